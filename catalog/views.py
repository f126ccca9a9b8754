"""The catalog's views: read-only tables derived from the stored ones (`schema.VIEWS`).

A stage reads a view as `sys::NAME` like any catalog table; the scheduler computes its
rows from the catalog version the stage reads (`bootstrap/stage.py`, wherever a stage,
its trigger or the integrity checks get their snapshot), so a view is never stale and
never stored. A view answers, in linear time and once per catalog version, a question
several stages would otherwise each answer with a fixpoint of their own.

`scc`: the strongly connected components of the relation graph of one timestep. The
stages asked "is H recursive, are B and H mutually recursive" by closing the graph
(`feeds(B, H) :- feeds(B, M), feeds(M, H)`): on a chain of n relations that fixpoint
takes n rounds and holds n²/2 pairs. Tarjan's algorithm finds the same components in
one pass over the rules (Soufflé computes them once too: its SCCGraph analysis).

>>> from evita.catalog.rows import CatalogRows
>>> rows = CatalogRows()
>>> rows.add("rule", id="p:r1", program="p", head_relation="tc")
>>> rows.add("rule", id="p:r2", program="p", head_relation="tc")
>>> rows.add("rule", id="p:r3", program="p", head_relation="seen", time="next")
>>> for r, pos, rel in [("p:r1", 1, "e"), ("p:r2", 1, "tc"), ("p:r2", 2, "e"), ("p:r3", 1, "seen")]:
...     rows.add("predicate", program="p", id=f"{r}#{pos}", rule=r, pos=pos, relation=rel)
>>> for row in view_rows("scc", rows): print(row)
('p', 'e', 'e', False, 1, 0)
('p', 'seen', 'seen', False, 1, 0)
('p', 'tc', 'tc', True, 1, 1)

`term_text`: the canonical text of every term and expression node, so a stage can ask
"are these two atoms the same atom" by comparing texts instead of walking argument rows
and expression trees pairwise. Printed by the printer `evita print` uses, from the rows
the decoder reads (`decode.Terms`): one printer. `shape` numbers the variables by first
occurrence, for "the same up to renaming":

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.encode import encode
>>> rows = encode(parse_program('r1 a(X) :- b(X, Y), notin c(Y, _), Y > X + 1.', "t.olg", "t"))
>>> for row in view_rows("term_text", rows): print(row)
('t', 't:r1#0', 't:r1', 'atom', 'a(X)', 'a($0)')
('t', 't:r1#1', 't:r1', 'atom', 'b(X, Y)', 'b($0, $1)')
('t', 't:r1#2', 't:r1', 'atom', 'notin c(Y, _)', 'notin c($0, _)')
('t', 't:r1#3', 't:r1', 'selection', 'Y > X + 1', '$0 > $1 + 1')
('t', 't:r1#3.e', 't:r1', 'expression', 'Y > X + 1', '$0 > $1 + 1')
('t', 't:r1#3.e.0', 't:r1', 'expression', 'Y', '$0')
('t', 't:r1#3.e.1', 't:r1', 'expression', 'X + 1', '$0 + 1')
('t', 't:r1#3.e.1.0', 't:r1', 'expression', 'X', '$0')
('t', 't:r1#3.e.1.1', 't:r1', 'expression', '1', '1')
"""
from __future__ import annotations

import dataclasses

from evita.bootstrap.syntax import Const, Var

from . import schema
from .decode import Terms
from .printer import format_atom, format_expr, format_literal
from .rows import CatalogRows

# A @next or @async rule's head belongs to a later timestep: it closes no cycle of this
# one's fixpoint (as `rule.time` says; null for an ordinary rule).
LATER = ("next", "async")


def view_rows(name: str, rows: CatalogRows) -> list:
    """The rows of view `name` (bare or `sys::` name) over the stored tables in `rows`,
    in the view's column order, sorted."""
    bare = schema.table(name).name
    return _COMPUTE[bare](rows)


def scc_rows(rows: CatalogRows) -> list:
    """`sys::scc`: (program, relation, scc, recursive, size, depth) per relation."""
    nodes, reads = relation_graph(rows)
    out = []
    for program in sorted(nodes):
        out += _components(program, sorted(nodes[program]), reads.get(program, {}))
    return sorted(out)


