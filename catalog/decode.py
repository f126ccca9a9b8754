"""Catalog rows -> Program: the inverse of `catalog.encode`.

Decoding reads only columns, never the shape of ids, so rules that later stages add with
ids of their own (`id("delta", R, A)`) decode like parsed ones. Statements come out in
statement-ordinal (`pos`) order; rows without an ordinal follow, ordered by id.

>>> from evita.bootstrap.syntax import Atom, Program, Rule, Var
>>> from evita.catalog.encode import encode
>>> r = Rule("r1", Atom("path", (Var("X"), Var("Y"))), (Atom("link", (Var("X"), Var("Y"))),))
>>> decode(encode(Program("sp", (r,))), "sp") == Program("sp", (r,))
True
"""
from __future__ import annotations

from collections import defaultdict

from evita.bootstrap.syntax import (
    BOOL, FLOAT, INFINITY, INT, NOWHERE, NULL, Aggregate, Assign, Atom, BinOp, Call, Column,
    STATISTIC_KEYS, Component, Cond, Const, Declaration, Fact, IODirective, ListExpr, Materialize, Plan, Program,
    Query, Rule, Select, Span, TypeDecl, UnOp, Var, Wildcard,
)

from .rows import CatalogRows

# The value the parser gives `infinity`; printing and the catalog only see the type.
INFINITY_VALUE = "infinity"


def const_value(text, type_: str):
    """The Python value of a stored constant (inverse of `encode.const_text`).

    >>> [const_value(t, ty) for t, ty in [("3", "int"), ("0.5", "float"), ("true", "bool"), (None, "null")]]
    [3, 0.5, True, None]
    """
    if type_ == INT:
        return int(text)
    if type_ == FLOAT:
        return float(text)
    if type_ == BOOL:
        return text == "true"
    if type_ == NULL:
        return None
    if type_ == INFINITY:
        return INFINITY_VALUE
    return text


def const(text, type_: str) -> Const:
    return Const(const_value(text, type_), type_)


def number_const(text: str) -> Const:
    """A materialize lifetime/size: infinity, an int or a float."""
    if text == "infinity":
        return const(text, INFINITY)
    try:
        return Const(int(text), INT)
    except ValueError:
        return Const(float(text), FLOAT)


def decode(rows: CatalogRows, program_id: str) -> Program:
    return _Decoder(rows, program_id).program()


class Terms:
    """Atoms, body terms and expression trees from their rows (`predicate`, `argument`,
    `expression`, `selection`, `assignment`): what the decoder prints a rule from, and
    what the view `sys::term_text` prints each term from (`catalog/views.py`), so the
    catalog has one printer. `t` maps a table name to its rows as dicts; ids are global
    (they start with the program id), so one `Terms` may hold several programs."""

    def __init__(self, t: dict, path: str = "<catalog>"):
        self.t = t
        self.path = path
        self.preds = {r["id"]: r for r in t["predicate"]}
        self.args = _group(t["argument"], "predicate", "pos")
        self.nodes = {r["id"]: r for r in t["expression"]}
        self.children = _group(t["expression"], "parent", "seq")

    def literals(self):
        """(rule id, pos, term id, literal) of every body term: atoms (pos > 0),
        selections and assignments."""
        for r in self.t["predicate"]:
            if r["pos"]:
                yield r["rule"], r["pos"], r["id"], self.atom(r)
        for table in ("selection", "assignment"):
            for r in self.t[table]:
                yield r["rule"], r["pos"], r["id"], self.term(table, r)

    def term(self, table: str, r):
        """The selection or assignment of row `r` of `table`."""
        if table == "selection":
            return Select(self.expr(r["expr"]), self.span(r))
        return Assign(Var(r["var"]), self.expr(r["expr"]), self.span(r))

    def span(self, row) -> Span:
        if row.get("line") is None:
            return NOWHERE
        return Span(self.path, row["line"], row["col"] or 0)

    def atom(self, p) -> Atom:
        args = tuple(self.argument(a) for a in self.args[p["id"]])
        return Atom(p["relation"], args, p["location"], bool(p["negated"]), bool(p["delta"]),
                    bool(p["named"]), self.span(p))

    def argument(self, a):
        kind = a["kind"]
        if kind == "var":
            return Var(a["var"])
        if kind == "wildcard":
            return Wildcard()
        if kind == "const":
            return const(a["value"], a["type"])
        if kind == "expr":
            return self.expr(a["expr"])
        if kind == "agg":
            arg = Var(a["var"]) if a["var"] is not None else (
                self.expr(a["expr"]) if a["expr"] is not None else None)
            return Aggregate(a["agg"], arg)
        raise ValueError(f"argument {a['predicate']}/{a['pos']} has unknown kind {kind!r}")

    def expr(self, node_id: str):
        n = self.nodes[node_id]
        kind = n["kind"]
        kids = [self.expr(c["id"]) for c in self.children[node_id]]
        if kind == "var":
            return Var(n["name"])
        if kind == "wildcard":
            return Wildcard()
        if kind == "const":
            return const(n["value"], n["type"])
        if kind == "call":
            return Call(n["name"], tuple(kids))
        if kind == "op":
            return UnOp(n["name"], kids[0]) if len(kids) == 1 else BinOp(n["name"], kids[0], kids[1])
        if kind == "cond":
            return Cond(*kids)
        if kind == "list":
            return ListExpr(tuple(kids))
        raise ValueError(f"expression {node_id} has unknown kind {kind!r}")


