"""Soufflé components (issue 12): `.comp`, `.init`, type parameters, inheritance,
`.override`, nested components and instances, instance-qualified names (`g.reach`).

The front end expands them (bootstrap/lowering/components.py): most tests look at the expanded
program and its catalog round trip; two run on Spark against the oracle, one through the
`evita run` command line with facts files and `-D`.
"""
from __future__ import annotations

import pytest

import oracle
from evita.bootstrap import syntax as S
from evita.bootstrap.cli import main
from evita.bootstrap.parser import parse_program
from souffle_support import errors, round_trips, run_planned


def parsed(text: str) -> S.Program:
    return parse_program(text, "t.dl")


def declared(p: S.Program) -> dict:
    """relation -> its column types."""
    return {d.relation: tuple(c.type for c in d.columns) for d in p.of(S.Declaration)}


def heads(p: S.Program) -> list:
    return [(r.name, r.head.relation, tuple(a.relation for a in r.body if isinstance(a, S.Atom))) for r in p.rules]


def facts(p: S.Program) -> list:
    return [(f.atom.relation,) + tuple(a.value for a in f.atom.args) for f in p.facts]


def codes(text: str) -> list:
    return [e[0] for e in errors(text)]


GRAPH = """\
.comp Graph<T> {
  .decl edge(x: T, y: T)
  .decl reach(x: T, y: T)
  reach(x, y) :- edge(x, y).
  reach(x, z) :- reach(x, y), edge(y, z).
  .output reach
}
"""


# ---------------------------------------------------------------- instances

def test_an_instance_prefixes_what_the_component_declares():
    p = parsed(".comp C {\n  .decl answer(x: number)\n  answer(42).\n  .output answer\n}\n.init c = C\n")
    assert declared(p) == {"c.answer": ("number",)}
    assert facts(p) == [("c.answer", 42)]
    assert [(d.direction, d.relation) for d in p.of(S.IODirective)] == [("output", "c.answer")]
    assert not any(isinstance(s, (S.CompDecl, S.CompInit)) for s in p.statements)
    assert p.dialect == "souffle" and round_trips(p)


def test_a_component_never_instantiated_leaves_nothing():
    p = parsed(GRAPH + ".decl q(x: number)\nq(1).\n")
    assert declared(p) == {"q": ("number",)} and p.rules == []


def test_two_instances_with_type_arguments_are_apart():
    p = parsed(GRAPH + ".init g = Graph<number>\n.init h = Graph<symbol>\n")
    assert declared(p) == {"g.edge": ("number", "number"), "g.reach": ("number", "number"),
                           "h.edge": ("symbol", "symbol"), "h.reach": ("symbol", "symbol")}
    assert heads(p) == [("g_rule1", "g.reach", ("g.edge",)), ("g_rule2", "g.reach", ("g.reach", "g.edge")),
                        ("h_rule1", "h.reach", ("h.edge",)), ("h_rule2", "h.reach", ("h.reach", "h.edge"))]
    assert round_trips(p)


def test_qualified_names_outside_the_component_in_facts_rules_and_directives():
    p = parsed(GRAPH + ".init g = Graph<number>\ng.edge(1, 2).\n.input g.edge\n.decl far(x: number)\n"
               "far(x) :- g.reach(x, _).\n.output far\n.printsize g.reach\n")
    assert facts(p) == [("g.edge", 1, 2)]
    assert ("rule3", "far", ("g.reach",)) in heads(p)
    assert [(d.direction, d.relation) for d in p.of(S.IODirective)] == [
        ("output", "g.reach"), ("input", "g.edge"), ("output", "far"), ("printsize", "g.reach")]
    assert errors(GRAPH + ".init g = Graph<number>\ng.edge(1, 2).\n") == [] and round_trips(p)


