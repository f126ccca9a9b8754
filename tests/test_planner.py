"""The planner as a reader of the catalog: strata, pipelines in catalog order, the
decisions stages wrote (delta drivers, decomposition, caching, broadcast), and the
defaults where no stage decided. Programs are compiled through the real lattice on
Spark (`compiled_plan`); the defaults are planned straight from parsed text."""
from __future__ import annotations

import json

import pytest

from evita.bootstrap import builtins as B
from evita.bootstrap.checks import check_program
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.planner import plan, plan_catalog
from evita.bootstrap.scheduler import compile_program
from evita.catalog.encode import encode
from evita.runtime import sql

from conftest import EXAMPLES, compiled_plan

TC = """
edge(1, 2). edge(2, 3).
r1 tc(X, Y) :- edge(X, Y).
r2 tc(X, Z) :- tc(X, Y), edge(Y, Z).
"""


def test_transitive_closure_plan(spark):
    df = compiled_plan(spark, TC)
    assert len(df.strata) == 1
    st = df.strata[0]
    assert st.recursive and st.relations == ("tc",)
    assert [r.name for r in st.init_rules] == ["r1"]
    [d] = st.delta_rules
    assert d.name == "r2_d1" and d.driven_by == "tc"
    assert [(s.op, s.relation, s.delta, s.keys) for s in d.steps] == [
        ("scan", "tc", True, ()), ("join", "edge", False, ("Y",))]
    # partition.dl: column 0 of tc passes unchanged from the recursive atom to the head
    assert st.strategy == "local" and "column #0" in st.reason
    # one mechanism with rounds (runtime/rounds.py), without a budget; edge reaches every
    # partition whole, through Spark; no broadcast hint is forced on it (its size is unknown)
    assert st.rounds.partition == (("tc", 0),) and st.rounds.local_iterations is None
    assert d.steps[1].copy == "whole" and d.steps[1].method == ""
    assert df.relations["tc"].partition == (0,)
    text = df.to_text()
    assert "r2_d1: [on Δtc] scan Δtc(X, Y) -> join edge(Y, Z) on Y" in text
    assert "local fixpoint per partition: tc on (#0); each partition holds edge@*; one Spark job" in text
    assert json.loads(df.to_json())["strata"][0]["delta_rules"][0]["name"] == "r2_d1"


def test_plan_is_deterministic(spark):
    text = (EXAMPLES / "shortest_path.olg").read_text()
    assert compiled_plan(spark, text, name="sp").to_json() == compiled_plan(spark, text, name="sp").to_json()


def test_shortest_path_keeps_body_order_and_differentiates_only_recursion(spark):
    df = compiled_plan(spark, (EXAMPLES / "shortest_path.olg").read_text(), name="sp", skip=["magic_sets"])
    names = [(st.index, [r.name for r in st.init_rules], [r.name for r in st.delta_rules]) for st in df.strata]
    # r2 reads @X and @Y: localize.dl ships link to Y first (r2_loc1 -> loc_r2_2); that
    # relation is complete before path's stratum starts, so only Δpath drives r2_loc2 (delta.dl)
    assert names == [(0, ["r2_loc1"], []), (1, ["r1"], ["r2_loc2_d2"]), (2, ["r3"], []), (3, ["r4"], [])]
    r2 = df.strata[1].delta_rules[0]
    assert [(s.op, s.relation, s.delta) for s in r2.steps[:2]] == [("scan", "loc_r2_2", False), ("join", "path", True)]
    assert [s.op for s in r2.steps[2:]] == ["filter", "assign", "assign"]
    assert df.relations["path"].keys == (0, 1, 2)
    assert df.relations["minCostPath"].aggregates[0].func == "min"
    assert df.strata[1].strategy == "distributed"  # keyed: partition.dl leaves it to the loop


def test_nonlinear_recursion_gets_one_eca_rule_per_recursive_atom(spark):
    df = compiled_plan(spark, "r1 tc(X, Y) :- e(X, Y).\nr2 tc(X, Z) :- tc(X, Y), tc(Y, Z).\ne(1, 2).\n")
    st = df.strata[0]
    assert [r.name for r in st.delta_rules] == ["r2_d1", "r2_d2"]
    assert [s.delta for s in st.delta_rules[1].steps] == [False, True]
    assert st.rounds is None and st.strategy == "distributed"