class _Decoder(Terms):
    def __init__(self, rows: CatalogRows, program_id: str):
        self.pid = program_id
        mine = rows.only(program_id)
        t = {name: mine.dicts(name) for name in mine}
        progs = t["program"]
        if not progs:
            raise LookupError(f"no program {program_id!r} in the catalog rows "
                              f"(programs: {', '.join(rows.programs()) or 'none'})")
        self.prog = progs[0]
        super().__init__(t, self.prog["path"] or "<catalog>")
        self._groups: dict = {}  # (table, key, order) -> `_group` of it, made once
        self._primary = None
        self._choice = None
        self.body = defaultdict(list)  # rule id -> [(pos, id, literal)]
        for rule, pos, term, literal in self.literals():
            self.body[rule].append((pos, term, literal))

    def grouped(self, table: str, key: str, order: str) -> dict:
        """`_group` of a table, made once per decoder: asked per relation or fact, it
        would otherwise scan the whole table each time (quadratic in the program)."""
        k = (table, key, order)
        if k not in self._groups:
            self._groups[k] = _group(self.t[table], key, order)
        return self._groups[k]

    def program(self) -> Program:
        stmts = []  # (pos, kind rank, id, statement)
        for r in self.t["rule"]:
            stmts.append((r["pos"], 0, r["id"], self.rule(r)))
        for r in self.t["fact"]:
            stmts.append((r["pos"], 1, r["id"], self.fact(r)))
        for r in self.t["query"]:
            stmts.append((r["pos"], 2, r["id"], Query(self.atom(self.preds[r["predicate"]]), self.span(r))))
        for r in self.t["relation"]:
            if r["declared"]:
                stmts.append((r["pos"], 3, r["id"], self.declaration(r)))
        for r in self.t["io"]:
            stmts.append((r["pos"], 4, r["relation"] + r["direction"], self.io(r)))
        for r in self.t["component"]:
            addrs = [a["address"] for a in self.grouped("component_address", "component", "seq")[r["name"]]]
            stmts.append((r["pos"], 5, r["name"], Component(r["name"], tuple(addrs), self.span(r))))
        bases = _group(self.t["type_base"], "type", "seq")
        for r in self.t["type_decl"]:
            own = bases[r["name"]]
            fields = tuple(b.get("field") or "" for b in own) if r["kind"] in ("record", "adt") else ()
            stmts.append((r["pos"], 7, r["name"], TypeDecl(r["name"], r["kind"], tuple(b["base"] for b in own),
                                                           self.span(r), fields)))
        for key, plan in self.plans():
            stmts.append((None, 6, key, plan))
        stmts.sort(key=lambda s: (s[0] is None, s[0] or 0, s[1], s[2]))
        p = self.prog
        return Program(p["name"], tuple(s[3] for s in stmts), p["path"] or "", p["dialect"],
                       p["text"] or "", p.get("number_bits") or 64)

    def plans(self) -> list:
        """`.plan` statements: the physical decisions stages wrote (after every other)."""
        out = []
        parts = _group(self.t["partition_column"], "relation", "seq")
        strata = {s["relation"]: s for s in self.t["stratum"]}
        for r in self.t["relation"]:
            st = strata.get(r["id"], {})
            params = [("distribution", r["distribution"]), ("cached", "true" if r["cached"] else None),
                      ("partition", ",".join(str(c["col"]) for c in parts.get(r["id"], ())) or None),
                      ("strategy", st.get("strategy")), ("reason", st.get("reason")),
                      ("local_iterations", None if st.get("local_iterations") is None else str(st["local_iterations"])),
                      ("role", r["role"]), ("made_for", r["made_for"])]
            params = tuple((k, v) for k, v in params if v is not None)
            if params:
                out.append(("relation:" + r["name"], Plan("relation", r["name"], params)))
        out += statistics_plans(self.t["statistic"])
        out += flow_plans(self.t["flow_op"], self.t["flow_input"])
        rules = {r["id"]: r["name"] for r in self.t["rule"]}
        decided = [p for p in self.t["predicate"] if (p["method"] or p.get("copy")) and p["rule"] in rules]
        for rid, preds in _group(decided, "rule", "pos").items():
            params = [(f"{key}{p['pos']}", p[column]) for p in preds
                      for key, column in (("join", "method"), ("copy", "copy")) if p.get(column)]
            out.append(("rule:" + rules[rid], Plan("rule", rules[rid], tuple(params))))
        return out

    def rule(self, r) -> Rule:
        head_id = r["head"] or next(p["id"] for p in self.t["predicate"]
                                    if p["rule"] == r["id"] and p["pos"] == 0)
        body = tuple(lit for _, _, lit in sorted(self.body[r["id"]], key=lambda x: (x[0], x[1])))
        origin = r["origin"].split(":", 1)[-1] if r["origin"] else None
        return Rule(r["name"], self.atom(self.preds[head_id]), body, bool(r["is_delete"]), r["time"],
                    r["component"], self.span(r), origin)

    def fact(self, r) -> Fact:
        vals = self.grouped("fact_value", "fact", "pos")[r["id"]]
        atom = Atom(r["relation"], tuple(const(v["value"], v["type"]) for v in vals), r["location"],
                    span=self.span(r))
        return Fact(atom, r["component"], self.span(r))

    def keys(self, relation_id: str):
        if self._primary is None:  # relation id -> its first primary index, as the table lists them
            self._primary = {}
            for i in self.t["index"]:
                if i["kind"] == "primary":
                    self._primary.setdefault(i["relation"], i)
        idx = self._primary.get(relation_id)
        if idx is None:
            return None
        cols = self.grouped("index_column", "index", "seq")[idx["id"]]
        return tuple(c["col"] for c in cols)

    def choice(self, relation_id: str) -> tuple:
        """A relation's choice domains (indexes of kind 'choice'), in the order of their ids."""
        if self._choice is None:  # relation id -> its choice indexes
            self._choice = {}
            for i in sorted(self.t["index"], key=lambda i: (len(i["id"]), i["id"])):
                if i["kind"] == "choice":
                    self._choice.setdefault(i["relation"], []).append(i)
        cols = self.grouped("index_column", "index", "seq")
        return tuple(tuple(c["col"] for c in cols[i["id"]]) for i in self._choice.get(relation_id, ()))

    def declaration(self, r):
        keys = self.keys(r["id"])
        if r["style"] == "materialize":
            return Materialize(r["name"], number_const(r["lifetime"]), number_const(r["size"]),
                               keys or (), self.span(r))
        cols = self.grouped("relation_column", "relation", "pos")[r["id"]]
        qualifiers = self.grouped("relation_qualifier", "relation", "seq")[r["id"]]
        return Declaration(r["name"], tuple(Column(c["name"], c["type"]) for c in cols), keys,
                           r["style"], self.span(r), tuple(q["qualifier"] for q in qualifiers), self.choice(r["id"]))

    def io(self, r) -> IODirective:
        params = [p for p in self.t["io_param"] if p["pos"] == r["pos"]]
        params.sort(key=lambda p: (p["seq"] is None, p["seq"] or 0, p["key"]))
        return IODirective(r["direction"], r["relation"], tuple((p["key"], p["value"]) for p in params),
                           self.span(r))


