"""Soufflé's `.limitsize R(n=N)` (issue 12 §2; docs/language.md, ".decl, .input,
.output"): as in Soufflé, the recursion deriving R stops before a round once R holds N
tuples or more, the round that reached N kept whole; only R's recursion stops (its
stratum is its SCC alone); a relation no recursion derives is not limited. The same on
the SQL loop, the driver's columnar backend and as SQL text. The corpus
(tests/souffle/limitsize/) runs these through `evita run`'s path.
"""
from __future__ import annotations

import pytest

from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from evita.bootstrap.strata import limitsize_without_effect
from evita.runtime.inputs import check_io_params
from souffle_support import round_trips, run_planned

PROGRAM = """\
.decl p(x: number)
.decl w(x: number, y: number)
.decl q(x: number)
.limitsize p(n=2)
.limitsize w(n=3)
p(0). w(0, 0). w(0, 1). q(0).
p(x + 1) :- p(x), x < 1000.
w(x + 1, y) :- w(x, y), x < 1000.
q(x + 1) :- q(x), x < 2.
"""
EXPECTED = {"p": {(0,), (1,)},  # one tuple a round: exactly 2
            "w": {(0, 0), (0, 1), (1, 0), (1, 1)},  # two a round: the round reaching 3 is kept
            "q": {(0,), (1,), (2,)}}  # not limited: to its fixpoint


def test_the_recursion_stops_between_rounds_on_every_backend(spark):
    from evita.runtime.engine import run

    flow = plan(check_program(parse_program(PROGRAM, "l.dl")))
    assert [s.relations for s in flow.strata if s.recursive] == [("q",), ("p",), ("w",)]  # one stratum each
    assert "limit 2" in flow.to_text()
    runs = [run_planned(spark, PROGRAM, "l.dl", backend)[1] for backend in ("sql", "small")]
    runs.append(run(flow, spark, local=False, one_partition=True))
    for result in runs:
        assert result.tuples(list(EXPECTED)) == EXPECTED
    assert any("p holds 2 tuples (.limitsize p(n=2))" in n for n in runs[0].notes)


def test_the_directive_prints_back():
    assert round_trips(check_program(parse_program(PROGRAM, "l.dl")))


def test_a_relation_no_recursion_derives_gets_a_warning_at_the_directive():
    program = parse_program(".decl a(x: number)\n.decl p(x: number)\n.limitsize p(n=1)\na(1).\np(x) :- a(x).\n"
                            ".limitsize a(n=1)\n", "l.dl")
    found = [(d.severity, d.span.line, d.span.col, d.message) for d in limitsize_without_effect(program)]
    assert found == [("warning", 3, 1, ".limitsize p has no effect: no recursion derives p"),
                     ("warning", 6, 1, ".limitsize a has no effect: no recursion derives a")]


@pytest.mark.parametrize("directive, expected", [
    (".limitsize p(n=\"many\")", [(3, 14, ".limitsize p: n=many is not a number of tuples")]),
    (".limitsize p(n=lots)", [(3, 14, ".limitsize p: n=lots is not a number of tuples")]),
    (".limitsize p", [(3, 12, ".limitsize p: the size limit n= is missing")]),
    (".limitsize p(m=3)", [(3, 14, ".limitsize p: Evita does not support parameter m"),
                           (3, 12, ".limitsize p: the size limit n= is missing")]),
    (".limitsize p(n=3)\n.limitsize p(n=4)", [(4, 12, ".limitsize p: a second size limit (the first is at line 3)")]),
])
def test_a_bad_directive_is_a_diagnostic_at_its_text(directive, expected):
    program = parse_program(".decl p(x: number)\np(0).\n" + directive + "\n", "l.dl")
    assert [(d.code, d.span.line, d.span.col, d.message) for d in check_io_params(program)] == [
        ("io-param",) + e for e in expected]
