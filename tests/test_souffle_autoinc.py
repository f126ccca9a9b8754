"""Soufflé's `autoinc()` (issue 12 §3), with Evita's deterministic numbering
(docs/language.md, "autoinc()"): the parser lowers a rule with `autoinc()` in its head to
a helper relation of the rule's distinct bindings numbered by `autoinc<*>`, and the rule
reading the numbers, so they do not depend on evaluation order. What matters: every
number is unique across the program, there is one per binding (a tuple of every atom
the body scans), each round of a recursion numbers its new bindings after all earlier
ones, and two runs give the same numbers; on Spark's backends as in the oracle. The
corpus (tests/souffle/autoinc/) has the cases Soufflé's documentation fixes.
"""
from __future__ import annotations

import pytest

import oracle
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from souffle_support import errors, round_trips, run_planned

PROGRAM = """\
.decl e(x: symbol, y: number)
.decl r(x: symbol, id: number)
.decl s(id: number, y: number, z: symbol)
.decl t(id: number)
.decl d(x: symbol)
e("b", 2). e("a", 1). e("a", 3). e("c", 2). e("b", 1).
r(x, autoinc()) :- e(x, _).
s(autoinc(), y, x) :- e(x, y), y < 3.
d(x) :- r(x, _).
t(autoinc()) :- d(x), e(x, y).
t(autoinc()) :- e(_, _).
"""
# bindings of each rule: r by the tuples of e (5: `_` scans), s by (y, x) with y < 3 (4),
# the first t rule by (x, y) (5), the second by nothing (1: e(_, _) only tests e)
BINDINGS = {"r": 5, "s": 4, "t": 5 + 1}


def numbers(answers: dict) -> list:
    return [t[1] for t in answers["r"]] + [t[0] for t in answers["s"]] + [t[0] for t in answers["t"]]


def test_numbers_are_unique_one_per_binding_and_the_same_every_time():
    first = oracle.evaluate(check_program(parse_program(PROGRAM, "a.dl")))
    again = oracle.evaluate(check_program(parse_program(PROGRAM, "a.dl")))
    assert first == again
    assert {rel: len(first[rel]) for rel in BINDINGS} == BINDINGS
    got = numbers(first)
    assert len(got) == len(set(got)) == sum(BINDINGS.values())
    # rank * 4 + the rule's index (4 rules with autoinc(), in source order)
    assert sorted(first["r"]) == [("a", 0), ("a", 4), ("b", 8), ("b", 12), ("c", 16)]
    assert sorted(first["s"]) == [(1, 1, "a"), (5, 1, "b"), (9, 2, "b"), (13, 2, "c")]
    assert sorted(first["t"]) == [(2,), (3,), (6,), (10,), (14,), (18,)]


def test_each_component_instance_numbers_apart():
    """K and i are set after components are expanded: an instance is one more rule."""
    text = (".decl a(x: number)\n.decl r(x: number, n: number)\n"
            ".comp C { .decl q(x: number, n: number)\nq(x, autoinc()) :- a(x).\nr(x, n) :- q(x, n). }\n"
            ".init c1 = C\n.init c2 = C\na(1). a(2).\nr(9, autoinc()).\n")
    got = oracle.evaluate(check_program(parse_program(text, "a.dl")))
    assert got["c1.q"] == {(1, 0), (2, 3)} and got["c2.q"] == {(1, 1), (2, 4)}  # k * 3 + i
    assert got["r"] == got["c1.q"] | got["c2.q"] | {(9, 2)}


def test_the_lowered_program_round_trips():
    assert round_trips(check_program(parse_program(PROGRAM, "a.dl")))


