"""Applying a stage's derived edits to catalog rows: the stage primitives.

A stage says only its rewrite; the bookkeeping every rewrite needs lives here, once,
driven by the ownership the schema declares (`Col.owner`, `catalog/schema.py`):

- **delete cascades along ownership**: deleting a rule deletes its predicates,
  selections and assignments, their arguments and expression nodes;
- **copy a rule or a term** under a new id: everything it owns comes along, its ids
  rebased from the old owner's id onto the new one (`reprefix`), no column listed;
- **update by key**: a named-field head that names a row's key and leaves other fields
  out sets the fields it names on that row; with no such row it inserts one, the fields
  left out null;
- **remove a term** and close the gap: the rule's other terms keep their ids and move
  up to positions 0..n-1, `term_count` follows;
- **remove a column** of a relation: from its declaration, key and partitioning, from
  every atom and fact of it, later columns moving down;
- **move a row to a new key**, every other field carried along (columns the stage
  never names too); a moved id is followed by the rows it owns (their ids rebased) and
  by the columns naming it (`schema.ref`).

The order: deletions and removed terms (on the catalog as the stage read it), moves,
copies (of rows as the stage read them, so a stage may copy a rule and delete the
original), insertions (an inserted row replaces the row with its key), updates, then the
gaps left by removed terms close and removed columns go.

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
    term_removals: list = field(default_factory=list)  # (term id,)
    column_removals: list = field(default_factory=list)  # (relation id, column position)
    moves: dict = field(default_factory=dict)  # table -> [key + new key (None: that key column kept)]


class EditError(Exception):
    """A primitive the catalog cannot apply (a term that does not exist, a key taken):
    `primitive` names it (`remove_term`, `move::argument`), `at` the catalog row."""

    def __init__(self, primitive: str, message: str, at=None):
        super().__init__(message)
        self.primitive, self.message, self.at = primitive, message, at


def pattern(table: str, **fields) -> tuple:
    """A deletion pattern: the named fields, None (anything) elsewhere."""
    return tuple(fields.get(c) for c in schema.table(table).column_names)


def reprefix(value, old: str, new: str):
    """`value` with its prefix `old` replaced by `new` (ids are built from their owner's)."""
    if isinstance(value, str) and value.startswith(old):
        return new + value[len(old):]
    return value


def apply(rows: CatalogRows, edits: Edits) -> CatalogRows:
    """The edits applied to `rows` (a new catalog); raises EditError."""
    new = CatalogRows({k: list(v) for k, v in rows.items()})
    closing = _rules_of_removed_terms(rows, [t for (t,) in edits.term_removals])
    deletes = {t: list(ps) for t, ps in edits.deletes.items()}
    for (term,) in edits.term_removals:
        for table in TERM_TABLES:
            deletes.setdefault(table, []).append(pattern(table, id=term))
    _delete(new, deletes)
    for table, moves in sorted(edits.moves.items()):
        _move(new, table, moves)
    copied = CatalogRows()
    owned = _Owned(rows) if edits.copies or edits.term_copies else None
    for rule, to, name in edits.copies:
        _copy_rule(owned, copied, rule, to, name)
    slots = _Slots(new)
    for term, rule, pos in edits.term_copies:
        _copy_term(owned, copied, term, rule, pos, slots.id_for(rule, pos))
    _delete(new, slots.replaced)
    for table, inserted in list(copied.items()) + list(edits.inserts.items()):
        _upsert(new, table, inserted)
    for table, updates in edits.updates.items():
        _update(new, table, updates)
    _close_gaps(new, closing)
    # Positions are those of the catalog the stage read: a relation's highest goes first,
    # so removing it leaves the lower ones where the stage saw them.
    for relation, pos in sorted(edits.column_removals, key=lambda removal: (removal[0], -removal[1])):
        _remove_column(new, relation, pos)
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
    heads = [t["id"] for t in owned.terms_of_rule["predicate"].get(rule, ()) if t["pos"] == 0]
    for r in owned.rules.get(rule, ()):
        out.add("rule", **{**r, "id": to, "name": name, "head": f"{to}#0" if heads else r["head"],
                           "origin": r["origin"] or rule})
    for table in TERM_TABLES:
        for t in owned.terms_of_rule[table].get(rule, ()):
            _copy_term(owned, out, t["id"], to, t["pos"], f"{to}#{t['pos']}")


class _Slots:
    """The id a term copied to position `pos` of `rule` gets: `rule#pos`, unless a term
    that stays holds that id at another position (the rule was reordered: system_r
    moves positions, never ids), or another copy took it; then `rule#pos~N`, the
    least N free. A term that stays at that very id and position is replaced (its
    rows go, with what it owns), as an insert replaces the row with its key."""

    def __init__(self, rows: CatalogRows):
        self.held = {r["id"]: (t, r["rule"], r["pos"]) for t in TERM_TABLES for r in rows.dicts(t)}
        self.claimed: set = set()
        self.replaced: dict = {}  # table -> deletion patterns of the terms copied over

    def id_for(self, rule: str, pos: int) -> str:
        wanted = f"{rule}#{pos}"
        to, n = wanted, 0
        while to in self.claimed or (to in self.held and self.held[to][1:] != (rule, pos)):
            n += 1
            to = f"{wanted}~{n}"
        if to in self.held:
            table = self.held[to][0]
            self.replaced.setdefault(table, []).append(pattern(table, id=to))
        self.claimed.add(to)
        return to


def _copy_term(owned: _Owned, out: CatalogRows, term: str, rule: str, pos: int, to: str) -> None:
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


# ---------------------------------------------------------------- remove a term, close the gap

def _rules_of_removed_terms(rows: CatalogRows, terms: list) -> set:
    """The rules whose terms `terms` are (in the catalog the stage read); their gaps close
    after the edits. A term that is not there, a head or a query's atom cannot go."""
    where = {r["id"]: (t, r) for t in TERM_TABLES for r in rows.dicts(t)}
    rules = {r["id"] for r in rows.dicts("rule")}
    out = set()
    for term in terms:
        if term not in where:
            raise EditError("remove_term", f"stage::remove_term({term!r}): no term has that id", term)
        table, row = where[term]
        if row["rule"] not in rules:
            raise EditError("remove_term", f"stage::remove_term({term!r}) names the atom of a query", term)
        if row["pos"] == 0:
            raise EditError("remove_term", f"stage::remove_term({term!r}) names the head of rule {row['rule']}: "
                            "delete the rule instead (delete sys::rule{id: R})", term)
        out.add(row["rule"])
    return out


def _close_gaps(rows: CatalogRows, rules: set) -> None:
    """The terms of `rules` at positions 0..n-1 in the order they hold, term_count n."""
    if not rules:
        return
    at: dict = {}  # rule -> [(pos, id, table, row index)]
    for table in TERM_TABLES:
        names = schema.table(table).column_names
        i_rule, i_pos, i_id = names.index("rule"), names.index("pos"), names.index("id")
        for k, r in enumerate(rows.get(table, [])):
            if r[i_rule] in rules:
                at.setdefault(r[i_rule], []).append((r[i_pos], r[i_id], table, k))
    for rule, terms in at.items():
        for new_pos, (pos, _, table, k) in enumerate(sorted(terms, key=lambda t: (t[0], t[1]))):
            if new_pos != pos:
                rows[table][k] = _with(table, rows[table][k], pos=new_pos)
    names = schema.table("rule").column_names
    i_id = names.index("id")
    rows["rule"] = [_with("rule", r, term_count=len(at.get(r[i_id], ()))) if r[i_id] in rules else r
                    for r in rows.get("rule", [])]


def _with(table: str, row: tuple, **values) -> tuple:
    names = schema.table(table).column_names
    return tuple(values[c] if c in values else v for c, v in zip(names, row))


# ---------------------------------------------------------------- move a row to a new key

def move_columns(table: str) -> list:
    """The columns of `stage::move::T`: T's key, then `to_` + each key column (left out,
    null: that column keeps its value)."""
    key = schema.table(table).key
    return list(key) + [f"to_{k}" for k in key]


def _move(rows: CatalogRows, table: str, moves: list) -> None:
    """Each row of `table` with key `old` now has key `new`, its other fields as they
    were. A moved id renames the rows it owns (ids rebased) and every column naming it."""
    decl = schema.table(table)
    width = len(decl.key)
    key = _key_of(table)
    by_key = {key(r): r for r in rows.get(table, [])}
    moved: dict = {}  # old key -> new key
    for m in moves:
        old, to = tuple(m[:width]), tuple(t if t is not None else o for o, t in zip(m[:width], m[width:]))
        if old not in by_key:
            raise EditError(f"move::{table}", f"stage::move::{table} moves no row: {table} has no row with key "
                            f"{_shown(decl.key, old)}", old[0])
        if old in moved and moved[old] != to:
            raise EditError(f"move::{table}", f"stage::move::{table} moves the row {_shown(decl.key, old)} to two "
                            f"keys: {_shown(decl.key, moved[old])} and {_shown(decl.key, to)}", old[0])
        moved[old] = to
    if len(set(moved.values())) < len(moved):
        raise EditError(f"move::{table}", f"stage::move::{table} moves two rows to one key", None)
    key_idx = [decl.column_names.index(k) for k in decl.key]
    for old, to in moved.items():
        row = list(by_key.pop(old))
        for i, v in zip(key_idx, to):
            row[i] = v
        moved[old] = (to, tuple(row))
    for old, (to, row) in moved.items():
        if to in by_key:
            raise EditError(f"move::{table}", f"stage::move::{table} moves {_shown(decl.key, old)} to "
                            f"{_shown(decl.key, to)}, which another row holds: delete or move that one first",
                            old[0])
        by_key[to] = row
    rows[table] = list(by_key.values())
    if decl.key == ("id",):
        _rename_ids(rows, {(table, old[0]): to[0] for old, (to, _) in moved.items() if old != to})


def _shown(key: tuple, values: tuple) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in zip(key, values)) + "}"