def test_without_stages_the_defaults_apply():
    """No stage ran: no hints, no cache, the distributed loop, and a rule reading its
    own stratum runs whole every iteration (naive evaluation)."""
    df = plan(parse_program(TC))
    st = df.strata[0]
    assert [(r.name, r.driven_by) for r in st.delta_rules] == [("r2", None)]
    assert st.rounds is None and st.strategy == "distributed" and "no stage" in st.reason
    assert not any(s.cached or s.broadcast or s.partition for s in df.relations.values())
    assert "r2: [every iteration]" in df.to_text()


def test_a_broadcast_placement_is_the_join_method_where_no_atom_method_was_chosen():
    """`distribution=broadcast` on a relation makes the joins that read it broadcast it;
    an atom whose method a stage (or `.plan rule`) chose keeps that method; `replicated`
    is shown as such and asks for no broadcast."""
    text = TC + """
.plan relation edge(distribution=broadcast)
"""
    df = plan(parse_program(text))
    assert df.relations["edge"].broadcast and "join edge(" in df.to_text()
    joins = [s for st in df.strata for r in st.init_rules + st.delta_rules for s in r.steps if s.op == "join"]
    assert joins and all(s.method == "broadcast" for s in joins if s.relation == "edge")
    chosen = plan(parse_program(text + ".plan rule r2(join2=merge)\n"))
    assert {s.method for st in chosen.strata for r in st.delta_rules for s in r.steps
            if s.op == "join" and s.relation == "edge"} == {"merge"}
    replicated = plan(parse_program(TC + ".plan relation edge(distribution=replicated)\n"))
    assert replicated.relations["edge"].replicated and not replicated.relations["edge"].broadcast
    assert "[base replicated" in replicated.to_text() and "[broadcast]" not in replicated.to_text()


def test_given_eca_rules_are_taken_as_given():
    text = """
r1 path(X, Y) :- delta link(X, Y).
r2b path(X, Z) :- delta path(Y, Z), link(X, Y).
"""
    st = plan(parse_program(text)).strata[0]
    assert [r.name for r in st.init_rules] == ["r1"]  # a lower stratum's delta is all of it
    assert [(r.name, r.driven_by) for r in st.delta_rules] == [("r2b", "path")]


def test_negation_and_aggregation_make_strata():
    text = """
r1 reach(X, Y) :- edge(X, Y).
r2 reach(X, Z) :- reach(X, Y), edge(Y, Z).
r3 unreach(X, Y) :- node(X), node(Y), notin reach(X, Y).
r4 deg(X, count<*>) :- edge(X, _).
r5 lonely(X) :- node(X), notin deg(X, _).
"""
    df = plan(parse_program(text))
    assert [st.relations for st in df.strata] == [("reach", "deg"), ("unreach", "lonely")]
    [anti] = [s for s in df.strata[1].init_rules[0].steps if s.op == "antijoin"]
    assert anti.relation == "reach" and anti.keys == ("X", "Y")


def test_unstratifiable_negation_is_a_static_check_naming_the_cycle_and_rules():
    text = "r1 p(X) :- q(X), notin r(X).\nr2 r(X) :- p(X).\n"
    with pytest.raises(EvitaError) as e:
        check_program(parse_program(text, "bad.olg"))
    d = e.value.first
    assert d.code == "unstratifiable"
    assert "r -> p -> r" in d.message and "rule r1" in d.message and "rule r2" in d.message
    assert (d.span.file, d.span.line, d.span.col) == ("bad.olg", 1, 18)


def test_count_inside_recursion_is_unstratifiable_but_min_follows_prem():
    with pytest.raises(EvitaError) as e:
        check_program(parse_program("r1 p(X, count<Y>) :- p(Y, X).\n"))
    assert e.value.first.code == "unstratifiable" and "count" in e.value.first.message
    df = plan(check_program(parse_program("""
r1 dist(Y, min<D>) :- start(Y), D := 0.
r2 dist(Y, min<D>) :- dist(X, D1), edge(X, Y, W), D := D1 + W.
""")))
    agg = df.relations["dist"].aggregates
    assert agg[0].func == "min" and agg[0].premappable


def test_prem_relation_is_decomposable_on_a_group_column(spark):
    df = compiled_plan(spark, """
edge(1, 2, 1).
r1 apsp(S, Y, min<D>) :- edge(S, Y, D).
r2 apsp(S, Y, min<D>) :- apsp(S, X, D1), edge(X, Y, W), D := D1 + W.
""")
    st = df.strata[0]  # PreM: per partition, as rounds run (issue 38, item 2)
    assert st.strategy == "local" and st.rounds.partition == (("apsp", 0),) and st.rounds.local_iterations is None


