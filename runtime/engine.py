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

Where a stratum runs (docs/runtime.md, "Strategies"), as a stage decided: a stratum in
tasks (`Stratum.rounds`: decomposable, each partition to its own fixpoint in one Spark
job; or monotone, in rounds) is handed to `runtime.rounds`; a stratum whose inputs are
small runs on the driver (`run_small`); both use the columnar evaluator
(`runtime.columnar`). The rest run here, on Spark's SQL.

Catalog-sized runs (`one_partition=True`: stages, integrity checks, the lattice) keep every
relation in one partition, so that an action is one Spark stage of one task, and, when no
relation can hold a list, build relations as SQL text: common table expressions of a
`SqlScope`, sent to Spark as one statement per action instead of one DataFrame (a round
trip to the JVM and an analysis) per relation.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import os
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.activity import doing
from ..bootstrap.diagnostics import Diagnostic, EvitaError, plural
from . import columnar, progress, semantics
from .session import settings_for_a_while
from .dataflow import DELETION_SUFFIX, Dataflow, IterationStats, Storage, Stratum
from .io import plain as _plain
from .sql import DIALECT, coalesced, list_free, rule_select, select_all, subquery, table, union_all

# A user program runs to its fixpoint, as in Soufflé: no iteration limit unless asked
# (`--max-iterations N`, `run(max_iterations=N)`). The stages keep theirs (bootstrap/stage.py).
DEFAULT_MAX_ITERATIONS = None
COMPACT_EVERY = 8  # re-cache a growing union of deltas this often, so plans stay short
# SQL mode: a relation read by several rules becomes a leaf (one more round of Spark
# planning, ~20-40 ms) when inlining it would add more plan nodes than this to the
# statement (each costs ~1-2 ms of analysis, optimization and execution).
MATERIALIZE_ABOVE = 120


@dataclass
class Result:
    dataflow: Dataflow
    relations: Mapping  # relation -> DataFrame with the relation's column names
    stats: list = field(default_factory=list)
    seconds: float = 0.0
    cached: list = field(default_factory=list)  # DataFrames the run cached
    engine: Optional["_Engine"] = field(default=None, repr=False)
    notes: list = field(default_factory=list)  # strategy choices worth explaining
    _traffic: Optional[list] = field(default=None, repr=False)  # per-node traffic, once asked
    settings: dict = field(default_factory=dict)  # the Spark settings the run's plans were tuned for

    def tuned(self):
        """The run's tuning around an action that reads its relations. A stratum run once
        is built lazily, so its work is done by the job that reads it, after `run` gave the
        session its own settings back: without this, a small run's results were computed
        with adaptive execution on (a job per exchange) and the session's shuffle partitions."""
        spark = self.engine.spark if self.engine is not None else None
        return settings_for_a_while(spark, self.settings) if spark is not None else contextlib.nullcontext()

    def release(self):
        """Drop the run's caches (a catalog evaluation does, once it has its tuples:
        Spark keeps every cached plan until then, and each later query's analysis
        looks through all of them)."""
        for df in self.cached:
            df.unpersist()
        self.cached = []

    @property
    def actions(self) -> int:
        return sum(s.actions for s in self.stats)

    @property
    def held(self) -> dict:
        """relation -> pandas table, for the relations the run left on the driver
        (reading them again costs no job)."""
        return self.engine.tables if self.engine is not None else {}

    def __getitem__(self, name):
        return self.relations[name]

    def table(self, name: str) -> str:
        """A name Spark SQL can read the relation by (columns c0, c1, ...): a view, or a
        common table expression of the run's `SqlScope`."""
        return self.engine.view(self.engine.full[name])

    def rows(self, name: str) -> list:
        """The relation's tuples, sorted, arrays as tuples (one more action)."""
        with self.tuned():
            if self.dataflow.relations[name].arity == 0:  # a proposition: the empty tuple, or none
                return [()] if not self.relations[name].isEmpty() else []
            return sorted((_plain(tuple(r)) for r in self.relations[name].collect()), key=_sort_key)

    def tuples(self, names=None) -> dict:
        """relation -> set of tuples for several relations with a single Spark action."""
        names = list(self.relations) if names is None else list(names)
        with self.tuned():
            got = self.engine.scope.collect([(n, self.table(n)) for n in names], self.engine.one_partition)
        # a proposition's tuples carry Spark's unit column (io.UNIT): the empty tuple to users
        return {n: {()} if got[n] and self.dataflow.relations[n].arity == 0 else got[n] for n in names}

    def traffic(self) -> list:
        """Per location: tuples sent, received and derived locally (`runtime.traffic`;
        one Spark action, the first time). Empty when no relation is located."""
        if self._traffic is None:
            from .traffic import measure

            self._traffic = measure(self)
        return self._traffic

    def stats_text(self) -> str:
        lines = ["stratum  iteration  mode   actions  seconds  deltas"]
        for s in self.stats:
            d = ", ".join(f"{k}: {v}" for k, v in s.deltas.items())
            lines.append(f"{s.stratum:>7}  {s.iteration:>9}  {s.mode:<5}  {s.actions:>7}  {s.seconds:>7.3f}  {d}")
        lines += self.notes
        lines.append(f"total actions: {self.actions}, {self.seconds:.2f} s")
        return "\n".join(lines)


def _sort_key(row):
    from .order import row_key

    return row_key(row)  # the order the CLI shows and writes rows in


@dataclass(frozen=True)
class SqlInput:
    """An input relation given as a query (a sqlglot tree) with columns c0..c{arity-1}
    and no lists, for `one_partition` runs: it becomes a common table expression, not
    a DataFrame."""
    query: object
    arity: int


