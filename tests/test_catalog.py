"""The catalog layer: rows, encode, decode, printer, Spark store, and docs/catalog.md."""
from __future__ import annotations

import doctest
import hashlib
import importlib

import pytest

from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.syntax import (
    Aggregate, Atom, BinOp, Call, Component, Cond, Const, Fact, NamedAtom, Program, Rule, Select,
    UnOp, Var, Wildcard,
)
from evita.catalog import schema, store
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_atom, format_expr, format_program, format_rule
from evita.catalog.rows import CatalogRows, diff

from conftest import EXAMPLES, REPO

X, Y, Z, C = Var("X"), Var("Y"), Var("Z"), Var("C")

SP = """
materialize(link, infinity, infinity, keys(1, 2)).
link("a", "b", 1).
r1 path(@X, Y, C) :- link(@X, Y, C).
r2 path(@X, Z, C1 + C2) :- link(@X, Y, C1), path(@Y, Z, C2), X != Z.
r3 best(@X, Z, min<C>) :- path(@X, Z, C).
r4 delete path(@X, Z, C)@next :- notin link(@X, Z, C), path(@X, Z, C), D := f_now().
query best(@X, Z, C).
"""


def sp_rows():
    return encode(parse_program(SP, "sp.olg"))


# ---------------------------------------------------------------- encode

def test_ids_are_positions_and_deterministic():
    rows = sp_rows()
    assert rows == sp_rows()
    assert [d["id"] for d in rows.dicts("program")] == ["sp"]
    assert [d["id"] for d in rows.dicts("rule")] == ["sp:r1", "sp:r2", "sp:r3", "sp:r4"]
    preds = {d["id"]: d for d in rows.dicts("predicate")}
    assert sorted(k for k in preds if k.startswith("sp:r2")) == ["sp:r2#0", "sp:r2#1", "sp:r2#2"]
    assert preds["sp:query6#0"]["rule"] == "sp:query6"
    assert [d["id"] for d in rows.dicts("selection")] == ["sp:r2#3"]
    assert [(d["id"], d["var"]) for d in rows.dicts("assignment")] == [("sp:r4#3", "D")]
    assert [d["id"] for d in rows.dicts("fact")] == ["sp:fact1"]
    assert [d["id"] for d in rows.dicts("query")] == ["sp:query6"]


def test_one_argument_row_per_position():
    rows = sp_rows()
    args = rows.dicts("argument")
    assert len(args) == sum(d["arity"] for d in rows.dicts("predicate"))
    assert len({(a["predicate"], a["pos"]) for a in args}) == len(args)
    by = {(a["predicate"], a["pos"]): a for a in args}
    assert by[("sp:r2#0", 2)]["kind"] == "expr"
    assert by[("sp:r2#0", 2)]["expr"] == "sp:r2#0.2.e"
    assert (by[("sp:r3#0", 2)]["kind"], by[("sp:r3#0", 2)]["agg"], by[("sp:r3#0", 2)]["var"]) == ("agg", "min", "C")
    assert by[("sp:r1#1", 0)] | {} == {"program": "sp", "predicate": "sp:r1#1", "pos": 0, "kind": "var",
                                        "var": "X", "value": None, "type": None, "expr": None, "agg": None}
    nodes = {d["id"]: d for d in rows.dicts("expression")}
    assert (nodes["sp:r2#0.2.e"]["kind"], nodes["sp:r2#0.2.e"]["name"]) == ("op", "+")
    assert [(n["id"], n["seq"], n["name"]) for n in rows.dicts("expression") if n["parent"] == "sp:r2#0.2.e"] \
        == [("sp:r2#0.2.e.0", 0, "C1"), ("sp:r2#0.2.e.1", 1, "C2")]
    assert nodes["sp:r2#3.e"]["name"] == "!="


def test_rule_and_predicate_columns():
    rows = sp_rows()
    r4 = next(d for d in rows.dicts("rule") if d["name"] == "r4")
    assert (r4["is_delete"], r4["time"], r4["term_count"], r4["head"], r4["head_relation"]) == \
        (True, "next", 4, "sp:r4#0", "path")
    assert (r4["line"], r4["col"]) == (7, 1)
    p = {d["id"]: d for d in rows.dicts("predicate")}
    assert p["sp:r4#1"]["negated"] and not p["sp:r4#2"]["negated"]
    assert p["sp:r1#0"]["location"] == 0 and p["sp:r1#0"]["relation"] == "path"