def _rename_ids(rows: CatalogRows, renamed: dict) -> None:
    """(table, old id) -> new id, for the moved rows; the rows they own (transitively)
    follow, their ids rebased when built from the owner's (`p:r1#1.0.e` under `p:r1#1`);
    then every id, owner and reference column holding a renamed id says the new one."""
    todo = list(renamed.items())
    while todo:
        (owner_table, old), new = todo.pop()
        for t in schema.TABLES:
            if "id" not in t.column_names:
                continue
            i_id = t.column_names.index("id")
            for c in t.owner_columns:
                if owner_table not in c.owner:
                    continue
                i = t.column_names.index(c.name)
                for r in rows.get(t.name, []):
                    if r[i] == old and (t.name, r[i_id]) not in renamed:
                        to = reprefix(r[i_id], old, new)
                        if to != r[i_id]:
                            renamed[(t.name, r[i_id])] = to
                            todo.append(((t.name, r[i_id]), to))
    for t in schema.TABLES:
        cols = [(i, (t.name,)) for i, c in enumerate(t.columns) if c.name == "id"]
        cols += [(t.column_names.index(c.name), c.owner + c.refers) for c in t.id_columns]
        if not rows.get(t.name):
            continue
        rows[t.name] = [_renamed_row(r, cols, renamed) for r in rows[t.name]]


