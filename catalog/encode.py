"""Program -> catalog rows (the `parse` stage's output, seed 002 Fig 3.1-3.2).

Ids are a function of the program and a position, never counters:

    program     NAME                          relation    NAME.rel
    rule        NAME:LABEL                    index       NAME.rel:primary
    predicate   RULE#POS  (head 0, body 1..n) query       NAME:query<ordinal>, atom QUERY#0
    selection   RULE#POS                      fact        NAME:fact<ordinal>
    assignment  RULE#POS                      expression  OWNER.e, OWNER.e.0, OWNER.e.0.1, ...

where an expression's OWNER is the selection/assignment id or `PREDICATE.ARGPOS`. Each
argument position is one `argument` row (var, const, wildcard, expr or agg), so stages join
on variables directly. A label used twice (rejected later by the static checks) gets the id
`NAME:LABEL/<ordinal>` so the catalog still holds both rules.

Every relation mentioned gets a `relation` row and its `relation_column`s: declared names
and types; for `sys::NAME` the catalog schema's columns (string/int/double/boolean as
symbol/number/float/bool, and materialized, since catalog tables persist); otherwise
c0..cN of type any. Keys (materialize, define) become the index `REL:primary`.

>>> from evita.bootstrap.syntax import Atom, Program, Rule, Var
>>> r = Rule("r1", Atom("path", (Var("X"), Var("Y"))), (Atom("link", (Var("X"), Var("Y"))),))
>>> rows = encode(Program("sp", (r,)))
>>> [(d["id"], d["head"], d["term_count"]) for d in rows.dicts("rule")]
[('sp:r1', 'sp:r1#0', 2)]
>>> [(d["predicate"], d["pos"], d["kind"], d["var"]) for d in rows.dicts("argument")]
[('sp:r1#0', 0, 'var', 'X'), ('sp:r1#0', 1, 'var', 'Y'), ('sp:r1#1', 0, 'var', 'X'), ('sp:r1#1', 1, 'var', 'Y')]
"""
from __future__ import annotations

from evita.bootstrap.diagnostics import Diagnostic, EvitaError
from evita.bootstrap.syntax import (
    BOOL, FLOAT, INFINITY, INT, NULL, Aggregate, Assign, Atom, BinOp, Call, Component, Cond,
    Const, Declaration, Fact, IODirective, ListExpr, Materialize, NamedAtom, Plan, Program, Query, Rule,
    Select, TypeDecl, UnOp, Var, Wildcard,
)

from . import schema
from .rows import CatalogRows

# Catalog column types as relation_column types (sys:: relations are typed by the schema).
SCHEMA_TYPES = {schema.STRING: "symbol", schema.INT: "number", schema.DOUBLE: "float",
                schema.BOOL: "bool"}


def const_text(c: Const):
    """The text a constant is stored as (`value` columns); None for null.

    >>> [const_text(Const(v, t)) for v, t in [(3, "int"), (0.5, "float"), (True, "bool"), ("a b", "string")]]
    ['3', '0.5', 'true', 'a b']
    """
    if c.type == BOOL:
        return "true" if c.value else "false"
    if c.type == NULL:
        return None
    if c.type == INFINITY:
        return "infinity"
    if c.type == FLOAT:
        return repr(float(c.value))
    if c.type == INT:
        return str(int(c.value))
    return str(c.value)


def _line_col(span):
    return (span.line, span.col) if span is not None and span.line > 0 else (None, None)


def _fail(code: str, message: str, node, hint: str = ""):
    raise EvitaError([Diagnostic(code, message, node.span, "", hint)])


def encode(program: Program) -> CatalogRows:
    """All catalog rows of one program (stage 'parse')."""
    return _Encoder(program).run()


