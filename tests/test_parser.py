"""The front end: one test per construct of docs/language.md, the lowerings, the example
programs, and the invalid-program fixtures `tests/fixtures/invalid/syntax_*`.

A fixture states what it must produce in its first line, `// expect: CODE LINE:COL`
(the code of the first diagnostic and where it points; lines count from the top of the
file, the expectation line being line 1). No Spark here.
"""
from __future__ import annotations

import re

import pytest

from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_atom, parse_file, parse_program, parse_rule
from evita.bootstrap.syntax import (
    Aggregate, Assign, Atom, BinOp, Call, Column, Component, Cond, Const, Declaration, Fact,
    IODirective, ListExpr, Materialize, Query, Rule, Select, UnOp, Var, Wildcard,
)
from evita.catalog.schema import table

from conftest import EXAMPLES, FIXTURES

X, Y, Z, C = Var("X"), Var("Y"), Var("Z"), Var("C")


def const(v):
    types = {bool: "bool", int: "int", float: "float", str: "string", type(None): "null"}
    return Const(v, types[type(v)])


def errors(text, path="t.olg"):
    with pytest.raises(EvitaError) as info:
        parse_program(text, path)
    return info.value


# ---------------------------------------------------------------- statements

def test_fact_holds_typed_constants():
    [f] = parse_program('link("a\\"b", 3, -2, 1.5, true, null, infinity).').facts
    assert f.atom == Atom("link", (const('a"b'), const(3), const(-2), const(1.5), const(True), const(None),
                                   Const("infinity", "infinity")))


def test_fact_with_location_on_a_constant():
    [f] = parse_program('node(@"n1", 5).').facts
    assert f.atom.location == 0 and f.atom.args[0] == const("n1")


def test_materialize_keys_are_one_based_in_text():
    [m] = parse_program("materialize(link, infinity, 10, keys(1, 2)).\nmaterialize(e, 2.5, infinity, keys()).")\
        .of(Materialize)[:1]
    assert m == Materialize("link", Const("infinity", "infinity"), const(10), (0, 1))
    assert parse_program("materialize(e, 2.5, infinity, keys()).").statements[0].keys == ()


def test_define_maps_jol_types_and_keeps_zero_based_keys():
    [d] = parse_program("define(link, keys(0, 1), {String, Integer, Double, Object}).").statements
    assert d == Declaration("link", (Column("c0", "symbol"), Column("c1", "number"), Column("c2", "float"),
                                     Column("c3", "any")), (0, 1), "define")
    assert parse_program("define(e, {Long}).").statements[0].keys is None


def test_souffle_declarations_and_io():
    p = parse_program('.decl edge(x: number, y: symbol) btree\n'
                      '.input edge(IO=file, filename="e.facts", delimiter="\\t")\n'
                      '.output edge\n')
    decl, inp, out = p.statements
    assert decl == Declaration("edge", (Column("x", "number"), Column("y", "symbol")), None, "decl",
                               qualifiers=("btree",))  # a hint, kept so the program prints back whole
    assert inp == IODirective("input", "edge", (("IO", "file"), ("filename", "e.facts"), ("delimiter", "\t")))
    assert out == IODirective("output", "edge", ())
    assert p.dialect == "souffle"


def test_dialect_is_overlog_without_decl():
    assert parse_program("define(e, {String}).\np(X) :- e(X).").dialect == "overlog"


def test_query_statement():
    [q] = parse_program('query path("node1", Y, _).').statements
    assert q == Query(Atom("path", (const("node1"), Y, Wildcard())))


def test_comments_are_ignored():
    p = parse_program("// line comment\n/* block\n comment */ p(1). // trailing\n/**/q(2).")
    assert [f.atom.relation for f in p.facts] == ["p", "q"]


# ---------------------------------------------------------------- rules

