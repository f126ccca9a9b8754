"""Applying a stage's derived edits to catalog rows: the stage primitives.

A stage says only its rewrite; the bookkeeping every rewrite needs lives here, once,
driven by the ownership the schema declares (`Col.owner`, `catalog/schema.py`):

- **delete cascades along ownership**: deleting a rule deletes its predicates,
  selections and assignments, their arguments and expression nodes;
- **copy a rule or a term** under a new id: everything it owns comes along, its ids
  rebased from the old owner's id onto the new one (`reprefix`), no column listed;
- **update by key**: a named-field head that names a row's key and leaves other fields
  out sets the fields it names on that row; with no such row it inserts one, the fields
  left out null.

The order: deletions (on the catalog as the stage read it), copies (of rows as the stage
read them, so a stage may copy a rule and delete the original), insertions (an inserted
row replaces the row with its key), updates.

>>> from evita.catalog.rows import CatalogRows
>>> rows = CatalogRows()
>>> rows.add("rule", id="p:r1", program="p", name="r1", head="p:r1#0", term_count=2)
>>> rows.add("predicate", id="p:r1#0", rule="p:r1", pos=0, relation="a")
>>> rows.add("predicate", id="p:r1#1", rule="p:r1", pos=1, relation="b")
>>> rows.add("argument", predicate="p:r1#1", pos=0, kind="expr", expr="p:r1#1.0.e")
>>> rows.add("expression", id="p:r1#1.0.e", rule="p:r1", term="p:r1#1", kind="var", name="X")
>>> edits = Edits(copies=[("p:r1", "p:r1_c", "r1_c")], deletes={"rule": [pattern("rule", id="p:r1")]})
>>> new = apply(rows, edits)
>>> sorted(r[0] for r in new["rule"]), sorted(r[1] for r in new["predicate"])
(['p:r1_c'], ['p:r1_c#0', 'p:r1_c#1'])
>>> [(e["id"], e["term"], e["rule"]) for e in new.dicts("expression")]
[('p:r1_c#1.0.e', 'p:r1_c#1', 'p:r1_c')]
>>> new.dicts("rule")[0]["origin"]
'p:r1'
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import schema
from .rows import CatalogRows

TERM_TABLES = ("predicate", "selection", "assignment")


@dataclass
class Edits:
    """What a stage derived, as the scheduler applies it."""
    inserts: dict = field(default_factory=dict)  # table -> [row]
    deletes: dict = field(default_factory=dict)  # table -> [pattern: row with None for "any"]
    updates: dict = field(default_factory=dict)  # table -> [(row, named column names)]
    copies: list = field(default_factory=list)  # (rule id, new rule id, new name)
    term_copies: list = field(default_factory=list)  # (term id, new rule id, new position)


def pattern(table: str, **fields) -> tuple:
    """A deletion pattern: the named fields, None (anything) elsewhere."""
    return tuple(fields.get(c) for c in schema.table(table).column_names)


def reprefix(value, old: str, new: str):
    """`value` with its prefix `old` replaced by `new` (ids are built from their owner's)."""
    if isinstance(value, str) and value.startswith(old):
        return new + value[len(old):]
    return value


def apply(rows: CatalogRows, edits: Edits) -> CatalogRows:
    new = CatalogRows({k: list(v) for k, v in rows.items()})
    _delete(new, edits.deletes)
    copied = CatalogRows()
    owned = _Owned(rows) if edits.copies or edits.term_copies else None
    for rule, to, name in edits.copies:
        _copy_rule(owned, copied, rule, to, name)
    for term, rule, pos in edits.term_copies:
        _copy_term(owned, copied, term, rule, pos)
    for table, inserted in list(copied.items()) + list(edits.inserts.items()):
        _upsert(new, table, inserted)
    for table, updates in edits.updates.items():
        _update(new, table, updates)
    return new.sorted()


# ---------------------------------------------------------------- delete, cascading

def _delete(rows: CatalogRows, patterns_by_table: dict) -> None:
    gone: dict = {}  # table -> ids deleted
    for table, patterns in patterns_by_table.items():
        if patterns:
            keep, drop = _split(rows.get(table, []), _matcher(patterns))
            rows[table] = keep
            _note(gone, table, drop)
    changed = bool(gone)
    while changed:  # ownership is a tree a few levels deep: predicate -> argument -> ...
        changed = False
        for t in schema.TABLES:
            for c in t.owner_columns:
                dead = set().union(*(gone.get(o, set()) for o in c.owner))
                if not dead or not rows.get(t.name):
                    continue
                i = t.column_names.index(c.name)
                keep, drop = _split(rows[t.name], lambda r: r[i] in dead)
                if drop:
                    rows[t.name] = keep
                    changed = _note(gone, t.name, drop) or changed


def _split(rows: list, dead) -> tuple:
    keep, drop = [], []
    for r in rows:
        (drop if dead(r) else keep).append(r)
    return keep, drop


def _note(gone: dict, table: str, dropped: list) -> bool:
    """Remember the ids of deleted rows (of tables keyed by `id`); True if any is new."""
    names = schema.table(table).column_names
    if "id" not in names or not dropped:
        return False  # rows without an id own nothing
    i = names.index("id")
    ids = gone.setdefault(table, set())
    before = len(ids)
    ids.update(r[i] for r in dropped)
    return len(ids) > before


def _matches(row: tuple, pattern: tuple) -> bool:
    return all(p is None or p == v for v, p in zip(row, pattern))


def _matcher(patterns: list):
    """Whether a row matches any of `patterns` (`_matches`), as one set look-up per shape
    of pattern (which fields it names): a stage deleting a row per rule of a large
    program would otherwise compare every row with every pattern."""
    shapes: dict = {}  # positions named -> the set of values named there
    try:
        for p in patterns:
            named = tuple(i for i, v in enumerate(p) if v is not None)
            shapes.setdefault(named, set()).add(tuple(p[i] for i in named))
    except TypeError:  # a pattern naming a list: compared one by one
        return lambda row: any(_matches(row, p) for p in patterns)

    def matches(row: tuple) -> bool:
        try:
            return any(tuple(row[i] for i in named) in values for named, values in shapes.items())
        except TypeError:  # the row holds a list where a pattern names a value
            return any(_matches(row, p) for p in patterns)
    return matches


# ---------------------------------------------------------------- copies

class _Owned:
    """The rows a copy reads, grouped once by their owner: a stage that copies every rule
    of a large program (delta, magic sets) would otherwise scan each table per copy."""

    def __init__(self, rows: CatalogRows):
        self.rules = _grouped(rows.dicts("rule"), "id")
        self.terms_of_rule = {t: _grouped(rows.dicts(t), "rule") for t in TERM_TABLES}
        self.terms = {t: _grouped(rows.dicts(t), "id") for t in TERM_TABLES}
        self.arguments = _grouped(rows.dicts("argument"), "predicate")
        self.expressions = _grouped(rows.dicts("expression"), "term")


def _grouped(dicts: list, column: str) -> dict:
    """column value -> its rows, in the order the table holds them."""
    out: dict = {}
    for d in dicts:
        out.setdefault(d[column], []).append(d)
    return out


def _copy_rule(owned: _Owned, out: CatalogRows, rule: str, to: str, name: str) -> None:
    for r in owned.rules.get(rule, ()):
        out.add("rule", **{**r, "id": to, "name": name, "head": reprefix(r["head"], rule, to),
                           "origin": r["origin"] or rule})
    for table in TERM_TABLES:
        for t in owned.terms_of_rule[table].get(rule, ()):
            _copy_term(owned, out, t["id"], to, t["pos"])


def _copy_term(owned: _Owned, out: CatalogRows, term: str, rule: str, pos: int) -> None:
    to = f"{rule}#{pos}"
    for table in TERM_TABLES:
        for t in owned.terms[table].get(term, ()):
            moved = {**t, "id": to, "rule": rule, "pos": pos}
            if "expr" in moved:
                moved["expr"] = reprefix(moved["expr"], term, to)
            out.add(table, **moved)
    for a in owned.arguments.get(term, ()):
        out.add("argument", **{**a, "predicate": to, "expr": reprefix(a["expr"], term, to)})
    for e in owned.expressions.get(term, ()):
        out.add("expression", **{**e, "id": reprefix(e["id"], term, to), "rule": rule, "term": to,
                                 "parent": reprefix(e["parent"], term, to)})


# ---------------------------------------------------------------- insert, update

def _key_of(table: str):
    decl = schema.table(table)
    idx = [decl.column_names.index(k) for k in decl.key]
    return lambda r: tuple(r[i] for i in idx)


def _upsert(rows: CatalogRows, table: str, inserted: list) -> None:
    key = _key_of(table)
    by_key = {key(r): r for r in rows.get(table, [])}
    for r in inserted:
        by_key[key(r)] = tuple(r)
    rows[table] = list(by_key.values())


def _update(rows: CatalogRows, table: str, updates: list) -> None:
    key = _key_of(table)
    names = schema.table(table).column_names
    by_key = {key(r): r for r in rows.get(table, [])}
    for row, fields in updates:
        old = by_key.get(key(row))
        if old is None:
            by_key[key(row)] = tuple(row)
            continue
        by_key[key(row)] = tuple(v if c in fields else o for c, v, o in zip(names, row, old))
    rows[table] = list(by_key.values())