class SqlScope:
    """Common table expressions shared by the engine runs of one evaluation.

    A relation built as SQL text is a named CTE here (its SQL rendered once); every
    statement sent to Spark is prefixed with the CTEs it reads, transitively, so a
    relation costs no round trip to the JVM until an action reads it. Runs that share
    a scope can read each other's relations (`Result.table`) and be collected by one
    action (`collect`)."""

    _names = itertools.count()

    def __init__(self, spark):
        self.spark = spark
        self.ctes: dict = {}  # name -> (SQL text, names of the CTEs it reads, transitively)

    def define(self, tree) -> str:
        name = f"evita_q{next(self._names)}"
        self.ctes[name] = (tree.sql(DIALECT), self._reads(tree))
        return name

    def _reads(self, tree) -> frozenset:
        from sqlglot import exp

        direct = {t.name for t in tree.find_all(exp.Table) if t.name in self.ctes}
        return frozenset(direct.union(*[self.ctes[d][1] for d in direct]))

    def text(self, tree) -> str:
        """`tree` as one statement, with the CTEs it reads (in the order defined)."""
        reads = self._reads(tree)
        body = tree.sql(DIALECT)
        if not reads:
            return body
        order = sorted(reads, key=lambda n: int(n[len("evita_q"):]))
        return "WITH " + ", ".join(f"{n} AS ({self.ctes[n][0]})" for n in order) + " " + body

    def frame(self, tree):
        return self.spark.sql(self.text(tree))

    def collect(self, items: list, one_partition: bool = False) -> dict:
        """key -> set of tuples, for (key, table name) pairs, in one Spark action.
        Each tuple travels as JSON (nulls kept), so any column types mix in one union."""
        import json

        from sqlglot import exp

        if not items:
            return {}
        rows_as_json = "to_json(array(struct(*)), map('ignoreNullFields', 'false'))"
        parts = [exp.select(exp.alias_(exp.Literal.number(i), "r", copy=False),
                            exp.alias_(exp.maybe_parse(rows_as_json, dialect=DIALECT), "t", copy=False),
                            copy=False).from_(table(name), copy=False)
                 for i, (_, name) in enumerate(items)]
        union = union_all(parts)
        out = {key: set() for key, _ in items}
        for row in self.frame(coalesced(union) if one_partition else union).collect():
            out[items[row["r"]][0]].add(_plain(tuple(json.loads(row["t"])[0].values())))
        return out


@dataclass(eq=False)
class _Cte:
    """A relation held as a CTE of the engine's scope; `frame` once it was needed as a
    DataFrame."""
    name: str
    frame: object = None


SMALL_BYTES = 8 << 20  # below this estimated input size, tune Spark for tiny jobs
COLLECT_BYTES = 64 << 20  # a Spark-side input estimated below this is collected whole; above, at most small_rows + 1 rows
# A tiny job costs a fraction of the default with no adaptive execution (which runs a job
# per exchange) and one shuffle partition; and no automatic broadcast, which costs a job
# per broadcast relation where a one-partition join is a stage of the same job. A
# broadcast a stage chose (`distribution=broadcast`, an atom's method) is a hint, and stays.
SMALL_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1",
              "spark.sql.autoBroadcastJoinThreshold": "-1"}
# Located relations are hash-partitioned on their location column alone. A join or a set
# difference whose keys include that column then needs no exchange, but Spark requires
# co-partitioning on all the keys unless told otherwise.
LOCATED_CONF = {"spark.sql.requireAllClusterKeysForCoPartition": "false"}


def run(dataflow: Dataflow, spark, inputs: Optional[dict] = None, *,
        max_iterations: Optional[int] = DEFAULT_MAX_ITERATIONS, local: bool = True, tuning: str = "auto",
        one_partition: bool = False, scope: Optional[SqlScope] = None, small_rows: Optional[int] = None,
        known_rows: Optional[dict] = None) -> Result:
    """Evaluate `dataflow`. `inputs` maps relation names to DataFrames (columns by
    position). `local=False` runs every stratum on Spark's SQL path, the recursive ones
    in the distributed loop: neither per-partition fixpoints in tasks nor small strata
    on the driver.

    `small_rows`: a stratum whose inputs hold at most this many rows runs to its
    fixpoint on the driver, in the columnar evaluator (default `SMALL_ROWS`, or
    $EVITA_SMALL_ROWS; 0 turns it off). `known_rows`: relation -> rows, of inputs
    measured already (`evita run` measures what it reads): a stratum reading more than
    `small_rows` of them is not collected to find it out.

    `tuning`: "small" turns off adaptive execution and uses one shuffle partition (a
    tiny job then costs a fraction of the default), "large" keeps the session's
    settings, "auto" picks "small" when the inputs' estimated size is small.

    `one_partition`: every relation is read as one partition and every join, union and
    aggregate keeps it so (coalesce, never shuffle), so an action runs as a single Spark
    stage of one task. For catalog-sized data, where each Spark stage costs far more
    than its rows; needs `spark.sql.maxSinglePartitionBytes` high enough (see
    `bootstrap.stage.CATALOG_SIZED`). Inputs may then be `SqlInput`s too, and when
    no relation can hold a list, relations are built as SQL text: common table
    expressions of `scope` (a new one if not given), which later runs sharing the
    scope can read (`Result.table`) and collect in the same action (`SqlScope.collect`)."""
    inputs = inputs or {}
    conf = run_settings(dataflow, inputs, tuning, one_partition)
    with settings_for_a_while(spark, conf):
        if small_rows is None:
            small_rows = int(os.environ.get("EVITA_SMALL_ROWS", columnar.SMALL_ROWS))
        engine = _Engine(dataflow, spark, inputs, max_iterations, local, one_partition, scope)
        engine.small_rows = small_rows if local and not one_partition else 0
        engine.known_rows = dict(known_rows or {})
        result = engine.run()
    result.settings = conf
    return result


def run_settings(dataflow: Dataflow, inputs: dict, tuning: str = "auto", one_partition: bool = False) -> dict:
    """The Spark settings a run of `dataflow` over `inputs` works under (`run`'s `tuning`).
    Whatever plans or caches a query over the run's relations or inputs is to do it under
    them too: Spark fixes a cached relation's plan when it is cached, and an input's
    statistics are one query over the inputs (`Result.tuned`, `cli_commands.run_file`)."""
    if tuning == "auto":
        tuning = "small" if _estimated_bytes(dataflow, inputs) < SMALL_BYTES else "large"
    conf = dict(SMALL_CONF) if tuning == "small" else {}
    if not one_partition and any(s.located for s in dataflow.relations.values()):
        conf.update(LOCATED_CONF)
    return conf


def _estimated_bytes(dataflow: Dataflow, inputs: dict) -> int:
    total = 64 * len(dataflow.facts)
    for df in inputs.values():
        try:
            total += _size_estimate(df)
        except Exception:  # no estimate: assume large
            return SMALL_BYTES
    return total


def _size_estimate(df) -> int:
    """Spark's estimate of a DataFrame's size in bytes, from its optimized plan (no job)."""
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