def test_a_statements_final_dot_is_never_part_of_a_name():
    p = parsed(".decl q(x: number, y: number)\n.decl p(x: number)\np(x) :- q(x, y), x < y.\nq(1, 2). q(2, 1).\n"
               ".output p\np(7).\n")
    assert [r.head.relation for r in p.rules] == ["p"] and facts(p) == [("q", 1, 2), ("q", 2, 1), ("p", 7)]


def test_named_fields_of_an_instance_relation():
    p = parsed(GRAPH + ".init g = Graph<number>\ng.edge{y: 2, x: 1}.\n")
    assert facts(p) == [("g.edge", 1, 2)] and round_trips(p)


def test_named_fields_of_a_relation_two_components_declare_differently_are_refused():
    assert errors(".comp A { .decl edge(x: number, y: number) }\n.comp B { .decl edge(a: number, b: number) }\n"
                  ".init a = A\n.init b = B\na.edge{x: 1, y: 2}.\n") == [
        ("unknown-field", 5, 1, "the fields of a.edge cannot be named: components declare edge with different columns")]


def test_a_name_the_component_does_not_declare_stays_global():
    p = parsed(".decl seen(x: number)\n.comp C {\n  .decl r(x: number)\n  r(1).\n  seen(x) :- r(x).\n}\n"
               ".init a = C\n.init b = C\n")
    assert heads(p) == [("a_rule1", "seen", ("a.r",)), ("b_rule1", "seen", ("b.r",))]
    assert errors(".decl seen(x: number)\n.comp C {\n  .decl r(x: number)\n  r(1).\n  seen(x) :- r(x).\n}\n"
                  ".init a = C\n.init b = C\n") == []


def test_types_declared_in_a_component_belong_to_each_instance():
    p = parsed(".comp C {\n  .type Id <: number\n  .decl r(x: Id)\n  r(1).\n}\n.init c = C\n")
    assert [(t.name, t.bases) for t in p.of(S.TypeDecl)] == [("c.Id", ("number",))]
    assert declared(p) == {"c.r": ("c.Id",)} and round_trips(p)


def test_aggregates_and_eqrel_inside_a_component_are_per_instance():
    text = (".comp C {\n  .decl r(x: number)\n  .decl n(k: number)\n  n(k) :- k = count : { r(_) }.\n"
            "  .decl e(a: number, b: number) eqrel\n}\n.init a = C\n.init b = C\n")
    p = parsed(text)
    helpers = sorted(r for r in declared(p) if "agg" in r)
    assert helpers and all(h.startswith(("a.", "b.")) for h in helpers)
    assert len([h for h in helpers if h.startswith("a.")]) == len(helpers) // 2
    assert {r.head.relation for r in p.rules if "eqrel" in r.name} == {"a.e", "b.e"}
    assert errors(text) == [] and round_trips(p)


# ---------------------------------------------------------------- inheritance, override

def test_inheritance_copies_the_base_with_its_type_arguments():
    p = parsed(".comp A<T> {\n  .decl r(x: T)\n  r(x) :- s(x).\n  .decl s(x: T)\n}\n"
               ".comp B<K> : A<K> {\n  .decl t(x: K)\n  t(x) :- r(x).\n}\n.init b = B<symbol>\n")
    assert declared(p) == {"b.r": ("symbol",), "b.s": ("symbol",), "b.t": ("symbol",)}
    assert heads(p) == [("b_rule1", "b.r", ("b.s",)), ("b_rule2", "b.t", ("b.r",))]


def test_several_bases_and_a_type_parameter_as_the_base():
    p = parsed(".comp A { .decl a(x: number) }\n.comp B { .decl b(x: number) }\n.comp C : A, B { }\n"
               ".comp D<Base> : Base { .decl d(x: number) }\n.init c = C\n.init d = D<A>\n")
    assert set(declared(p)) == {"c.a", "c.b", "d.a", "d.d"}


