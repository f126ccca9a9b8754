"""Statistics of input relations, measured on Spark, for the cost-based stages.

`evita run` measures every input it read before the stages run, and `evita analyze`
measures and stores them for later compiles (like SQL's ANALYZE TABLE): rows, and per
column the distinct values, the least and greatest number and the nulls. All inputs
are measured in one Spark job (one single-row aggregate per relation, joined).

Distinct counts are HyperLogLog++ estimates (`approx_count_distinct`) with a relative
standard deviation of `DISTINCT_RSD`: within about ±10% with 95% confidence, and exact
for small counts. The stages read them as catalog rows of table `statistic`; a
program's facts get theirs from `stages/stats.dl`.
"""
from __future__ import annotations

import json

DISTINCT_RSD = 0.05
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")


def measure(frames: dict) -> list:
    """{relation: DataFrame} -> [(relation, col or None, metric, value)], in one job."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not frames:
        return []
    parts, wanted = [], []
    for k, (rel, df) in enumerate(sorted(frames.items())):
        cols = [F.count(F.lit(1)).alias(f"r{k}_rows")]
        wanted.append((rel, None, "cardinality", f"r{k}_rows"))
        for c, field in enumerate(df.schema.fields):
            col = F.col(f"`{field.name}`")
            cols.append(F.approx_count_distinct(col, DISTINCT_RSD).alias(f"r{k}_d{c}"))
            cols.append(F.count(F.when(col.isNull(), 1)).alias(f"r{k}_n{c}"))
            wanted += [(rel, c, "distinct", f"r{k}_d{c}"), (rel, c, "nulls", f"r{k}_n{c}")]
            if field.dataType.simpleString() in _NUMERIC:
                cols += [F.min(col).cast("double").alias(f"r{k}_lo{c}"), F.max(col).cast("double").alias(f"r{k}_hi{c}")]
                wanted += [(rel, c, "min", f"r{k}_lo{c}"), (rel, c, "max", f"r{k}_hi{c}")]
        parts.append(df.agg(F.to_json(F.struct(*cols)).alias("measured")))
    # One row of JSON per relation, unioned: one job (a cross join would broadcast each).
    row = {}
    for r in reduce(lambda a, b: a.unionAll(b), parts).collect():
        row.update(json.loads(r["measured"]))
    return [(rel, col, metric, float(row[name])) for rel, col, metric, name in wanted if row.get(name) is not None]


def measure_tables(tables: dict) -> list:
    """`measure` of pandas tables held in this process (`runtime/here.py`): the same
    metrics, distinct counts exact (a run in process never starts Spark to estimate them)."""
    out = []
    for rel, t in sorted(tables.items()):
        out.append((rel, None, "cardinality", float(len(t))))
        for c, name in enumerate(t.columns):
            col = t[name]
            out.append((rel, c, "distinct", float(col.nunique(dropna=True))))
            out.append((rel, c, "nulls", float(col.isna().sum())))
            if len(col) and col.dtype.kind in "iuf":
                out += [(rel, c, "min", float(col.min())), (rel, c, "max", float(col.max()))]
    return out


def catalog_rows(program_id: str, measured: list) -> list:
    """Rows of catalog table `statistic` (program, relation, col, metric, value)."""
    return [(program_id, rel, col, metric, value) for rel, col, metric, value in measured]


# ---------------------------------------------------------------- stored by `evita analyze`

def stored_path(program_id: str, warehouse=None):
    """A `catalog.fs.Loc` under the warehouse (local, or a shared filesystem)."""
    from .session import warehouse_dir

    return warehouse_dir(warehouse) / "statistics" / f"{program_id}.json"


def store(program_id: str, measured: list, warehouse=None):
    """Keep `measured` for later compiles of the program (replacing what was kept for
    the same relations); written to a temporary file, then renamed into place."""
    path = stored_path(program_id, warehouse)
    path.parent.mkdir()
    mine = {rel for rel, *_ in measured}
    kept = [m for m in load(program_id, warehouse) if m[0] not in mine] + list(measured)
    path.parent.drop_stale_temporaries()  # what an `analyze` killed while writing left
    path.write_atomically(json.dumps(sorted(kept, key=lambda m: (m[0], -1 if m[1] is None else m[1], m[2])),
                                     indent=1).encode())
    return path


def load(program_id: str, warehouse=None) -> list:
    path = stored_path(program_id, warehouse)
    if not path.exists():
        return []
    return [tuple(m) for m in json.loads(path.read_text())]


def merged(program_id: str, measured: list, warehouse=None) -> list:
    """What a compile starts from: the statistics measured now, and the stored ones of
    relations not measured now."""
    now = {rel for rel, *_ in measured}
    return [m for m in load(program_id, warehouse) if m[0] not in now] + list(measured)
