"""The localize stage (stages/localize.dl) beyond its case file: the rule it must refuse,
and its place in the lattice before magic sets (Fig 4.1's program through both)."""
from __future__ import annotations

import re

import pytest

from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.scheduler import compile_program
from evita.bootstrap.stage import StageFailure
from evita.catalog.decode import decode
from evita.catalog.encode import encode

from conftest import EXAMPLES, lattice_order
from test_magic import answers

UNROUTABLE = """clique("a", 1). clique("b", 1).
s1 separator(@I, J, V) :- clique(@I, V), clique(@J, V), I != J.
"""


def test_an_unroutable_rule_fails_at_its_atom_and_keeps_the_catalog(spark):
    # P2's unitTests/olg/unroutableLocalization.olg: J occurs nowhere left of clique(@J, V).
    program = check_program(parse_program(UNROUTABLE, "unroutable.olg", "unroutable"))
    with pytest.raises(StageFailure) as failed:
        compile_program(spark, encode(program), program.name)
    e = failed.value
    assert e.stage == "localize"
    assert "unroutable.olg:2:42" in e.detail and "error[unroutable]" in e.detail
    assert "rule s1: location variable @J is not bound left of its atom" in e.detail
    assert e.versions[-1].stage == lattice_order()[lattice_order().index("localize") - 1]  # the last good one


def test_localize_runs_before_magic_sets_and_the_answers_stay(spark):
    # Fig 4.1: the path program with a bound query. Localized first, magic sets then
    # restrict the chain's links; answers as without either stage.
    path = EXAMPLES / "path_magic.olg"
    program = check_program(parse_file(path))
    order = lattice_order()
    assert order.index("localize") < order.index("magic_sets")
    comp = compile_program(spark, encode(program), program.name)
    final = decode(comp.final, program.name)
    labels = {r.name for r in final.rules}
    assert any(label.startswith("r2_loc") for label in labels), sorted(labels)
    assert any(r.head.relation.startswith("magic_") for r in final.rules)
    left_out = compile_program(spark, encode(program), program.name, only=["delta"])
    plain = decode(left_out.final, program.name)
    # left out, localize's trigger still finds r2: the user is told it runs centralized
    assert any(n.startswith("stage localize was left out, but it applies here (r2)") and "run centralized" in n
               for n in left_out.notes), left_out.notes
    assert not comp.notes
    want, _ = answers(spark, plain, path.parent)
    have, _ = answers(spark, final, path.parent)
    assert want and have == want


# ---------------------------------------------------------------- located execution

# Seed 002 Fig 4.19 on the Fig 4.2 topology, the path program localized, without magic
# sets: per node, tuples sent and received (set semantics; research note p2_stages.md
# §2.3, 171 shipped in total). Nodes 1..10.
FIG_4_19_SENT = [15, 15, 15, 30, 17, 18, 19, 20, 21, 1]
FIG_4_19_RECEIVED = [15, 15, 15, 16, 16, 17, 18, 19, 20, 20]


def test_per_node_traffic_matches_fig_4_19_and_magic_sets_ship_less(spark, capsys):
    from conftest import compiled_plan
    from evita.bootstrap.cli import main
    from evita.runtime.engine import run

    program = check_program(parse_file(EXAMPLES / "path_magic.olg"))
    result = run(compiled_plan(spark, program, skip=["magic_sets"]), spark)
    traffic = result.traffic()
    assert [t.node for t in traffic] == [f"node{i}" for i in range(1, 11)]
    assert [t.sent for t in traffic] == FIG_4_19_SENT
    assert [t.received for t in traffic] == FIG_4_19_RECEIVED
    assert sum(t.sent for t in traffic) == 171 == len(result.rows("path"))
    assert sum(t.derived for t in traffic) == 18  # r1: one path per link, where the link lives

    # With magic sets only node1's paths are asked for: far fewer tuples travel.
    magic = run(compiled_plan(spark, program), spark).traffic()
    assert 0 < sum(t.sent for t in magic) < 171 // 4

    # `evita run --stats` prints the table
    assert main(["run", str(EXAMPLES / "path_magic.olg"), "--skip", "magic_sets", "--stats"]) == 0
    out = capsys.readouterr().out
    table = out.split("tuples per location", 1)[1].splitlines()
    assert [line.split() for line in table if line.startswith(("node4 ", "total "))][:2] == [
        ["node4", "30", "16", "3"], ["total", "171", "171", "18"]]


def test_located_relations_live_partitioned_on_their_location_in_the_distributed_loop(spark):
    from conftest import compiled_plan
    from evita.runtime.engine import run

    program = check_program(parse_file(EXAMPLES / "path_magic.olg"))
    flow = compiled_plan(spark, program, skip=["magic_sets"])
    assert {n for n, s in flow.relations.items() if s.located} == {"link", "path", "loc_r2_2"}
    assert all(flow.relations[n].location == 0 for n in ("link", "path", "loc_r2_2"))
    assert "located(#0)" in flow.to_text()
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:  # every stratum on Spark, none on the driver, in four partitions
        loop = run(flow, spark, local=False, tuning="large")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)
    assert [s.mode for s in loop.stats if s.iteration > 0] and all(s.mode == "sql" for s in loop.stats)
    for name in ("link", "loc_r2_2"):
        physical = loop.engine.full[name]._jdf.queryExecution().executedPlan().toString()
        assert re.search(r"Exchange hashpartitioning\(c0#\d+, 4\), REPARTITION_BY_NUM", physical), (name, physical)
    small = run(flow, spark)
    assert loop.tuples(["path"]) == small.tuples(["path"]) and len(small.rows("path")) == 171


def test_a_stage_after_localize_must_keep_every_rule_at_one_location(spark, tmp_path):
    # catalog/located.dl, ensured by localize, is checked after every later stage: one
    # that moves path's location in r2_loc2 from Y to Z is refused, the catalog kept.
    (tmp_path / "wander.dl").write_text('''
stage("wander").
precedes("localize", "wander").
precedes("wander", "magic_sets").
w1 sys::argument{predicate: A, pos: 0, var: "Z"} :- sys::rule{id: R, name: "r2_loc2"},
     sys::predicate{rule: R, id: A, relation: "path", pos: J}, J > 0.
''')
    program = check_program(parse_file(EXAMPLES / "path_magic.olg"))
    with pytest.raises(StageFailure) as failed:
        compile_program(spark, encode(program), program.name, stage_paths=[str(tmp_path)])
    assert failed.value.stage == "wander"
    assert "rule reads two locations" in failed.value.detail and "r2_loc2" in failed.value.detail


def test_explain_shows_each_split_with_the_columns_shipped(spark, capsys, tmp_path):
    from evita.bootstrap.cli import main

    chain = tmp_path / "chain.olg"
    chain.write_text("a(1, 2). b(2, 3). c(3, 5).\nq1 q(@A, D) :- a(@A, B), b(@B, C), c(@C, D).\n")
    dot = tmp_path / "chain.dot"
    assert main(["explain", str(chain), "--stage", "localize", "--dot", str(dot)]) == 0
    out = capsys.readouterr().out
    assert "q1: reads 3 locations, split into a chain" in out
    assert "ships loc_q1_2(@B, A, B) -> q1_loc2 at @B" in out
    assert "ships loc_q1_3(@C, A, B, C) -> q1_loc3 at @C" in out
    assert "ships to @A -> q at @A" in out
    assert '[label="ships loc_q1_3(@C, A, B, C)"]' in dot.read_text()
