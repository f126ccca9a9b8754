"""Decomposable recursive strata: each partition runs to its own fixpoint in one task.

When the planner finds a linear recursion that carries a column unchanged from the
recursive atom to the head (`Stratum.local`), every tuple derived from a tuple stays in
that tuple's partition (seed 003: a discriminating set; seed 001: no coordination).
So the recursive relation is hash-partitioned on that column, the other relations are
replicated to every task, and `mapInArrow` runs a small semi-naive evaluator over
pandas inside each task. The driver pays for one Spark job instead of one per
iteration (about 2 s each on the 2-core machine: see docs/performance.md).

The evaluator handles what such strata usually hold: joins, anti-joins, selections and
assignments over arithmetic, comparisons and boolean operators. A stratum using
anything else (built-in functions, lists, aggregates) runs in the SQL loop instead
(`supports`).

Duplicate elimination uses one 64-bit key per tuple: exact for one integer column or two
that fit in 32 bits each; otherwise a 64-bit hash of the row (pandas), where two
different tuples collide with probability about n^2 / 2^65 (1e-7 for 2.5M tuples).
"""
from __future__ import annotations

import time

from ..bootstrap import syntax as S
from .dataflow import Dataflow, Stratum

_OPS = ("+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||")


def _expr_ok(t) -> bool:
    if isinstance(t, (S.Var, S.Wildcard)):
        return True
    if isinstance(t, S.Const):
        return t.type in (S.INT, S.FLOAT, S.STRING, S.BOOL)
    if isinstance(t, S.BinOp):
        return t.op in _OPS and _expr_ok(t.left) and _expr_ok(t.right)
    if isinstance(t, S.UnOp):
        return _expr_ok(t.arg)
    if isinstance(t, S.Cond):
        return _expr_ok(t.test) and _expr_ok(t.then) and _expr_ok(t.other)
    return False


def supports(st: Stratum, dataflow: Dataflow) -> bool:
    store = dataflow.relations[st.local.relation]
    if store.aggregates or store.keys is not None:
        return False
    for r in st.delta_rules:
        if r.aggregates or r.delete:
            return False
        for s in r.steps:
            if not all(isinstance(a, (S.Var, S.Wildcard, S.Const)) for a in s.args):
                return False
            if s.expr is not None and not _expr_ok(s.expr):
                return False
        if not all(_expr_ok(a) for a in r.head_args):
            return False
    return True


_ARROW = {"bigint": "int64", "double": "float64", "string": "string", "boolean": "bool_", "int": "int32"}


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
    if any(t not in _ARROW for t in types):
        return False
    tables = {}
    for name in st.local.replicated:  # replicated: shipped to every task with the function
        engine._actions += 1
        tables[name] = engine.full[name].toPandas()
    parts = engine.spark.sparkContext.defaultParallelism
    partitioned = init.repartition(max(1, parts), F.col(f"c{st.local.partition[0]}"))
    task = _Task(st.delta_rules, rel, s.arity, tables, types)
    out = engine.keep(partitioned.mapInArrow(task, init.schema))
    engine.full[rel] = engine.delta[rel] = out
    engine._actions += 1
    n = out.count()
    from .engine import IterationStats

    engine.stats.append(IterationStats(st.index, 0, engine._actions - before, {rel: n},
                                       time.perf_counter() - t0, mode="local"))
    return True


class _Task:
    """The function each task runs (pickled to the workers with the replicated tables)."""

    def __init__(self, rules, relation, arity, tables, types):
        self.rules = rules
        self.relation = relation
        self.arity = arity
        self.tables = tables
        self.types = types

    def __call__(self, batches):
        import pandas as pd
        import pyarrow as pa

        cols = [f"c{i}" for i in range(self.arity)]
        frames = [b.to_pandas() for b in batches]
        delta = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in cols})
        seen = _KeySet()
        delta = seen.add_new(delta[cols])
        parts = [delta]
        while len(delta):
            derived = [_eval_rule(r, self.relation, delta, self.tables) for r in self.rules]
            derived = [d for d in derived if len(d)]
            if not derived:
                break
            new = pd.concat(derived, ignore_index=True) if len(derived) > 1 else derived[0]
            delta = seen.add_new(new[cols])
            parts.append(delta)
        result = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
        schema = pa.schema([(c, getattr(pa, _ARROW[t])()) for c, t in zip(cols, self.types)])
        table = pa.Table.from_pandas(result, schema=schema, preserve_index=False)
        yield from table.to_batches(max_chunksize=1 << 20)