def test_labelled_rule_with_location_and_assignment():
    r = parse_rule("r1 path(@X, Y, P, C) :- link(@X, Y, C), P := f_cons(X, Y).")
    assert r.name == "r1"
    assert r.head == Atom("path", (X, Y, Var("P"), C), location=0)
    assert r.body == (Atom("link", (X, Y, C), location=0), Assign(Var("P"), Call("f_cons", (X, Y))))


def test_unlabelled_rules_are_numbered_among_rules_only():
    p = parse_program("a(1).\np(X) :- a(X).\nr9 q(X) :- a(X).\nquery p(X).\ns(X) :- a(X).")
    assert [r.name for r in p.rules] == ["rule1", "r9", "rule3"]


def test_delete_rules_and_delete_as_a_relation_name():
    p = parse_program("delete p(X) :- q(X).\nr2 delete p(X) :- q(X).\ndelete(X) :- q(X).\n"
                      "r4 delete delete(X) :- q(X).")
    assert [(r.name, r.delete, r.head.relation) for r in p.rules] == [
        ("rule1", True, "p"), ("r2", True, "p"), ("rule3", False, "delete"), ("r4", True, "delete")]


def test_keywords_are_names_where_no_statement_starts():
    p = parse_program("r1 component(X) :- materialize(X), query(X), define(X), delta > 1, delta(X).")
    r = p.rules[0]
    assert r.head.relation == "component"
    assert [b.relation for b in r.body if isinstance(b, Atom)] == ["materialize", "query", "define", "delta"]
    assert r.body[3] == Select(BinOp(">", Var("delta"), const(1)))
    assert parse_program("query(X) :- q(X).").rules[0].head.relation == "query"


@pytest.mark.parametrize("suffix,time", [("", None), ("@next", "next"), ("@async", "async"),
                                         (" @next", "next")])
def test_dedalus_time_suffix(suffix, time):
    assert parse_rule(f"p(X){suffix} :- q(X).").time == time


def test_selections_calls_and_f_prefixed_selections():
    r = parse_rule("p(X) :- q(X), f_contains(X, L), X != 3, cat(X, Y) == Z, f_contains(X, L) == false.")
    assert r.body[0] == Atom("q", (X,))
    assert r.body[1] == Select(Call("f_contains", (X, Var("L"))))
    assert r.body[2] == Select(BinOp("!=", X, const(3)))
    assert r.body[3] == Select(BinOp("==", Call("cat", (X, Y)), Z))
    assert r.body[4] == Select(BinOp("==", Call("f_contains", (X, Var("L"))), const(False)))


def test_negation_spellings_give_the_same_atom():
    a = parse_rule("p(X) :- q(X), notin r(X, _).").body[1]
    b = parse_rule("p(X) :- q(X), !r(X, _).").body[1]
    assert a == b == Atom("r", (X, Wildcard()), negated=True)
    assert parse_rule("p(X) :- q(X), !f_contains(X, L).").body[1] == \
        Select(UnOp("!", Call("f_contains", (X, Var("L")))))


def test_delta_atom():
    assert parse_rule("p(X) :- delta q(@X), r(X).").body[0] == Atom("q", (X,), location=0, delta=True)


def test_namespaced_relation_names():
    r = parse_rule("delta::programEvent(P) :- sys::program(P, _, _, _, _, _).")
    assert r.head.relation == "delta::programEvent" and r.body[0].relation == "sys::program"


@pytest.mark.parametrize("written,func,arg", [
    ("a_min<C>", "min", C), ("min<C>", "min", C), ("a_MAX<C>", "max", C), ("max<C>", "max", C),
    ("count<*>", "count", None), ("a_COUNT<*>", "count", None), ("a_count<C>", "count", C),
    ("sum<C>", "sum", C), ("a_sum<C1 + C2>", "sum", BinOp("+", Var("C1"), Var("C2"))),
    ("avg<C>", "avg", C), ("a_avg<C>", "avg", C), ("set<C>", "set", C), ("list<C>", "list", C),
])
def test_head_aggregate_spellings(written, func, arg):
    r = parse_rule(f"best(@X, {written}) :- cost(@X, C, C1, C2).")
    assert r.head.args[1] == Aggregate(func, arg)
    assert r.head.location == 0