def test_every_relation_gets_rows_and_keys_become_an_index():
    rows = sp_rows()
    rel = {d["name"]: d for d in rows.dicts("relation")}
    assert set(rel) == {"link", "path", "best"}
    assert (rel["link"]["declared"], rel["link"]["style"], rel["link"]["materialized"], rel["link"]["arity"],
            rel["link"]["lifetime"], rel["link"]["pos"]) == (True, "materialize", True, 3, "infinity", 0)
    assert (rel["path"]["declared"], rel["path"]["style"], rel["path"]["materialized"], rel["path"]["pos"]) == \
        (False, None, False, None)
    cols = [(d["relation"], d["pos"], d["name"], d["type"]) for d in rows.dicts("relation_column")]
    assert ("sp.path", 2, "c2", "any") in cols and len(cols) == 9
    assert [(d["id"], d["kind"]) for d in rows.dicts("index")] == [("sp.link:primary", "primary")]
    assert [(d["seq"], d["col"]) for d in rows.dicts("index_column")] == [(0, 0), (1, 1)]  # keys(1, 2)


def test_declared_and_sys_relations_take_their_columns():
    p = parse_program('.decl e(src: symbol, dst: number)\n.input e(IO=file, filename="e.csv")\n'
                      "r1 out(R) :- e{src: R}, sys::rule{id: R, name: N}.", "d.dl")
    rows = encode(p)
    cols = {}
    for d in rows.dicts("relation_column"):
        cols.setdefault(d["relation"], []).append((d["name"], d["type"]))
    assert cols["d.e"] == [("src", "symbol"), ("dst", "number")]
    assert cols["d.sys::rule"][:3] == [("id", "symbol"), ("program", "symbol"), ("name", "symbol")]
    assert len(cols["d.sys::rule"]) == len(schema.table("rule").columns)
    rel = {d["name"]: d for d in rows.dicts("relation")}
    assert rel["e"]["input"] and rel["e"]["style"] == "decl" and not rel["e"]["output"]
    assert [(d["key"], d["value"], d["seq"]) for d in rows.dicts("io_param")] == [("IO", "file", 0), ("filename", "e.csv", 1)]
    assert {d["named"] for d in rows.dicts("predicate") if d["pos"] > 0} == {True}
    assert rows.dicts("program")[0]["dialect"] == "souffle"


def test_a_relations_role_marks_are_columns_and_print_as_plan_keys():
    """relation.role and made_for (what decouple::asymmetric's relations are for: partition.dl
    reads them) round-trip through `.plan relation`; a role outside batch, seal, held, dominated is refused."""
    from evita.bootstrap.checks import check_plans

    text = 'h_home(@"a/2", "a").\nq1 h_now(@L, 0) :- h_home(@L, _).\n.plan relation h_home(role=batch, made_for=h)\n'
    program = parse_program(text, "t.olg", name="t")
    rows = encode(program)
    marks = {r["name"]: (r["role"], r["made_for"]) for r in rows.dicts("relation")}
    assert marks == {"h_home": ("batch", "h"), "h_now": (None, None)}
    assert ".plan relation h_home(role=batch, made_for=h)" in format_program(decode(rows, "t"))
    assert not list(check_plans(program))
    bad = parse_program(text.replace("role=batch", "role=home"), "t.olg", name="t")
    assert [d.message for d in check_plans(bad)] == ["role=home is not one of batch, seal, held, dominated"]


def test_duplicate_labels_keep_both_rules():
    p = parse_program("r1 a(X) :- b(X).\nr1 c(X) :- b(X).", "dup.olg")
    rows = encode(p)
    assert [d["id"] for d in rows.dicts("rule")] == ["dup:r1", "dup:r1/1"]
    assert decode(rows, "dup") == p


def test_components_facts_and_queries():
    rows = encode(parse_file(EXAMPLES / "two_phase_commit.olg"))
    comps = {d["name"]: d for d in rows.dicts("component")}
    assert set(comps) == {"coordinator", "participant"}
    addrs = [(d["component"], d["seq"], d["address"]) for d in rows.dicts("component_address")]
    assert ("participant", 2, "p3") in addrs
    assert {d["component"] for d in rows.dicts("rule")} == {"coordinator", "participant"}
    fv = rows.dicts("fact_value")
    assert len(fv) == sum(d["arity"] for d in rows.dicts("fact"))
    assert {(d["value"], d["type"]) for d in fv if d["pos"] == 0} == {("coord", "string"), ("p3", "string")}


