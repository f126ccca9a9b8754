"""`CatalogRows`: catalog contents as plain Python data, table name -> list of tuples.

Tuples hold the table's columns in `catalog/schema.py` order, so the same rows feed the
Spark tables (`catalog.store`), the decoder and the tests. Helpers give a canonical order,
a comparable form without provenance columns, per-program selection and a readable diff.

>>> rows = CatalogRows()
>>> rows.add("stage_lattice", before="parse", after="delta")
>>> rows["stage_lattice"]
[('parse', 'delta')]
>>> rows.dicts("stage_lattice")
[{'before': 'parse', 'after': 'delta'}]
"""
from __future__ import annotations

import difflib

from .schema import BY_NAME, TABLES, table


def program_column(table_name: str):
    """The column naming a row's program: 'id' in `program`, else 'program'; None for
    tables shared by all programs (stage, stage_lattice)."""
    if table_name == "program":
        return "id"
    return "program" if "program" in BY_NAME[table_name].column_names else None


PER_PROGRAM = tuple(t.name for t in TABLES if program_column(t.name))


def _sort_key(row: tuple, idx) -> tuple:
    # None sorts first; (flag, value) pairs keep None out of comparisons with values.
    return tuple((True, row[i]) if row[i] is not None else (False, 0) for i in idx)


class CatalogRows(dict):
    """dict: table name -> list of row tuples. Missing known tables read as empty lists."""

    def __missing__(self, name):
        table(name)  # KeyError with the known names for a typo
        self[name] = []
        return self[name]

    def add(self, name: str, row: tuple = None, /, **values) -> None:
        """Append a row given as a tuple, or as keyword columns (missing ones are None)."""
        t = BY_NAME[name]
        if row is None:
            unknown = set(values) - set(t.column_names)
            if unknown:
                raise KeyError(f"{name} has no column(s) {sorted(unknown)}")
            row = tuple(values.get(c) for c in t.column_names)
        elif len(row) != len(t.columns):
            raise ValueError(f"{name} rows have {len(t.columns)} columns, got {len(row)}: {row!r}")
        self[name].append(row)

    def dicts(self, name: str) -> list:
        cols = BY_NAME[name].column_names
        return [dict(zip(cols, r)) for r in self.get(name, [])]

    def counts(self) -> dict:
        return {t.name: len(self.get(t.name, [])) for t in TABLES}

    def sorted(self) -> "CatalogRows":
        """Canonical form: every table present, rows by the table's `order`, then all columns."""
        out = CatalogRows()
        for t in TABLES:
            names = t.column_names
            idx = [names.index(c) for c in t.order] + list(range(len(names)))
            out[t.name] = sorted(self.get(t.name, []), key=lambda r: _sort_key(r, idx))
        return out

    def compared(self) -> dict:
        """Sorted rows without `source` columns (line, col, path, text): equal for two
        catalogs of the same program however its text was laid out."""
        out = {}
        for t in TABLES:
            keep = [i for i, c in enumerate(t.columns) if not c.source]
            rows = [tuple(r[i] for i in keep) for r in self.get(t.name, [])]
            out[t.name] = sorted(rows, key=lambda r: _sort_key(r, range(len(keep))))
        return out

    def programs(self) -> list:
        found = set()
        for name in PER_PROGRAM:
            i = BY_NAME[name].column_names.index(program_column(name))
            found.update(r[i] for r in self.get(name, []))
        return sorted(p for p in found if p is not None)

    def select(self, keep) -> "CatalogRows":
        """Rows of the programs for which `keep(program_id)` holds (shared tables kept whole)."""
        out = CatalogRows()
        for t in TABLES:
            col = program_column(t.name)
            rows = self.get(t.name, [])
            if col is None:
                out[t.name] = list(rows)
            else:
                i = t.column_names.index(col)
                out[t.name] = [r for r in rows if keep(r[i])]
        return out

    def only(self, program_id: str) -> "CatalogRows":
        return self.select(lambda p: p == program_id)

    def without(self, program_id: str) -> "CatalogRows":
        return self.select(lambda p: p != program_id)

    def merge(self, other: "CatalogRows") -> "CatalogRows":
        """Union of both (duplicate rows kept once)."""
        out = CatalogRows()
        for t in TABLES:
            seen = dict.fromkeys(self.get(t.name, []))
            seen.update(dict.fromkeys(other.get(t.name, [])))
            out[t.name] = list(seen)
        return out

    def replace_programs(self, other: "CatalogRows") -> "CatalogRows":
        """These rows with every program that `other` holds replaced by other's rows."""
        theirs = set(other.programs())
        return self.select(lambda p: p not in theirs).merge(other.select(lambda p: True))


def diff(a: CatalogRows, b: CatalogRows, compared: bool = True, context: int = 1) -> str:
    """A unified diff per table, for test failures. Empty when equal.

    >>> a = CatalogRows(); a.add("stage", name="parse", kind="bootstrap")
    >>> b = CatalogRows(); b.add("stage", name="parse", kind="datalog")
    >>> print(diff(a, b))
    --- stage (left)
    +++ stage (right)
    @@ -1 +1 @@
    -('parse', 'bootstrap')
    +('parse', 'datalog')
    """
    left = a.compared() if compared else a.sorted()
    right = b.compared() if compared else b.sorted()
    out = []
    for t in TABLES:
        la = [repr(r) for r in left.get(t.name, [])]
        lb = [repr(r) for r in right.get(t.name, [])]
        if la != lb:
            out += difflib.unified_diff(la, lb, f"{t.name} (left)", f"{t.name} (right)",
                                        n=context, lineterm="")
    return "\n".join(out)