# On Spark a smaller program; the corpus (tests/souffle/autoinc/) runs more cases through
# `evita run`'s path. p is recursive: the chain 1 -> 2 -> {3, 4} numbers one round at a
# time, each round's bindings after the earlier ones in ascending order; the fact
# f(7, autoinc()) is one more rule.
SMALL = """\
.decl e(x: symbol, y: number)
.decl r(x: symbol, id: number)
.decl t(id: number)
.decl g(x: number, y: number)
.decl p(x: number, n: number)
.decl f(x: number, n: number)
e("b", 2). e("a", 1). e("a", 3). e("c", 2).
g(1, 2). g(2, 3). g(2, 4).
r(x, autoinc()) :- e(x, _).
t(autoinc()) :- e(_, y).
p(1, 100).
p(y, autoinc()) :- p(x, _), g(x, y).
f(7, autoinc()).
"""
K = 4  # rules with autoinc()


def test_spark_numbers_as_the_oracle_does_on_both_backends(spark):
    """Run on the SQL loop, on the driver's columnar backend and as SQL text: the same numbers."""
    expected = oracle.evaluate(check_program(parse_program(SMALL, "a.dl")))
    assert expected["r"] == {("a", 0), ("a", K), ("b", 2 * K), ("c", 3 * K)}
    assert expected["t"] == {(1,), (K + 1,), (2 * K + 1,), (3 * K + 1,)}  # one per tuple of e
    # rounds: {2}, then {3, 4}
    assert expected["p"] == {(1, 100), (2, 2), (3, K + 2), (4, 2 * K + 2)}
    assert expected["f"] == {(7, 3)}
    names = ["r", "t", "p", "f"]
    runs = [run_planned(spark, SMALL, "a.dl", backend)[1].tuples(names) for backend in ("sql", "small")]
    assert runs[0] == runs[1] == {n: expected[n] for n in names}
    # and as SQL text, the way catalog-sized programs run (`one_partition`; its recursion
    # with an aggregate is the loop above): the numbering of a stratum run once
    from evita.runtime.engine import run

    once = check_program(parse_program(SMALL.replace("p(y, autoinc()) :- p(x, _), g(x, y).\n", ""), "a.dl"))
    got = run(plan(once), spark, local=False, one_partition=True)
    assert got.tuples(["r", "t", "f"]) == {n: oracle.evaluate(once)[n] for n in ("r", "t", "f")}


@pytest.mark.parametrize("rule", ["p(y, autoinc()) :- p(x, _), g(x, y).",
                                  # over its own relation an atom of wildcards is scanned: Soufflé
                                  # tests each round's new tuples, so this never ends either
                                  "p(2, autoinc()) :- p(_, _)."])
def test_a_recursion_that_never_ends_says_autoinc_is_why(spark, rule):
    """Soufflé's evaluation of these never ends: each round numbers a new tuple. Evita's
    stops at the iteration limit, at the autoinc() call, and says why."""
    from evita.bootstrap.diagnostics import EvitaError
    from evita.runtime.engine import run

    text = (".decl g(x: number, y: number)\n.decl p(x: number, n: number)\ng(1, 2). g(2, 1).\np(1, 0).\n"
            + rule + "\n")
    with pytest.raises(EvitaError) as caught:
        run(plan(check_program(parse_program(text, "a.dl"))), spark, max_iterations=12)
    [d] = caught.value.diagnostics
    assert (d.code, d.span.line, d.span.col) == ("no-fixpoint", 5, rule.index("autoinc") + 1)
    assert "autoinc() gives each new binding of its rule a fresh number" in d.hint


DECLS = ".decl a(x: number)\n.decl r(x: number, n: number)\n"


@pytest.mark.parametrize("text, expected", [
    ("r(x, n) :- a(x), n = autoinc().",
     ("syntax", 3, 22, "autoinc() is supported only as an argument of a rule's head")),
    ("r(x, autoinc() * 2) :- a(x).",
     ("syntax", 3, 6, "autoinc() is supported only as an argument of a rule's head")),
    ("r(x, autoinc(x)) :- a(x).", ("syntax", 3, 6, "autoinc() takes no arguments")),
    ("r(x, autoinc<x>) :- a(x).",
     ("misused-aggregate", 3, 6, "autoinc<...> numbers the groups and aggregates no value")),
])
def test_misuse_is_one_diagnostic_at_the_call(text, expected):
    assert errors(DECLS + text) == [expected]
