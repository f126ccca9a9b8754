"""A recursive stratum on Spark in rounds: partitions iterate on their own, then exchange once.

The distributed loop (`engine.to_fixpoint`) pays one or more Spark jobs per iteration and
re-joins whole relations each time. Here, for a monotone stratum (set relations, and
min/max in recursion that obeys PreM: seed 003), each looping relation is hash-partitioned
on the column a stage chose (`stages/partition.dl`, `Stratum.rounds`), and one Spark job
is one *round*:

* every partition holds its part of each looping relation, the new tuples sent to it,
  and what its rules read: a copy of each lower relation partitioned on the column
  that joins the partition's own tuples, or the whole relation where no column does.
  The copies are cut and placed once, in round 1's job (partitioned as the round's
  exchange partitions the state, and checkpointed); every round's task reads its
  partition of them beside its state (a cogroup that moves only the state and the
  messages), and a Python worker keeps a partition's decoded copies for the run's
  later rounds;
* it runs up to `local_iterations` semi-naive iterations (`semantics.fixpoint`, the one
  definition of a round, with `route`): a derived tuple it owns joins its state at once
  and drives its next iteration; one owned elsewhere is sent;
* the round's output is the new state and the messages, each partition's tuples per
  relation in one Arrow blob, behind a local checkpoint; the job that fills it also
  collects each partition's counts, so the driver learns in the same job whether
  anything is still moving.

A partition reads its neighbours' tuples at most one round late, so a round does as
much as `local_iterations` global iterations where the data allows (seed 003's bounded
staleness, with the round as the bound); the answers are the bulk-synchronous ones: a
set only grows, and a PreM min/max converges to the same fixpoint whatever order
improvements arrive in. Nothing is collected to the driver but the counts.

A decomposable recursion (strategy `local`: linear, and every rule keeps the partition
column from its driving atom to its head: seed 001's coordination-free class) runs here
too, with no iteration budget: no derived tuple leaves its partition, so one round is
the whole fixpoint, one Spark job, and the lower relations reach the tasks through Spark
(copies as above), never through the driver.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Optional

from . import progress, semantics
from .columnar import ARROW, arrow_type
from .dataflow import IterationStats, RoundsPlan, Stratum, copy_name
from .phases import SparkWork
from .session import parallelism, settings_for_a_while

SCHEMA = "part int, kind string, rel string, payload binary"
_PANDAS = {"bigint": "int64", "int": "int64", "double": "float64", "string": "object", "boolean": "bool"}


class NotHere(Exception):
    """The stratum cannot run in rounds (why, in words): the distributed loop runs it."""


class Inconsistent(Exception):
    """The plan contradicts itself (a stage's rows or the planner are wrong): an internal
    error, never a reason to fall back quietly."""


@dataclass(frozen=True)
class Copy:
    """A relation as one partition reads it: `column` is the column its rows are
    partitioned on (they meet the partition's own tuples there), None for all of it."""
    name: str
    relation: str
    column: Optional[int]


def placement(st: Stratum, relations: dict) -> tuple:
    """(the stratum's delta rules reading copies, {copy name: Copy}), as the plan placed
    them (stages/partition.dl groups s and cp, `Step.copy`). What the stage and the
    planner guarantee is checked, cheaply: a breach raises Inconsistent."""
    owner = dict(st.rounds.partition)
    looping = semantics.looping(st)
    if sorted(owner) != sorted(looping):
        raise Inconsistent(f"stratum {st.index} in rounds partitions {sorted(owner)} and loops over {looping}")
    why = next(filter(None, [RoundsPlan.unfit(relations[n]) for n in looping]
                      + [RoundsPlan.misfit(r, owner) for r in st.delta_rules]), None)
    if why:
        raise Inconsistent(f"stratum {st.index} in rounds: {why}")
    rules = [replace(r, steps=tuple(replace(s, relation=copy_name(s)) if s.copy and s.relation not in owner else s
                                    for s in r.steps)) for r in st.delta_rules]
    copies = {name: Copy(name, relation, column) for name, relation, column in RoundsPlan.copies(st.delta_rules)}
    return tuple(rules), copies


def start_types(engine, st: Stratum, starts: dict) -> dict:
    """relation -> the Spark type of each column, as Spark analyzes the stratum (no job):
    a relation's start where something starts it, else the first of its rules to
    analyze; every rule must agree, since a task's tuples are typed once."""
    from pyspark.errors import AnalysisException

    looping = semantics.looping(st)
    known = {n: [f.dataType.simpleString() for f in starts[n].schema.fields] for n in looping
             if engine.seeds(n) or any(r.head == n for r in st.init_rules)}
    for n in looping:
        engine.full[n] = engine.delta[n] = starts[n]
    for _ in range(len(looping) + 1):
        for n in looping:
            for select in engine.candidates(n, st.delta_rules):
                try:
                    fields = engine.sql_frame(select).schema.fields
                except AnalysisException:
                    continue  # reads a relation still untyped: typed in a later pass
                types = [f.dataType.simpleString() for f in fields]
                if n not in known:
                    known[n] = types
                    empty = engine.spark.range(0).select(*[_typed_null(t, f"c{i}") for i, t in enumerate(types)])
                    engine.full[n] = engine.delta[n] = starts[n] = empty
                elif types != known[n]:
                    known[n] = _wider(n, known[n], types)
    for n in looping:
        if n not in known or any(t not in ARROW for t in known[n]):
            raise NotHere(f"{n} has a column of a type a task does not hold ({', '.join(known.get(n, ['?']))})")
    return known


_NUMBERS = ("int", "bigint", "double")


def _wider(name: str, one: list, other: list) -> list:
    """Per column the type both fit in, as Spark's union widens numbers; NotHere otherwise."""
    out = []
    for a, b in zip(one, other):
        if a != b and not (a in _NUMBERS and b in _NUMBERS):
            raise NotHere(f"the rules of {name} derive columns of types {', '.join(other)}, "
                          f"it starts with {', '.join(one)}")
        out.append(max(a, b, key=_NUMBERS.index) if a != b else a)
    return out


def _typed_null(spark_type: str, name: str):
    from pyspark.sql import functions as F

    return F.lit(None).cast(spark_type).alias(name)


def run_rounds(engine, st: Stratum) -> bool:
    """Run the stratum in rounds; False (with the reason noted) when it cannot."""
    from pyspark.sql import functions as F

    from .columnar import unsupported

    t0 = time.perf_counter()
    before = engine._actions
    engine._stratum = st
    looping = semantics.looping(st)
    for name in st.relations:  # its relations that no delta rule derives: read like lower ones
        if name not in looping:
            s = engine.df.relations[name]
            engine.full[name] = engine.combine(s, engine.seeds(name), engine.candidates(name, st.init_rules))
    starts = {n: engine.frame(engine.combine(engine.df.relations[n], engine.seeds(n),
                                             engine.candidates(n, st.init_rules))) for n in looping}
    try:
        rules, copies = placement(st, engine.df.relations)
        why = unsupported(st.delta_rules, [engine.df.relations[n] for n in looping])
        if why:
            raise NotHere(f"a task's evaluator cannot: {why}")
        types = start_types(engine, st, starts)
    except NotHere as e:
        engine.notes.append(f"stratum {st.index} runs in the distributed loop, not in rounds: {e}")
        return False
    parts = max(1, parallelism(engine.spark))
    owner = dict(st.rounds.partition)
    frames, bases = [], []
    for name in looping:
        start = starts[name]
        start = start.select(*[F.col(c).cast(t).alias(c) for c, t in zip(start.columns, types[name])])
        frames.append(_blobs(start, [(name, owner[name])], "msg", types[name], parts))
    for relation in dict.fromkeys(c.relation for c in copies.values()):  # its copies cut in one pass
        base = engine.frame(engine.full[relation])
        copy_types = [f.dataType.simpleString() for f in base.schema.fields]
        if any(t not in ARROW for t in copy_types):
            engine.notes.append(f"stratum {st.index} runs in the distributed loop, not in rounds: "
                                f"{relation} has a column of type {copy_types}")
            return False
        cut = [(c.name, c.column) for c in copies.values() if c.relation == relation]
        types.update({name: copy_types for name, _ in cut})
        bases.append(_blobs(base, cut, "base", copy_types, parts))
    frame = _union(frames)
    base = _union(bases)
    storages = {n: engine.df.relations[n] for n in looping}
    storages.update({c.name: replace(engine.df.relations[c.relation], name=c.name) for c in copies.values()})
    task = _Round(replace(st, relations=tuple(looping), init_rules=(), delta_rules=rules),
                  storages, types, owner, parts, st.rounds.local_iterations, straggler(), uuid.uuid4().hex)
    engine.record(IterationStats(st.index, 0, engine._actions - before, {}, time.perf_counter() - t0,
                                 mode=mode(st)))
    # Adaptive execution would run each round's exchange as a job of its own first
    # and re-plan the exchanges; with `parts` shuffle partitions, the copies' partitioning
    # (below) is the one every round's state is exchanged into, so they are not moved again.
    with settings_for_a_while(engine.spark, {"spark.sql.adaptive.enabled": "false",
                                             "spark.sql.shuffle.partitions": str(parts)}):
        if base is not None:  # cut and placed once, in round 1's job; read where they lie after
            base = base.repartition(parts, "part").localCheckpoint(eager=False)
        frame = _rounds(engine, st, task, frame, base, looping)
    for name in looping:
        blobs = frame.where((F.col("kind") == "state") & (F.col("rel") == name)).select("payload")
        engine.full[name] = engine.keep(blobs.mapInArrow(_Decode(types[name]), _schema(types[name])))
    return True


def _union(frames: list):
    out = frames[0] if frames else None
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _rounds(engine, st: Stratum, task: "_Round", frame, base, looping: list):
    """Rounds until no partition sends or holds back anything: the last round's blobs.
    `base`: the copies' blobs, partitioned as the rounds' exchange partitions the state
    (None when the rules read no copy); each round's task reads its partition of them
    beside its state, without an exchange."""
    round_no, sent, moving, done = 0, {}, {}, 0  # done: iterations so far, the busiest partition's
    while True:
        round_no += 1
        if engine.max_iterations is not None:  # the limit counts iterations, as the loop's does
            if done >= engine.max_iterations:  # still moving: sent on, or held back by the budget
                engine.no_fixpoint(st, {n: sent.get(n, 0) + moving.get(n, 0) for n in looping})
            left = engine.max_iterations - done
            task.budget = left if st.rounds.local_iterations is None else min(st.rounds.local_iterations, left)
        t1 = time.perf_counter()
        if base is None:
            out = frame.groupBy("part").applyInPandas(task.function(), SCHEMA)
        else:
            out = frame.groupBy("part").cogroup(base.groupBy("part")).applyInPandas(task.cogrouped(), SCHEMA)
        out = out.localCheckpoint(eager=False)
        work = SparkWork(engine.spark)
        counts = [json.loads(r.payload) for r in out.where("kind = 'stat'").select("payload").collect()]
        jobs, exchanged = work.since()
        engine._actions += 1 if jobs is None else jobs
        sent = {n: sum(c["sent"].get(n, 0) for c in counts) for n in looping}
        gained = {n: sum(c["gained"].get(n, 0) for c in counts) for n in looping}  # what the partitions keep
        held_back = {n: sum(c["pending"].get(n, 0) for c in counts) for n in looping}
        pending, moving = sum(held_back.values()), held_back
        iterations = max((c["iterations"] for c in counts), default=0)
        done += max(1, iterations)
        engine.record(IterationStats(st.index, round_no, 1 if jobs is None else jobs, gained,
                                     time.perf_counter() - t1, mode=mode(st), exchanged=exchanged))
        slowest = max(counts, key=lambda c: sum(c["seconds"].values()), default=None)
        if slowest is not None:  # where a round's time goes: its slowest partition's task
            moved = "" if exchanged is None else f", {exchanged / 1e6:,.1f} MB exchanged"
            engine.notes.append(f"stratum {st.index} round {round_no}: {plural_iterations(iterations)}{moved}; the "
                                "slowest partition read its blobs in {read:.2f} s, iterated {iterate:.2f} s, wrote "
                                "{write:.2f} s".format(**slowest["seconds"]))
        frame = out.where("kind != 'stat'")
        if engine.reports(st):
            progress.note(f"round {round_no}: up to {plural_iterations(iterations)} in each partition, "
                          f"{sum(gained.values()):,} new tuples, {sum(sent.values()):,} exchanged", mode=mode(st))
        if not any(sent.values()) and not pending:
            return frame


def mode(st: Stratum) -> str:
    """How the stats name the stratum's run: "local" for a decomposable recursion (no
    tuple leaves its partition: one round, seed 001's coordination-free class), else
    "rounds"."""
    return "local" if st.strategy == "local" else "rounds"


def straggler() -> tuple:
    """(partition, seconds) from EVITA_SLOW_PARTITION=P:SECONDS: partition P sleeps that
    long in every round, a straggler every round waits for (seed 003's experiment, for
    benchmarks and tests). (None, 0.0) when unset."""
    import os

    value = os.environ.get("EVITA_SLOW_PARTITION", "")
    if ":" not in value:
        return None, 0.0
    part, seconds = value.split(":", 1)
    return int(part), float(seconds)


def plural_iterations(n: int) -> str:
    return f"{n} iteration" + ("" if n == 1 else "s")


def _schema(types: list) -> str:
    return ", ".join(f"c{i} {t}" for i, t in enumerate(types)) or "c0 boolean"


# ---------------------------------------------------------------- in the tasks

def owners(values, parts: int, spark_type: str):
    """The partition owning each value: one hash, the same in every process (pandas'
    `hash_array` has a fixed key), of the value as its declared type holds it."""
    import numpy as np
    import pandas as pd

    if spark_type in ("bigint", "int"):
        values = np.asarray(values, dtype=np.int64)
    elif spark_type == "double":
        values = np.asarray(values, dtype=np.float64)
    elif spark_type == "boolean":
        values = np.asarray(values, dtype=bool).astype(np.int64)
    else:
        values = np.asarray(values, dtype=object)
    return (pd.util.hash_array(values) % np.uint64(parts)).astype(np.int64)


def _arrow_schema(types: list, exact: bool = False):
    """The Arrow schema a task holds the columns in (an `int` as 64 bits, as its
    arithmetic gives them); `exact`: Spark's own types, to give the tuples back to Spark."""
    import pyarrow as pa

    return pa.schema([(f"c{i}", arrow_type(t, held=not exact)) for i, t in enumerate(types)])


def _blob(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _unblob(payload: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()


def _blobs(df, cuts: list, kind: str, types: list, parts: int):
    """The relation's rows as blobs addressed to their partitions, made where the rows
    are (no shuffle yet): for each (name, column) of `cuts`, partitioned on the column
    (every partition gets all rows where it is None)."""
    def encode(batches):
        import numpy as np
        import pyarrow as pa

        for batch in batches:
            table = pa.Table.from_batches([batch]).cast(_arrow_schema(types))
            for name, column in cuts:
                if column is None:
                    targets = [(p, table) for p in range(parts)]
                else:
                    owner = owners(table.column(column).to_numpy(zero_copy_only=False), parts, types[column])
                    targets = [(int(p), table.filter(pa.array(owner == p))) for p in np.unique(owner)]
                for p, rows in targets:
                    yield pa.RecordBatch.from_pydict({"part": pa.array([p], pa.int32()), "kind": [kind],
                                                      "rel": [name], "payload": pa.array([_blob(rows)], pa.binary())})

    return df.mapInArrow(encode, SCHEMA)


class _Decode:
    """State blobs -> the relation's rows (a DataFrame's `mapInArrow` function)."""

    def __init__(self, types: list):
        self.types = types

    def __call__(self, batches):
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                yield from _unblob(payload).cast(_arrow_schema(self.types, exact=True)).to_batches()


# (run, partition) -> {copy name: table}, in a Python worker: `_Round.copies`
_KEPT: dict = {}


class _Round:
    """One partition's round (a grouped `applyInPandas` function; pickled to the workers)."""

    def __init__(self, st: Stratum, storages: dict, types: dict, owner: dict, parts: int, budget: int,
                 slow: tuple = (None, 0.0), run: str = ""):
        self.st, self.storages, self.types = st, storages, types
        self.owner, self.parts, self.budget = owner, parts, budget
        self.slow, self.run = slow, run

    def function(self):
        """A plain (key, rows) function: Spark reads the parameters of what it is given."""
        def one_partition(key, pdf):
            return self(key, pdf, None)
        return one_partition

    def cogrouped(self):
        """(key, state and messages, copies): the function of a round that reads copies."""
        def one_partition(key, pdf, copies):
            return self(key, pdf, copies)
        return one_partition

    def copies(self, part: int, pdf) -> dict:
        """copy name -> table, for the partition. A Python worker runs many rounds' tasks
        (Spark reuses it): the tables it decoded for this run's partition are kept, not
        decoded again, whichever round asks. (The evaluator's `_Lookups` indexes are not
        built here: at 10^6 edges, building a dict index over each partition's copy in
        every worker cost more than the merges it saves: docs/performance.md.)"""
        key = (self.run, part)
        kept = _KEPT.get(key)
        if kept is None:
            for other in [k for k in _KEPT if k[0] != self.run]:  # an earlier run's: done with
                del _KEPT[other]
            blobs: dict = {}
            if pdf is not None:
                for rel, payload in zip(pdf["rel"], pdf["payload"]):
                    blobs.setdefault(rel, []).append(payload)
            names = [n for n in self.storages if n not in self.owner]
            kept = _KEPT[key] = {n: self.table(blobs.get(n, []), n) for n in names}
        return kept

    def table(self, blobs: list, name: str):
        import pandas as pd
        import pyarrow as pa

        if not blobs:
            return pd.DataFrame({f"c{i}": pd.Series([], dtype=_PANDAS[t]) for i, t in enumerate(self.types[name])})
        return pa.concat_tables([_unblob(b) for b in blobs]).to_pandas()

    def __call__(self, key, pdf, copies):
        import pandas as pd
        import pyarrow as pa
        from .columnar import PandasTables, evaluate_rule

        clock = time.perf_counter()
        part = int(key[0])
        if part == self.slow[0]:  # the straggler experiment: this partition's every round is late
            time.sleep(self.slow[1])
        blobs: dict = {}
        for kind, rel, payload in zip(pdf["kind"], pdf["rel"], pdf["payload"]):
            blobs.setdefault((kind, rel), []).append(payload)
        tables = self.copies(part, copies)
        ops = PandasTables()
        full, delta, sizes, held = {}, {}, {}, {}
        for name in self.owner:
            s = self.storages[name]
            state = self.table(blobs.get(("state", name), []), name)
            held[name] = len(state)
            pending = self.table(blobs.get(("pending", name), []), name)
            messages = self.table(blobs.get(("msg", name), []), name)
            arrived = semantics.new_delta(ops, s, state, messages) if len(messages) else messages
            full[name] = semantics.absorb(ops, s, state, arrived) if len(arrived) else state
            delta[name] = semantics.combine(ops, s, [pending, arrived])
            sizes[name] = len(delta[name])

        def route(name, new):
            mine = owners(new[f"c{self.owner[name]}"].to_numpy(), self.parts,
                          self.types[name][self.owner[name]]) == part
            return new[mine].reset_index(drop=True), new[~mine].reset_index(drop=True)

        def derive(name, read):
            def reading(step):
                return read(step) if step.relation in self.owner else tables[step.relation]
            outputs = [d for d in (evaluate_rule(r, reading) for r in self.st.delta_rules if r.head == name) if len(d)]
            return ops.union(self.storages[name], outputs) if outputs else None

        read = time.perf_counter()
        done = semantics.fixpoint(self.st, self.storages, ops, full, sizes, derive, max_iterations=None,
                                  delta=delta, route=route, budget=self.budget)
        iterated = time.perf_counter()
        rows, stat = [], {"sent": {}, "pending": {}, "iterations": len(done.rounds),
                          "gained": {n: len(done.full[n]) - held[n] for n in self.owner}}

        def emit(p, kind, name, table):
            arrow = pa.Table.from_pandas(table, schema=_arrow_schema(self.types[name]), preserve_index=False)
            rows.append((p, kind, name, _blob(arrow)))

        for name in self.owner:
            s = self.storages[name]
            emit(part, "state", name, done.full[name])
            if done.pending and name in done.pending:
                emit(part, "pending", name, done.pending[name])
                stat["pending"][name] = len(done.pending[name])
            away = [t for t in done.sent.get(name, []) if len(t)]
            if away:
                away = semantics.combine(ops, s, away)
                dest = owners(away[f"c{self.owner[name]}"].to_numpy(), self.parts, self.types[name][self.owner[name]])
                for p in sorted(set(dest.tolist())):
                    emit(p, "msg", name, away[dest == p].reset_index(drop=True))
                stat["sent"][name] = len(away)
        stat["seconds"] = {"read": read - clock, "iterate": iterated - read, "write": time.perf_counter() - iterated}
        rows.append((part, "stat", "", json.dumps(stat).encode()))
        return pd.DataFrame(rows, columns=["part", "kind", "rel", "payload"])