def test_override_drops_the_base_rules_and_facts_of_the_relation():
    p = parsed(".comp Base {\n  .decl R(x: number) overridable\n  R(1).\n  R(x + 1) :- R(x), x < 5.\n"
               "  .output R\n}\n.comp Sub : Base {\n  .override R\n  R(2).\n  R(x + 1) :- R(x), x < 4.\n}\n"
               ".init mySub = Sub\n.init myBase = Base\n")
    assert facts(p) == [("mySub.R", 2), ("myBase.R", 1)]
    assert [r.head.relation for r in p.rules] == ["mySub.R", "myBase.R"]
    assert [s.span.line for s in p.rules] == [10, 4]  # Sub's own rule, then Base's in its own instance


def test_override_drops_the_helpers_of_the_base_rules_aggregates_too():
    p = parsed(".comp Base {\n  .decl r(x: number)\n  .decl n(k: number) overridable\n"
               "  n(k) :- k = count : { r(_) }.\n}\n.comp Sub : Base {\n  .override n\n"
               "  n(k) :- k = sum x : { r(x) }.\n}\n.init s = Sub\n")
    assert not any(r.startswith("s.rule1_agg") for r in declared(p))
    assert {r.name for r in p.rules} == {"s_rule2_agg1", "s_rule2_agg1_all", "s_rule2_agg1_none", "s_rule2"}
    assert errors(".comp Base {\n  .decl r(x: number)\n  .decl n(k: number) overridable\n"
                  "  n(k) :- k = count : { r(_) }.\n}\n.comp Sub : Base {\n  .override n\n"
                  "  n(k) :- k = sum x : { r(x) }.\n}\n.init s = Sub\n") == []


def test_an_overridden_eqrel_relation_stays_an_equivalence():
    p = parsed(".comp Base {\n  .decl r(x: number)\n  .decl e(a: number, b: number) eqrel overridable\n"
               "  e(x, x + 1) :- r(x).\n}\n.comp Sub : Base {\n  .override e\n  e(1, 2).\n}\n.init s = Sub\n")
    assert sorted(r.name for r in p.rules) == ["s_eqrel_e_reflexive", "s_eqrel_e_symmetric", "s_eqrel_e_transitive"]
    assert facts(p) == [("s.e", 1, 2)]


# ---------------------------------------------------------------- nesting

def test_nested_components_and_instances_as_in_soufflés_documentation():
    p = parsed(".decl Out(x: number)\n.comp A {\n  .decl R(x: number)\n  .comp Count {\n    R(1).\n"
               "    R(x + 1) :- R(x), x < 10.\n  }\n  .init myCount = Count\n  Out(x) :- R(x).\n}\n"
               ".init myA = A\n.output Out\n")
    assert declared(p) == {"Out": ("number",), "myA.R": ("number",)}
    assert facts(p) == [("myA.R", 1)]
    assert heads(p) == [("myA_myCount_rule1", "myA.R", ("myA.R",)), ("myA_rule2", "Out", ("myA.R",))]


def test_an_instance_inside_an_instance_is_named_by_both():
    p = parsed(GRAPH + ".comp Two {\n  .init in = Graph<number>\n  .decl ends(x: number)\n"
               "  ends(y) :- in.reach(_, y).\n}\n.init t = Two\nt.in.edge(1, 2).\n.output t.ends\n")
    assert set(declared(p)) == {"t.in.edge", "t.in.reach", "t.ends"}
    assert ("t_rule3", "t.ends", ("t.in.reach",)) in heads(p)
    assert facts(p) == [("t.in.edge", 1, 2)] and round_trips(p)


def test_a_type_parameter_names_the_component_to_instantiate():
    p = parsed(".decl R(x: number)\n.comp Case<Selector> {\n  .comp One { R(1). }\n  .comp Two { R(2). }\n"
               "  .init selection = Selector\n}\n.init myCase = Case<Two>\n.output R\n")
    assert facts(p) == [("R", 2)]


def test_a_component_from_an_included_file(tmp_path):
    from evita.bootstrap.parser import parse_file
    (tmp_path / "graph.dl").write_text(GRAPH)
    (tmp_path / "main.dl").write_text('#include "graph.dl"\n.init g = Graph<number>\ng.edge(1, 2).\n')
    p = parse_file(tmp_path / "main.dl")
    assert set(declared(p)) == {"g.edge", "g.reach"} and facts(p) == [("g.edge", 1, 2)]