def _renamed_row(row: tuple, cols: list, renamed: dict) -> tuple:
    out = list(row)
    for i, tables in cols:
        for target in tables:
            if (target, row[i]) in renamed:
                out[i] = renamed[(target, row[i])]
                break
    return tuple(out)


# ---------------------------------------------------------------- remove a column

def _remove_column(rows: CatalogRows, relation: str, pos: int) -> None:
    """Column `pos` of relation `relation` (its id) goes: from the declaration, the key
    and partitioning columns, the statistics, and every atom and fact of the relation;
    the columns after it move down one."""
    rel = next((r for r in rows.dicts("relation") if r["id"] == relation), None)
    if rel is None:
        raise EditError("remove_column", f"stage::remove_column({relation!r}, {pos}): no relation has that id",
                        relation)
    if not (isinstance(pos, int) and 0 <= pos < (rel["arity"] or 0)):
        raise EditError("remove_column", f"stage::remove_column({relation!r}, {pos}): {rel['name']} has "
                        f"columns 0..{(rel['arity'] or 0) - 1}", relation)
    name, program = rel["name"], rel["program"]
    rows["relation"] = _rows_where(rows, "relation", {relation}, lambda r: _with("relation", r, arity=rel["arity"] - 1))
    _drop_position(rows, "relation_column", lambda d: d["relation"] == relation, "pos", pos)
    indexes = {d["id"] for d in rows.dicts("index") if d["relation"] == relation}
    _drop_position(rows, "index_column", lambda d: d["index"] in indexes, "col", pos, seq="seq")
    _drop_position(rows, "partition_column", lambda d: d["relation"] == relation, "col", pos, seq="seq")
    _drop_position(rows, "statistic", lambda d: d["program"] == program and d["relation"] == name
                   and d["col"] is not None, "col", pos)
    atoms = {d["id"] for d in rows.dicts("predicate") if d["relation"] == name and d["program"] == program}
    gone_exprs = {d["expr"] for d in rows.dicts("argument") if d["predicate"] in atoms and d["pos"] == pos and d["expr"]}
    _drop_position(rows, "argument", lambda d: d["predicate"] in atoms, "pos", pos)
    _drop_subtrees(rows, gone_exprs)
    rows["predicate"] = _rows_where(rows, "predicate", atoms, lambda r: _narrower("predicate", r, pos))
    facts = {d["id"] for d in rows.dicts("fact") if d["relation"] == name and d["program"] == program}
    _drop_position(rows, "fact_value", lambda d: d["fact"] in facts, "pos", pos)
    rows["fact"] = _rows_where(rows, "fact", facts, lambda r: _narrower("fact", r, pos))