def test_capitalized_variable_comparison_is_not_an_aggregate():
    assert parse_rule("p(X) :- q(X, Min), Min<X.").body[1] == Select(BinOp("<", Var("Min"), X))


def test_head_expressions():
    r = parse_rule("path(X, Z, f_cons(X, P2), C1 + C2) :- q(X, Z, P2, C1, C2).")
    assert r.head.args[2] == Call("f_cons", (X, Var("P2")))
    assert r.head.args[3] == BinOp("+", Var("C1"), Var("C2"))


# ---------------------------------------------------------------- expressions

def expr(text):
    return parse_rule(f"p(V) :- q(A, B, D), V := {text}.").body[1].expr


A, B, D = Var("A"), Var("B"), Var("D")


def test_precedence_and_associativity():
    assert expr("A + B * D") == BinOp("+", A, BinOp("*", B, D))
    assert expr("A - B - D") == BinOp("-", BinOp("-", A, B), D)
    assert expr("(A + B) % D") == BinOp("%", BinOp("+", A, B), D)
    assert expr("A < B && B < D || A == D") == \
        BinOp("||", BinOp("&&", BinOp("<", A, B), BinOp("<", B, D)), BinOp("==", A, D))
    assert expr("A > B ? A : B") == Cond(BinOp(">", A, B), A, B)
    assert expr("A ? B : D ? A : B") == Cond(A, B, Cond(D, A, B))


def test_unary_operators_and_negative_literals():
    assert expr("-A") == UnOp("-", A)
    assert expr("!A") == UnOp("!", A)
    assert expr("-1") == const(-1)
    assert expr("- 2.5") == const(-2.5)
    assert expr("A - -1") == BinOp("-", A, const(-1))
    assert expr("2e3") == const(2000.0)


def test_power_is_a_call_to_pow():
    assert expr("A ^ B ^ D") == Call("pow", (A, Call("pow", (B, D))))
    assert expr("-A ^ 2") == UnOp("-", Call("pow", (A, const(2))))


def test_lists_and_strings():
    assert expr('[A, "x\\n", 3]') == ListExpr((A, const("x\n"), const(3)))
    assert expr("[]") == ListExpr(())
    assert expr('"tab\\there \\\\ \\"q\\""') == const('tab\there \\ "q"')


# ---------------------------------------------------------------- components

def test_components_mark_their_rules_and_facts():
    p = parse_program('component leader @ ["n1", "n2"] {\n  c(@"n1", 1).\n  r1 p(X)@async :- c(X, _).\n}\n'
                      'component solo @ "n3" { r2 q(X) :- c(X, _). }\ncomponent bare { }\nr3 s(X) :- c(X, _).')
    kinds = [(type(s).__name__, getattr(s, "component", None)) for s in p.statements]
    assert kinds == [("Component", None), ("Fact", "leader"), ("Rule", "leader"), ("Component", None),
                     ("Rule", "solo"), ("Component", None), ("Rule", None)]
    assert p.of(Component) == [Component("leader", ("n1", "n2")), Component("solo", ("n3",)),
                               Component("bare", ())]


# ---------------------------------------------------------------- named fields

def test_named_fields_of_a_catalog_relation():
    r = parse_rule('r1 out(R) :- sys::rule{id: R, is_delete: false}.')
    atom = r.body[0]
    cols = table("rule").column_names
    assert atom.named and atom.relation == "sys::rule" and atom.arity == len(cols)
    assert atom.args[cols.index("id")] == Var("R")
    assert atom.args[cols.index("is_delete")] == const(False)
    assert sum(isinstance(a, Wildcard) for a in atom.args) == len(cols) - 2


