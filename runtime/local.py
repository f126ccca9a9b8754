"""Decomposable recursive strata: each partition runs to its own fixpoint in one task.

When the planner finds a linear recursion that carries a column unchanged from the
recursive atom to the head (`Stratum.local`), every tuple derived from a tuple stays in
that tuple's partition (seed 003: a discriminating set; seed 001: no coordination).
So the recursive relation is hash-partitioned on that column, the other relations are
replicated to every task, and `mapInArrow` runs a small semi-naive evaluator over
pandas inside each task (`runtime/columnar.py`, the same evaluator small strata
use on the driver). The driver pays for one Spark job instead of one per iteration
(about 2 s each on the 2-core machine: see docs/performance.md). A stratum the columnar
evaluator cannot run (lists, some built-ins, keyed or aggregated relations) runs in the
SQL loop instead (`supports`).
"""
from __future__ import annotations

import json
import time
from dataclasses import replace

from . import columnar, progress
from .dataflow import Dataflow, IterationStats, Stratum
from .session import parallelism


def supports(st: Stratum, dataflow: Dataflow) -> bool:
    store = dataflow.relations[st.local.relation]
    if store.aggregates or store.keys is not None:
        return False
    return columnar.unsupported(st.delta_rules, [store]) is None


def run_local_stratum(engine, st: Stratum) -> bool:
    """Evaluate a decomposable stratum; False when its column types need the SQL loop."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    before = engine._actions
    rel = st.local.relation
    s = engine.df.relations[rel]
    engine._stratum = st
    for name in st.relations:  # the stratum's non-recursive relations: once, lazily
        if name != rel:
            other = engine.df.relations[name]
            df = engine.combine(other, engine.seeds(name), engine.candidates(name, st.init_rules))
            engine.full[name] = engine.keep(df) if other.cached else df
    init = engine.combine(s, engine.seeds(rel), engine.candidates(rel, st.init_rules))
    types = [f.dataType.simpleString() for f in init.schema.fields]
    if any(t not in columnar.ARROW for t in types):
        return False
    tables = {}
    for name in st.local.replicated:  # replicated: shipped to every task with the function
        if name in engine.tables:  # the driver holds it already
            tables[name] = engine.tables[name]
        else:
            engine._actions += 1
            tables[name] = engine.full[name].toPandas()
    parts = parallelism(engine.spark)
    partitioned = init.repartition(max(1, parts), F.col(f"c{st.local.partition[0]}"))
    task = _Task(st, s, tables, types, engine.max_iterations)
    out = engine.keep(partitioned.mapInArrow(task, init.schema))
    engine.full[rel] = engine.delta[rel] = out
    engine._actions += 1
    try:
        n = out.count()
    except Exception as e:  # a task reached the iteration limit: say so as the SQL loop would
        sizes = _limit_reached(e)
        if sizes is None:
            raise
        engine.no_fixpoint(st, sizes)
    engine.stats.append(IterationStats(st.index, 0, engine._actions - before, {rel: n},
                                       time.perf_counter() - t0, mode="local"))
    if engine.reports(st):  # the iterations ran in the tasks: the driver knows only the end
        progress.note(f"every partition at its fixpoint in tasks: {rel} {n:,} tuples", relation=rel, tuples=n,
                      mode="local")
    return True


_LIMIT_MARK = "<evita: iteration limit>"


def _limit_reached(error: Exception):
    """The delta sizes a task reported on reaching the iteration limit, else None."""
    text = str(error)
    if _LIMIT_MARK not in text:
        return None
    return json.loads(text.split(_LIMIT_MARK)[1])


class _Task:
    """The function each task runs (pickled to the workers with the replicated tables)."""

    def __init__(self, st: Stratum, store, tables, types, max_iterations: int):
        self.stratum = replace(st, relations=(store.name,), init_rules=(), local=None)
        self.store = store
        self.tables = tables
        self.types = types
        self.max_iterations = max_iterations

    def __call__(self, batches):
        import pandas as pd
        import pyarrow as pa

        cols = [f"c{i}" for i in range(self.store.arity)]
        frames = [b.to_pandas() for b in batches]
        start = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in cols})
        try:
            out = columnar.run_stratum(self.stratum, {self.store.name: self.store}, self.tables,
                                       start={self.store.name: start[cols]}, max_iterations=self.max_iterations)
        except columnar.NoFixpoint as e:  # the driver finds this marker in the task's error
            raise RuntimeError(f"{_LIMIT_MARK}{json.dumps(e.sizes)}{_LIMIT_MARK}") from None
        schema = pa.schema([(c, columnar.arrow_type(t)) for c, t in zip(cols, self.types)])
        table = pa.Table.from_pandas(out.tables[self.store.name], schema=schema, preserve_index=False)
        yield from table.to_batches(max_chunksize=1 << 20)
