"""Soufflé's core language, second slice (issue 12): aggregates in every position
Soufflé allows with its empty-set semantics, `.input`/`.output` parameters and
`.printsize`, and the C preprocessor subset.

Most tests stop at the front end; the semantics run once per backend on Spark in one
program, compared with the oracle (tests/oracle.py) and with answers worked out by hand.
"""
from __future__ import annotations

import pytest

import oracle
from evita.bootstrap import syntax as S
from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from evita.catalog.printer import format_program
from souffle_support import errors, round_trips, run_planned



def rules(text: str) -> dict:
    """label -> rule text, of the lowered program."""
    program = parse_program(text, "t.dl")
    return {r.name: format_program(S.Program("p", (r,))).strip() for r in program.rules}



# ---------------------------------------------------------------- aggregates: where they stand

def test_a_correlated_count_gets_a_domain_and_a_zero_for_empty_groups():
    got = rules("r1 outdeg(x, n) :- node(x), n = count : { edge(x, _) }.")
    assert got == {
        "r1_agg1_dom": "r1_agg1_dom r1_agg1_dom(x) :- node(x).",
        "r1_agg1": "r1_agg1 r1_agg1(x, count<*>) :- edge(x, _).",
        "r1_agg1_all": "r1_agg1_all r1_agg1_all(x, n) :- r1_agg1(x, n).",
        "r1_agg1_none": "r1_agg1_none r1_agg1_all(x, 0) :- r1_agg1_dom(x), notin r1_agg1(x, _).",
        "r1": "r1 outdeg(x, n) :- node(x), r1_agg1_all(x, n).",
    }


def test_an_ungrouped_sum_defaults_to_zero_through_a_unit_fact():
    program = parse_program("total(s) :- s = sum w : weight(_, w).", "t.dl")
    assert program.facts[0].atom == S.Atom("rule1_agg1_unit", (S.Const(0, S.INT),))
    assert [r.name for r in program.rules] == ["rule1_agg1", "rule1_agg1_all", "rule1_agg1_none", "rule1"]
    assert program.rules[2].body[1] == S.Atom("rule1_agg1", (S.Wildcard(),), negated=True)


@pytest.mark.parametrize("func", ["min", "max", "mean"])
def test_min_max_mean_of_nothing_is_no_tuple_so_no_default(func):
    got = rules(f"r1 best(x, v) :- node(x), v = {func} c : cost(x, c).")
    assert list(got) == ["r1_agg1", "r1"]


def test_a_multi_literal_body_with_constraints_and_false():
    got = rules("r1 c(n) :- n = count : { a(x), x > 3, false }.")
    assert got["r1_agg1"] == "r1_agg1 r1_agg1(count<*>) :- a(x), x > 3, false."


def test_an_aggregate_inside_an_expression_is_a_fresh_variable():
    got = rules("r1 p(x) :- q(y), x = 2 * max s : { r(s) } + 1.")
    assert got["r1"] == "r1 p(x) :- q(y), r1_agg1(_agg1), x := 2 * _agg1 + 1."
    got = rules("r1 p(x) :- q(x), x < count : { a(_) }.")
    assert got["r1"] == "r1 p(x) :- q(x), r1_agg1_all(_agg1), x < _agg1."


def test_an_outer_variable_the_body_does_not_bind_comes_from_the_domain():
    got = rules("r1 p(x, n) :- q(x), n = count : { b(y), y > x }.")
    assert got["r1_agg1"] == "r1_agg1 r1_agg1(x, count<*>) :- r1_agg1_dom(x), b(y), y > x."
    got = rules("r1 p(x, m) :- q(x), m = min y : { b(y), y > x }.")  # min needs it too, not a default
    assert list(got) == ["r1_agg1_dom", "r1_agg1", "r1"]


def test_nested_aggregates_lower_inside_out():
    got = rules("r1 p(x, n) :- q(x), n = sum y : { b(x, y), m = count : { c(y, _) }, m > 1 }.")
    assert got["r1_agg1_agg1"] == "r1_agg1_agg1 r1_agg1_agg1(y, count<*>) :- c(y, _)."
    assert got["r1_agg1"] == "r1_agg1 r1_agg1(x, sum<y>) :- b(x, y), r1_agg1_agg1_all(y, m), m > 1."


