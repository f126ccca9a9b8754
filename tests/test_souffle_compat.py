"""Soufflé programs run as Soufflé runs them (issue 39): nullary relations, ground
negated atoms, unsigned output, aggregates whose body shares variables with the rule,
lists in directives, multi-head rules, negated disjunctions, functor facts, no default
iteration limit, multi-character delimiters and rfc4180 outputs.

Each program runs on the oracle (tests/oracle.py), the columnar evaluator ("small") and
Spark's SQL loop ("sql"), and all three must give Soufflé's rows.
"""
from __future__ import annotations

import pytest

import oracle
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from souffle_support import run_planned

BACKENDS = ["small", "sql"]


def _everywhere(spark, backend, text, expected):
    program = check_program(parse_program(text, "t.dl"))
    got = oracle.evaluate(program)
    assert {rel: got.get(rel, set()) for rel in expected} == expected
    _, result = run_planned(spark, text, "t.dl", backend)
    assert result.tuples(list(expected)) == expected


NULLARY = """
.decl b(x: number)
b(3). b(4).
.decl a()
a() :- b(_).
.decl never()
never() :- b(5).
.decl q(x: number)
q(x) :- a(), b(x).
.decl none(x: number)
none(x) :- never(), b(x).
.decl neg(x: number)
neg(x) :- b(x), !never().
.decl neg2(x: number)
neg2(x) :- b(x), !a().
.decl fact()
fact().
.decl both()
both() :- fact(), a(), !never().
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_nullary_relations_are_derived_negated_and_stated(spark, backend):
    _everywhere(spark, backend, NULLARY, {
        "a": {()}, "never": set(), "q": {(3,), (4,)}, "none": set(), "neg": {(3,), (4,)}, "neg2": set(),
        "fact": {()}, "both": {()}})


GROUND_NEGATION = """
.decl X(a: symbol, b: symbol)
.decl Y(a: symbol, b: symbol)
.decl Z(a: symbol, b: symbol)
.decl W(a: symbol, b: symbol)
X("a", "b"). Y("a", "b"). Y("c", "d").
Z(a, b) :- !X("a", "b"), Y(a, b).
W(a, b) :- Y(a, b), !X("x", "y").
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negated_ground_atom_is_a_condition(spark, backend):
    _everywhere(spark, backend, GROUND_NEGATION, {"Z": set(), "W": {("a", "b"), ("c", "d")}})