class _Engine:
    _views = itertools.count()

    def __init__(self, dataflow: Dataflow, spark, inputs: dict, max_iterations: int, local: bool,
                 one_partition: bool = False, scope: Optional[SqlScope] = None):
        self.df = dataflow
        self.spark = spark
        self.inputs = inputs
        self.max_iterations = max_iterations
        self.use_local = local
        self.one_partition = one_partition
        self.scope = scope if scope is not None else SqlScope(spark)
        # SQL text needs no column types from Spark as long as no column can hold a list
        self.sql_mode = one_partition and list_free(dataflow, inputs)
        self.full: dict = {}  # relation -> DataFrame, or _Cte in SQL mode
        self.sizes: dict = {}  # CTE relation -> about how many plan nodes it adds where it is read
        self.uses = Counter(step.relation for st in dataflow.strata for r in st.init_rules + st.delta_rules
                            for step in r.steps if step.relation)
        self.delta: dict = {}
        self.views: dict = {}  # id(DataFrame) -> (DataFrame, view name)
        self.stats: list = []
        self.now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        self.cached: list = []
        self.retire: list = []  # (action number after which it may go, cached DataFrame)
        self.small_rows = 0
        self.known_rows: dict = {}  # input relation -> rows, measured before the run
        self.tables: dict = {}  # relation -> pandas DataFrame, for relations the driver holds
        self.seed_tables: dict = {}  # derived relation -> its facts as a pandas DataFrame
        self.notes: list = []  # why a stratum did not take a strategy it might have

    # ------------------------------------------------------------ driver

    def run(self) -> Result:
        start = time.perf_counter()
        try:
            self.load_base()
            for st in self.df.strata:
                with self.activity(st):
                    self.run_stratum(st)
            self.apply_deletions()
        finally:
            self.views.clear()
        out = _Named(self, {name: s.columns for name, s in self.df.relations.items() if s.kind != "deletion"})
        return Result(self.df, out, self.stats, time.perf_counter() - start, self.cached, self, self.notes)

    def reports(self, st: Stratum) -> bool:
        """Whether the stratum's iterations are progress to report: a loop over a user
        program's data (a catalog program is a detail of its stage)."""
        return st.recursive and not self.one_partition

    def activity(self, st: Stratum):
        """The stratum as an activity: named if it fails; logged with its iterations
        when it reports (a stratum run once is built lazily: its work is done by the
        job that reads it, which the progress line shows)."""
        if self.reports(st):
            return progress.stratum(st.index, st.relations)
        return doing(f"stratum {st.index} ({', '.join(st.relations)})")

    def record(self, stat: IterationStats) -> None:
        """Keep an iteration's stats and report it (its delta sizes are counted already)."""
        self.stats.append(stat)
        if self._stratum is not None and self.reports(self._stratum):
            progress.iteration(stat.iteration, stat.deltas, stat.mode)

    def _in_tasks(self, st) -> bool:
        from .rounds import run_rounds

        return run_rounds(self, st)

    def run_stratum(self, st) -> None:
        # a size limit is checked between the rounds of the whole recursion, which
        # per-partition fixpoints do not have
        limited = any(self.df.relations[n].limit is not None for n in st.relations)
        in_tasks = st.rounds is not None and self.use_local and not self.one_partition and not limited
        if in_tasks and st.strategy == "local" and self._in_tasks(st):  # a stage chose tasks: small or not
            return
        if self.small_rows and self.run_small(st):
            return
        if in_tasks and st.strategy != "local" and self._in_tasks(st):
            return
        if st.recursive:
            self.run_recursive(st)
        else:
            self.run_once(st)

    def run_small(self, st: Stratum) -> bool:
        """Run the stratum on the driver, in the columnar evaluator, when its inputs
        hold at most `small_rows` rows and the evaluator has everything its rules use.
        Iterations then cost milliseconds instead of a Spark job each. A stratum run
        once goes there only when its inputs are on the driver already: collecting them
        would cost a job, and on Spark it costs none (it is built lazily)."""
        from . import columnar

        rules = st.init_rules + st.delta_rules
        why = columnar.unsupported(rules, [self.df.relations[n] for n in st.relations])
        if why:
            return self.not_small(st, why)
        t0 = time.perf_counter()
        before = self._actions
        reads = sorted({step.relation for r in rules for step in r.steps
                        if step.relation and step.relation not in st.relations})
        known = sum(self.known_rows.get(n, 0) for n in set(reads) | set(st.relations))
        if known > self.small_rows:  # measured already: no collect to find it out
            return self.not_small(st, f"its inputs hold {plural(known, 'row')} (more than {self.small_rows})")
        tables = {}
        try:
            if st.recursive:
                self.collect_together({n: self.full[n] for n in reads if n not in self.tables})
            for name in reads:
                tables[name] = self.driver_table(name, self.full[name], st.recursive)
            for name in st.relations:
                if name in self.seed_tables:
                    tables[name] = self.seed_tables[name]
                elif self.seeds(name):
                    seeds = reduce(lambda a, b: a.union(b), [self.frame(p) for p in self.seeds(name)])
                    tables[name] = self.driver_table(name, seeds, st.recursive, keep=False)
            rows = sum(len(t) for t in tables.values())
            if rows > self.small_rows:
                return self.not_small(st, f"its inputs hold {plural(rows, 'row')} (more than {self.small_rows})")
            report = (lambda i, sizes: progress.iteration(i, sizes, "small")) if self.reports(st) else None
            out = columnar.run_stratum(st, self.df.relations, tables, max_iterations=self.max_iterations,
                                       on_iteration=report)
            frames = {n: self.spark_frame(out.tables[n], self.df.relations[n]) for n in st.relations}
        except columnar.NoFixpoint as e:
            self.no_fixpoint(st, e.sizes)
        except (columnar.Unsupported, ValueError, TypeError) as e:  # Spark's SQL semantics decide
            return self.not_small(st, str(e))
        for name in st.relations:
            self.tables[name], self.full[name] = out.tables[name], frames[name]
        if out.stopped:
            self.notes.append(out.stopped)
        for i, (seconds, sizes) in enumerate(out.iterations):
            if i == 0:  # the start includes gathering the inputs and handing the results to Spark
                seconds = time.perf_counter() - t0 - sum(s for s, _ in out.iterations[1:])
            self.stats.append(IterationStats(st.index, i, self._actions - before if i == 0 else 0, sizes,
                                             seconds, mode="small"))
        return True

    def not_small(self, st: Stratum, why: str) -> bool:
        if st.recursive:  # a stratum run once costs no job on Spark: nothing to explain
            self.notes.append(f"stratum {st.index} runs on Spark, not on the driver: {why}")
        return False

    def driver_table(self, name: str, df, collect: bool, keep: bool = True):
        """The relation as a pandas table on the driver: held already, or collected
        (one action) when `collect` and Spark estimates it small. Raises Unsupported."""
        from . import columnar

        if name in self.tables and keep:
            return self.tables[name]
        if not collect:
            raise columnar.Unsupported(f"{name} is not on the driver")
        try:
            estimate = _size_estimate(df)
        except Exception:  # no estimate: do not collect
            raise columnar.Unsupported(f"no size estimate for {name}")
        self._actions += 1
        if estimate > COLLECT_BYTES:
            table = self.collect_at_most(name, df)
        else:
            table = df.toPandas()
        table = self.held_as(name, table)
        if keep:
            self.tables[name] = table
        return table

    def held_as(self, name: str, table):
        """A table collected from Spark as the evaluator holds the relation. Raises Unsupported."""
        table = columnar.checked(table)
        storage = self.df.relations.get(name)
        if storage is not None and storage.arity == 0:
            table = table[[]]  # Spark's unit column (io.UNIT) is not the evaluator's
        return table

    def collect_together(self, frames: dict) -> None:
        """`driver_table` of several relations in one action, where Spark estimates each
        small and its columns are of plain types: each relation's columns go to columns
        named by type and position in one union, so relations of any mix of types travel
        together, and each comes back as `toPandas` would give it. The others are left
        to `driver_table`, one action each. (A recursive stratum of the points-to
        analysis reads 31 lower relations: 31 jobs before.)"""
        from functools import reduce

        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        plain = ("bigint", "int", "double", "string", "boolean")
        parts, layout = [], {}
        for name, df in frames.items():
            try:
                small = _size_estimate(df) <= COLLECT_BYTES
            except Exception:  # no estimate: driver_table decides
                small = False
            fields = df.schema.fields
            if not small or not fields or any(f.dataType.simpleString() not in plain for f in fields):
                continue
            keys = [f"{f.dataType.simpleString()}_{j}" for j, f in enumerate(fields)]
            layout[name] = (len(layout), keys, df.columns)
            parts.append(df.select(F.lit(layout[name][0]).alias("_r"),
                                   *[F.col(f"`{f.name}`").alias(k) for f, k in zip(fields, keys)]))
        if len(parts) < 2:
            return
        self._actions += 1
        both = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts).toArrow()
        for name, (r, keys, columns) in layout.items():
            table = both.filter(pc.equal(both["_r"], r)).select(keys).rename_columns(columns).to_pandas()
            try:
                self.tables[name] = self.held_as(name, table)
            except columnar.Unsupported:  # nulls, say: driver_table says so for this relation
                pass

    def collect_at_most(self, name: str, df):
        """The relation's rows when it holds at most `small_rows`, found by collecting
        one more than that (one action, bounded memory). Spark's estimate cannot decide:
        without column statistics it takes the product of a join's sides' sizes, so a
        relation a few joins derive from facts files of a few kilobytes is estimated at
        terabytes, and a recursion reading it would run on Spark's SQL loop (a Doop-style
        points-to analysis over a dozen classes: over 20 minutes instead of seconds).
        Raises Unsupported when it holds more."""
        from . import columnar

        table = df.limit(self.small_rows + 1).toPandas()
        if len(table) > self.small_rows:
            raise columnar.Unsupported(f"{name} holds more than {plural(self.small_rows, 'row')}")
        return table

    def spark_frame(self, table, s: Storage):
        """A pandas result as a Spark DataFrame (a local relation: no job)."""
        from pyspark.sql import types as T

        from . import columnar
        from .io import empty_frame

        if not len(table):
            return empty_frame(self.spark, s)
        if s.arity == 0:  # a true proposition: Spark's unit column (io.UNIT)
            from .io import facts_frame

            return facts_frame(self.spark, [()], s)
        from .io import _infer

        kinds = {"i": T.LongType(), "u": T.LongType(), "f": T.DoubleType(), "b": T.BooleanType(), "O": T.StringType()}
        fields = []
        for c in table.columns:
            kind = table[c].dtype.kind
            if kind == "O" and not columnar.all_text(table[c]):
                if not all(isinstance(v, tuple) for v in table[c]):
                    raise columnar.Unsupported(f"column {c} of {s.name} mixes lists and other values")
                fields.append(T.StructField(c, _infer(list(table[c])), True))  # lists: arrays
                continue
            if kind not in kinds:
                raise columnar.Unsupported(f"column {c} of {s.name} holds {table[c].dtype}")
            fields.append(T.StructField(c, kinds[kind], True))
        return self.spark.createDataFrame(table, T.StructType(fields))

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
        from .io import empty_frame

        facts: dict = {}
        for rel, values in self.df.facts:
            facts.setdefault(rel, []).append(values)
        for name, s in self.df.relations.items():
            parts = []
            if name in facts:
                rows = semantics.facts_kept(s, facts[name])
                parts.append(self.facts_part(rows, s))
            if name in self.inputs:
                given = self.inputs[name]
                arity = given.arity if isinstance(given, SqlInput) else len(given.columns)
                if arity != s.arity:
                    raise EvitaError([Diagnostic("arity", f"input for {name} has "
                                                 f"{plural(arity, 'column')}, the program uses {s.arity}", S.NOWHERE, name)])
                parts.append(self.input_part(given, s))
            if self.small_rows and name not in self.inputs and len(facts.get(name, ())) <= self.small_rows:
                from .io import facts_table

                table = facts_table(rows if name in facts else [], s)  # the columnar evaluator reads facts
                if table is not None:
                    table = table.drop_duplicates(ignore_index=True)
                    (self.tables if s.kind == "base" else self.seed_tables)[name] = table
            if s.kind == "base":
                if self.sql_mode:
                    self.full[name] = self.combine(s, parts) if len(parts) > 1 or name in self.inputs else (
                        parts[0] if parts else self.define(_empty_select(s)))
                    continue
                df = reduce(lambda a, b: a.union(b), parts) if parts else empty_frame(self.spark, s)
                df = self.single(df).distinct() if len(parts) > 1 or name in self.inputs else df
                self.full[name] = self.keep(self.placed(df, s)) if s.located else df
            else:
                self.base_parts = getattr(self, "base_parts", {})
                self.base_parts[name] = parts

    def facts_part(self, rows: list, s: Storage):
        from .io import VALUES_LIMIT, facts_frame, schema_for, values_select

        if not self.sql_mode or len(rows) > VALUES_LIMIT or s.arity == 0:
            return facts_frame(self.spark, rows, s)
        from .io import _convert

        schema = schema_for(s, list(zip(*rows)))
        data = [tuple(_convert(v, f.dataType) for v, f in zip(r, schema.fields)) for r in rows]
        return self.define(coalesced(values_select(data, schema)))

    def input_part(self, given, s: Storage):
        if isinstance(given, SqlInput):
            cte = self.define(coalesced(given.query))
            return cte if self.sql_mode else self.frame(cte)  # a program with lists runs on DataFrames
        if s.arity == 0:  # a proposition given as rows of no columns: true when there is one
            from pyspark.sql import functions as F

            from .io import UNIT

            return given.limit(1).select(F.lit(True).alias(UNIT))
        return given.toDF(*[f"c{i}" for i in range(s.arity)])

    def seeds(self, name: str) -> list:
        return getattr(self, "base_parts", {}).get(name, [])

    # ------------------------------------------------------------ relations as DataFrames, views, CTEs

    def view(self, rel) -> str:
        """The name SQL reads a relation by: its CTE, or a temp view of its DataFrame."""
        if isinstance(rel, _Cte):
            return rel.name
        hit = self.views.get(id(rel))
        if hit is not None:
            return hit[1]
        name = f"evita_v{next(self._views)}"
        self.single(rel).createOrReplaceTempView(name)
        self.views[id(rel)] = (rel, name)
        return name

    # Views are never dropped or replaced: dropping a temp view uncaches the DataFrame
    # behind it (and what was cached on top of it), so each view name is used once.

    def frame(self, rel):
        """The relation as a DataFrame (a CTE becomes one when first asked)."""
        if not isinstance(rel, _Cte):
            return rel
        if rel.frame is None:
            rel.frame = self.scope.frame(select_all(rel.name))
        return rel.frame

    def define(self, tree) -> _Cte:
        return _Cte(self.scope.define(tree))

    def materialize(self, rel):
        """A CTE read by several rules becomes a leaf: a lazy local checkpoint, filled by
        the action that first reads it. Spark analyzes and optimizes the relation once,
        here, instead of once per reader (deep programs would otherwise grow plans
        exponentially, as in the recursive loop; see `rebase`)."""
        if not isinstance(rel, _Cte):
            return rel
        return self.frame(rel).localCheckpoint(eager=False)

    def inlined_size(self, name: str, rules, seeds) -> int:
        """About how many plan nodes the relation's CTE brings to each reader: per atom a
        join, a sort and a projection plus what the atom's relation brings (a leaf, one)."""
        size = 2 + 2 * len(seeds)
        for r in rules:
            if r.head == name:
                size += 2 + sum(3 + self.sizes.get(step.relation, 1) for step in r.steps if step.relation)
        return size

    def single(self, df):
        """`df` in one partition when the engine runs in one-partition mode."""
        return df.coalesce(1) if self.one_partition else df

    def placed(self, df, s: Storage):
        """A located relation's tuples where they live: hash-partitioned on the location
        column (a stage's decision, `Storage.located`). For tuples a rule derived at
        another location this is the shipment: the one exchange a localized rule needs."""
        if not s.located or self.one_partition:
            return df
        from pyspark.sql import functions as F

        parts = int(self.spark.conf.get("spark.sql.shuffle.partitions"))
        return df.repartition(parts, F.col(f"c{s.location}"))

    def array_cols(self, relation: str) -> set:
        from pyspark.sql.types import ArrayType

        rel = self.full.get(relation)
        if rel is None or self.sql_mode:  # SQL mode: no column holds a list
            return set()
        return {i for i, f in enumerate(rel.schema.fields) if isinstance(f.dataType, ArrayType)}

    # ------------------------------------------------------------ rules

    def candidates(self, name: str, rules, read=None) -> list:
        """One SELECT per rule deriving `name` (sqlglot trees; nothing runs yet). An atom
        of the recursive stratum running reads `read(step)` in a round of
        `semantics.fixpoint`, else its start (the relation, or for a delta atom the delta)."""
        here = set(self._stratum.relations) if self._stratum is not None and self._stratum.recursive else set()

        def view_of(step):
            if step.relation in here and read is not None:
                return self.view(read(step))
            if step.delta and step.relation in here:
                return self.view(self.delta[step.relation])
            return self.view(self.full[step.relation])

        return [rule_select(r, view_of, self.array_cols, self.now, one_partition=self.one_partition)
                for r in rules if r.head == name]

    def union_select(self, selects: list, frames: list):
        """UNION ALL of rule SELECTs and of already built relations (facts, inputs)."""
        parts = selects + [select_all(self.view(f)) for f in frames]
        # In one-partition mode every part is one partition, and so is their union.
        return union_all(parts)

    def sql_frame(self, tree):
        return self.scope.frame(tree)

    # ------------------------------------------------------------ per-relation semantics

    def combine(self, s: Storage, frames: list, selects: list = ()):
        """Rule outputs, facts and inputs -> the relation's tuples (`semantics.combine`):
        a CTE in SQL mode, else a DataFrame."""
        # a choice-domain chooses in rounds of anti-joins: on DataFrames, in SQL mode too
        tables = SqlTables(self) if self.sql_mode and not s.choice else FrameTables(self)
        return semantics.combine(tables, s, list(selects) + list(frames))

    def group(self, df, s: Storage):
        from pyspark.sql import functions as F

        aggs = {a.column: a.func for a in s.aggregates}
        groups = [f"c{i}" for i in s.group_columns]
        exprs = []
        for i, func in aggs.items():
            c = F.col(f"c{i}")
            e = {"count": F.count(c), "min": F.min(c), "max": F.max(c), "avg": F.avg(c),
                 # sums wrap around (_SQL_AGGREGATES)
                 "sum": F.expr(_SQL_AGGREGATES["sum"].format(f"c{i}")),
                 "sum32": F.expr(_SQL_AGGREGATES["sum32"].format(f"c{i}")),
                 "umin": F.expr(_SQL_AGGREGATES["umin"].format(f"c{i}")),
                 "umax": F.expr(_SQL_AGGREGATES["umax"].format(f"c{i}")),
                 "set": F.array_sort(F.array_distinct(F.collect_list(c))),
                 "list": F.array_sort(F.collect_list(c))}[func]
            exprs.append(e.alias(f"c{i}"))
        # no group columns: group on a constant, so that no valuations give no tuple
        grouped = self.single(df).groupBy(*(groups or [F.lit(0).alias("_g")])).agg(*exprs)
        return grouped.select(*[f"c{i}" for i in range(s.arity)])

    def numbered(self, groups, s: Storage, offset):
        """autoinc<*>: distinct `groups` numbered offset, offset + 1, ... in ascending
        order of their columns (docs/language.md, "Aggregates"). One window over all of
        them: a sort in one task, the price of numbers that do not depend on Spark's
        partitioning."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = [f"c{i}" for i in s.group_columns]
        order = Window.orderBy(*keys) if keys else Window.orderBy(F.lit(0))
        column = s.aggregates[0].column
        number = (F.row_number().over(order) - 1 + offset).cast("bigint").alias(f"c{column}")
        return self.single(groups).select(*[number if i == column else F.col(f"c{i}") for i in range(s.arity)])

    def one_per_key(self, df, s: Storage):
        from pyspark.sql import functions as F

        keys = [f"c{i}" for i in s.keys]
        rest = [f"c{i}" for i in range(s.arity) if i not in s.keys]
        best = self.single(df).groupBy(*keys).agg(F.max(F.struct(*rest)).alias("_best"))
        return best.select(*[F.col(f"c{i}") if i in s.keys else F.col(f"_best.c{i}").alias(f"c{i}")
                             for i in range(s.arity)])

    # ------------------------------------------------------------ strata

    def run_once(self, st: Stratum):
        self._stratum = st
        t0 = time.perf_counter()
        for name in st.relations:
            s = self.df.relations[name]
            rel = self.combine(s, self.seeds(name), self.candidates(name, st.init_rules))
            if self.sql_mode:
                self.sizes[name] = self.inlined_size(name, st.init_rules, self.seeds(name))
                if (self.uses[name] - 1) * self.sizes[name] > MATERIALIZE_ABOVE:
                    rel, self.sizes[name] = self.materialize(rel), 1
                self.full[name] = rel
            else:
                self.full[name] = self.keep(self.placed(rel, s)) if s.cached or s.located else rel
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
        parts = [exp.select(exp.alias_(exp.Literal.number(i), "i", copy=False),
                            exp.alias_(exp.Count(this=exp.Star()), "n", copy=False), copy=False
                            ).from_(table(self.view(frames[n])), copy=False)
                 for i, n in enumerate(names)]
        rows = self.action(self.sql_frame(union_all(parts)))
        sizes = {names[r["i"]]: r["n"] for r in rows}
        return {n: sizes.get(n, 0) for n in names}

    def run_recursive(self, st: Stratum):
        if self.sql_mode:  # the loop reads lower relations every iteration: once, as leaves
            reads = {step.relation for r in st.init_rules + st.delta_rules for step in r.steps
                     if step.relation and step.relation not in st.relations and self.sizes.get(step.relation, 1) > 1}
            for name in sorted(reads):
                self.full[name], self.sizes[name] = self.materialize(self.full[name]), 1
            if not any(self.df.relations[n].aggregates or self.df.relations[n].keys is not None
                       or self.df.relations[n].dominated or self.df.relations[n].choice
                       for n in st.relations):  # sets only: a CTE over deltas
                return self.run_recursive_sql(st)
        self._stratum = st
        t0 = time.perf_counter()
        before = self._actions
        for name in st.relations:
            s = self.df.relations[name]
            df = self.frame(self.combine(s, self.seeds(name), self.candidates(name, st.init_rules)))
            self.full[name] = self.delta[name] = self.keep(self.placed(df, s))
        looping = [n for n in st.relations if any(r.head == n for r in st.delta_rules)]
        sizes = self.count_deltas(list(st.relations))
        if not self.sql_mode:
            self.retype_empty_starts(st, sizes)
        for name in looping:
            self.full[name] = self.delta[name] = self.rebase(self.full[name])
        self.record(IterationStats(st.index, 0, self._actions - before, sizes, time.perf_counter() - t0))
        self.to_fixpoint(st, sizes, FrameTables(self))

    def to_fixpoint(self, st: Stratum, sizes: dict, tables: "_SparkTables") -> None:
        """The rounds of a recursive stratum from its start (`self.full`; `sizes`: how
        many tuples each relation starts with), as `semantics.fixpoint` defines them,
        on Spark through `tables`, with stats per round."""
        self._round_actions = self._actions

        def derive(name, read):
            selects = self.candidates(name, st.delta_rules, read)
            s = self.df.relations[name]
            if s.located:  # shipped to where its tuples live first, then compared with what is there
                return self.placed(self.sql_frame(self.union_select(selects, [])), s)
            return _Bag(self.union_select(selects, []))

        def on_round(i, sizes, seconds):
            self.record(IterationStats(st.index, i, self._actions - self._round_actions, sizes, seconds))
            self._round_actions = self._actions

        start = {n: self.full[n] for n in st.relations}
        try:
            done = semantics.fixpoint(st, self.df.relations, tables, start, sizes, derive,
                                      max_iterations=self.max_iterations, on_round=on_round)
        except semantics.NoFixpoint as e:
            self.no_fixpoint(st, e.sizes)
        if done.stopped:
            self.notes.append(done.stopped)
        for name in st.relations:
            self.full[name] = done.full[name]

    def run_recursive_sql(self, st: Stratum):
        """The semi-naive loop of a set-valued stratum in SQL mode, with fewer rounds of
        Spark planning per iteration than the DataFrame loop: each new delta is one
        EXCEPT statement behind a lazy local checkpoint (no cache: the checkpoint keeps
        the rows the counting action computes), and a relation so far is a CTE over its
        deltas. One action per iteration counts the new deltas."""
        self._stratum = st
        t0 = time.perf_counter()
        before = self._actions
        for name in st.relations:
            rel = self.combine(self.df.relations[name], self.seeds(name), self.candidates(name, st.init_rules))
            self.full[name] = self.delta[name] = self.materialize(rel)
        sizes = self.count_deltas(list(st.relations))
        for name in st.relations:  # empty starts may be retyped: as DataFrames
            if not sizes.get(name):
                self.full[name] = self.delta[name] = self.frame(self.full[name])
        self.retype_empty_starts(st, sizes)
        self.record(IterationStats(st.index, 0, self._actions - before, sizes, time.perf_counter() - t0))
        self.to_fixpoint(st, sizes, SqlTables(self))

    def retype_empty_starts(self, st: Stratum, sizes: dict) -> None:
        """A relation of a recursive stratum that starts empty has untyped (string)
        columns, so a rule adding numbers or reading a list from it would not even
        analyze (the magic-sets rewrite of Fig 4.1 carries costs and path lists through
        sup relations). Ask Spark for the schemas the stratum's rules give (analysis
        only, no job) and retype the empty starts to match, until nothing changes."""
        from pyspark.sql import functions as F
        from pyspark.errors import AnalysisException
        from pyspark.sql.types import StringType

        empty = [n for n in st.relations if not sizes.get(n)]
        for _ in range(len(empty)):
            changed = False
            for name in empty:
                current = self.full[name].schema.fields
                for select in self.candidates(name, st.delta_rules):
                    try:
                        fields = self.sql_frame(select).schema.fields
                    except AnalysisException:
                        continue  # reads another empty start: typed in a later round
                    if any(isinstance(c.dataType, StringType) and f.dataType != c.dataType
                           for f, c in zip(fields, current)):
                        typed = self.spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(c.name)
                                                             for f, c in zip(fields, current)])
                        self.full[name] = self.delta[name] = typed
                        changed = True
                        break
            if not changed:
                return

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

    def no_fixpoint(self, st: Stratum, sizes: dict):
        raise semantics.no_fixpoint_error(st, self.df.relations, sizes, self.max_iterations)

    # ------------------------------------------------------------ end of the timestep

    def apply_deletions(self):
        for name, s in self.df.relations.items():
            if s.kind != "deletion":
                continue
            target = name[: -len(DELETION_SUFFIX)]
            ts = self.df.relations[target]
            self.tables.pop(target, None)  # the driver's copy no longer holds the relation
            key = ts.keys if ts.keys is not None else range(ts.arity)
            self.full[target] = self.keep(_anti(self.single(self.frame(self.full[target])),
                                                self.single(self.frame(self.full[name])), key))


# ---------------------------------------------------------------- the core's operations on Spark

@dataclass
class _Bag:
    """A union of rule SELECTs and relations, not run yet: what `_SparkTables.union` gives."""
    tree: object


class _SparkTables(semantics.Tables):
    """`runtime/semantics.py`'s operations on Spark. A table is a DataFrame or a common
    table expression (`_Cte`); a union is one SQL tree (`_Bag`), so that a relation's
    rules and seeds reach Spark as one statement."""

    def __init__(self, engine: "_Engine"):
        self.e = engine
        self.pieces: dict = {}  # set relation -> the tables whose union it is

    def union(self, s: Storage, parts: list):
        from sqlglot import exp

        selects = [p.tree if isinstance(p, _Bag) else p for p in parts if isinstance(p, (_Bag, exp.Expression))]
        tables = [p for p in parts if not isinstance(p, (_Bag, exp.Expression))]
        return _Bag(self.e.union_select(selects, tables))

    def tree(self, t):
        return t.tree if isinstance(t, _Bag) else select_all(self.e.view(t))

    def count(self, tables: dict) -> dict:
        return self.e.count_deltas_of(tables)


class FrameTables(_SparkTables):
    """On DataFrames: the loop for every kind of relation, and relations outside SQL mode."""

    def df(self, t):
        return self.e.sql_frame(t.tree) if isinstance(t, _Bag) else self.e.frame(t)

    def empty(self, s: Storage):
        from .io import empty_frame

        return empty_frame(self.e.spark, s)

    def distinct(self, s: Storage, t):
        return self.e.sql_frame(_distinct_select(self.tree(t)))

    def aggregate(self, s: Storage, t):
        return self.e.group(self.df(t), s)

    def greatest_per_key(self, s: Storage, t):
        return self.e.one_per_key(self.df(t), s)

    def least_in_groups(self, s: Storage, t, domains: tuple):
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cols = [f"c{i}" for i in range(s.arity)]
        whole = F.struct(*cols)
        df = self.e.single(self.df(t))
        for n, domain in enumerate(domains):  # per domain, whether it is the least whole tuple of its group
            df = df.withColumn(f"_least{n}", F.min(whole).over(Window.partitionBy(*[f"c{i}" for i in domain])) == whole)
        return df.where(reduce(lambda a, b: a & b, [F.col(f"_least{n}") for n in range(len(domains))])).select(*cols)

    def number(self, s: Storage, t, old=None):
        from pyspark.sql import functions as F

        fresh = _group_keys(self.df(t), s).distinct()
        if old is None:
            return self.e.numbered(fresh, s, F.lit(0))
        old = self.e.single(self.df(old))
        fresh = fresh.join(_group_keys(old, s), list(fresh.columns), "left_anti")
        numbered = self.e.numbered(fresh.crossJoin(old.agg(F.count(F.lit(1)).alias("_n"))), s, F.col("_n"))
        return self.e.placed(numbered, s)  # numbered in one place, then shipped where located tuples live

    def minus(self, s: Storage, t, other, columns=None):
        t, other = self.e.single(self.df(t)), self.e.single(self.df(other))
        return t.subtract(other) if columns is None else _anti(t, other, columns)

    def cleared(self, s: Storage, t):
        return self.df(t).limit(0)

    def new_tuples(self, s: Storage, full, cand):
        from sqlglot import exp  # EXCEPT is distinct: new tuples, once each

        return self.e.sql_frame(exp.except_(self.tree(cand), select_all(self.e.view(full)), distinct=True, copy=False))

    def improved(self, s: Storage, new, full):
        from pyspark.sql import functions as F

        new = self.df(new)
        a = s.aggregates[0]
        old = _renamed(self.e.single(self.df(full)), "o")
        joined = new.join(old, _match(new, old, s.group_columns, "o"), "left")
        c, o = F.col(f"c{a.column}"), F.col(f"o{a.column}")
        if a.func in ("umin", "umax"):  # unsigned order: compare the keys (bootstrap/lowering/unsigned.py)
            c, o = c.bitwiseXOR(F.lit(-(1 << 63))), o.bitwiseXOR(F.lit(-(1 << 63)))
        better = (c < o) if a.func in ("min", "umin") else (c > o)
        return joined.where(o.isNull() | better).select(*[f"c{i}" for i in range(s.arity)])

    def replace(self, s: Storage, full, delta, columns: tuple):
        delta = self.df(delta)
        return self.e.rebase(_anti(self.e.single(self.df(full)), self.e.single(delta), columns).union(delta))

    def extend(self, s: Storage, full, delta):
        pieces = self.pieces.setdefault(s.name, [full])
        pieces.append(delta)
        if len(pieces) >= COMPACT_EVERY:
            pieces[:] = [self.e.rebase(reduce(lambda a, b: a.union(b), pieces))]
        return reduce(lambda a, b: a.union(b), pieces)

    def hold(self, s: Storage, delta):
        return self.e.keep(delta)

    def settle(self, s: Storage, delta):
        return self.e.rebase(delta)


class SqlTables(_SparkTables):
    """In SQL mode: every relation a CTE of one statement; a round's new delta is one
    EXCEPT behind a lazy local checkpoint, and a set so far a CTE over its deltas. The
    engine's SQL loop runs set-valued strata only."""

    def empty(self, s: Storage):
        return self.e.define(_empty_select(s))

    def distinct(self, s: Storage, t):
        return self.e.define(_distinct_select(self.tree(t)))

    def aggregate(self, s: Storage, t):
        return self.e.define(_grouped_select(self.tree(t), s))

    def greatest_per_key(self, s: Storage, t):
        return self.e.define(_keyed_select(self.tree(t), s))

    def number(self, s: Storage, t, old=None):
        if old is not None:
            raise NotImplementedError("the SQL loop runs set-valued strata")
        return self.e.define(_numbered_select(self.tree(t), s))

    def minus(self, s: Storage, t, other, columns=None):
        from sqlglot import exp

        if columns is not None:
            raise NotImplementedError("the SQL loop runs set-valued strata")
        return self.e.define(exp.except_(self.tree(t), self.tree(other), distinct=True, copy=False))

    def cleared(self, s: Storage, t):
        from sqlglot import exp

        return self.e.define(self.tree(t).where(exp.false(), copy=False))

    def new_tuples(self, s: Storage, full, cand):
        return self.minus(s, cand, full)

    def hold(self, s: Storage, delta):
        return self.e.materialize(delta)

    def extend(self, s: Storage, full, delta):
        pieces = self.pieces.setdefault(s.name, [full])
        pieces.append(delta)
        whole = self.e.define(union_all([select_all(self.e.view(p)) for p in pieces]))
        if len(pieces) >= COMPACT_EVERY:
            pieces[:] = [whole := self.e.materialize(whole)]
        return whole