def test_encode_rejects_what_the_catalog_cannot_hold():
    bad_fact = Program("p", (Fact(Atom("a", (X,))),))
    with pytest.raises(EvitaError) as e:
        encode(bad_fact)
    assert e.value.first.code == "not-encodable" and "not a constant" in e.value.first.message
    unresolved = Program("p", (Rule("r1", Atom("a", (X,)), (NamedAtom("b", (("x", X, None),)),)),))
    with pytest.raises(EvitaError, match="named fields"):
        encode(unresolved)


# ---------------------------------------------------------------- rows and decode

ID_COLUMNS = {  # every column holding an id, so a test can rename them all
    "rule": ["id", "head"], "predicate": ["id", "rule"], "argument": ["predicate", "expr"],
    "selection": ["id", "rule", "expr"], "assignment": ["id", "rule", "expr"],
    "expression": ["id", "rule", "parent"], "fact": ["id"], "fact_value": ["fact"],
    "query": ["id", "predicate"], "relation": ["id"], "relation_column": ["relation"],
    "index": ["id", "relation"], "index_column": ["index"],
}


def rename_ids(rows: CatalogRows) -> CatalogRows:
    def new(old):
        return None if old is None else "id_" + hashlib.sha1(old.encode()).hexdigest()[:10]

    out = CatalogRows()
    for t in schema.TABLES:
        cols = t.column_names
        for r in rows.get(t.name, []):
            d = dict(zip(cols, r))
            for c in ID_COLUMNS.get(t.name, []):
                d[c] = new(d[c])
            out.add(t.name, tuple(d[c] for c in cols))
    return out


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl")), ids=lambda p: p.name)
def test_decode_reads_columns_not_id_shapes(path):
    p = parse_file(path)
    assert decode(rename_ids(encode(p)), p.name) == p


def test_rows_helpers():
    a, b = sp_rows(), encode(parse_program("r1 x(A) :- y(A).", "other.olg"))
    both = a.merge(b)
    assert both.programs() == ["other", "sp"]
    assert both.only("sp").sorted() == a.sorted()
    assert both.without("sp").sorted() == b.sorted()
    changed = encode(parse_program("r1 x(A) :- z(A).", "other.olg"))
    replaced = both.replace_programs(changed)
    assert replaced.only("other").sorted() == changed.sorted() and replaced.only("sp").sorted() == a.sorted()
    assert "y" in diff(b, changed) and diff(a, sp_rows()) == ""
    moved = encode(parse_program("\n\n" + SP, "sp.olg"))  # other lines: only source columns differ
    assert moved.sorted() != a.sorted() and moved.compared() == a.compared()
    assert a.counts()["rule"] == 4


# ---------------------------------------------------------------- printer

def test_printer_minimal_parentheses():
    cases = {
        BinOp("*", BinOp("+", X, Y), Z): "(X + Y) * Z",
        BinOp("+", X, BinOp("*", Y, Z)): "X + Y * Z",
        BinOp("-", BinOp("-", X, Y), Z): "X - Y - Z",
        BinOp("-", X, BinOp("-", Y, Z)): "X - (Y - Z)",
        BinOp("==", BinOp("<", X, Y), Const(True, "bool")): "(X < Y) == true",
        BinOp("&&", BinOp("||", X, Y), Z): "(X || Y) && Z",
        BinOp("||", X, BinOp("&&", Y, Z)): "X || Y && Z",
        UnOp("-", BinOp("+", X, Y)): "-(X + Y)",
        UnOp("!", Call("f_ok", (X,))): "!f_ok(X)",
        BinOp("*", X, Const(-1, "int")): "X * -1",
        Cond(Cond(X, Y, Z), Y, Cond(X, Y, Z)): "(X ? Y : Z) ? Y : X ? Y : Z",
        Call("f_cons", (X, Const("a\"b\n", "string"))): 'f_cons(X, "a\\"b\\n")',
    }
    for tree, text in cases.items():
        assert format_expr(tree) == text
        parsed = parse_program(f"r1 p(X) :- q(X), Out := {text}.").rules[0].body[1].expr
        assert parsed == tree, text