def test_mixed_aggregates_are_rejected_by_the_checks():
    with pytest.raises(EvitaError) as e:
        check_program(parse_program("r1 a(X, count<*>) :- b(X).\nr2 a(X, Y) :- c(X, Y).\n"))
    assert e.value.first.code == "aggregate-mismatch"


def test_delete_rules_feed_a_deletion_relation():
    df = plan(parse_program("r1 delete item(X) :- item(X), gone(X).\nitem(1). item(2). gone(2).\n"))
    assert df.relations["item#delete"].kind == "deletion"
    assert df.strata[0].init_rules[0].delete


def test_filters_wait_for_their_variables_but_never_move_earlier():
    df = plan(parse_program("r1 out(X, Z) :- X < Z, a(X, Y), Y != 3, b(Y, Z).\n"))
    ops = [(s.op, s.relation) for s in df.strata[0].init_rules[0].steps]
    assert ops == [("scan", "a"), ("filter", ""), ("join", "b"), ("filter", "")]


def test_every_builtin_has_a_spark_sql_form():
    assert set(sql.BUILTIN_SQL) == set(B.BUILTINS)


def test_plan_says_where_a_recursive_stratum_runs_when_its_inputs_are_small():
    from evita.bootstrap.parser import parse_file as parse

    sg = plan(parse(EXAMPLES / "same_generation.dl")).to_text()
    assert "small inputs: on the driver, columnar  // when its inputs hold at most 200,000 rows" in sg
    strings = plan(parse_program('e("a", "b").\nr1 p(X) :- e(X, _).\nr2 p(Y) :- p(X), Y := substr(X, 0, 1), '
                                 'strlen(Y) < 4.\n', "s.olg")).to_text()
    assert "small inputs: still on Spark  // the columnar evaluator cannot: rule r2 computes" in strings


EXPRESSIONS_IN_ATOMS = """
e(1, 2). e(2, 3). e(3, 4). e(5, 6).
r1 p(X, Y) :- e(X, Y).
r2 p(X, Z) :- p(X, Y), p(Y - 1 + 1, Z).
r3 q(X) :- e(X, _), !p(X + 1, X + 2).
r4 s(X) :- e(X - 1, X).
fib(0, 0). fib(1, 1).
r7 fib(N + 1, A + B) :- fib(N, A), fib(N - 1, B), N < 6.
"""


def test_an_expression_in_an_atom_becomes_a_variable_and_a_test(spark):
    """`p(Y - 1 + 1, Z)` driven by its delta is scanned first: its expression cannot be
    computed there. The pipeline binds a new variable and tests it once Y is bound; a
    negated atom's expression is assigned before the antijoin. Every backend then
    joins on columns only, and runs it (the driver's columnar evaluator used to refuse)."""
    from evita.runtime.columnar import run_dataflow
    from evita.runtime.dataflow import term_text
    from evita.runtime.engine import run

    program = parse_program(EXPRESSIONS_IN_ATOMS, "t.olg", name="exprs")
    flow = compiled_plan(spark, program)
    rules = [r for st in flow.strata for r in (*st.init_rules, *st.delta_rules)]
    for r in rules:
        for s in r.steps:
            assert all(type(a).__name__ in ("Var", "Wildcard", "Const") for a in s.args), (r.name, s)
    driven = next(r for r in rules if r.name == "r2_d2")
    assert [(s.op, s.relation) for s in driven.steps][:2] == [("scan", "p"), ("join", "p")]
    assert driven.steps[2].op == "filter" and "Y" in term_text(driven.steps[2].expr)
    negated = next(r for r in rules if r.name == "r3")
    assert [s.op for s in negated.steps] == ["scan", "assign", "assign", "antijoin"]

    fibs = [(0, 0), (1, 1)]
    while fibs[-1][0] < 6:
        fibs.append((fibs[-1][0] + 1, fibs[-1][1] + fibs[-2][1]))
    expected = {"p": {(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4), (5, 6)}, "q": {(3,), (5,)},
                "s": {(2,), (3,), (4,), (6,)}, "fib": set(fibs)}
    here = run_dataflow(flow, {})  # the driver's columnar evaluator: it refused such atoms
    assert {n: set(map(tuple, here[n].itertuples(index=False))) for n in expected} == expected
    # on Spark's SQL loop (a task runs the driver's columnar core: test_here.py compares those)
    assert run(flow, spark, {}, local=False).tuples(list(expected)) == expected
