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


def test_an_explain_view_is_read_back_and_a_new_catalog_misses(tmp_path, monkeypatch):
    """`evita explain P --stage S` again reads the view's graph back, as the compile;
    the graph of another catalog is computed, not served from the first."""
    from evita.bootstrap.explain import stage_graph
    from evita.bootstrap.stage import find_stages

    monkeypatch.setenv("EVITA_COMPILE_CACHE", "1")
    monkeypatch.setenv("EVITA_CACHE", str(tmp_path / "cache"))
    program = check_program(parse_file(EXAMPLES / "path_magic.olg"))
    stage = find_stages()["magic_sets"]
    first = stage_graph(None, stage, encode(program), program.name)
    kept = list((tmp_path / "cache").rglob("explained/*.pickle"))
    assert len(kept) == 1 and first.nodes
    assert stage_graph(None, stage, encode(program), program.name) == first
    rows = encode(program)
    rows["statistic"].append((program.name, "link", None, "cardinality", 1000.0))
    assert stage_graph(None, stage, rows, program.name) == first  # the view reads no statistics
    assert len(list((tmp_path / "cache").rglob("explained/*.pickle"))) == 2
