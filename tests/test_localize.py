"""The localize stage (stages/localize.dl) beyond its case file: the rules it must refuse,
its place in the lattice before magic sets (Fig 4.1's program through both), and random
located programs (test_runtime.located_program) localized and centralized, on Spark and
on the oracle."""
from __future__ import annotations

import os
import random
import re

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import oracle
from evita.bootstrap import syntax as S
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.scheduler import compile_program
from evita.bootstrap.stage import StageFailure
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program, format_rule
from evita.bootstrap.planner import plan, plan_catalog
from evita.runtime.engine import run

from conftest import EXAMPLES, lattice_order
from test_magic import answers
from test_runtime import located_program, random_located_program, rename

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


def test_a_located_notin_bound_only_in_a_later_link_fails(spark):
    # notin g(@Y, W) locates at Y, between e(@X, ...) and f(@X, W): W is not known there.
    text = "e(1, 2). f(1, 3). g(2, 3).\nr1 q(@X, W) :- e(@X, Y), notin g(@Y, W), f(@X, W).\n"
    program = check_program(parse_program(text, "late.olg", "late"))
    with pytest.raises(StageFailure) as failed:
        compile_program(spark, encode(program), program.name, only=["localize"])
    assert failed.value.stage == "localize" and "late.olg:2:26" in failed.value.detail
    assert "rule r1: W of a located notin is bound only in a later link" in failed.value.detail


def test_a_wildcard_shipped_under_count_fails_rather_than_count_less(spark):
    # e(@A, _) matches e(1, 1) and e(1, 2): two combinations for count<*> (Spark and the
    # oracle answer d(1, 2)); an intermediate loc_r1_3(@B, A, B) would keep one.
    text = "e(1, 1). e(1, 2). f(1, 5). g(5, 0, 0).\nr1 d(@A, count<*>) :- e(@A, _), f(@A, B), g(@B, _, _).\n"
    program = check_program(parse_program(text, "wild.olg", "wild"))
    assert oracle.evaluate(program)["d"] == {(1, 2)}
    with pytest.raises(StageFailure) as failed:
        compile_program(spark, encode(program), program.name, only=["localize"])
    assert "wild.olg:2:23" in failed.value.detail and "error[multiplicity]" in failed.value.detail
    assert "rule r1: the _ of this atom is not shipped, so count<> would count its tuples once" in failed.value.detail


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

# ---------------------------------------------------------------- random located programs

# One batch of seeded programs (located_program), renamed apart and compiled and run as
# one program, so each compile and run is one. By default a batch small enough for a
# shared 2-core machine, through the localize stage alone against the program as
# written; EVITA_LOCALIZE_FULL=1 compiles 100 through the default lattice against it
# with localize skipped (minutes), EVITA_DIFF_EXAMPLES=N runs N batches.
FULL = bool(os.environ.get("EVITA_LOCALIZE_FULL"))
BATCH = 100 if FULL else 16


def _locations(rule: S.Rule) -> set:
    """The location variables of a rule's body atoms, negated ones too."""
    return {a.args[a.location].name for a in rule.body
            if isinstance(a, S.Atom) and a.location is not None and isinstance(a.args[a.location], S.Var)}


@settings(max_examples=int(os.environ.get("EVITA_DIFF_EXAMPLES", "1")), deadline=None, derandomize=True,
          database=None, phases=[Phase.generate])  # shrinking a seed means nothing
@given(st.integers(0, 2 ** 20))
def test_random_located_programs_answer_the_same_localized_and_centralized(spark, seed):
    programs = [located_program(random.Random(seed * BATCH + i), i) for i in range(BATCH)]
    merged = []
    for i, p in enumerate(programs):
        merged += rename(p, f"p{i}_")
    batch = check_program(S.Program("located", tuple(merged)))
    with_it, without = ({}, {"skip": ["localize"]}) if FULL else ({"only": ["localize"]}, {"only": []})
    comp = compile_program(spark, encode(batch), batch.name, **with_it)
    central = compile_program(spark, encode(batch), batch.name, **without)
    # left out, the user is told the rules run centralized
    told = [[n for n in c.notes if n.startswith("stage localize was left out")] for c in (comp, central)]
    assert not told[0] and "run centralized" in told[1][0], central.notes
    at = next(i for i, v in enumerate(comp.versions) if v.stage == "localize")
    before, localized = (decode(comp.versions[k].rows, batch.name) for k in (at - 1, at))

    # after the stage, no rule's body reads two locations, negated atoms included; the
    # rules split are those that did before it (const_prop may turn a location constant)
    for r in localized.rules:
        assert len(_locations(r)) <= 1, format_rule(r)
    split = {r.origin for r in localized.rules if r.origin and r.name != r.origin}
    assert {r.name for r in before.rules if len(_locations(r)) > 1} == split
    assert len(split) >= len(batch.rules) // 3, (len(split), len(batch.rules))

    heads = {r.head.relation for r in batch.rules}
    loc = {r.head.relation for r in localized.rules if r.head.relation.startswith("loc_")}
    if FULL:  # each catalog as the lattice left it: two runs
        have = run(plan_catalog(comp.final, batch.name), spark, tuning="small").tuples(sorted(heads | loc))
        want = run(plan_catalog(central.final, batch.name), spark, tuning="small").tuples(sorted(heads))
    else:  # the centralized program renamed apart (c_) beside the localized one: one run
        both = decode(comp.final, batch.name).statements + tuple(rename(decode(central.final, batch.name), "c_"))
        got = run(plan(S.Program(batch.name, both)), spark, tuning="small").tuples(
            sorted(heads | loc | {"c_" + h for h in heads}))
        have, want = got, {h: got["c_" + h] for h in heads}
    reference = oracle.evaluate(localized)
    for i, p in enumerate(programs):
        expected = oracle.evaluate(p)
        for name in {r.head.relation for r in p.rules}:
            n = f"p{i}_{name}"
            rows = expected.get(name, set())
            assert have[n] == want[n] == reference.get(n, set()) == rows, (
                f"{name} differs\n{format_program(p)}\nlocalized:  {sorted(have[n])}\n"
                f"centralized: {sorted(want[n])}\noracle: {sorted(rows)}")
    for n in loc:  # the intermediates: Spark as the oracle reads the localized program
        assert have[n] == reference.get(n, set()), n


@settings(max_examples=60, deadline=None, database=None)
@given(random_located_program())
def test_random_located_programs_are_checked_routable_and_terminate(program):
    # the generator's promises, which the differential test above relies on
    check_program(program)
    for r in program.rules:
        bound: set = set()
        seen = False
        for lit in r.body:
            if isinstance(lit, S.Atom) and lit.location is not None and isinstance(lit.args[0], S.Var):
                assert not seen and not lit.negated or lit.args[0].name in bound, format_rule(r)
                seen = True
            if isinstance(lit, S.Atom) and not lit.negated:
                bound |= {a.name for a in lit.args if isinstance(a, S.Var)}
            elif isinstance(lit, S.Assign):
                bound.add(lit.var.name)
    oracle.evaluate(program, max_rounds=50)  # stratified, and a fixpoint in a few rounds