def test_printer_atoms_and_rules():
    width = len(schema.table("rule").columns)
    named = Atom("sys::rule", (Var("R"),) + (Wildcard(),) * 3 + (Var("H"),) + (Wildcard(),) * (width - 5), named=True)
    assert format_atom(named) == "sys::rule{id: R, head: H}"
    assert format_atom(Atom("p", (X, Aggregate("count", None), Aggregate("sum", BinOp("+", X, Y))), location=0)) \
        == "p(@X, count<*>, sum<X + Y>)"
    long = Rule("r9", Atom("out", (X,)), tuple(Atom(f"relation_with_a_long_name{i}", (X, Y)) for i in range(4)))
    assert format_rule(long).splitlines()[0] == "r9 out(X) :-"
    assert format_rule(long).splitlines()[1] == "    relation_with_a_long_name0(X, Y),"
    comp = Program("c", (Component("node", ("a", "b")), Fact(Atom("n", (Const(1, "int"),)), "node")))
    assert format_program(comp) == 'component node @ ["a", "b"] {\n    n(1).\n}\n'


def test_printed_examples_read_like_the_spec():
    text = format_program(parse_program(SP, "sp.olg"))
    assert text.splitlines() == [
        "materialize(link, infinity, infinity, keys(1, 2)).",
        'link("a", "b", 1).',
        "r1 path(@X, Y, C) :- link(@X, Y, C).",
        "r2 path(@X, Z, C1 + C2) :- link(@X, Y, C1), path(@Y, Z, C2), X != Z.",
        "r3 best(@X, Z, min<C>) :- path(@X, Z, C).",
        "r4 delete path(@X, Z, C)@next :- notin link(@X, Z, C), path(@X, Z, C), D := f_now().",
        "query best(@X, Z, C).",
    ]


@pytest.mark.parametrize("module", ["rows", "encode", "decode", "printer", "store"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"evita.catalog.{module}"))
    assert result.failed == 0


def test_catalog_doc_is_in_sync():
    doc = (REPO / "docs" / "catalog.md").read_text()
    assert doc == schema.markdown() + "\n", "regenerate: python -m evita.catalog.schema > docs/catalog.md"


# ---------------------------------------------------------------- Spark store

@pytest.fixture(scope="module")
def catalog(spark):
    store.attach(spark)
    return spark


def jobs_of(spark, label, fn):
    """(result, number of Spark jobs fn ran)."""
    sc = spark.sparkContext
    sc.setJobGroup(label, label)
    try:
        result = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return result, len(sc.statusTracker().getJobIdsForGroup(label))


def test_tables_have_the_schema_types(catalog):
    spark_type = {"string": "string", "int": "int", "boolean": "boolean", "double": "double"}
    for t in schema.TABLES:
        fields = catalog.table(f"evita.`{t.name}`").schema.fields
        assert [(f.name, f.dataType.simpleString()) for f in fields] == \
            [(c.name, spark_type[c.type]) for c in t.columns], t.name


def test_save_load_replace_drop(catalog):
    a = sp_rows()
    b = encode(parse_program("r1 x(A) :- y(A), A > 2.", "other.olg"))
    _, save_jobs = jobs_of(catalog, "save", lambda: store.save_program(catalog, a))
    store.save_program(catalog, b)
    assert save_jobs == 0
    loaded, load_jobs = jobs_of(catalog, "load", lambda: store.load_rows(catalog, "sp"))
    assert load_jobs == 0
    assert loaded == a.sorted(), diff(a, loaded, compared=False)
    through_spark, spark_jobs = jobs_of(catalog, "load-spark", lambda: store.load_rows(catalog, "sp", engine="spark"))
    assert spark_jobs == 1
    assert through_spark == loaded
    assert {"sp", "other"} <= set(store.list_programs(catalog))
    assert store.list_programs(catalog) == store.list_programs(catalog, engine="spark")

    changed = encode(parse_program("r1 x(A) :- z(A).\nr2 w(A) :- x(A).", "other.olg"))
    store.save_program(catalog, changed)
    assert store.load_rows(catalog, "other") == changed.sorted()
    assert store.load_rows(catalog, "sp") == a.sorted()  # untouched
    assert catalog.sql("SELECT count(*) FROM evita.rule WHERE program = 'other'").first()[0] == 2

    store.drop_program(catalog, "other")
    assert "other" not in store.list_programs(catalog)
    assert store.load_rows(catalog, "other").counts() == CatalogRows().counts()
    assert store.load_rows(catalog, "sp") == a.sorted()