# ---------------------------------------------------------------- relations as SQL (SQL mode)

def _subquery(union, alias: str = "u"):
    return subquery(union, alias)


def _distinct_select(union):
    return select_all(_subquery(union)).distinct(copy=False)


# A sum wraps around as Soufflé's does: at 64 bits where Spark's ANSI sum would fail with
# ARITHMETIC_OVERFLOW (try_sum is null then, and the exact decimal sum is taken modulo
# 2^64, as runtime/sql.py `wrap64`); `sum32` (bootstrap/lowering/width.py) at 32 bits.
_SIGN_BIT = "CAST(-9223372036854775808 AS BIGINT)"  # bit 63 alone, as a bigint
_SQL_AGGREGATES = {"count": "count({})",
                   "sum": "coalesce(try_sum({0}), CAST(pmod(try_sum(try_cast({0} AS DECIMAL(38,0))) + "
                          "9223372036854775808, 18446744073709551616) - 9223372036854775808 AS BIGINT))",
                   "sum32": "(((sum({}) + 2147483648) & 4294967295) - 2147483648)",
                   "min": "min({})", "max": "max({})", "avg": "avg({})",
                   # by unsigned order (bootstrap/lowering/unsigned.py): the extreme of the
                   # keys (bit 63 flipped), flipped back
                   "umin": "(min({0} ^ " + _SIGN_BIT + ") ^ " + _SIGN_BIT + ")",
                   "umax": "(max({0} ^ " + _SIGN_BIT + ") ^ " + _SIGN_BIT + ")",
                   "set": "array_sort(array_distinct(collect_list({})))", "list": "array_sort(collect_list({}))"}