def _group(rows: list, key: str, order: str) -> dict:
    out = defaultdict(list)
    for r in rows:
        out[r[key]].append(r)
    for v in out.values():
        v.sort(key=lambda r: (r[order] is None, r[order] or 0))
    return out


_METRIC_KEY = {metric: key for key, metric in STATISTIC_KEYS.items()}  # in the order they print
_METRIC_ORDER = {metric: i for i, metric in enumerate(_METRIC_KEY)}


def flow_plans(ops: list, inputs: list) -> list:
    """`.plan op NAME(op=..., in0=..., ...)`, one per dataflow operator (table flow_op)."""
    names = {r["id"]: r["name"] for r in ops}
    ins = _group(inputs, "op", "seq")
    out = []
    for r in ops:
        params = [("op", r["op"])]
        params += [(f"in{i['seq']}", names.get(i["input"], i["input"])) for i in ins.get(r["id"], ())]
        params += [(k, r[k]) for k in ("detail", "relation", "rule") if r[k]]
        params += [("graph", r["graph"])] if r["graph"] and r["graph"] != "planned" else []
        out.append(("op:" + r["name"], Plan("op", r["name"], tuple(params))))
    return out


def statistics_plans(rows: list) -> list:
    """`.plan statistics REL(rows=..., distinct0=...)`, one per relation with statistics."""
    by_rel: dict = {}
    for r in rows:
        if r["metric"] in _METRIC_ORDER:
            by_rel.setdefault(r["relation"], []).append(r)
    out = []
    for rel, stats in sorted(by_rel.items()):
        stats.sort(key=lambda r: (-1 if r["col"] is None else r["col"], _METRIC_ORDER[r["metric"]]))
        params = tuple((_METRIC_KEY[r["metric"]] + ("" if r["col"] is None else str(r["col"])), _number(r["value"]))
                       for r in stats)
        out.append(("statistics:" + rel, Plan("statistics", rel, params)))
    return out


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))