def _rows_where(rows: CatalogRows, table: str, ids: set, change) -> list:
    """The rows of `table`, those whose id is in `ids` changed by `change`."""
    i = schema.table(table).column_names.index("id")
    return [change(r) if r[i] in ids else r for r in rows.get(table, [])]


def _drop_position(rows: CatalogRows, table: str, mine, column: str, pos: int, seq: str = "") -> None:
    """Rows of `table` that `mine` picks: the one at `column` == pos goes, later ones move
    down; with `seq`, each owner's rows are renumbered 0.. in their order (a key's columns)."""
    names = schema.table(table).column_names
    out, picked = [], []
    for r in rows.get(table, []):
        d = dict(zip(names, r))
        if not mine(d):
            out.append(r)
        elif d[column] != pos:
            picked.append({**d, column: d[column] - 1 if d[column] > pos else d[column]})
    if seq:
        owner = [c for c in names if c not in (seq, column) and c != "program"][0]
        by_owner: dict = {}
        for d in sorted(picked, key=lambda d: d[seq]):
            by_owner.setdefault(d[owner], []).append(d)
        picked = [{**d, seq: i} for ds in by_owner.values() for i, d in enumerate(ds)]
    rows[table] = out + [tuple(d[c] for c in names) for d in picked]


def _drop_subtrees(rows: CatalogRows, roots: set) -> None:
    """Expression nodes under `roots` (an argument's expression that went)."""
    gone, changed = set(roots), bool(roots)
    while changed:
        changed = False
        for d in rows.dicts("expression"):
            if d["parent"] in gone and d["id"] not in gone:
                gone.add(d["id"])
                changed = True
    i = schema.table("expression").column_names.index("id")
    rows["expression"] = [r for r in rows.get("expression", []) if r[i] not in gone]


def _narrower(table: str, row: tuple, pos: int) -> tuple:
    """An atom or fact row one column narrower: its arity, and its @ column moved down
    (the @ column itself removed: no location)."""
    d = dict(zip(schema.table(table).column_names, row))
    location = d["location"]
    if location is not None:
        location = None if location == pos else location - 1 if location > pos else location
    return _with(table, row, arity=d["arity"] - 1, location=location)