def relation_graph(rows: CatalogRows) -> tuple:
    """program -> the relation names its rules and declarations name, and program ->
    relation H -> the relations B a rule of H reads in this timestep (H's edges, reversed:
    B feeds H)."""
    rule = _columns("rule", "id", "program", "head_relation", "time")
    pred = _columns("predicate", "program", "rule", "pos", "relation")
    rel = _columns("relation", "program", "name")
    nodes: dict = {}
    reads: dict = {}
    head_of = {}  # rule id -> (program, head relation, reads in this timestep)
    for r in rows.get("rule", []):
        rid, program, head, time = (r[i] for i in rule)
        head_of[rid] = (program, head, time not in LATER)
        nodes.setdefault(program, set()).add(head)
    for p in rows.get("predicate", []):
        program, rid, pos, relation = (p[i] for i in pred)
        owner = head_of.get(rid)
        if owner is None:  # a query's atom: no rule, no edge
            continue
        nodes.setdefault(program, set()).add(relation)
        if pos > 0 and owner[2]:
            reads.setdefault(program, {}).setdefault(owner[1], set()).add(relation)
    for r in rows.get("relation", []):
        program, name = (r[i] for i in rel)
        nodes.setdefault(program, set()).add(name)
    return nodes, reads


def _columns(table: str, *names) -> tuple:
    cols = schema.table(table).column_names
    return tuple(cols.index(n) for n in names)


def _components(program: str, nodes: list, reads: dict) -> list:
    """Tarjan's algorithm, iterative (a chain of thousands of relations would overflow
    Python's stack), over the `reads` edges: a component comes out after every component
    it reads, so its depth is known from theirs when it does."""
    index, low, on_stack, stack = {}, {}, set(), []
    depth_of = {}  # member -> its component's depth, once the component is out
    out = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(reads.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for b in edges:
                if b not in index:
                    index[b] = low[b] = len(index)
                    stack.append(b)
                    on_stack.add(b)
                    work.append((b, iter(sorted(reads.get(b, ())))))
                    break
                if b in on_stack:
                    low[node] = min(low[node], index[b])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        members.append(m)
                        if m == node:
                            break
                    out += _component_rows(program, members, reads, depth_of)
    return out


def _component_rows(program: str, members: list, reads: dict, depth_of: dict) -> list:
    inside = set(members)
    below = [depth_of[b] for m in members for b in reads.get(m, ()) if b not in inside]
    depth = max(below) + 1 if below else 0
    recursive = len(members) > 1 or any(m in reads.get(m, ()) for m in members)
    name = min(members)
    for m in members:
        depth_of[m] = depth
    return [(program, m, name, recursive, len(members), depth) for m in members]


def term_text_rows(rows: CatalogRows) -> list:
    """`sys::term_text`: (program, id, rule, kind, text, shape) per term and expression node."""
    terms = Terms({t: rows.dicts(t) for t in SOURCES["term_text"]})
    out = []
    for p in terms.t["predicate"]:  # heads and query atoms too; `literals` has the body only
        atom = dataclasses.replace(terms.atom(p), named=False)  # positional, whatever was written
        out.append(_text_row(p["program"], p["id"], p["rule"], "atom", atom, format_atom))
    for table in ("selection", "assignment"):  # the kind is the table's name
        for r in terms.t[table]:
            out.append(_text_row(r["program"], r["id"], r["rule"], table, terms.term(table, r), format_literal))
    for n in terms.t["expression"]:
        out.append(_text_row(n["program"], n["id"], n["rule"], "expression", terms.expr(n["id"]), format_expr))
    return sorted(out)


def _text_row(program: str, term_id: str, rule: str, kind: str, term, fmt) -> tuple:
    return (program, term_id, rule, kind, fmt(term), fmt(numbered(term)))


def numbered(term):
    """`term` with its variables renamed $0, $1, ... in the order they are printed (the
    syntax classes list their fields in that order: an atom's arguments left to right,
    an operator's left side first, an assignment's variable before its expression)."""
    names: dict = {}

    def walk(t):
        cls = type(t)
        if cls is Var:
            return Var(names.setdefault(t.name, f"${len(names)}"))
        if cls is tuple:
            return tuple(walk(x) for x in t)
        fields = _fields(cls)
        return cls(*[walk(getattr(t, f)) for f in fields]) if fields else t

    return walk(term)


_FIELDS: dict = {}  # syntax class -> its fields but the span (which printing never reads)


def _fields(cls) -> tuple:
    """The fields a copy is built from, in order: the span is each class's last field and
    keeps its default; a constant or a leaf value is kept as it is."""
    if cls not in _FIELDS:
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) and cls is not Const else []
        _FIELDS[cls] = tuple(names[:-1]) if names[-1:] == ["span"] else ()
    return _FIELDS[cls]


_COMPUTE = {"scc": scc_rows, "term_text": term_text_rows}
SOURCES = {"scc": ("rule", "predicate", "relation"),  # the stored tables each view is derived from
           "term_text": ("predicate", "argument", "selection", "assignment", "expression")}
