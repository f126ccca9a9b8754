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


MULTI = """
.decl a(x: number)
.decl b(x: number)
.decl c(x: number)
.decl d(x: number)
.decl e(x: number)
c(1). c(2). c(3). c(4). d(2). e(3).
a(x), b(x) :- c(x), !(d(x) ; e(x)).
.decl f(x: number)
f(x) :- c(x), !(d(x), x > 1).
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_heads_and_a_negated_disjunction(spark, backend):
    _everywhere(spark, backend, MULTI, {"a": {(1,), (4,)}, "b": {(1,), (4,)}, "f": {(1,), (3,), (4,)}})


WITNESS = """
.decl a(x: number, y: number)
a(1, 5). a(2, 3). a(3, 3). a(4, 9).
.decl lowest(x: number, m: number)
lowest(x, m) :- m = min y : { a(x, y) }.
.decl highest(x: number, m: number)
highest(x, m) :- m = max y : { a(x, y) }.
.decl per(x: number, m: number)
per(x, m) :- a(x, _), m = min y : { a(x, y) }.
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_variable_only_the_aggregate_binds_is_a_witness_not_a_group(spark, backend):
    _everywhere(spark, backend, WITNESS, {
        "lowest": {(2, 3), (3, 3)}, "highest": {(4, 9)},
        "per": {(1, 5), (2, 3), (3, 3), (4, 9)}})


def test_a_witness_of_count_or_sum_is_an_error_as_in_soufflé():
    from souffle_support import errors

    assert errors(".decl a(x: number)\n.decl c(x: number, n: number)\nc(x, n) :- n = count : { a(x) }.\n") == [
        ("witness", 3, 12, "variable x is bound only inside a count aggregate, but the head uses it")]


def test_facts_holding_functors_are_folded():
    program = parse_program('.decl A(x: symbol)\nA(to_string(10)). A(cat("a", to_string(2))). A(substr("hello", 1, 3)).\n'
                            '.decl B(x: number)\nB(to_number(to_number(2))). B(to_number("12")). B(strlen("abc")). '
                            'B(max(1, 5, 3)). B(to_number(2.7)).\n', "t.dl")
    assert [f.atom.args[0].value for f in program.facts] == ["10", "a2", "ell", 2, 12, 3, 5, 2]
    from souffle_support import errors

    assert errors('.decl B(x: number)\nB(to_number("x1")).') == [
        ("constant-expression", 2, 3, "fact B: to_number: 'x1' is not a whole number")]


def test_lists_in_directives_apply_the_parameters_to_each():
    from evita.bootstrap import syntax as S

    program = parse_program('.decl a(x: number)\n.decl b(x: number)\n.input a, b(delimiter=",")\n'
                            '.output a, b\n.output a()\n', "t.dl")
    assert [(d.direction, d.relation, d.params) for d in program.of(S.IODirective)] == [
        ("input", "a", (("delimiter", ","),)), ("input", "b", (("delimiter", ","),)),
        ("output", "a", ()), ("output", "b", ()), ("output", "a", ())]


def test_a_recursion_runs_to_its_fixpoint_without_a_limit_unless_asked():
    from evita.bootstrap.planner import plan
    from evita.runtime import columnar, semantics

    text = ".decl n(x: number)\nn(0).\nn(x + 1) :- n(x), x < 2500.\n"
    flow = plan(check_program(parse_program(text, "t.dl")))
    [st] = [s for s in flow.strata if s.recursive]
    seeds = {"n": __import__("pandas").DataFrame({"c0": [0]})}
    assert len(columnar.run_stratum(st, flow.relations, seeds).tables["n"]) == 2501
    with pytest.raises(semantics.NoFixpoint):
        columnar.run_stratum(st, flow.relations, seeds, max_iterations=100)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_proposition_is_written_as_soufflé_writes_it(spark, backend, tmp_path):
    """The line "()" when true, nothing when false; the relation as a DataFrame has no columns."""
    from evita.runtime.inputs import OutputFile
    from evita.runtime.io import write_text_outputs

    _, result = run_planned(spark, NULLARY, "t.dl", backend)
    write_text_outputs(result, [OutputFile("a", str(tmp_path / "a.csv"), "\t", False),
                                OutputFile("never", str(tmp_path / "never.csv"), "\t", False)])
    assert (tmp_path / "a.csv").read_text() == "()\n"
    assert (tmp_path / "never.csv").read_text() == ""
    assert result.relations["a"].columns == [] and result.relations["a"].count() == 1
    assert result.rows("a") == [()] and result.rows("never") == []