def test_the_domain_leaves_out_what_depends_on_aggregate_results():
    got = rules("r1 p(x, k) :- q(x), n = count : { b(x, _) }, k = n + 1, k > 2, !z(x).")
    assert got["r1_agg1_dom"] == "r1_agg1_dom r1_agg1_dom(x) :- q(x), notin z(x)."


def test_a_variable_only_in_sibling_aggregates_is_local_to_each():
    got = rules("r1 p(n, m) :- n = count : { b(y) }, m = count : { c(y) }.")
    assert got["r1_agg1"] == "r1_agg1 r1_agg1(count<*>) :- b(y)."
    assert got["r1_agg2"] == "r1_agg2 r1_agg2(count<*>) :- c(y)."


def test_a_result_an_atom_binds_too_is_compared_and_still_groups():
    got = rules("r1 p(x) :- a(x), x = sum y : { b(x, y) }.")
    assert got["r1_agg1_dom"] == "r1_agg1_dom r1_agg1_dom(x) :- a(x)."
    assert got["r1_agg1_all"] == "r1_agg1_all r1_agg1_all(x, x2) :- r1_agg1(x, x2)."
    assert got["r1"] == "r1 p(x) :- a(x), r1_agg1_all(x, x)."


@pytest.mark.parametrize("text, expected", [
    ("p(n) :- n = count : { }.", ("syntax", 1, 21, "an aggregate body needs at least one literal")),
    ("p(n) :- n = count : { a(x) ; b(x) }.", ("syntax", 1, 13, "an aggregate body cannot hold a disjunction")),
    ("p(n) :- a(n), count : { a(_) }.", ("syntax", 1, 15, "an aggregate is a value, not a condition")),
    ("p(n) :- n = sum x : { a(y) }.", ("unsafe-rule", 1, 17, "rule rule1_agg1: variable x in the head is not bound")),
    ("p(n) :- n = count : { a(x), x > y }.",
     ("unsafe-rule", 1, 33, "rule rule1_agg1: variable y in the condition is not bound")),
])
def test_bad_aggregates_are_positioned(text, expected):
    assert errors(text) == [expected]


def test_aggregates_in_a_head_and_a_fact():
    got = rules("r1 p(x, count : { b(x, _) }) :- q(x).\ntotal(sum v : w(v)).")
    assert got["r1"] == "r1 p(x, _agg1) :- q(x), r1_agg1_all(x, _agg1)."
    assert got["rule2"] == "rule2 total(_agg1) :- rule2_agg1_all(_agg1)."


AGGREGATES = """\
.decl a(x: number)
.decl e(x: number)
.decl q(x: number)
.decl b(x: number, y: number)
.decl r(s: number)
a(1). a(4). a(5). a(7).
q(1). q(2). q(9).
b(1, 10). b(1, 20). b(2, 5).
r(3). r(8).
.decl cnt(n: number)
.decl cnt_false(n: number)
.decl cnt_empty(n: number)
.decl sum_empty(n: number)
.decl min_empty(n: number)
.decl mean_empty(n: float)
.decl sum_all(n: number)
.decl expr(x: number)
.decl corr(x: number, n: number)
.decl corr_sum(x: number, n: number)
.decl above(x: number, n: number)
.decl nested(x: number, n: number)
.decl meanv(v: float)
.decl maxcorr(x: number, m: number)
.decl headagg(n: number)
.decl bigger(x: number)
.decl selfcount(x: number)
cnt(n) :- n = count : { a(x), x > 3 }.
cnt_false(n) :- n = count : { a(x), false }.
cnt_empty(n) :- n = count : e(_).
sum_empty(y) :- y = sum v : e(v).
min_empty(y) :- y = min v : e(v).
mean_empty(y) :- y = mean v : e(v).
sum_all(y) :- y = sum v : a(v).
expr(x) :- x = 2 * max s : { r(s) } + 1.
corr(x, n) :- q(x), n = count : { b(x, _) }.
corr_sum(x, n) :- q(x), n = sum y : { b(x, y) }.
above(x, n) :- q(x), n = count : { a(y), y > x }.
nested(x, n) :- q(x), n = sum y : { b(x, y), m = count : { a(z), z < y }, m > 2 }.
meanv(v) :- v = mean x : a(x).
maxcorr(x, m) :- q(x), m = max y : b(x, y).
headagg(count : { q(_) }).
bigger(x) :- q(x), x < count : { a(_) }.
selfcount(x) :- q(x), x = count : { r(s), s > x }.
"""

