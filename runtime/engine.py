"""Execute a dataflow on Spark: stratified semi-naive evaluation with set semantics.

Costs on Spark are counted in actions (jobs started from the driver), so the loop is
built around one action per iteration of a recursive stratum: every relation's new
delta is cached, and a single `collect()` of their sizes materializes all of them at
once. Non-recursive strata cost no action at all: their relations are cached lazily and
filled by whichever action reads them first.

Per relation, what "new" means:
- plain relations: set difference against everything derived so far;
- aggregated relations: group on the other columns; inside recursion only min/max are
  allowed and follow PreM (seed 003): a tuple is new when its group is new or its value
  improves, and it replaces the old tuple of its group;
- relations with a primary key: per key one tuple (the greatest, for determinism); a
  changed tuple replaces the old one with the same key (Overlog §2.2.3);
- `delete` rules collect tuples that are removed when the timestep ends (deferred).

Decomposable strata (`Stratum.local`) are handed to `runtime.local`, which runs each
partition's fixpoint inside one task.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError
from ..bootstrap.planner import DELETION_SUFFIX
from .dataflow import Dataflow, Storage, Stratum
from .sql import DIALECT, rule_select

DEFAULT_MAX_ITERATIONS = 1000
COMPACT_EVERY = 8  # re-cache a growing union of deltas this often, so plans stay short


@dataclass
class IterationStats:
    stratum: int
    iteration: int  # 0: the stratum's init rules
    actions: int  # Spark actions started for this iteration
    deltas: dict  # relation -> size of its delta
    seconds: float
    mode: str = "sql"  # "sql" (driver loop) or "local" (fixpoint inside tasks)


@dataclass
class Result:
    dataflow: Dataflow
    relations: dict  # relation -> DataFrame with the relation's column names
    stats: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def actions(self) -> int:
        return sum(s.actions for s in self.stats)

    def __getitem__(self, name):
        return self.relations[name]

    def rows(self, name: str) -> list:
        """The relation's tuples, sorted, arrays as tuples (one more action)."""
        return sorted((_plain(tuple(r)) for r in self.relations[name].collect()), key=_sort_key)

    def tuples(self, names=None) -> dict:
        """relation -> set of tuples for several relations with a single Spark action."""
        import json

        from pyspark.sql import functions as F

        names = list(self.relations) if names is None else list(names)
        if not names:
            return {}
        parts = []
        for i, n in enumerate(names):
            df = self.relations[n]
            df = df.toDF(*[f"c{j}" for j in range(len(df.columns))])
            parts.append(df.select(F.lit(i).alias("r"), F.to_json(F.array(F.struct("*")),
                                                                  {"ignoreNullFields": "false"}).alias("t")))
        out = {n: set() for n in names}
        for row in reduce(lambda a, b: a.union(b), parts).collect():
            out[names[row["r"]]].add(_plain(tuple(json.loads(row["t"])[0].values())))
        return out

    def stats_text(self) -> str:
        lines = ["stratum  iteration  mode   actions  seconds  deltas"]
        for s in self.stats:
            d = ", ".join(f"{k}: {v}" for k, v in s.deltas.items())
            lines.append(f"{s.stratum:>7}  {s.iteration:>9}  {s.mode:<5}  {s.actions:>7}  {s.seconds:>7.3f}  {d}")
        lines.append(f"total actions: {self.actions}, {self.seconds:.2f} s")
        return "\n".join(lines)


def _plain(v):
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if hasattr(v, "asDict"):
        return tuple(_plain(x) for x in v)
    return v


def _sort_key(row):
    return tuple((type(x).__name__, repr(x)) if not isinstance(x, (int, float)) or isinstance(x, bool)
                 else ("0num", x) for x in row)


SMALL_BYTES = 8 << 20  # below this estimated input size, tune Spark for tiny jobs
SMALL_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}


def run(dataflow: Dataflow, spark, inputs: Optional[dict] = None, *,
        max_iterations: int = DEFAULT_MAX_ITERATIONS, local: bool = True, tuning: str = "auto") -> Result:
    """Evaluate `dataflow`. `inputs` maps relation names to DataFrames (columns by
    position). `local=False` forces the SQL loop even for decomposable strata.

    `tuning`: "small" turns off adaptive execution and uses one shuffle partition (a
    tiny job then costs a fraction of the default), "large" keeps the session's
    settings, "auto" picks "small" when the inputs' estimated size is small."""
    inputs = inputs or {}
    if tuning == "auto":
        tuning = "small" if _estimated_bytes(dataflow, inputs) < SMALL_BYTES else "large"
    saved = {}
    if tuning == "small":
        for k, v in SMALL_CONF.items():
            saved[k] = spark.conf.get(k, None)
            spark.conf.set(k, v)
    try:
        return _Engine(dataflow, spark, inputs, max_iterations, local).run()
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _estimated_bytes(dataflow: Dataflow, inputs: dict) -> int:
    total = 64 * len(dataflow.facts)
    for df in inputs.values():
        try:
            total += int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes().toString())
        except Exception:  # no estimate: assume large
            return SMALL_BYTES
    return total


