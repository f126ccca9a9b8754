"""Soufflé's algebraic data types (issue 39; docs/language.md, "Algebraic data types (Soufflé)";
bootstrap/records.py and bootstrap/lowering/records.py): an ADT value is its canonical
text {"B":[fields]} in every backend, so the oracle, the columnar core (in process) and
Spark SQL give the same rows. The corpus (tests/souffle/adt/) runs programs through
`evita run`, inputs and outputs included."""
from __future__ import annotations

from pathlib import Path

import pytest

import oracle
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from evita.bootstrap.records import adt_branch, adt_field, adt_text, parse_souffle, souffle_text, surface
from evita.bootstrap.types import TypeSystem
from souffle_support import errors, round_trips, run_planned
from test_souffle_records import in_process

# An evaluator over expression trees: recursion over subterms, branch patterns in bodies
# and heads, `e = $B(...)`, negation, an aggregate grouped by an ADT value, an enum.
EVALUATOR = """\
.type Op = Plus {} | Times {}
.type Expr = Num {n: number} | Bin {op: Op, l: Expr, r: Expr} | Neg {e: Expr} | Var {name: symbol}
.decl top(e: Expr)
top($Bin($Plus, $Num(1), $Bin($Times(), $Num(2), $Neg($Num(3))))).
top($Bin($Plus, $Var("x"), $Num(1))).
top($Neg($Neg($Num(4)))).
.decl sub(e: Expr)
sub(e) :- top(e).
sub(l), sub(r) :- sub($Bin(_, l, r)).
sub(e) :- sub($Neg(e)).
.decl val(e: Expr, v: number)
val($Num(n), n) :- sub($Num(n)).
val(e, a + b) :- sub(e), e = $Bin($Plus, l, r), val(l, a), val(r, b).
val(e, a * b) :- sub(e), e = $Bin($Times(), l, r), val(l, a), val(r, b).
val($Neg(e), -a) :- sub($Neg(e)), val(e, a).
.decl stuck(e: Expr)
stuck(e) :- top(e), !val(e, _).
.decl uses(op: Op, n: number)
uses(op, n) :- sub($Bin(op, _, _)), n = count : { sub($Bin(op, _, _)) }.
.decl leaf_sum(e: Expr, s: number)
leaf_sum(e, s) :- top(e), s = sum n : { sub($Num(n)) }.
.decl doubled(e: Expr)
doubled($Bin($Plus, e, e)) :- sub(e), e = $Num(_), !sub($Bin(_, e, _)).
.decl closed(e: Expr)
closed(e) :- top(e), e = $Neg(_), !top($Var(_)).
.decl negs(e: Expr)
negs($Neg(e)) :- sub(e), e = $Neg(_).
"""


def test_the_oracle_the_columnar_core_and_spark_agree(spark):
    expected = oracle.evaluate(check_program(parse_program(EVALUATOR, "e.dl")))
    here = in_process(EVALUATOR)
    _, result = run_planned(spark, EVALUATOR, "e.dl", "sql")
    on_spark = result.tuples()  # one Spark action, with the run's tuning
    for relation, tuples in expected.items():
        assert here[relation] == tuples, relation
        assert on_spark[relation] == tuples, relation
    assert all(expected[r] for r in ("val", "stuck", "uses", "doubled", "closed"))  # none is empty


def _shown(rows) -> set:
    return {tuple(souffle_text(v) if isinstance(v, str) and v.startswith("{") else v for v in r) for r in rows}


def test_known_answers():
    got = oracle.evaluate(check_program(parse_program(EVALUATOR, "e.dl")))
    vals = _shown(got["val"])
    assert ("$Bin($Plus, $Num(1), $Bin($Times, $Num(2), $Neg($Num(3))))", -5) in vals
    assert ("$Neg($Neg($Num(4)))", 4) in vals
    assert _shown(got["stuck"]) == {("$Bin($Plus, $Var(x), $Num(1))",)}
    assert _shown(got["uses"]) == {("$Plus", 2), ("$Times", 1)}
    assert {s for _, s in got["leaf_sum"]} == {1 + 2 + 3 + 4}
    # a negated pattern with _: no tuple matches it (a helper relation of its variables)
    assert _shown(got["doubled"]) == {("$Bin($Plus, $Num(3), $Num(3))",), ("$Bin($Plus, $Num(4), $Num(4))",)}
    assert _shown(got["closed"]) == {("$Neg($Neg($Num(4)))",)}
    assert _shown(got["negs"]) == {("$Neg($Neg($Num(3)))",), ("$Neg($Neg($Num(4)))",), ("$Neg($Neg($Neg($Num(4))))",)}


def test_a_program_with_adts_prints_and_parses_back():
    assert round_trips(parse_program(EVALUATOR, "e.dl"))