def test_named_fields_of_a_declared_relation_in_head_and_body():
    p = parse_program(".decl e(src: number, dst: number)\n.decl f(a: number, b: number)\n"
                      "f{b: Y} :- e{dst: Y}, !e{src: Y}.")
    r = p.rules[0]
    assert r.head == Atom("f", (Wildcard(), Y), named=True)
    assert r.body == (Atom("e", (Wildcard(), Y), named=True), Atom("e", (Y, Wildcard()), negated=True, named=True))


def test_named_fields_with_notin_and_delta():
    r = parse_rule("p(R) :- delta sys::rule{id: R}, notin sys::fact{id: R}.")
    assert r.body[0].delta and r.body[0].named and r.body[1].negated


# ---------------------------------------------------------------- lowering

def test_top_level_disjunction_expands_with_labels():
    p = parse_program(".decl e(x: number)\n.decl p(x: number)\nr p(x) :- e(x), x > 1 ; e(x), x < -1.\n"
                      "p(x) :- e(x) ; p(x).")
    assert [(r.name, len(r.body)) for r in p.rules] == [("r", 2), ("r_or2", 2), ("rule2", 1), ("rule2_or2", 1)]
    assert p.rules[1].body[1] == Select(BinOp("<", Var("x"), const(-1)))


def test_parenthesized_disjunction_multiplies_out_in_order():
    p = parse_program("r1 p(X) :- a(X), (b(X) ; c(X), d(X)), (e(X) ; f(X)).")
    bodies = [[b.relation for b in r.body] for r in p.rules]
    assert bodies == [["a", "b", "e"], ["a", "b", "f"], ["a", "c", "d", "e"], ["a", "c", "d", "f"]]
    assert [r.name for r in p.rules] == ["r1", "r1_or2", "r1_or3", "r1_or4"]


def test_parenthesized_expression_at_literal_start_is_not_a_group():
    r = parse_rule("p(X) :- q(X), (X + 1) * 2 > 4, (r(X)).")
    assert r.body[1] == Select(BinOp(">", BinOp("*", BinOp("+", X, const(1)), const(2)), const(4)))
    assert r.body[2] == Atom("r", (X,))


def test_souffle_equals_becomes_assignment_or_comparison():
    r = parse_rule("p(x, y, z) :- q(x), y = x + 1, x = 3, 4 = z, z = y.")
    assert r.body[1] == Assign(Var("y"), BinOp("+", Var("x"), const(1)))  # y: bound nowhere else
    assert r.body[2] == Select(BinOp("==", Var("x"), const(3)))           # x: bound by q(x)
    assert r.body[3] == Assign(Var("z"), const(4))                          # EXPR = X
    assert r.body[4] == Select(BinOp("==", Var("z"), Var("y")))           # both bound by then


def test_body_aggregate_becomes_a_helper_rule_before_its_user():
    p = parse_program("r1 outdeg(x, n) :- node(x), n = count : { edge(x, _) }.\n"
                      "total(s) :- max w : { weight(_, w) } = s.")
    assert [s.name for s in p.rules] == ["r1_agg1_dom", "r1_agg1", "r1_agg1_all", "r1_agg1_none", "r1",
                                         "rule2_agg1", "rule2"]
    helper, user = p.rules[1], p.rules[4]
    assert helper == Rule("r1_agg1", Atom("r1_agg1", (Var("x"), Aggregate("count", None))),
                          (Atom("edge", (Var("x"), Wildcard())),))
    assert user.body == (Atom("node", (Var("x"),)), Atom("r1_agg1_all", (Var("x"), Var("n"))))
    helper2, user2 = p.rules[5:]
    assert helper2.head == Atom("rule2_agg1", (Aggregate("max", Var("w")),))
    assert user2.body == (Atom("rule2_agg1", (Var("s"),)),)


@pytest.mark.parametrize("written,func", [("min c", "min"), ("max c", "max"), ("mean c", "avg"),
                                          ("sum c + 1", "sum")])
