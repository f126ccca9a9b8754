"""Soufflé's records (issue 39; docs/language.md, "Records"; bootstrap/records.py and
bootstrap/lowering/records.py): a record is its canonical text in every backend, so the
oracle, the columnar core (in process) and Spark SQL give the same rows. The corpus
(tests/souffle/records/) runs programs through `evita run`, inputs and outputs included."""
from __future__ import annotations

import pytest

import oracle
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from evita.bootstrap.records import parse_souffle, record_text, souffle_text
from evita.runtime import columnar
from souffle_support import errors, round_trips, run_planned

LISTS = """\
.type List = [head: number, tail: List]
.decl upto(n: number, l: List)
upto(0, nil).
upto(n + 1, [n, l]) :- upto(n, l), n < 5.
.decl heads(h: number)
heads(h) :- upto(_, [h, _]).
.decl second(s: number)
second(s) :- upto(_, l), l = [_, [s, _]].
.decl empty(n: number)
empty(n) :- upto(n, nil).
"""
PLACES = """\
.type Pt = [x: number, y: number]
.type Named = [name: symbol, at: Pt]
.decl place(p: Named)
place(["a b", [1, 2]]). place(["say \\"hi\\"", [3, 4]]). place(["e", [1, 2]]).
.decl together(a: symbol, b: symbol)
together(a, b) :- place([a, p]), place([b, q]), p = q, a != b.
.decl known(p: Pt)
known([1, 2]). known([5, 6]).
.decl nobody_at(p: Pt)
nobody_at(p) :- known(p), !place([_, p]).
.decl alone(n: Named)
alone(n) :- place(n), n = [_, p], !known(p).
.decl per_point(p: Pt, n: number)
per_point(p, n) :- place([_, p]), n = count : { place([_, p]) }.
.decl moved(n: Named)
moved([s, [x + 1, y]]) :- place([s, [x, y]]).
"""


def rows(table) -> set:
    return {tuple(r) for r in table.astype(object).values.tolist()}


def in_process(text: str) -> dict:
    return {n: rows(t) for n, t in columnar.run_dataflow(plan(check_program(parse_program(text, "r.dl"))), {}).items()}


@pytest.mark.parametrize("text", [LISTS, PLACES], ids=["lists", "places"])
def test_the_oracle_the_columnar_core_and_spark_agree(spark, text):
    expected = oracle.evaluate(check_program(parse_program(text, "r.dl")))
    here = in_process(text)
    _, result = run_planned(spark, text, "r.dl", "sql")
    on_spark = result.tuples()  # one Spark action, with the run's tuning
    for relation, tuples in expected.items():
        assert here[relation] == tuples, relation
        assert on_spark[relation] == tuples, relation
    assert expected  # every relation compared


def test_known_answers():
    lists = oracle.evaluate(check_program(parse_program(LISTS, "r.dl")))
    assert lists["upto"] >= {(0, "null"), (2, "[1,[0,null]]")}
    assert lists["heads"] == {(0,), (1,), (2,), (3,), (4,)}
    assert lists["second"] == {(0,), (1,), (2,), (3,)}
    assert lists["empty"] == {(0,)}
    got = oracle.evaluate(check_program(parse_program(PLACES, "r.dl")))
    assert got["together"] == {("a b", "e"), ("e", "a b")}
    assert got["alone"] == {('["say \\"hi\\"",[3,4]]',)}
    assert got["per_point"] == {("[1,2]", 2), ("[3,4]", 1)}
    assert ('["e",[2,2]]',) in got["moved"]
    assert got["nobody_at"] == {("[5,6]",)}  # a negated pattern with _: no place is at [5, 6]


def test_a_program_with_records_prints_and_parses_back():
    assert round_trips(parse_program(PLACES, "r.dl"))


@pytest.mark.parametrize("text, expected", [
    ('.type P = [x: number, y: symbol]\n.decl p(a: P)\np([1, "a", 3]).',
     ("type-mismatch", 3, 3, "the record has 3 fields, but type P has 2 (x: number, y: symbol)")),
    ('.type P = [x: number, y: symbol]\n.decl p(a: P)\np(["a", "b"]).',
     ("type-mismatch", 3, 4, 'field x of P holds a number, but "a" is a symbol')),
    ('.type P = [x: number]\n.decl p(a: P)\n.decl q(x: number)\nq(x) :- p([x, y]).',
     ("type-mismatch", 4, 11, "the record has 2 fields, but type P has 1 (x: number)")),
    ('.decl r(a: number)\nr([1]).', ("type-mismatch", 2, 3, "[1] is a record, but r (column 1) holds a number")),
    ('.type P = [x: number]\n.decl p(a: P)\n.decl q(a: P)\nq(a) :- p(a), p(b), a < b.',
     ("type-mismatch", 4, 21, "rule rule1: the condition orders a record of type P with <")),
    ('.type P = [x: number, y: symbol]\n.decl a(n: number, s: symbol)\n.decl q(r: P)\nq([s, n]) :- a(n, s).',
     ("type-mismatch", 4, 4, "rule rule1: s is a symbol, but field x of record type P holds a number")),
    ('.type P = [x: number, y: Q]\n.type Q = [z: symbol]\n.decl a(n: number)\n.decl q(r: P)\n'
     'q([n, n]) :- a(n).',
     ("type-mismatch", 5, 7, "rule rule1: n is a number, but field y of record type P holds a record of type Q")),
])
def test_record_type_errors_are_positioned(text, expected):
    assert expected in errors(text)


def test_canonical_text_and_soufflés_text_form():
    table = {"L": ("number", "L"), "T": ("symbol", "L")}
    assert parse_souffle('[ "a, b" , [1, [2, nil]]]', "T", table) == '["a, b",[1,[2,null]]]'
    assert parse_souffle("[plain text, nil]", "T", table) == '["plain text",null]'
    assert souffle_text('["a, b",[1,[2,null]]]') == "[a, b, [1, [2, nil]]]"
    assert record_text("sn", ["tab\there", -3]) == '["tab\\there",-3]'
    with pytest.raises(ValueError):
        parse_souffle("[1, [2, nil]", "L", table)


def test_a_bad_record_in_an_input_file_is_positioned(tmp_path, capsys):
    from evita.bootstrap.cli import main

    (tmp_path / "p.dl").write_text(".type L = [h: number, t: L]\n.decl e(l: L)\n.input e\n.decl o(h: number)\n"
                                   "o(h) :- e([h, _]).\n.output o\n")
    (tmp_path / "e.facts").write_text("[1, nil]\n[x, nil]\n")
    assert main(["run", str(tmp_path / "p.dl"), "-F", str(tmp_path), "-D", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "e.facts:2:2: error[input-type]" in err and "a whole number expected at character 2" in err


def test_the_preview_shows_records_as_soufflé_writes_them(tmp_path, capsys):
    from evita.bootstrap.cli import main

    (tmp_path / "p.dl").write_text('.type P = [x: number, y: symbol]\n.decl q(r: P)\nq([1, "a b"]).\n.output q\n')
    assert main(["run", str(tmp_path / "p.dl")]) == 0
    out = capsys.readouterr().out
    assert "[1, a b]" in out and '"a b"' not in out
