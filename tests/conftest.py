"""Shared fixtures: one SparkSession per test process (the whole run, or each pytest-xdist worker), a fresh warehouse per session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Every test compiles for real: a compile read from the cache would skip what a test
# injects into the stages (bootstrap/compile_cache.py; tests/test_compile_cache.py turns it on).
os.environ["EVITA_COMPILE_CACHE"] = "0"


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


def stages() -> dict:
    """name -> StageFile: every stage, shipped and under examples/stages, found the way
    the lattice finds them (`find_stages`), so a new stage file is tested with no edit."""
    from evita.bootstrap.stage import find_stages

    if not hasattr(stages, "found"):
        stages.found = find_stages([EXAMPLES / "stages"])
    return stages.found


def lattice_order(stage_paths=(), skip=(), only=None, choose=None) -> list:
    """The stages a compile runs, in order, as `stage_lattice.dl` and the stage files'
    lattice facts state it: a stage runs once every stage it follows has run or is left
    out, the least such by name first, until the planner (which compiling does not run).
    Worked out here from the facts, apart from the lattice's own rules, so tests that
    check the scheduler's order state no list of stages."""
    from evita.bootstrap.scheduler import Lattice
    from evita.bootstrap.stage import BOOTSTRAP_STAGES, find_stages

    lattice = Lattice(find_stages(stage_paths))
    names = set(lattice.names)
    picked = dict(lattice.facts("default")) | dict(choose or {})
    out_of_play = set(skip) | {s for g, s in lattice.facts("alternative") if picked.get(g) != s}
    if only is not None:
        out_of_play |= names - set(only) - set(BOOTSTRAP_STAGES)
    before = {s: {a for a, b in lattice.orders() if b == s} for s in names}
    while True:  # transitive: a stage left out does not let what follows it overtake what precedes it
        wider = {s: bs.union(*(before.get(b, set()) for b in bs)) for s, bs in before.items()}
        if wider == before:
            break
        before = wider
    order, passed = ["parse"], {"parse"} | out_of_play
    while True:  # the planner comes last, whatever precedes/2 facts say
        ready = sorted(s for s in names - passed - {"planner"} if before[s] <= passed)
        if not ready:
            return order
        order.append(ready[0])
        passed.add(ready[0])


_alone: dict = {}


def stage_alone(spark, stage: str, program):
    """`program` after `stage` alone (encode -> run_stage -> apply -> decode), one Spark
    run per stage and program text."""
    from evita.bootstrap import stage as st
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode

    key = (stage, program.name, program.path, program.text)
    if key not in _alone:
        rows = encode(program)
        out = st.run_stage(spark, stages()[stage], rows, program.name)
        _alone[key] = decode(st.apply(rows, out), program.name)
    return _alone[key]


def after_stage(spark, stage: str, path: Path):
    """(program as parsed, program after `stage` alone), one Spark run per stage and file."""
    from evita.bootstrap.parser import parse_file

    program = parse_file(path)
    return program, stage_alone(spark, stage, program)


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


_TIMED: dict = {}


def logical_value(v):
    """A value as its logical node when it is an address (`A/2`, `A#1`, `A/2#1` are A):
    decouple and partition move a component's work to such copies."""
    from evita.runtime.simulate import logical

    return logical(v) if isinstance(v, str) else v


def shown_outputs(run):
    """(seed, step, kind, node, peer, relation, tuple) of every output of a simulation
    (messages leaving the program, new query answers), addresses logical, counted: two
    partitions sending one message would show it twice. The rewrite stages' oracle."""
    from collections import Counter

    t = run.trace[run.trace["kind"].isin(("external", "output"))]
    return Counter((int(r.seed), int(r.step), r.kind, logical_value(r.node), logical_value(r.peer), r.relation,
                    tuple(map(logical_value, r.tuple))) for r in t.itertuples(index=False))


_RUNS: dict = {}
PROTOCOL_SEEDS, PROTOCOL_DELAY = range(200), "uniform:1-5"


def simulated(spark, path, steps: int, skip=()):
    """A Dedalus program simulated over 200 seeds with delays uniform:1-5, once per test
    run (test_protocols.py checks the invariants of the runs test_decouple.py compares):
    compiled by the default lattice, or with `skip` stages left out."""
    from evita.runtime.simulate import Simulation, compile_timed

    key = (str(path), steps, tuple(skip))
    if key not in _RUNS:
        timed = compile_timed(str(path), spark, skip=tuple(skip)) if skip else compiled_timed(spark, path)
        _RUNS[key] = Simulation(timed, PROTOCOL_SEEDS, PROTOCOL_DELAY).run(steps)
    return _RUNS[key]


def compiled_timed(spark, path):
    """A Dedalus program compiled and lowered once per test run (tests/test_dedalus.py,
    test_protocols.py and test_paxos.py share it): `runtime.simulate.compile_timed`."""
    from evita.runtime.simulate import compile_timed

    key = str(path)
    if key not in _TIMED:
        _TIMED[key] = compile_timed(key, spark)
    return _TIMED[key]


# ---------------------------------------------------------------- beyond local mode
# tests/test_zz_cluster.py and tests/test_zz_connect.py run these programs in a driver
# of their own (a standalone cluster, a Spark Connect server) and compare with local mode.

SPARK_PROGRAMS = {  # name -> arguments of `evita run`
    "tc": [str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc"), "--stats"],  # fixpoint inside tasks
    "sg": [str(EXAMPLES / "same_generation.dl"), "-F", str(EXAMPLES / "same_generation"), "--no-local",
           "--stats"],  # the distributed loop
    "sp": [str(EXAMPLES / "shortest_path.olg")],  # Overlog: keys, aggregates, lists
}


def bench_protocols():
    """bench/protocols.py as a module: it holds the first forms of the protocols the
    examples restate (Paxos's), which the tests hold the restatements to."""
    import importlib.util

    if not hasattr(bench_protocols, "module"):
        spec = importlib.util.spec_from_file_location("bench_protocols", REPO / "bench" / "protocols.py")
        bench_protocols.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench_protocols.module)
    return bench_protocols.module


def answers(directory: Path, printed: str) -> dict:
    """The relations written to DIR/REL.csv, and the rows of the tables printed (the
    shortest-path example has a query and no .output, so it writes nothing)."""
    files = {f.name: sorted(f.read_text().splitlines()) for f in sorted(directory.glob("*.csv"))}
    return {**files, "printed": sorted(line for line in printed.splitlines() if line.startswith("│"))}


def local_answers(tmp_path: Path, capsys) -> dict:
    """SPARK_PROGRAMS run in local mode, in this process's session: name -> `answers`."""
    from evita.bootstrap.cli import main

    local = {}
    for name, args in SPARK_PROGRAMS.items():
        target = tmp_path / "local" / name
        capsys.readouterr()
        assert main(["run", *args, "--output", str(target), "--master", "local[2]"]) == 0
        local[name] = answers(target, capsys.readouterr().out)
    return local
