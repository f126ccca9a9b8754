"""Shared fixtures: one SparkSession for the whole run, a fresh warehouse per session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("warehouse")
    os.environ["EVITA_WAREHOUSE"] = str(path)
    # the stages' compiled (ECA) forms, made once per test run (bootstrap/compiled_stages.py)
    os.environ["EVITA_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    return path


@pytest.fixture(scope="session")
def spark(warehouse):
    from evita.runtime.session import spark_session

    session = spark_session(master="local[2]", warehouse=warehouse)
    yield session
    session.stop()


_after_stage: dict = {}


def after_stage(spark, stage: str, path: Path):
    """(program as parsed, program after `stage` alone), one Spark run per stage and file."""
    from evita.bootstrap import stage as st
    from evita.bootstrap.parser import parse_file
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode

    if (stage, path) not in _after_stage:
        program = parse_file(path)
        rows = encode(program)
        out = st.run_stage(spark, st.find_stages()[stage], rows, program.name)
        _after_stage[stage, path] = (program, decode(st.apply(rows, out), program.name))
    return _after_stage[stage, path]


def assert_golden(text: str, golden: Path) -> None:
    """`text` equals the golden file; EVITA_UPDATE_GOLDEN=1 rewrites the file instead."""
    if os.environ.get("EVITA_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with EVITA_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def compiled_plan(spark, program, **kw):
    """The dataflow of a program (object or text) compiled through the lattice's stages,
    planned from the final catalog, as `evita plan` and `evita run` do."""
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_program
    from evita.bootstrap.planner import plan_catalog
    from evita.bootstrap.scheduler import compile_program
    from evita.catalog.encode import encode

    if isinstance(program, str):
        program = parse_program(program, "t.olg", name=kw.pop("name", "t"))
    check_program(program)
    comp = compile_program(spark, encode(program), program.name, **kw)
    return plan_catalog(comp.final, program.name)