# ---------------------------------------------------------------- mistakes, positioned

@pytest.mark.parametrize("text, expected", [
    (".init g = Graph<number>\n",
     [("unknown-component", 1, 11, ".init g names component Graph, which is not declared")]),
    (GRAPH + ".init g = Graph\n", [("component-arity", 8, 11, "component Graph takes 1 type argument, not 0")]),
    (GRAPH + ".init g = Graph<number, symbol>\n",
     [("component-arity", 8, 11, "component Graph takes 1 type argument, not 2")]),
    (".comp A : B { }\n.comp B : A { }\n.init a = A\n",
     [("recursive-component", 2, 11, "component A contains itself (A -> B -> A)")]),
    (".comp A { .init me = A }\n.init a = A\n", [("recursive-component", 1, 22, "component A contains itself (A -> A)")]),
    (".comp A { .decl r(x: number) }\n.comp B : A {\n  .override q\n}\n.init b = B\n",
     [("override", 3, 13, "component B overrides q, which no base component (A) declares")]),
    (".comp A { .decl r(x: number) }\n.comp B : A {\n  .override r\n}\n.init b = B\n",
     [("override", 3, 13, "r is not overridable")]),
    (".comp A { .decl r(x: number) }\n.init a = A\n.init a = A\n",
     [("duplicate-instance", 3, 7, "instance a is already defined at t.dl:2:1")]),
    (".comp A { .decl r(x: number) }\n.comp B { .init in = A }\n.comp C : B { .init in = A }\n.init c = C\n",
     [("duplicate-instance", 3, 21, "instance in is already defined at t.dl:2:11")]),
    (".comp A { .decl r(x: number) }\n.comp A { }\n.init a = A\n",
     [("duplicate-component", 2, 7, "component A is declared twice (first at t.dl:1:1)")]),
    (".comp A { .decl r(x: number) }\n.override r\n", [("override", 2, 11, ".override r stands outside any component")]),
    (".comp B : Nope { }\n.init b = B\n",
     [("unknown-component", 1, 11, "component B names component Nope, which is not declared")]),
])
def test_mistakes_are_positioned_and_named(text, expected):
    assert errors(text) == expected


@pytest.mark.parametrize("text, expected", [
    (".comp C<> { }\n.decl q(x: number)\nq(1).\n", [("syntax", 1, 9, "unexpected '>' in .comp; expected a name")]),
    (".comp C : { .decl r(x: number) }\n", [("syntax", 1, 11, "unexpected '{' in .comp; expected a name")]),
    (".init c C\n", [("syntax", 1, 9, "unexpected name 'C' in .init; expected '='")]),
    (".init c = C<number\n", [("syntax", 1, 19, "unexpected end of file in .init; expected ',' or '>'")]),
    (".comp C { .decl r(x: number)\n  r(1) }\n.init c = C\n",
     [("syntax", 2, 8, "unexpected '}'; expected ':-' to start a rule body or '.' to end the fact")]),
])
def test_syntax_errors_in_component_headers_and_bodies(text, expected):
    """Each once: the rest of the `.comp` goes with it, so nothing follows from it."""
    assert errors(text) == expected


def test_the_hint_of_a_syntax_error_shows_the_form():
    from evita.bootstrap.diagnostics import EvitaError
    with pytest.raises(EvitaError) as e:
        parsed(".init c C\n")
    assert "hint: write .init INSTANCE = COMPONENT<TYPE, ...>" in e.value.render()
    with pytest.raises(EvitaError) as e:
        parsed(".comp C { .decl r(x: number)\n  r(1) }\n")
    assert "hint: end the statement with '.' before the '}'" in e.value.render()