def test_failed_save_leaves_previous_rows(catalog):
    good = encode(parse_program("r1 x(A) :- y(A).", "atomic.olg"))
    store.save_program(catalog, good)
    bad = encode(parse_program("r1 x(A) :- y(A), z(A).", "atomic.olg"))
    bad["argument"][-1] = bad["argument"][-1][:2] + ("not an int",) + bad["argument"][-1][3:]
    with pytest.raises(Exception):
        store.save_program(catalog, bad)  # the argument table fails after others were staged
    assert store.load_rows(catalog, "atomic") == good.sorted()


def test_committed_save_rolls_forward_after_a_crash(catalog, monkeypatch):
    first = encode(parse_program("r1 x(A) :- y(A).", "crash.olg"))
    store.save_program(catalog, first)
    second = encode(parse_program("r1 x(A) :- y(A).\nr2 y(A) :- x(A).", "crash.olg"))

    def crash(root, journal):
        raise KeyboardInterrupt("crash between commit and moves")

    monkeypatch.setattr(store, "_apply", crash)
    with pytest.raises(KeyboardInterrupt):
        store.save_program(catalog, second)
    monkeypatch.undo()
    assert store.load_rows(catalog, "crash") == first.sorted()  # moves never ran
    store.attach(catalog)  # recovery: the committed journal is carried out
    assert store.load_rows(catalog, "crash") == second.sorted()


def test_reattach_sees_the_data(catalog):
    store.save_program(catalog, sp_rows())
    store.detach(catalog)
    assert not catalog.catalog.databaseExists("evita")
    store.attach(catalog)
    assert catalog.catalog.tableExists("evita.rule")
    assert {r["name"] for r in catalog.table("evita.rule").where("program = 'sp'").collect()} == \
        {"r1", "r2", "r3", "r4"}
    other = catalog.newSession()  # another session of the application shares the registration
    assert other.table("evita.predicate").where("program = 'sp'").count() == len(sp_rows()["predicate"])


def test_detach_leaves_other_tables_alone(catalog):
    catalog.sql("CREATE TABLE evita.mine (x INT) USING parquet")
    try:
        store.detach(catalog)
        assert catalog.catalog.tableExists("evita.mine") and not catalog.catalog.tableExists("evita.rule")
        store.attach(catalog)
        assert catalog.catalog.tableExists("evita.rule")
    finally:
        catalog.sql("DROP TABLE evita.mine")
    assert "sp" in store.list_programs(catalog)


def test_spark_sql_joins_on_variables(catalog):
    store.save_program(catalog, sp_rows())
    # Which rules join two body atoms on a shared variable?
    joins = catalog.sql("""
        SELECT DISTINCT r.name, a1.var
        FROM evita.rule r
        JOIN evita.predicate p1 ON p1.rule = r.id AND p1.pos > 0 AND NOT p1.negated
        JOIN evita.predicate p2 ON p2.rule = r.id AND p2.pos > p1.pos AND NOT p2.negated
        JOIN evita.argument a1 ON a1.predicate = p1.id AND a1.kind = 'var'
        JOIN evita.argument a2 ON a2.predicate = p2.id AND a2.kind = 'var' AND a2.var = a1.var
        WHERE r.program = 'sp' ORDER BY r.name, a1.var""").collect()
    assert [tuple(j) for j in joins] == [("r2", "Y")]


def test_a_query_registers_only_the_catalog_tables_it_reads(spark):
    """`evita sql` in a new JVM registers the tables its query names, not all 27 and the
    history (1.5 s of registrations); a later full attach registers the rest."""
    from evita.bootstrap.cli import catalog_tables_read

    query = "SELECT count(*) AS n FROM evita.rule r JOIN evita.predicate p ON r.id = p.rule"
    try:
        store._drop_tables(spark)  # as a new JVM finds it: nothing registered
        store.attach(spark, only=catalog_tables_read(query))
        assert set(store._table_names(spark)) & set(schema.BY_NAME) == {"rule", "predicate"}
        assert spark.sql(query).collect()[0]["n"] >= 0
    finally:
        store.attach(spark)
    assert set(store._table_names(spark)) >= set(schema.BY_NAME)
    assert catalog_tables_read("SELECT * FROM evita_history.rule") is None
    assert catalog_tables_read("SELECT * FROM rule") is None