class _KeySet:
    """Tuples seen so far, as 64-bit keys in a pandas hash table."""

    def __init__(self):
        from pandas._libs import hashtable

        self.table = hashtable.Int64HashTable()

    def add_new(self, df):
        import numpy as np
        import pandas as pd

        if not len(df):
            return df
        keys = _keys(df)
        fresh = ~pd.Series(keys).duplicated().to_numpy()
        fresh &= self.table.lookup(keys) < 0
        out = df[fresh]
        self.table.map_locations(np.ascontiguousarray(keys[fresh]))
        return out.reset_index(drop=True)


def _keys(df):
    import numpy as np
    import pandas as pd

    ints = all(pd.api.types.is_integer_dtype(t) for t in df.dtypes)
    if ints and df.shape[1] == 1:
        return df.iloc[:, 0].to_numpy(dtype=np.int64)
    if ints and df.shape[1] == 2:
        a = df.iloc[:, 0].to_numpy(dtype=np.int64)
        b = df.iloc[:, 1].to_numpy(dtype=np.int64)
        lim = 1 << 31
        if len(a) == 0 or (a.min() >= -lim and a.max() < lim and b.min() >= -lim and b.max() < lim):
            return (a << 32) | (b & 0xFFFFFFFF)
    return pd.util.hash_pandas_object(df, index=False).to_numpy().view(np.int64)


# ---------------------------------------------------------------- evaluating one rule

def _bind(args, df):
    """Columns of an atom's tuples renamed to its variables; constants and repeated
    variables become selections; wildcards are dropped."""
    names = {}
    mask = None
    for i, a in enumerate(args):
        c = df[f"c{i}"]
        cond = None
        if isinstance(a, S.Var):
            if a.name in names:
                cond = c == df[names[a.name]]
            else:
                names[a.name] = f"c{i}"
        elif isinstance(a, S.Const):
            cond = c == a.value
        if cond is not None:
            mask = cond if mask is None else (mask & cond)
    if mask is not None:
        df = df[mask]
    return df[list(names.values())].rename(columns={v: k for k, v in names.items()})


def _eval_rule(rule, relation, delta, tables):
    import pandas as pd

    b = None
    for step in rule.steps:
        if step.op in ("scan", "join", "antijoin"):
            src = delta if step.relation == relation else tables[step.relation]
            plain = [a for a in step.args if not isinstance(a, (S.Var, S.Wildcard, S.Const))]
            if plain:  # expressions in atom arguments: compare after binding
                raise NotImplementedError
            atom = _bind(step.args, src)
            if b is None:
                b = atom
                continue
            keys = [v for v in atom.columns if v in b.columns]
            if step.op == "antijoin":
                if not keys:
                    b = b.iloc[0:0] if len(atom) else b
                else:
                    m = b.merge(atom[keys].drop_duplicates(), on=keys, how="left", indicator=True)
                    b = m[m["_merge"] == "left_only"].drop(columns="_merge")
            else:
                b = b.merge(atom, on=keys, how="inner") if keys else b.merge(atom, how="cross")
        elif step.op == "filter":
            b = b[_vec(step.expr, b).astype(bool)]
        elif step.op == "assign":
            b = b.assign(**{step.var: _vec(step.expr, b)})
        if not len(b):  # no valuation: later terms would bind nothing, and the head reads them
            return pd.DataFrame({f"c{i}": [] for i in range(len(rule.head_args))})
    out = {f"c{i}": _vec(a, b) for i, a in enumerate(rule.head_args)}
    return pd.DataFrame({k: (v if hasattr(v, "__len__") else [v] * len(b)) for k, v in out.items()}, index=b.index)


def _vec(t, b):
    import numpy as np

    if isinstance(t, S.Var):
        return b[t.name].to_numpy()
    if isinstance(t, S.Const):
        return t.value
    if isinstance(t, S.UnOp):
        v = _vec(t.arg, b)
        return -v if t.op == "-" else ~np.asarray(v, dtype=bool)
    if isinstance(t, S.Cond):
        return np.where(_vec(t.test, b), _vec(t.then, b), _vec(t.other, b))
    l, r = _vec(t.left, b), _vec(t.right, b)
    op = t.op
    if op == "+":
        return l + r
    if op == "-":
        return l - r
    if op == "*":
        return l * r
    if op == "/":
        return np.true_divide(l, r)
    if op == "%":
        return np.fmod(l, r)
    if op == "&&":
        return np.logical_and(l, r)
    if op == "||":
        return np.logical_or(l, r)
    return {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}[op](l, r)