def test_an_unknown_component_close_to_a_known_one_is_suggested():
    from evita.bootstrap.diagnostics import EvitaError
    with pytest.raises(EvitaError) as e:
        parsed(GRAPH + ".init g = Grph<number>\n")
    assert e.value.first.hint == "did you mean Graph?"
    with pytest.raises(EvitaError) as e:
        parsed(GRAPH + ".init g = Nope<number>\n")
    assert e.value.first.hint == "declare it with .comp Nope { ... }; the components visible here are Graph"


def test_a_mistake_in_a_component_instantiated_twice_is_reported_once():
    assert codes(".comp A { .init x = Nope }\n.init a = A\n.init b = A\n") == ["unknown-component"]


def test_a_relation_declared_again_in_a_sub_component_is_a_duplicate_declaration():
    assert errors(".comp A { .decl r(x: number) }\n.comp B : A { .decl r(x: number) }\n.init b = B\n") == [
        ("duplicate-declaration", 2, 15, "relation b.r is declared twice (first at t.dl:1:11)")]


def test_a_mistake_inside_an_instance_points_into_the_component():
    found = errors(GRAPH.replace("edge(x, y).", "edge(x, y, w).") + ".init g = Graph<number>\n")
    assert found and found[0][:2] == ("arity", 4)


def test_the_rendered_diagnostic_says_what_to_do():
    from evita.bootstrap.diagnostics import EvitaError
    with pytest.raises(EvitaError) as e:
        parsed(GRAPH + ".init g = Graph\n")
    text = e.value.render()
    assert "t.dl:8:11: error[component-arity]" in text and "hint: give one type argument per parameter of .comp Graph<T> (at t.dl:1:1)" in text
    assert "Traceback" not in text


# ---------------------------------------------------------------- on Spark

PROGRAM = GRAPH.replace("reach(x: T, y: T)", "reach(x: T, y: T) overridable") + """\
.comp Undirected<T> : Graph<T> {
  .override reach
  reach(x, y) :- edge(x, y).
  reach(y, x) :- edge(x, y).
  reach(x, z) :- reach(x, y), reach(y, z).
}
.init g = Graph<number>
.init u = Undirected<symbol>
g.edge(1, 2). g.edge(2, 3). g.edge(5, 5).
u.edge("a", "b"). u.edge("b", "c").
.decl loops(x: number)
loops(x) :- g.reach(x, x).
.output loops
"""


@pytest.mark.parametrize("backend", ["small", "sql"])
def test_instances_on_spark_agree_with_the_oracle(spark, backend):
    program, result = run_planned(spark, PROGRAM, "comp.dl", backend)
    expected = oracle.evaluate(program)
    got = result.tuples(["g.reach", "u.reach", "loops"])
    assert got == {k: expected[k] for k in got}
    assert got["g.reach"] == {(1, 2), (2, 3), (1, 3), (5, 5)}
    assert len(got["u.reach"]) == 9  # {a, b, c} squared: the override made it symmetric
    assert got["loops"] == {(5,)}


def test_evita_run_reads_and_writes_instance_relations_by_their_qualified_names(spark, tmp_path, capsys):
    program = tmp_path / "graphs.dl"
    # a rule outside the instance reads it with a constant (what const_prop and magic_sets look for)
    program.write_text(GRAPH.replace(".output reach", ".input edge\n  .output reach")
                       + ".init g = Graph<number>\n.decl from1(y: number)\nfrom1(y) :- g.reach(1, y).\n"
                       ".output from1\n")
    facts_dir = tmp_path / "facts"
    facts_dir.mkdir()
    (facts_dir / "g.edge.facts").write_text("1\t2\n2\t3\n")
    out = tmp_path / "out"
    code = main(["run", str(program), "-F", str(facts_dir), "-D", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert sorted(p.name for p in out.iterdir()) == ["from1.csv", "g.reach.csv"]  # Soufflé's name for it
    assert (out / "g.reach.csv").read_text().splitlines() == ["1\t2", "1\t3", "2\t3"]
    assert (out / "from1.csv").read_text().splitlines() == ["2", "3"]
