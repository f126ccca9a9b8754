"""The stage toolkit: primitives (catalog/edit.py, stage::error), the planner reading
only the catalog, decisions written by stages (partition.dl, cache.dl, the external
broadcast_small.dl), and stratification owned by the static checks."""
from __future__ import annotations

import pytest

from evita.bootstrap import stage as st
from evita.bootstrap.checks import check_program
from evita.bootstrap.cli import main
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan_catalog
from evita.bootstrap.scheduler import compile_program
from evita.catalog import edit, store
from evita.catalog.encode import encode
from evita.catalog.rows import CatalogRows

from conftest import EXAMPLES, compiled_plan


def _rows(text: str, name: str = "p") -> CatalogRows:
    return encode(check_program(parse_program(text, f"{name}.olg", name=name)))


# ---------------------------------------------------------------- primitives, no Spark

def test_deleting_a_rule_cascades_to_everything_it_owns():
    rows = _rows("r1 a(X, Y) :- b(X, Z), Z > 1, Y := Z + 1.\nr2 c(X) :- b(X, _).\n")
    new = edit.apply(rows, edit.Edits(deletes={"rule": [edit.pattern("rule", id="p:r1")]}))
    for table in ("predicate", "selection", "assignment", "expression"):
        assert not [r for r in new.dicts(table) if r["rule"] == "p:r1"], table
    assert not [a for a in new.dicts("argument") if a["predicate"].startswith("p:r1#")]
    assert [r["name"] for r in new.dicts("rule")] == ["r2"]


def test_copying_a_rule_rebases_its_terms_and_records_its_origin():
    rows = _rows("r1 a(X, Y) :- b(X, Z), Z > 1, Y := Z + 1.\n")
    new = edit.apply(rows, edit.Edits(copies=[("p:r1", "p:r1_x", "r1_x")]))
    [copied] = [r for r in new.dicts("rule") if r["id"] == "p:r1_x"]
    assert copied["id"] == "p:r1_x" and copied["origin"] == "p:r1" and copied["head"] == "p:r1_x#0"
    for table in ("predicate", "selection", "assignment", "expression"):
        before = [r for r in rows.dicts(table) if r["rule"] == "p:r1"]
        after = [r for r in new.dicts(table) if r["rule"] == "p:r1_x"]
        assert len(before) == len(after) > 0, table
        assert all(r["id"].startswith("p:r1_x#") for r in after)
    assert all(e["term"].startswith("p:r1_x#") for e in new.dicts("expression") if e["rule"] == "p:r1_x")


def test_a_named_head_with_its_key_updates_only_the_fields_it_names():
    rows = _rows("r1 a(X) :- b(X).\n")
    row = dict.fromkeys(rows.dicts("predicate")[0])
    row.update(id="p:r1#1", method="broadcast")
    new = edit.apply(rows, edit.Edits(updates={"predicate": [(tuple(row.values()), ["id", "method"])]}))
    [b] = [p for p in new.dicts("predicate") if p["id"] == "p:r1#1"]
    assert b["method"] == "broadcast" and b["relation"] == "b" and b["rule"] == "p:r1"


def test_an_unknown_primitive_is_a_positioned_error(tmp_path):
    (tmp_path / "bad.dl").write_text('stage("bad").\nprecedes("parse", "bad").\nx1 stage::copy(R) :- sys::rule{id: R}.\n')
    with pytest.raises(Exception) as e:
        st.catalog_form(st.find_stages([tmp_path])["bad"].program, set())
    assert "stage::copy/1 is not a stage primitive" in str(e.value) and "bad.dl:3:4" in str(e.value)


# ---------------------------------------------------------------- on Spark

def test_stage_error_reports_the_offending_rule_and_leaves_the_catalog(spark, tmp_path):
    (tmp_path / "no_r2.dl").write_text(
        'stage("no_r2").\nprecedes("parse", "no_r2").\n'
        'e1 stage::error(R, "no-r2", cat("rule ", N, " may not be called r2")) :- sys::rule{id: R, name: N}, N == "r2".\n')
    rows = _rows("r1 a(X) :- b(X).\nr2 c(X) :- a(X).\n")
    with pytest.raises(st.StageFailure) as e:
        compile_program(spark, rows, "p", stage_paths=[tmp_path], only=["no_r2"])
    assert e.value.stage == "no_r2" and "rule r2 may not be called r2" in e.value.reason
    assert "p.olg:2:1: error[no-r2]" in e.value.detail
    assert [v.stage for v in e.value.versions] == ["parse"]


