"""The order rows are shown and written in: by the columns' types, as Soufflé's output
is, never as text. Numbers (number, unsigned, float) numerically, symbols as text (by
code point, which is UTF-8's byte order), false before true, lists element by element;
nulls first (as Spark's ascending order). Column by column, left to right.

One definition, two forms: `row_key` for rows as Python values (the screen's previews
on both paths, `evita simulate`'s tables, `Result.rows`), `sorted_table` for Arrow
tables (the `-D` and `--output` files, millions of rows sorted in Arrow, not in Python).
A test checks that the two agree.

>>> sorted([(10, "b"), (2, "a"), (None, "z"), (2, "B"), (-1.5, "c")], key=row_key)
[(None, 'z'), (-1.5, 'c'), (2, 'B'), (2, 'a'), (10, 'b')]
"""
from __future__ import annotations

import math

# ranks of the kinds of value a column may hold (a column holds one kind, but nulls)
_NULL, _BOOL, _NUMBER, _NAN, _TEXT, _LIST, _OTHER = range(7)


def value_key(v):
    """The sort key of one value (see the module's order)."""
    if v is None:
        return (_NULL, 0)
    if isinstance(v, bool):
        return (_BOOL, v)
    if isinstance(v, (int, float)):
        return (_NAN, 0) if isinstance(v, float) and math.isnan(v) else (_NUMBER, v)
    if isinstance(v, str):
        return (_TEXT, v)
    if isinstance(v, (list, tuple)):
        return (_LIST, tuple(value_key(x) for x in v))
    return (_OTHER, str(v))


def row_key(row) -> tuple:
    """The sort key of a row (a tuple or list of Python values)."""
    return tuple(value_key(v) for v in row)


def sorted_table(table):
    """An Arrow table's rows in `row_key`'s order: sorted by Arrow on the typed columns
    (nulls first; NaN after the numbers, as `value_key`); a table with a column Arrow
    cannot order (a list, a struct) by `row_key` itself."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows < 2 or table.num_columns == 0:
        return table
    if any(pa.types.is_nested(c.type) for c in table.columns):
        rows = list(zip(*(c.to_pylist() for c in table.columns)))
        return table.take(pa.array(sorted(range(len(rows)), key=lambda i: row_key(rows[i])), pa.int64()))
    keys, columns = [], {}
    for i, col in enumerate(table.columns):
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        columns[f"z{i}"] = pc.is_valid(col)  # nulls first (false before true), in any pyarrow
        keys.append((f"z{i}", "ascending"))
        if pa.types.is_floating(col.type):  # NaN after every number
            columns[f"n{i}"] = pc.is_nan(col)
            keys.append((f"n{i}", "ascending"))
        columns[f"k{i}"] = col
        keys.append((f"k{i}", "ascending"))
    order = pc.sort_indices(pa.table(columns), sort_keys=keys)
    return table.take(order)