def test_body_aggregate_functions_and_single_atom_source(written, func):
    p = parse_program(f"r1 best(x, v) :- node(x), v = {written} : cost(x, c).")
    helper = next(r for r in p.rules if r.name == "r1_agg1")
    assert helper.head.args[-1].func == func
    assert helper.body == (Atom("cost", (Var("x"), Var("c"))),)


def test_souffle_program_declares_its_aggregate_helpers():
    p = parse_program(".decl node(x: number)\n.decl edge(x: number, y: number)\n.decl deg(x: number, n: number)\n"
                      "r1 deg(x, n) :- node(x), n = count : { edge(x, _) }.")
    decls = {s.relation: s for s in p.statements if isinstance(s, Declaration)}
    assert decls["r1_agg1"] == Declaration("r1_agg1", (Column("x", "any"), Column("n", "any")), None, "decl")
    assert decls["r1_agg1_dom"].columns == (Column("x", "any"),)
    assert decls["r1_agg1_all"].columns == decls["r1_agg1"].columns
    assert p.statements[p.statements.index(decls["r1_agg1"]) + 1].name == "r1_agg1"


def test_disjunction_then_aggregate_lowering_share_labels():
    p = parse_program("r1 p(x, n) :- (a(x) ; b(x)), n = count : { c(x, _) }.")
    assert [r.name for r in p.rules if not r.name.endswith(("_dom", "_all", "_none"))] == \
        ["r1_agg1", "r1", "r1_or2_agg1", "r1_or2"]


# ---------------------------------------------------------------- program-level properties

def test_program_name_and_text():
    p = parse_program("p(1).", path="some/dir/my-prog.v2.olg")
    assert (p.name, p.path, p.text) == ("my_prog_v2", "some/dir/my-prog.v2.olg", "p(1).")
    assert parse_program("p(1).").name == "program"
    assert parse_program("p(1).", name="given").name == "given"


def test_spans_point_into_the_source():
    p = parse_program("\n  r1 path(X, Y) :-\n     link(X, Y).", path="s.olg")
    r = p.rules[0]
    assert (r.span.file, r.span.line, r.span.col) == ("s.olg", 2, 3)
    assert (r.head.span.line, r.head.span.col) == (2, 6)
    link = r.body[0]
    assert (link.span.line, link.span.col, link.span.end_line, link.span.end_col) == (3, 6, 3, 16)
    assert (link.args[1].span.line, link.args[1].span.col) == (3, 14)


def test_parsing_twice_gives_equal_programs():
    for path in sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl")):
        assert parse_file(path) == parse_file(path)
    # spans take no part in equality: layout and comments do not matter
    assert parse_program("r1 p(X) :- q(X).") == parse_program("// c\n r1  p( X )\n :-\n q(X) .")


def test_parse_atom_helper():
    assert parse_atom("link(@X, Y)") == Atom("link", (X, Y), location=0)
    assert parse_atom("notin link(X, _)").negated
    assert parse_atom("sys::rule{id: R}").named


EXAMPLE_FILES = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_parses(path):
    program = parse_file(path)
    assert program.rules
    assert program.dialect == ("souffle" if path.suffix == ".dl" else "overlog")
    if program.dialect == "souffle":
        inputs = [s.relation for s in program.of(IODirective) if s.direction == "input"]
        for rel in inputs:  # every .input names a facts file next to the program
            assert (path.with_suffix("") / f"{rel}.facts").exists(), rel


def test_example_programs_exist():
    names = {p.name for p in EXAMPLE_FILES}
    assert {"shortest_path.olg", "path_magic.olg", "chord_aggregates.olg", "hashset.olg",
            "two_phase_commit.olg", "tc.dl", "same_generation.dl", "negation.dl"} <= names


def test_a_program_of_300_rules_parses_whole():
    """Its speed is measured, not asserted here (a timing bound failed under a loaded
    machine): bench/compile_scale.py times parsing and compiling thousands of rules."""
    text = "\n".join(f"r{i} path{i}(@X, Z, P, C) :- link(@X, Y, C1), path(@Y, Z, P2, C2), "
                     f"f_contains(X, P2) == false, P := f_cons(X, P2), C := C1 + C2." for i in range(300))
    program = parse_program(text)
    assert [r.name for r in program.rules] == [f"r{i}" for i in range(300)]