AGGREGATES_EXPECTED = {
    "cnt": {(3,)}, "cnt_false": {(0,)}, "cnt_empty": {(0,)}, "sum_empty": {(0,)}, "min_empty": set(),
    "mean_empty": set(), "sum_all": {(17,)}, "expr": {(17,)},
    "corr": {(1, 2), (2, 1), (9, 0)}, "corr_sum": {(1, 30), (2, 5), (9, 0)},
    "above": {(1, 3), (2, 3), (9, 0)}, "nested": {(1, 30), (2, 0), (9, 0)}, "meanv": {(4.25,)},
    "maxcorr": {(1, 20), (2, 5)}, "headagg": {(3,)}, "bigger": {(1,), (2,)},
    "selfcount": {(2,)},
}


def test_aggregate_program_checks_round_trips_and_the_oracle_agrees_with_soufflé():
    program = check_program(parse_program(AGGREGATES, "aggregates.dl"))
    assert round_trips(program)
    got = oracle.evaluate(program)
    assert {rel: got.get(rel, set()) for rel in AGGREGATES_EXPECTED} == AGGREGATES_EXPECTED


@pytest.mark.parametrize("backend", ["small", "sql"])
def test_aggregates_on_spark_agree_with_soufflé(spark, backend):
    _, result = run_planned(spark, AGGREGATES, "aggregates.dl", backend)
    assert result.tuples(list(AGGREGATES_EXPECTED)) == AGGREGATES_EXPECTED


# ---------------------------------------------------------------- the C preprocessor

PREPROCESSED = """\
#define N 3
#define PAIR(a, b) p(a, b)
#ifdef N
r(N). s("N"). /* N */ t(N). // N
PAIR(N, N + 1).
#else
r(0).
#endif
#if 0
junk that would not parse
#elif defined(N) && N > 2
big(N).
#endif
#ifndef M
m(1).
#endif
#undef N
#if N
nope(1).
#endif
/*
#bogus inside a comment is no directive
*/
last(1).
"""


def test_define_ifdef_if_else_undef_and_function_like_macros():
    program = parse_program(PREPROCESSED, "pre.dl")
    facts = [(f.atom.relation, tuple(a.value for a in f.atom.args)) for f in program.facts]
    assert facts == [("r", (3,)), ("s", ("N",)), ("t", (3,)), ("p", (3, 4)), ("big", (3,)), ("m", (1,)),
                     ("last", (1,))]


def test_preprocessing_keeps_every_line_where_it_was():
    program = parse_program(PREPROCESSED.replace("last(1).", "q(x) :- r(x), x > 2."), "pre.dl")
    rule = program.rules[0]
    assert (rule.span.line, rule.span.col) == (24, 1)
    assert errors("#define T 1\n#ifdef T\n#endif\nr(x) :- q(T).") == [
        ("unsafe-rule", 4, 3, "rule rule1: variable x in the head is not bound")]


@pytest.mark.parametrize("expression, kept", [
    ("1 + 2 * 3 == 7", True), ("(1 + 2) * 3 == 9", True), ("7 / -2 == -3 && -7 % 3 == -1", True),  # C truncates
    ("1 << 4 | 1 == 17", True), ("~0 == -1 && !5 == 0", True), ("2 > 1 ? 0 : 1", False), ("0x10 == 16 && 010 == 8", True),
    ("5 & 3 ^ 1 == 0", True), ("UNDEFINED_NAME", False), ("-1 < 0 && 3 >= 3 && 2 <= 1 == 0", True),
    ("defined(N) && 100 / N > 1", False),  # the division is not evaluated: N is undefined (0)
])
def test_if_takes_c_integer_expressions(expression, kept):
    facts = parse_program(f"#if {expression}\nr(1).\n#endif\ns(1).\n", "if.dl").facts
    assert ("r" in {f.atom.relation for f in facts}) == kept


def test_if_has_no_power_operator_and_cannot_hang_the_compiler():
    import time

    started = time.perf_counter()
    assert errors("#if 9**9**9**9\nr(1).\n#endif\n") == [
        ("preprocessor", 1, 7, "#if 9**9**9**9: `*` where a number, a name or `(` should be (C has no power operator)")]
    assert errors("#if (1 << 62) * (1 << 62) * 99999999\nr(1).\n#endif\n") == []  # 64-bit, as C: no big numbers
    deep = errors("#if " + "(" * 5000 + "1" + ")" * 5000 + "\n#endif\n")
    assert [d[:3] for d in deep] == [("preprocessor", 1, 5)] and "nested too deeply" in deep[0][3]
    assert time.perf_counter() - started < 1