def _group_keys(df, s: Storage):
    """The group columns of `df`; a constant column when there are none (one group)."""
    from pyspark.sql import functions as F

    return df.select(*([f"c{i}" for i in s.group_columns] or [F.lit(0).alias("_g")]))


def _numbered_select(union, s: Storage):
    """`Engine.numbered` in SQL, from 0: the distinct groups, each with its rank."""
    from sqlglot import exp

    keys = [f"c{i}" for i in s.group_columns]
    column = s.aggregates[0].column
    distinct = exp.select(*(keys or ["0 AS _g"]), copy=False).from_(_subquery(union), copy=False).distinct(copy=False)
    number = exp.maybe_parse(f"CAST(row_number() OVER (ORDER BY {', '.join(keys) or '_g'}) - 1 AS BIGINT)",
                             dialect=DIALECT)
    cols = [exp.alias_(number, f"c{i}") if i == column else exp.column(f"c{i}") for i in range(s.arity)]
    return exp.select(*cols, copy=False).from_(_subquery(distinct, "d"), copy=False)


def _grouped_select(union, s: Storage):
    """`Engine.group` in SQL: group on the other columns; with none, on a constant, so
    that no valuations give no tuple."""
    from sqlglot import exp

    aggs = {a.column: a.func for a in s.aggregates}
    cols = [exp.alias_(exp.maybe_parse(_SQL_AGGREGATES[aggs[i]].format(f"c{i}"), dialect=DIALECT), f"c{i}")
            if i in aggs else exp.column(f"c{i}") for i in range(s.arity)]
    groups = [exp.column(f"c{i}") for i in s.group_columns]
    source = _subquery(union)
    if not groups:
        source = _subquery(exp.select(exp.Star(), exp.alias_(exp.Literal.number(0), "_g", copy=False), copy=False
                                      ).from_(source, copy=False), "g")
        groups = [exp.column("_g")]
    return exp.select(*cols, copy=False).from_(source, copy=False).group_by(*groups, copy=False)


