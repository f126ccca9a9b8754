"""The compile cache (bootstrap/compile_cache.py): a compile of the same catalog through
the same stages and options is read back, equal to the one that ran; anything the
compile depends on that changes is a miss."""
from __future__ import annotations

import shutil

from evita.bootstrap import compile_cache
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_file
from evita.bootstrap.scheduler import compile_program
from evita.bootstrap.stage import package_root
from evita.catalog.encode import encode

from conftest import EXAMPLES


def test_a_compile_is_read_back_and_changes_miss(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("EVITA_COMPILE_CACHE", "1")
    monkeypatch.setenv("EVITA_CACHE", str(tmp_path / "cache"))
    program = check_program(parse_file(EXAMPLES / "shortest_path.olg"))

    first = compile_program(spark, encode(program), program.name)
    again = compile_program(spark, encode(program), program.name)
    assert not first.cached and again.cached
    assert [(v.number, v.stage, v.rows) for v in again.versions] == [(v.number, v.stage, v.rows)
                                                                      for v in first.versions]
    assert again.notes == first.notes and again.lattice == first.lattice

    # other options, another catalog, another stage text: each compiles for real
    assert not compile_program(spark, encode(program), program.name, skip=["magic_sets"]).cached
    rows = encode(program)
    rows["statistic"].append((program.name, "link", None, "cardinality", 1000.0))
    assert not compile_program(spark, rows, program.name).cached
    stages = tmp_path / "stages"
    shutil.copytree(package_root() / "stages" / "include", stages / "include")
    shutil.copy(package_root() / "stages" / "cache.dl", stages / "cache.dl")
    with open(stages / "cache.dl", "a") as f:
        f.write("\n// a comment changes no rule, a new rule would\ncache_unused(1).\n")
    assert not compile_program(spark, encode(program), program.name, stage_paths=[stages]).cached

    monkeypatch.setenv("EVITA_COMPILE_CACHE", "0")
    assert not compile_program(spark, encode(program), program.name).cached
    assert compile_cache.enabled() is False