def test_macros_flow_into_and_out_of_included_files(tmp_path):
    (tmp_path / "consts.dl").write_text("#define LIMIT 10\nlimit(LIMIT).\nseen(BASE).\n")
    main = tmp_path / "main.dl"
    main.write_text("#define BASE 1\n#include \"consts.dl\"\ntwice(LIMIT * 2).\n#ifdef LIMIT\nok(1).\n#endif\n")
    from evita.bootstrap.parser import parse_file

    facts = {f.atom.relation: f.atom.args[0].value for f in parse_file(main).facts}
    assert facts == {"limit": 10, "seen": 1, "twice": 20, "ok": 1}


def test_unlabelled_rules_of_an_included_file_get_labels_of_their_own(tmp_path):
    """Each file numbers its unlabelled rules from 1: an included file's labels carry
    its name, so they never collide with the includer's (`duplicate-rule`)."""
    (tmp_path / "my-lib.dl").write_text(".decl b(x: number)\nb(x) :- a(x).\n")
    main = tmp_path / "main.dl"
    main.write_text('.decl a(x: number)\na(1).\na(x) :- a(y), x = y + 1, x < 3.\n#include "my-lib.dl"\n'
                    ".decl c(x: number)\nc(x) :- b(x).\n")
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file

    program = check_program(parse_file(main))
    assert [r.name for r in program.rules] == ["rule1", "my_lib_rule1", "rule2"]


@pytest.mark.parametrize("text, expected", [
    ("#foo\nr(1).", ("preprocessor", 1, 1, "unknown preprocessor directive #foo")),
    ("r(1).\n  #pragma once\n", ("preprocessor", 2, 3, "unknown preprocessor directive #pragma")),
    ("\n#ifdef X\nr(1).\n", ("preprocessor", 2, 1, "#ifdef without #endif")),
    ("#endif\n", ("preprocessor", 1, 1, "#endif without #if")),
    ("#if 1\n#else\n#else\n#endif\n", ("preprocessor", 3, 1, "#else after #else")),
    ("#if x +\n#endif\n", ("preprocessor", 1, 8, "#if x +: the end of the expression where a number, a name or `(` "
                                               "should be")),
    ("#if 1 / (2 - 2)\n#endif\n", ("preprocessor", 1, 7, "#if 1 / (2 - 2): division by zero")),
    ("#define Z 0\n#if 10 % Z\n#endif\n", ("preprocessor", 2, 5, "#if 10 % Z (after macros: 10 % 0): division by zero")),
    ("#if 2 $ 3\n#endif\n", ("preprocessor", 1, 7, "#if 2 $ 3: `$` is not part of a C integer expression")),
    ("#if (1\n#endif\n", ("preprocessor", 1, 7, "#if (1: the end of the expression where `)` should be")),
    ("#define\n", ("preprocessor", 1, 1, "#define needs a macro name, got ''")),
    ("#define F(x) r(x)\nF(1, 2).\n", ("preprocessor", 2, 1, "macro F takes 1 argument, not 2")),
    ("#error stop here\n", ("preprocessor", 1, 1, "#error stop here")),
    ('#include "nowhere.dl"\n', ("include", 1, 1, "#include names nowhere.dl, which is not a file")),
])
def test_bad_preprocessor_input_is_positioned(text, expected):
    assert errors(text) == [expected]


# ---------------------------------------------------------------- .input / .output parameters, .printsize

IO_PROGRAM = """\
.decl edge(a: number, b: symbol)
.input edge(IO=file, filename="data/edges.txt", delimiter=",", headers=true)
.decl big(a: number, b: symbol)
.output big(filename="big.tsv")
.output big(filename="sub/big.csv", delimiter=",", headers=true)
.printsize big
.printsize edge
big(a, b) :- edge(a, b), a > 1.
"""


def test_several_outputs_and_printsize_parse_and_survive_the_catalog():
    program = parse_program(IO_PROGRAM, "io.dl")
    directives = [(d.direction, d.relation, dict(d.params).get("filename")) for d in program.of(S.IODirective)]
    assert directives == [("input", "edge", "data/edges.txt"), ("output", "big", "big.tsv"),
                          ("output", "big", "sub/big.csv"), ("printsize", "big", None), ("printsize", "edge", None)]
    assert errors(IO_PROGRAM) == []
    assert round_trips(program)


