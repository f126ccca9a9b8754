"""The magic-sets stage (stages/magic_sets.dl), on real Spark.

- golden fixtures: the stage's output for every example and for tests/fixtures/magic/
  (several queries, non-linear recursion, negation below, assignments and selections
  between calls, two binding patterns), printed as program text
  (tests/fixtures/golden/magic_sets/; regenerate with EVITA_UPDATE_GOLDEN=1);
- Fig 4.3: the rewrite of Fig 4.1, rule by rule;
- differential: query answers and outputs are the same with and without the stage, on
  Spark for every example and fixture, and on the reference evaluator for random
  programs with a bound query.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import oracle
from evita.bootstrap import stage as stg
from evita.bootstrap import syntax as S
from evita.bootstrap.planner import plan
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program, format_rule
from evita.runtime.queries import query_frame
from evita.runtime.engine import run
from evita.runtime.io import gather_inputs

from conftest import EXAMPLES, FIXTURES, after_stage, assert_golden
from test_runtime import random_program, rename

GOLDEN = FIXTURES / "golden" / "magic_sets"
PROGRAMS = (sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))
            + sorted((FIXTURES / "magic").glob("*.*")))
# negation.dl: its count's helper relation is read with x bound (outdeg(x, n) :- node(x), ...)
CHANGED = {"path_magic.olg", "shortest_path.olg", "several_queries.olg", "nonlinear.dl",
           "negation_below.olg", "assign_select.olg", "constants.olg", "negation.dl"}


def magic_of(spark, path: Path):
    """(program as parsed, program after the magic-sets stage alone), one Spark run per file."""
    return after_stage(spark, "magic_sets", path)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_magic_sets_golden(spark, path):
    before, after = magic_of(spark, path)
    assert_golden(format_program(after), GOLDEN / (path.name + ".golden"))
    # Programs without a bound query, or whose bound relation is called two ways, stay as written.
    assert (after.rules != before.rules) == (path.name in CHANGED)


def test_magic_sets_reproduces_figure_4_3(spark):
    _, after = magic_of(spark, EXAMPLES / "path_magic.olg")
    rules = {r.name: " ".join(format_rule(r).split()) for r in after.rules}  # one line each
    assert rules == {
        "r1_case5": "r1_case5 path(@X, Y, P, C) :- magic_path(X), link(@X, Y, C), P := f_cons(X, Y).",
        "r2_case2_1": "r2_case2_1 sup_r2_1(X, Y, C1) :- magic_path(X), link(@X, Y, C1).",
        "r2_case3_2": "r2_case3_2 magic_path(Y) :- sup_r2_1(X, Y, C1).",
        "r2_case4_2": "r2_case4_2 sup_r2_2(X, Y, C1, Z, P2, C2) :- sup_r2_1(X, Y, C1), path(@Y, Z, P2, C2).",
        "r2_case5": "r2_case5 path(@X, Z, P, C) :- sup_r2_2(X, Y, C1, Z, P2, C2), f_contains(X, P2) == false, "
                    "P := f_cons(X, P2), C := C1 + C2.",
    }
    facts = [f for f in after.facts if f.atom.relation == "magic_path"]
    assert [tuple(a.value for a in f.atom.args) for f in facts] == [("node1",)]


def answers(spark, program: S.Program, folder: Path) -> dict:
    """What a user of `program` sees, run on Spark: query answers (by query number) and
    .output relations; for a program with neither, every derived relation."""
    dataflow = plan(program)
    facts_dir = folder / program.name
    result = run(dataflow, spark, gather_inputs(spark, dataflow, [], str(facts_dir) if facts_dir.is_dir() else None),
                 tuning="small")
    out = {f"query {i}": {tuple(tuple(v) if isinstance(v, list) else v for v in r)
                          for r in query_frame(result.relations[q.relation], q).collect()}
           for i, q in enumerate(dataflow.queries)}
    shown = list(dataflow.outputs) or ([] if dataflow.queries else
                                       [n for n, s in dataflow.relations.items() if s.kind == "derived"])
    out.update({name: set(rows) for name, rows in result.tuples(shown).items()})
    return out, result


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_answers_are_the_same_with_and_without_magic_sets(spark, path):
    before, after = magic_of(spark, path)
    want, _ = answers(spark, before, path.parent)
    have, _ = answers(spark, after, path.parent)
    assert want, "the program should have a query or an output"
    assert have == want


def test_magic_sets_derives_only_what_the_query_needs(spark):
    before, after = magic_of(spark, EXAMPLES / "path_magic.olg")
    _, full = answers(spark, before, EXAMPLES)
    _, magic = answers(spark, after, EXAMPLES)
    assert len(full.tuples(["path"])["path"]) == 171
    # paths from node1 and from the clique nodes it extends; none from node5..node10
    sources = {t[0] for t in magic.tuples(["path"])["path"]}
    assert sources == {"node1", "node2", "node3", "node4"}


# ---------------------------------------------------------------- random programs

BATCH = 20


@st.composite
def bound_query_program(draw, index: int = 0):
    """A random stratified program (test_runtime.random_program), every relation
    materialized, and a query binding constants of one derived relation."""
    p = draw(random_program(index, nullary=False))  # the shapes its batches are tuned to (a query binds a column)
    derived = sorted({(r.head.relation, r.head.arity) for r in p.rules})
    name, arity = draw(st.sampled_from(derived))
    bound = draw(st.lists(st.booleans(), min_size=arity, max_size=arity).filter(any))
    args = tuple(S.Const(draw(st.integers(0, 4)), S.INT) if b else S.Var(f"Q{i}") for i, b in enumerate(bound))
    return p, S.Atom(name, args)


@settings(max_examples=int(os.environ.get("EVITA_MAGIC_EXAMPLES", "3")), deadline=None, derandomize=True,
          database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(bound_query_program(), min_size=BATCH, max_size=BATCH))
def test_random_programs_with_a_bound_query_keep_their_answers(spark, cases):
    """One Spark compile per batch of 20 programs (renamed apart, one query each); the
    answers of each query are compared on the reference evaluator."""
    statements, queries = [], []
    for i, (p, q) in enumerate(cases):
        renamed = rename(p, f"p{i}_")
        relations = sorted({s.atom.relation if isinstance(s, S.Fact) else s.head.relation for s in renamed}
                           | {l.relation for s in renamed if isinstance(s, S.Rule) for l in s.body
                              if isinstance(l, S.Atom)})
        statements += [S.Materialize(r, S.Const("infinity", S.INFINITY), S.Const("infinity", S.INFINITY), ())
                       for r in relations]
        statements += renamed
        queries.append(S.Atom(f"p{i}_" + q.relation, q.args))
    statements += [S.Query(q) for q in queries]
    batch = S.Program("magic_batch", tuple(statements))
    rows = encode(batch)
    out = stg.run_stage(spark, stg.find_stages()["magic_sets"], rows, batch.name)
    rewritten = decode(stg.apply(rows, out), batch.name)
    want, have = oracle.evaluate(batch), oracle.evaluate(rewritten)
    restricted = 0
    for i, q in enumerate(queries):
        full, magic = want.get(q.relation, set()), have.get(q.relation, set())
        assert _matching(full, q) == _matching(magic, q), \
            f"query {format_rule(S.Rule('q', q, ()))} differs\n{format_program(rewritten)}"
        # A rewritten relation holds only true tuples: those its calls ask for.
        assert magic <= full, f"{q.relation} derives tuples the original does not: {sorted(magic - full)[:5]}"
        restricted += magic != full
    assert any(r.name.endswith("_case5") for r in rewritten.rules), "the batch should have rewritten some rule"
    assert restricted, "magic sets should have restricted some queried relation to what its query asks"


def _matching(tuples: set, q: S.Atom) -> set:
    return {t for t in tuples if all(not isinstance(a, S.Const) or t[i] == a.value for i, a in enumerate(q.args))}