def _keyed_select(union, s: Storage):
    """`Engine.one_per_key` in SQL: per key the greatest of the other columns."""
    from sqlglot import exp

    rest = [f"c{i}" for i in range(s.arity) if i not in s.keys]
    best = exp.select(*[exp.column(f"c{i}") for i in s.keys],
                      exp.alias_(exp.maybe_parse(f"max(struct({', '.join(rest)}))", dialect=DIALECT), "_best")
                      ).from_(_subquery(union)).group_by(*[exp.column(f"c{i}") for i in s.keys])
    return exp.select(*[exp.column(f"c{i}") if i in s.keys else
                        exp.alias_(exp.maybe_parse(f"_best.c{i}", dialect=DIALECT), f"c{i}")
                        for i in range(s.arity)]).from_(_subquery(best, "b"))


def _empty_select(s: Storage):
    """No rows, with the column types `io.empty_frame` gives."""
    from sqlglot import exp

    from .io import schema_for

    cols = [exp.alias_(exp.Cast(this=exp.Null(), to=exp.DataType.build(f.dataType.simpleString(), dialect=DIALECT)),
                       f"c{i}") for i, f in enumerate(schema_for(s).fields)]
    return coalesced(exp.select(*cols, copy=False).where(exp.false(), copy=False))


class _Named(Mapping):
    """relation -> DataFrame with the relation's column names, built when first asked
    for (each is a round trip to the JVM and an analysis of the whole plan)."""

    def __init__(self, engine: _Engine, columns: dict):
        self._engine = engine
        self._columns = columns  # name -> column names
        self._named: dict = {}

    def __getitem__(self, name):
        if name not in self._named:
            frame = self._engine.frame(self._engine.full[name])
            if not self._columns[name]:  # a proposition: no columns (Spark's unit column dropped)
                from .io import as_nullary

                self._named[name] = as_nullary(frame)
            else:
                self._named[name] = frame.toDF(*self._columns[name])
        return self._named[name]

    def __contains__(self, name):
        # Mapping's own test would build the DataFrame (a round trip and an analysis)
        return name in self._columns

    def __iter__(self):
        return iter(self._columns)

    def __len__(self):
        return len(self._columns)


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