def test_input_and_output_files_follow_the_directives(tmp_path):
    from evita.runtime.inputs import OutputFile, output_files, printsize_relations, resolve_inputs

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "edges.txt").write_text("a,b\n1,x\n2,y\n3,z\n")
    program = parse_program(IO_PROGRAM, "io.dl")
    edge = resolve_inputs(program, (), str(tmp_path))["edge"]
    assert (edge.path, edge.delimiter, edge.headers) == (str(tmp_path / "data" / "edges.txt"), ",", True)
    assert output_files(program, "out") == [OutputFile("big", "out/big.tsv", "\t", False),
                                            OutputFile("big", "out/sub/big.csv", ",", True)]
    assert printsize_relations(program) == ["big", "edge"]


@pytest.mark.parametrize("directive, expected", [
    ('.output r(compress=true)', (3, 11, ".output r: compress= (compressed files) is not supported yet")),
    ('.input r(IO=sqlite, dbname="x.db")', (3, 10, ".input r: IO=sqlite (the SQLite format) is not supported yet")),
    ('.output r(IO=json)', (3, 11, ".output r: IO=json (the JSON format) is not supported yet")),
    ('.input r(headers=yes)', (3, 10, ".input r: headers=yes is neither true nor false")),
    ('.output r(colour="red")', (3, 11, ".output r: Evita does not support parameter colour")),
    ('.input r(delimiter="")', (3, 10, ".input r: the delimiter is empty")),
])
def test_bad_io_parameters_are_positioned(directive, expected):
    from evita.runtime.inputs import check_io_params

    program = parse_program(f".decl r(x: number)\nr(1).\n{directive}\n", "io.dl")
    found = [(d.span.line, d.span.col, d.message) for d in check_io_params(program)]
    assert found == [expected]


def test_io_parameters_on_spark_read_headers_and_write_every_output(spark, tmp_path, capsys):
    """One run on the small backend: the facts file named by filename=, with a header
    and commas; two .output files of one relation; .printsize lines."""
    from evita.runtime.cli_commands import print_sizes
    from evita.runtime.engine import run
    from evita.runtime.inputs import output_files, printsize_relations, resolve_inputs
    from evita.runtime.io import gather_inputs, write_text_outputs

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "edges.txt").write_text("a,b\n1,x\n2,y\n3,z\n")
    program = check_program(parse_program(IO_PROGRAM, "io.dl"))
    dataflow = plan(program)
    inputs = gather_inputs(spark, dataflow, files=resolve_inputs(program, (), str(tmp_path)))
    result = run(dataflow, spark, inputs, local=True)
    out = tmp_path / "out"
    columns = {name: list(s.columns) for name, s in dataflow.relations.items()}
    write_text_outputs(result, output_files(program, str(out), dataflow.outputs), columns)
    assert (out / "big.tsv").read_text() == "2\ty\n3\tz\n"
    assert (out / "sub" / "big.csv").read_text() == "a,b\n2,y\n3,z\n"
    print_sizes(result, printsize_relations(program))
    assert capsys.readouterr().out == "big\t2\nedge\t3\n"


def test_pragmas_are_accepted_with_a_note():
    from evita.bootstrap.checks import check_program, qualifier_notes
    from evita.bootstrap.parser import parse_program

    program = check_program(parse_program('.decl a(x: number)\n.pragma "magic-transform" "*"\na(1).\n  .pragma "legacy"\n',
                                          "p.dl"))
    notes = [(d.code, d.span.line, d.text) for d in qualifier_notes(program)]
    assert notes == [("pragma", 2, '.pragma "magic-transform" "*"'), ("pragma", 4, '.pragma "legacy"')]
    assert len(program.facts) == 1


def test_souffle_rule_plans_are_accepted_with_a_note():
    from evita.bootstrap.checks import check_program, qualifier_notes
    from evita.bootstrap.parser import parse_program

    text = ".decl e(x: number, y: number)\n.decl p(x: number, y: number)\np(x, y) :- e(x, y).\n" \
           "p(x, z) :- p(x, y), e(y, z). .plan 0:(1,2), 1:(2,1)\n"
    program = check_program(parse_program(text, "p.dl"))
    assert [(d.code, d.span.line, d.span.col, d.text) for d in qualifier_notes(program)] == \
        [("plan", 4, 30, ".plan 0:(1,2), 1:(2,1)")]
    assert len(program.rules) == 2