# ---------------------------------------------------------------- diagnostics

INVALID = sorted((FIXTURES / "invalid").glob("syntax_*"))
EXPECT = re.compile(r"//\s*expect:\s*(?P<code>[\w-]+)\s+(?P<line>\d+):(?P<col>\d+)")


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_program_reports_code_and_position(path):
    m = EXPECT.search(path.read_text().splitlines()[0])
    assert m, f"{path.name}: first line must be `// expect: CODE LINE:COL`"
    with pytest.raises(EvitaError) as info:
        parse_file(path)
    first = info.value.first
    assert (first.code, first.span.line, first.span.col) == (m["code"], int(m["line"]), int(m["col"])), \
        info.value.render()
    rendered = info.value.render()
    assert f"{path}:{m['line']}:{m['col']}" in rendered
    assert "hint:" in rendered


def test_at_least_eight_distinct_syntax_mistakes_have_fixtures():
    assert len(INVALID) >= 8
    codes = {EXPECT.search(p.read_text())["code"] for p in INVALID}
    assert {"syntax", "non-ground-fact", "unknown-field", "undeclared-relation"} <= codes


@pytest.mark.parametrize("text,message,hint", [
    ("p(X) :- q(X)\nr(X) :- q(X).", "missing '.'", "ends with '.'"),
    ("p('a').", "unexpected character", "double quotes"),
    ("p(X) := q(X).", "unexpected ':='", "assigns to a variable"),
    ("p(X, min<>) :- q(X).", "unexpected '>'", "min<C>"),
    ("p(cert<X>) :- q(X).", "unexpected '>'", "'cert' is not an aggregate"),
    ("p(X) :- q(X), X < 1 < 2.", "unexpected '<'", "do not chain"),
    ("p(X) :- foo q(X).", "unexpected word 'foo'", "'notin' and 'delta'"),
    ("lbl p(1).", "a fact cannot be preceded by 'lbl'", "query"),
    ("p(1)@next.", "time suffix", "rule"),
    ("query p(min<X>).", "aggregates belong in rule heads", "rule"),
    ("p(X) :- q(X), f_g(@X).", "location specifier", "remove"),
    ("p(X) :- q(@X, @Y).", "at most one location", "mark only"),
    ("materialize(e, infinity, infinity, keys(0)).", "1-based", "keys(1)"),
    ("materialize(e, forever, infinity, keys(1)).", "not a lifetime", "infinity"),
    ("p(X) :- q(X)", "ends in the middle", "'.'"),
    ("component a { component b { } }", "inside component", "nest"),
    ("p(X) :− q(X).", "unexpected character", "ASCII minus"),
])
def test_messages_and_hints_speak_plainly(text, message, hint):
    err = errors(text)
    d = err.first
    assert message in d.message, d.render(text)
    assert hint in d.hint, d.render(text)


def test_several_mistakes_are_reported_together():
    text = "r1 p(X) :- q(X.\nr2 p(X) :- q(X).\nr3 p(X) :- q(X)) .\np(Y).\nr5 p(X) :- q{a: X}.\n"
    err = errors(text, "many.olg")
    assert [(d.code, d.span.line) for d in err.diagnostics] == [("syntax", 1), ("syntax", 3)]
    # semantic mistakes are all reported once the text parses
    err = errors("p(Y).\nr1 p(X) :- q{a: X}.\nr2 p(@X, @Y) :- q(X, Y).\n", "sem.olg")
    assert [d.code for d in err.diagnostics] == ["non-ground-fact", "undeclared-relation", "syntax"]


def test_named_fields_of_materialized_relation_are_rejected():
    err = errors("materialize(link, infinity, infinity, keys(1)).\np(X) :- link{src: X}.")
    assert err.first.code == "unknown-field" and "without column names" in err.first.message