class _Engine:
    _views = itertools.count()

    def __init__(self, dataflow: Dataflow, spark, inputs: dict, max_iterations: int, local: bool):
        self.df = dataflow
        self.spark = spark
        self.inputs = inputs
        self.max_iterations = max_iterations
        self.use_local = local
        self.full: dict = {}
        self.delta: dict = {}
        self.views: dict = {}  # id(DataFrame) -> (DataFrame, view name)
        self.stats: list = []
        self.now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.cached: list = []
        self.retire: list = []  # (action number after which it may go, cached DataFrame)

    # ------------------------------------------------------------ driver

    def run(self) -> Result:
        start = time.perf_counter()
        try:
            self.load_base()
            for st in self.df.strata:
                if st.local is not None and self.use_local:
                    from .local import run_local_stratum, supports
                    if supports(st, self.df) and run_local_stratum(self, st):
                        continue
                if st.recursive:
                    self.run_recursive(st)
                else:
                    self.run_once(st)
            self.apply_deletions()
        finally:
            self.views.clear()
        out = {}
        for name, s in self.df.relations.items():
            if s.kind == "deletion":
                continue
            out[name] = self.full[name].toDF(*s.columns)
        return Result(self.df, out, self.stats, time.perf_counter() - start)

    def action(self, df) -> list:
        """Every action goes through here so the stats can count them."""
        self._actions += 1
        rows = df.collect()
        keep = []
        for safe, cached in self.retire:  # caches whose rows now live in checkpoints
            if safe <= self._actions:
                cached.unpersist()
            else:
                keep.append((safe, cached))
        self.retire = keep
        return rows

    _actions = 0
    _stratum = None

    # ------------------------------------------------------------ base relations

    def load_base(self):
        from .io import facts_frame, empty_frame

        facts: dict = {}
        for rel, values in self.df.facts:
            facts.setdefault(rel, []).append(values)
        for name, s in self.df.relations.items():
            parts = []
            if name in facts:
                rows = facts[name]
                if s.keys is not None:  # a later fact replaces an earlier one with the same key
                    last = {}
                    for r in rows:
                        last[tuple(r[k] for k in s.keys)] = r
                    rows = list(last.values())
                parts.append(facts_frame(self.spark, rows, s))
            if name in self.inputs:
                given = self.inputs[name]
                if len(given.columns) != s.arity:
                    raise EvitaError([Diagnostic("arity", f"input for {name} has {len(given.columns)} columns, "
                                                 f"the program uses {s.arity}", S.NOWHERE, name)])
                parts.append(given.toDF(*[f"c{i}" for i in range(s.arity)]))
            if s.kind == "base":
                df = reduce(lambda a, b: a.union(b), parts) if parts else empty_frame(self.spark, s)
                self.full[name] = df.distinct() if len(parts) > 1 or name in self.inputs else df
            else:
                self.base_parts = getattr(self, "base_parts", {})
                self.base_parts[name] = parts

    def seeds(self, name: str) -> list:
        return getattr(self, "base_parts", {}).get(name, [])

    # ------------------------------------------------------------ rules

    def view(self, df) -> str:
        hit = self.views.get(id(df))
        if hit is not None:
            return hit[1]
        name = f"evita_v{next(self._views)}"
        df.createOrReplaceTempView(name)
        self.views[id(df)] = (df, name)
        return name

    # Views are never dropped or replaced: dropping a temp view uncaches the DataFrame
    # behind it (and what was cached on top of it), so each view name is used once.

    def array_cols(self, relation: str) -> set:
        from pyspark.sql.types import ArrayType

        df = self.full.get(relation)
        if df is None:
            return set()
        return {i for i, f in enumerate(df.schema.fields) if isinstance(f.dataType, ArrayType)}

    def candidates(self, name: str, rules) -> list:
        """One SELECT per rule deriving `name` (sqlglot trees; nothing runs yet)."""
        here = set(self._stratum.relations) if self._stratum is not None and self._stratum.recursive else set()

        def view_of(step):
            if step.delta and step.relation in here:
                return self.view(self.delta[step.relation])
            return self.view(self.full[step.relation])

        return [rule_select(r, view_of, self.array_cols, self.now) for r in rules if r.head == name]

    def union_select(self, selects: list, frames: list):
        """UNION ALL of rule SELECTs and of already built frames (facts, inputs)."""
        from sqlglot import exp

        parts = selects + [exp.select("*").from_(self.view(f)) for f in frames]
        return reduce(lambda a, b: exp.union(a, b, distinct=False), parts)

    def sql_frame(self, tree):
        return self.spark.sql(tree.sql(DIALECT))

    # ------------------------------------------------------------ per-relation semantics

    def combine(self, s: Storage, frames: list, selects: list = ()):
        """Rule outputs -> the relation's tuples (set, grouped, or one per key)."""
        from sqlglot import exp

        from .io import empty_frame

        selects = list(selects)
        if not frames and not selects:
            return empty_frame(self.spark, s)
        union = self.union_select(selects, frames)
        if s.aggregates or s.keys is not None:
            df = self.sql_frame(union)
            return self.group(df, s) if s.aggregates else self.one_per_key(df, s)
        return self.sql_frame(exp.select("*").from_(exp.Subquery(this=union, alias=exp.TableAlias(
            this=exp.to_identifier("u")))).distinct())

    def group(self, df, s: Storage):
        from pyspark.sql import functions as F

        aggs = {a.column: a.func for a in s.aggregates}
        groups = [f"c{i}" for i in s.group_columns]
        exprs = []
        for i, func in aggs.items():
            c = F.col(f"c{i}")
            e = {"count": F.count(c), "sum": F.sum(c), "min": F.min(c), "max": F.max(c), "avg": F.avg(c),
                 "set": F.array_sort(F.array_distinct(F.collect_list(c))),
                 "list": F.array_sort(F.collect_list(c))}[func]
            exprs.append(e.alias(f"c{i}"))
        # no group columns: group on a constant, so that no valuations give no tuple
        grouped = df.groupBy(*(groups or [F.lit(0).alias("_g")])).agg(*exprs)
        return grouped.select(*[f"c{i}" for i in range(s.arity)])

    def one_per_key(self, df, s: Storage):
        from pyspark.sql import functions as F

        keys = [f"c{i}" for i in s.keys]
        rest = [f"c{i}" for i in range(s.arity) if i not in s.keys]
        best = df.groupBy(*keys).agg(F.max(F.struct(*rest)).alias("_best"))
        return best.select(*[F.col(f"c{i}") if i in s.keys else F.col(f"_best.c{i}").alias(f"c{i}")
                             for i in range(s.arity)])

    # ------------------------------------------------------------ strata

    def run_once(self, st: Stratum):
        self._stratum = st
        t0 = time.perf_counter()
        for name in st.relations:
            s = self.df.relations[name]
            df = self.combine(s, self.seeds(name), self.candidates(name, st.init_rules))
            self.full[name] = self.keep(df) if s.cached else df
        self.stats.append(IterationStats(st.index, 0, 0, {}, time.perf_counter() - t0))

    def keep(self, df):
        df = df.cache()
        self.cached.append(df)
        return df

    def count_deltas(self, names: list) -> dict:
        return self.count_deltas_of({n: self.delta[n] for n in names})

    def count_deltas_of(self, frames: dict) -> dict:
        """One action: the sizes of every delta, which also fills their caches."""
        from sqlglot import exp

        names = list(frames)
        if not names:
            return {}
        parts = [exp.select(exp.alias_(exp.Literal.number(i), "i"),
                            exp.alias_(exp.Count(this=exp.Star()), "n")).from_(self.view(frames[n]))
                 for i, n in enumerate(names)]
        rows = self.action(self.sql_frame(reduce(lambda x, y: exp.union(x, y, distinct=False), parts)))
        sizes = {names[r["i"]]: r["n"] for r in rows}
        return {n: sizes.get(n, 0) for n in names}

    def run_recursive(self, st: Stratum):
        self._stratum = st
        t0 = time.perf_counter()
        before = self._actions
        for name in st.relations:
            s = self.df.relations[name]
            df = self.combine(s, self.seeds(name), self.candidates(name, st.init_rules))
            self.full[name] = self.delta[name] = self.keep(df)
        looping = [n for n in st.relations if any(r.head == n for r in st.delta_rules)]
        sizes = self.count_deltas(list(st.relations))
        for name in looping:
            self.full[name] = self.delta[name] = self.rebase(self.full[name])
        self.stats.append(IterationStats(st.index, 0, self._actions - before, sizes, time.perf_counter() - t0))
        pieces = {n: [self.full[n]] for n in looping}  # full = union of these pieces
        iteration = 0
        while any(sizes.get(n, 0) for n in looping):
            iteration += 1
            if iteration > self.max_iterations:
                self.no_fixpoint(st, sizes)
            t0 = time.perf_counter()
            before = self._actions
            new_delta = {}
            for name in looping:
                s = self.df.relations[name]
                new_delta[name] = self.keep(self.advance(s, self.candidates(name, st.delta_rules)))
            for name in st.relations:
                if name not in looping:
                    self.delta[name] = self.full[name].limit(0)
            sizes = self.count_deltas_of(new_delta)
            for name in looping:
                s = self.df.relations[name]
                d = self.delta[name] = self.rebase(new_delta[name])
                if s.aggregates or s.keys is not None:
                    self.full[name] = self.rebase(self.replace(s, self.full[name], d))
                else:
                    pieces[name].append(d)
                    if len(pieces[name]) >= COMPACT_EVERY:
                        pieces[name] = [self.rebase(reduce(lambda a, b: a.union(b), pieces[name]))]
                    self.full[name] = reduce(lambda a, b: a.union(b), pieces[name])
            self.stats.append(IterationStats(st.index, iteration, self._actions - before, sizes,
                                             time.perf_counter() - t0))

    def rebase(self, df):
        """The same tuples under a one-node logical plan. Each delta is computed from the
        previous ones, so without this the plans (and the time Spark spends analyzing
        them) would double every iteration. A lazy local checkpoint cuts the lineage
        now and stores the rows when the next action computes them; the cache it reads
        from can go once that action has run."""
        leaf = df.localCheckpoint(eager=False)
        if df.is_cached:
            self.retire.append((self._actions + 1, df))
        return leaf

    def advance(self, s: Storage, cand: list):
        """The delta of one iteration: what is new or better than the relation so far."""
        from pyspark.sql import functions as F

        from sqlglot import exp

        full = self.full[s.name]
        if not cand:
            return full.limit(0)
        if not s.aggregates and s.keys is None:  # EXCEPT is distinct: new tuples, once each
            return self.sql_frame(exp.except_(self.union_select(cand, []),
                                              exp.select("*").from_(self.view(full)), distinct=True))
        new = self.combine(s, [], cand)
        if s.aggregates:  # PreM: a new group, or a better value for an old one
            a = s.aggregates[0]
            old = _renamed(full, "o")
            g = s.group_columns
            cond = _match(new, old, g, "o")
            joined = new.join(old, cond, "left")
            c, o = F.col(f"c{a.column}"), F.col(f"o{a.column}")
            better = (c < o) if a.func == "min" else (c > o)
            return joined.where(o.isNull() | better).select(*[f"c{i}" for i in range(s.arity)])
        return new.subtract(full)  # keyed: only tuples that changed

    def replace(self, s: Storage, full, delta):
        """Tuples of `delta` replace those of `full` in the same group (or with the same key)."""
        key = s.group_columns if s.aggregates else s.keys
        return _anti(full, delta, key).union(delta)

    def no_fixpoint(self, st: Stratum, sizes: dict):
        growing = [n for n, v in sizes.items() if v]
        rule = next((r for r in st.delta_rules if r.head in growing), None)
        span = rule.span if rule else S.NOWHERE
        raise EvitaError([Diagnostic(
            "no-fixpoint",
            f"stratum {st.index} did not reach a fixpoint within {self.max_iterations} iterations: "
            + ", ".join(f"{n} still gains {sizes[n]} tuples" for n in growing),
            span, growing[0] if growing else "",
            "a rule may build ever new values (unbounded arithmetic, growing lists); bound it, "
            "or raise the limit with --max-iterations")])

    # ------------------------------------------------------------ end of the timestep

    def apply_deletions(self):
        for name, s in self.df.relations.items():
            if s.kind != "deletion":
                continue
            target = name[: -len(DELETION_SUFFIX)]
            ts = self.df.relations[target]
            key = ts.keys if ts.keys is not None else range(ts.arity)
            self.full[target] = self.keep(_anti(self.full[target], self.full[name], key))


def _renamed(df, prefix: str):
    return df.toDF(*[f"{prefix}{i}" for i in range(len(df.columns))])


def _match(left, right, cols, prefix: str):
    """Null-safe equality of columns c<i> (left) and <prefix><i> (right)."""
    from pyspark.sql import functions as F

    conds = [F.col(f"c{i}").eqNullSafe(F.col(f"{prefix}{i}")) for i in cols]
    return reduce(lambda x, y: x & y, conds) if conds else F.lit(True)


def _anti(df, other, cols):
    """Rows of `df` whose columns `cols` match no row of `other` (renamed apart first, so
    frames derived from one another do not confuse Spark's self-join resolution)."""
    return df.join(_renamed(other, "x"), _match(df, None, cols, "x"), "left_anti")