def test_plan_is_a_function_of_the_stored_catalog(spark):
    program = check_program(parse_program((EXAMPLES / "shortest_path.olg").read_text(), "sp.olg", name="replan"))
    comp = compile_program(spark, encode(program), "replan")
    store.attach(spark)
    store.save_program(spark, comp.final)
    stored = store.load_rows(spark, "replan")
    assert plan_catalog(stored, "replan").to_text() == plan_catalog(comp.final, "replan").to_text()


def test_broadcast_small_changes_the_spark_physical_plan(spark, tmp_path):
    from evita.runtime.engine import run

    text = ('.decl color(x: symbol, c: symbol)\n.decl edge(x: symbol, y: symbol)\n.decl same(x: symbol, y: symbol)\n'
            '.output same\ncolor("a", "red"). color("b", "red").\nedge("a", "b"). edge("b", "a").\n'
            'same(x, y) :- edge(x, y), color(y, c), color(x, c).\n')
    program = check_program(parse_program(text, "bc.dl", name="bc"))
    plans = {}
    # Spark broadcasts anything it knows to be under 10 MB by itself; with that turned off
    # (as for relations whose size it cannot see) only the stage's hint broadcasts.
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        for paths in ((), (EXAMPLES / "stages",)):
            comp = compile_program(spark, encode(program), "bc", stage_paths=paths)
            df = plan_catalog(comp.final, "bc")
            result = run(df, spark, {}, small_rows=0)  # on Spark: the driver would not join there
            physical = result.relations["same"]._jdf.queryExecution().executedPlan().toString()
            plans[bool(paths)] = (df, physical, sorted(map(tuple, result.relations["same"].collect())))
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    (before, physical_before, answer_before), (after, physical_after, answer_after) = plans[False], plans[True]
    assert answer_before == answer_after == [("a", "b"), ("b", "a")]
    assert "[broadcast]" not in before.to_text() and "BroadcastHashJoin" not in physical_before
    assert after.relations["color"].broadcast and "join color(y, c) on y [broadcast]" in after.to_text()
    assert "BroadcastHashJoin" in physical_after


def test_partition_leaves_mutual_recursion_to_the_distributed_loop(spark):
    df = compiled_plan(spark, "e(1, 2).\nr1 a(X, Y) :- e(X, Y).\nr2 b(X, Y) :- a(X, Y).\nr3 a(X, Z) :- b(X, Y), e(Y, Z).\n",
                       name="mutual")
    [rec] = [s for s in df.strata if s.recursive]
    assert rec.rounds is None and rec.strategy == "distributed"


def test_evita_check_rejects_an_unstratifiable_program(tmp_path, capsys):
    bad = tmp_path / "bad.olg"
    bad.write_text("r1 p(X) :- q(X), notin p(X).\nq(1).\n")
    assert main(["check", str(bad)]) != 0
    err = capsys.readouterr().err
    assert f"{bad}:1:18: error[unstratifiable]" in err and "negation of p" in err


def test_compile_writes_the_stage_tables(spark, capsys):
    from evita.bootstrap.scheduler import Lattice

    assert main(["compile", str(EXAMPLES / "tc.dl")]) == 0
    capsys.readouterr()
    assert main(["sql", "SELECT name, kind FROM evita.stage ORDER BY name"]) == 0
    out = capsys.readouterr().out
    lattice = Lattice(st.find_stages())
    assert all(name in out for name in lattice.names) and "datalog" in out and "bootstrap" in out
    assert main(["sql", "SELECT count(*) AS n FROM evita.stage_lattice"]) == 0
    assert str(len(lattice.rows()["stage_lattice"])) in capsys.readouterr().out.split()