class _Encoder:
    def __init__(self, program: Program):
        self.p = program
        self.pid = program.name
        self.rows = CatalogRows()
        self.relations: dict = {}  # name -> {"arity", "span", "decl", "pos", "input", "output"}
        plans = program.physical
        self.methods = dict(plans.methods)  # (rule label, body position) -> join method
        self.copies = dict(plans.copies)  # (rule label, body position) -> what a partition in rounds holds
        self.placed = {p.name: dict(p.params) for p in program.statements
                       if isinstance(p, Plan) and p.kind == "relation"}

    def run(self) -> CatalogRows:
        p = self.p
        self.rows.add("program", id=self.pid, name=p.name, dialect=p.dialect, number_bits=p.number_bits, stage="parse",
                      path=p.path or None, text=p.text or None)
        rule_ids = self._rule_ids()
        for pos, s in enumerate(p.statements):
            if isinstance(s, Rule):
                self.rule(rule_ids[pos], pos, s)
            elif isinstance(s, Fact):
                self.fact(pos, s)
            elif isinstance(s, Query):
                self.query(pos, s)
            elif isinstance(s, (Declaration, Materialize)):
                self.declare(pos, s)
            elif isinstance(s, IODirective):
                self.io(pos, s)
            elif isinstance(s, TypeDecl):
                self.type_decl(pos, s)
            elif isinstance(s, Plan):
                if s.kind == "relation":
                    self.mention(s.name, None, s.span)
                elif s.kind == "statistics":
                    self.statistics(s)
                elif s.kind == "op":
                    self.flow_op(s)
            elif isinstance(s, Component):
                self.component(pos, s)
            else:
                _fail("not-encodable", f"cannot store a {type(s).__name__} statement", s)
        for name, info in self.relations.items():
            self.relation(name, info)
        return self.rows

    def _rule_ids(self) -> dict:
        taken = {f"{self.pid}:query{i}" for i, s in enumerate(self.p.statements) if isinstance(s, Query)}
        ids = {}
        for pos, s in enumerate(self.p.statements):
            if isinstance(s, Rule):
                rid = f"{self.pid}:{s.name}"
                if rid in taken:
                    rid = f"{rid}/{pos}"
                taken.add(rid)
                ids[pos] = rid
        return ids

    # ------------------------------------------------------------ relations

    def mention(self, name: str, arity=None, span=None) -> dict:
        info = self.relations.setdefault(name, {"arity": None, "span": None, "decl": None,
                                                "pos": None, "input": False, "output": False})
        if info["arity"] is None and arity is not None:
            info["arity"] = arity
        if info["span"] is None and span is not None and span.line > 0:
            info["span"] = span
        return info

    def declare(self, pos: int, s) -> None:
        info = self.mention(s.relation, len(s.columns) if isinstance(s, Declaration) else None)
        if info["decl"] is not None:
            _fail("duplicate-declaration", f"relation {s.relation} is declared twice", s,
                  "keep one declaration")
        if isinstance(s, Declaration):
            info["arity"] = len(s.columns)
        info["decl"], info["pos"], info["span"] = s, pos, s.span

    def relation(self, name: str, info: dict) -> None:
        rid = f"{self.pid}.{name}"
        decl = info["decl"]
        sys_table = _sys_table(name)
        columns = None  # [(name, type)]
        if isinstance(decl, Declaration):
            columns = [(c.name, c.type) for c in decl.columns]
        elif sys_table is not None and decl is None:
            columns = [(c.name, SCHEMA_TYPES.get(c.type, "any")) for c in sys_table.columns]
        elif info["arity"] is not None:
            columns = [(f"c{i}", "any") for i in range(info["arity"])]
        arity = len(columns) if columns is not None else None
        line, col = _line_col(info["span"])
        mat = decl if isinstance(decl, Materialize) else None
        plan = self.placed.get(name, {})
        self.rows.add(
            "relation", id=rid, program=self.pid, name=name, arity=arity,
            declared=decl is not None,
            style=None if decl is None else ("materialize" if mat else decl.style),
            materialized=decl is not None or sys_table is not None,
            lifetime=const_text(mat.lifetime) if mat else None,
            size=const_text(mat.size) if mat else None,
            input=info["input"], output=info["output"], distribution=plan.get("distribution"),
            cached=True if plan.get("cached") == "true" else None, role=plan.get("role"),
            made_for=plan.get("made_for"), pos=info["pos"], line=line, col=col)
        for seq, c in enumerate(plan["partition"].split(",") if plan.get("partition") else ()):
            self.rows.add("partition_column", program=self.pid, relation=rid, seq=seq, col=int(c))
        if plan.get("strategy"):
            iterations = plan.get("local_iterations")
            self.rows.add("stratum", program=self.pid, relation=rid, strategy=plan["strategy"],
                          reason=plan.get("reason"), local_iterations=None if iterations is None else int(iterations))
        for i, (cname, ctype) in enumerate(columns or ()):
            self.rows.add("relation_column", program=self.pid, relation=rid, pos=i, name=cname, type=ctype)
        for seq, q in enumerate(getattr(decl, "qualifiers", ())):
            self.rows.add("relation_qualifier", program=self.pid, relation=rid, seq=seq, qualifier=q)
        keys = getattr(decl, "keys", None)
        if keys is not None:
            iid = f"{rid}:primary"
            self.rows.add("index", program=self.pid, id=iid, relation=rid, kind="primary")
            for seq, k in enumerate(keys):
                self.rows.add("index_column", program=self.pid, index=iid, seq=seq, col=k)
        for i, domain in enumerate(getattr(decl, "choice", ())):  # Soufflé's choice-domain: kind 'choice'
            iid = f"{rid}:choice{i}"
            self.rows.add("index", program=self.pid, id=iid, relation=rid, kind="choice")
            for seq, k in enumerate(domain):
                self.rows.add("index_column", program=self.pid, index=iid, seq=seq, col=k)

    # ------------------------------------------------------------ statements

    def rule(self, rid: str, pos: int, r: Rule) -> None:
        line, col = _line_col(r.span)
        self.rows.add("rule", id=rid, program=self.pid, name=r.name, pos=pos, head=f"{rid}#0",
                      head_relation=r.head.relation, is_delete=r.delete, time=r.time,
                      component=r.component, term_count=1 + len(r.body), line=line, col=col,
                      origin=f"{self.pid}:{r.origin}" if r.origin else None)
        self.atom(rid, 0, r.head)
        for i, lit in enumerate(r.body, start=1):
            tid = f"{rid}#{i}"
            line, col = _line_col(lit.span)
            if isinstance(lit, (Atom, NamedAtom)):
                self.atom(rid, i, lit, self.methods.get((r.name, i)), self.copies.get((r.name, i)))
            elif isinstance(lit, Select):
                self.rows.add("selection", program=self.pid, id=tid, rule=rid, pos=i,
                              expr=self.expr(rid, tid, tid, lit.expr), line=line, col=col)
            elif isinstance(lit, Assign):
                self.rows.add("assignment", program=self.pid, id=tid, rule=rid, pos=i,
                              var=lit.var.name, expr=self.expr(rid, tid, tid, lit.expr), line=line, col=col)
            else:
                _fail("not-encodable", f"cannot store a {type(lit).__name__} body literal "
                      "(the parser lowers body aggregates to atoms)", lit)

    def atom(self, owner: str, pos: int, a, method=None, copy=None) -> str:
        if not isinstance(a, Atom):
            _fail("not-encodable", f"cannot store a {type(a).__name__} (named fields must be "
                  "resolved to positions first)", a)
        pid = f"{owner}#{pos}"
        self.mention(a.relation, a.arity, a.span)
        line, col = _line_col(a.span)
        self.rows.add("predicate", program=self.pid, id=pid, rule=owner, pos=pos,
                      relation=a.relation, negated=a.negated, delta=a.delta, arity=a.arity,
                      location=a.location, named=a.named, method=method, copy=copy, line=line, col=col)
        for i, t in enumerate(a.args):
            self.argument(owner, pid, i, t)
        return pid

    def argument(self, rule_id: str, pid: str, pos: int, t) -> None:
        row = dict(program=self.pid, predicate=pid, pos=pos)
        if isinstance(t, Var):
            row.update(kind="var", var=t.name)
        elif isinstance(t, Wildcard):
            row.update(kind="wildcard")
        elif isinstance(t, Const):
            row.update(kind="const", value=const_text(t), type=t.type)
        elif isinstance(t, Aggregate):
            row.update(kind="agg", agg=t.func)
            if isinstance(t.arg, Var):
                row.update(var=t.arg.name)
            elif t.arg is not None:
                row.update(expr=self.expr(rule_id, pid, f"{pid}.{pos}", t.arg))
        else:
            row.update(kind="expr", expr=self.expr(rule_id, pid, f"{pid}.{pos}", t))
        self.rows.add("argument", **row)

    def expr(self, rule_id: str, term: str, owner: str, t) -> str:
        root = f"{owner}.e"
        self._node(rule_id, term, root, None, None, t)
        return root

    def _node(self, rule_id: str, term: str, nid: str, parent, seq, t) -> None:
        row = dict(program=self.pid, id=nid, rule=rule_id, term=term, parent=parent, seq=seq)
        children = ()
        if isinstance(t, Var):
            row.update(kind="var", name=t.name)
        elif isinstance(t, Wildcard):
            row.update(kind="wildcard")
        elif isinstance(t, Const):
            row.update(kind="const", value=const_text(t), type=t.type)
        elif isinstance(t, Call):
            row.update(kind="call", name=t.func)
            children = t.args
        elif isinstance(t, BinOp):
            row.update(kind="op", name=t.op)
            children = (t.left, t.right)
        elif isinstance(t, UnOp):
            row.update(kind="op", name=t.op)
            children = (t.arg,)
        elif isinstance(t, Cond):
            row.update(kind="cond")
            children = (t.test, t.then, t.other)
        elif isinstance(t, ListExpr):
            row.update(kind="list")
            children = t.items
        else:
            _fail("not-encodable", f"a {type(t).__name__} cannot appear inside an expression", t,
                  "aggregates belong at the top level of a head argument")
        self.rows.add("expression", **row)
        for i, c in enumerate(children):
            self._node(rule_id, term, f"{nid}.{i}", nid, i, c)

    def fact(self, pos: int, f: Fact) -> None:
        fid = f"{self.pid}:fact{pos}"
        a = f.atom
        self.mention(a.relation, a.arity, a.span)
        line, col = _line_col(f.span)
        self.rows.add("fact", id=fid, program=self.pid, pos=pos, relation=a.relation, arity=a.arity,
                      location=a.location, component=f.component, line=line, col=col)
        for i, t in enumerate(a.args):
            if not isinstance(t, Const):
                _fail("not-encodable", f"fact argument {i + 1} of {a.relation} is not a constant",
                      f, "facts hold constants only; write a rule to derive tuples")
            self.rows.add("fact_value", program=self.pid, fact=fid, pos=i, value=const_text(t), type=t.type)

    def query(self, pos: int, q: Query) -> None:
        qid = f"{self.pid}:query{pos}"
        line, col = _line_col(q.span)
        self.rows.add("query", id=qid, program=self.pid, pos=pos, predicate=self.atom(qid, 0, q.atom),
                      line=line, col=col)

    def statistics(self, s: Plan) -> None:
        from evita.bootstrap.syntax import statistic_key

        for key, value in s.params:
            metric, col = statistic_key(key)
            self.rows.add("statistic", program=self.pid, relation=s.name, col=col, metric=metric, value=float(value))

    def flow_op(self, s: Plan) -> None:
        from evita.bootstrap.flow import op_row

        params = dict((k, _text(v)) for k, v in s.params)
        row = op_row(self.pid, s.name, params.get("op"), params.get("detail"), params.get("relation"),
                     params.get("rule"), params.get("graph", "planned"))
        self.rows.add("flow_op", **row)
        for seq, key in enumerate(("in0", "in1")):
            if key in params:
                self.rows.add("flow_input", program=self.pid, op=row["id"], seq=seq, input=f"{self.pid}:{params[key]}")

    def io(self, pos: int, d: IODirective) -> None:
        info = self.mention(d.relation, None, d.span)
        if d.direction in ("input", "output"):  # several are allowed: `.output R` to two files
            info[d.direction] = True
        line, col = _line_col(d.span)
        self.rows.add("io", program=self.pid, relation=d.relation, direction=d.direction, pos=pos,
                      line=line, col=col)
        for seq, (key, value) in enumerate(d.params):
            self.rows.add("io_param", program=self.pid, relation=d.relation, direction=d.direction,
                          key=key, value=_text(value), seq=seq, pos=pos)

    def type_decl(self, pos: int, t: TypeDecl) -> None:
        line, col = _line_col(t.span)
        self.rows.add("type_decl", program=self.pid, name=t.name, kind=t.kind, pos=pos, line=line, col=col)
        for seq, base in enumerate(t.bases):
            field = t.fields[seq] if seq < len(t.fields) else ""
            self.rows.add("type_base", program=self.pid, type=t.name, seq=seq, base=base, field=field)

    def component(self, pos: int, c: Component) -> None:
        line, col = _line_col(c.span)
        self.rows.add("component", program=self.pid, name=c.name, pos=pos, line=line, col=col)
        for seq, a in enumerate(c.addresses):
            self.rows.add("component_address", program=self.pid, component=c.name, seq=seq,
                          address=_text(a))


def _text(v) -> str:
    return const_text(v) if isinstance(v, Const) else str(v)


def _sys_table(name: str):
    if not name.startswith("sys::"):
        return None
    try:
        return schema.table(name)
    except KeyError:
        return None