def test_the_canonical_text_and_soufflés_text_form():
    table = {"P": ("number", "symbol"), "E": (("Num", ("number",)), ("Pair", ("P", "E")), ("Nil", ()))}
    text = parse_souffle('$Pair([1, "a, b"], $Nil)', "E", table)
    assert text == '{"Pair":[[1,"a, b"],{"Nil":[]}]}'
    assert souffle_text(text) == "$Pair([1, a, b], $Nil)"
    assert surface(text) == '$Pair([1, "a, b"], $Nil())'  # a program's constant: it parses back
    assert parse_souffle(" $Nil() ", "E", table) == parse_souffle("$Nil", "E", table) == '{"Nil":[]}'
    assert adt_branch(text) == "Pair" and adt_field(text, "Pair", 1, "adt E") == '{"Nil":[]}'
    assert adt_field(text, "Num", 0, "number") is None  # another branch: no field
    assert adt_text("Num", "n", [-3]) == '{"Num":[-3]}'
    for bad in ("$Num(x)", "$Two(1)", "$Num(1", "Num(1)"):
        with pytest.raises(ValueError):
            parse_souffle(bad, "E", table)


def test_the_record_table_describes_adts_for_input():
    types = TypeSystem([s for s in parse_program(
        ".type P = [x: number, e: E]\n.type E = Num {n: number} | Pt {p: P} | Nil {}\n.decl d(e: E)\n",
        "t.dl").statements if type(s).__name__ == "TypeDecl"])
    assert types.record_table() == {"P": ("number", "E"), "E": (("Num", ("number",)), ("Pt", ("P",)), ("Nil", ()))}
    assert types.primitive("E") == "symbol" and types.kind("E") == "adt E"


E = ".type E = Num {n: number} | Add {l: E, r: E} | Nil {}\n.decl e(x: E)\n"


@pytest.mark.parametrize("text, expected", [
    (E + "e($Nun(1)).", ("unknown-branch", 3, 3, "unknown branch $Nun")),
    (E + "e($Num(1, 2)).", ("type-mismatch", 3, 3, "$Num has 2 fields here, but branch Num of E has 1 (n: number)")),
    (E + '.decl q(n: number)\nq(n) :- e($Add(n)).',
     ("type-mismatch", 4, 11, "$Add has 1 field here, but branch Add of E has 2 (l: E, r: E)")),
    (E + 'e($Num("a")).', ("type-mismatch", 3, 8, 'field n of branch $Num holds a number, but "a" is a symbol')),
    (E + ".decl a(s: symbol)\n.decl q(x: E)\nq($Num(s)) :- a(s).",
     ("type-mismatch", 5, 8, "rule rule1: s is a symbol, but field n of branch $Num holds a number")),
    (E + ".type F = Num {x: symbol}\n",
     ("duplicate-declaration", 3, 1, "branch Num of F is already a branch of E (declared at t.dl:1:1)")),
    (E + ".decl q(n: number)\nq($Num(1)).",
     ("type-mismatch", 4, 3, "$Num(...) is a value of ADT type E, but q (column 1) holds a number")),
    (E + ".type C = Red {}\n.decl c(x: C)\nc($Nil).",
     ("type-mismatch", 5, 3, "$Nil(...) is a value of ADT type E, but c (column 1) holds a value of ADT type C")),
    (E + "e(nil).", ("type-mismatch", 3, 3, "nil is a record, but e (column 1) holds a value of ADT type E")),
    (E + ".decl q(a: E)\nq(a) :- e(a), e(b), a < b.",
     ("type-mismatch", 4, 21, "rule rule1: the condition orders a value of ADT type E with <, which is not "
                              "supported yet")),
    (".type E = A {x: number, x: number}\n", ("duplicate-declaration", 1, 1, "branch A of E names the field x twice")),
])
def test_adt_errors_are_positioned(text, expected):
    assert expected in errors(text)


def test_a_bad_adt_value_in_an_input_file_is_positioned(tmp_path, capsys):
    from evita.bootstrap.cli import main

    (tmp_path / "p.dl").write_text(".type E = Num {n: number} | Nil {}\n.decl e(x: E)\n.input e\n"
                                   ".decl o(n: number)\no(n) :- e($Num(n)).\n.output o\n")
    (tmp_path / "e.facts").write_text("$Num(1)\n$Nil\n$Num(x)\n")
    assert main(["run", str(tmp_path / "p.dl"), "-F", str(tmp_path), "-D", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "e.facts:3:6: error[input-type]" in err and "a whole number expected at character 6" in err


def test_a_components_adt_is_qualified_by_its_instance():
    text = (Path(__file__).parent / "souffle" / "adt" / "component_branches" / "prog.dl").read_text()
    program = parse_program(text, "c.dl")
    got = oracle.evaluate(check_program(program))
    assert got["has"] == {("x",)} and got["both"] == {(2,)}  # two instances, one branch name each
    assert round_trips(program)  # `.type c.T = c.B {...}` and `$c.B(...)` print and parse back
