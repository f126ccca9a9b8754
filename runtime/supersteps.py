"""Dedalus time on Spark: `evita run PROGRAM --steps N`.

The synchronous special case of the simulator's semantics (`docs/dedalus.md`): a global
timestep is a superstep, every message takes exactly one timestep, and a node's state
lives in the partitions of its location. Each superstep is one engine run of the tick
program (`runtime/dedalus.py`) over
- the facts (the EDB, at their nodes),
- the `@next` facts of the superstep before,
- the messages sent in the superstep before, now at their destinations,
- the inputs for this timestep;
then one Spark action collects what changed, what was sent and what the outputs gained,
and checkpoints the state the next superstep reads. It agrees with `evita simulate
--delay fixed:1` (a test holds them equal on every example) and is the path for data
that outgrows one process.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Optional

from . import progress
from .dedalus import CLOCK, MEMBER, Timed, unknown_address
from . import fired
from .simulate import COUNT_COLUMNS, Run, _state, _trace

WORLD = 0  # the one run's world column


@dataclass
class Superstep:
    step: int
    seconds: float
    actions: int
    changed: int  # tuples new or gone, over every relation
    sent: int


@dataclass
class StepsRun(Run):
    supersteps: list = field(default_factory=list)


def run_steps(timed: Timed, spark, steps: int, inputs: Optional[dict] = None, *,
              small: Optional[bool] = None) -> StepsRun:
    """Supersteps until the run quiesces or `steps` have run.

    Two ways to hold the state between supersteps, one semantics:
    - small (facts and inputs under SMALL_FACTS rows, or `small=True`): the state comes
      back to the driver with the superstep's one action and goes out again in the next
      statement's text, as the catalog programs do (`bootstrap/stage.py`): the whole
      superstep is one Spark job, in one partition;
    - large: the state stays in Spark as checkpointed DataFrames, a message moves to
      its destination's partitions there, and one shuffle finds what changed; only the
      changes and a copy of the messages (for the trace) come to the driver."""
    from ..bootstrap.stage import catalog_sized

    if small is None:
        small = len(timed.facts) + sum(len(v) for v in (inputs or {}).values()) < SMALL_FACTS
    if small:
        with catalog_sized(spark):
            return _Supersteps(timed, spark, inputs).run(steps, _DriverState(timed, spark))
    from .engine import SMALL_CONF

    saved = {k: spark.conf.get(k, None) for k in SMALL_CONF}
    try:
        return _Supersteps(timed, spark, inputs).run(steps, _SparkState(timed, spark))
    finally:
        for k, v in saved.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


SMALL_FACTS = 100_000


class _Supersteps:
    """The loop and its book-keeping: trace, counts, deliveries, quiescence."""

    def __init__(self, timed: Timed, spark, inputs: Optional[dict]):
        from ..bootstrap.planner import plan

        self.t = timed
        self.spark = spark
        self.flow = plan(timed.program)
        self.nodes = list(timed.nodes) or sorted({n for _, n, _ in timed.facts}, key=str)
        self.timed_in: dict = {}
        for rel, rows in (inputs or {}).items():
            for step, values in rows:
                self.timed_in.setdefault(step, {}).setdefault(rel, []).extend(
                    [(node, tuple(values)) for node in _places(timed, rel, tuple(values), self.nodes)])
        self.trace: list = []
        self.counts: dict = {}
        self.busy: set = set()

    def run(self, steps: int, state) -> StepsRun:
        import pandas as pd

        t0 = time.perf_counter()
        t = self.t
        last_input = max(self.timed_in, default=-1)
        supersteps, quiet_at, deliveries = [], None, []
        for step in range(steps):
            with progress.superstep(step, steps):
                s0 = time.perf_counter()
                arrived = self.timed_in.get(step, {})
                for rel, rows in arrived.items():
                    for node, values in rows:
                        self.trace.append((WORLD, step, node, "input", rel, values, None, step))
                for rel, dst, msg, src in deliveries:
                    self.trace.append((WORLD, step, dst, "deliver", rel, msg, src, step))
                    _count(self.counts, dst, "received")
                    self.busy.add((dst, step))
                changes, sends, actions = state.step(self.flow, step, self.nodes, deliveries, arrived)
                changed = 0
                for kind, rel, values in changes:
                    changed += 1
                    if kind == "new" and rel in t.arity:
                        n = t.arity[rel]
                        node = values[n + 1]
                        _count(self.counts, node, "derived")
                        self.busy.add((node, step))
                        if rel in t.shown:
                            self.trace.append((WORLD, step, node, "output", rel, values[:n], None, step))
                delivered_now = bool(deliveries)
                deliveries = self.messages(step, sends)
                sent = sum(len(v) for v in sends.values())
                supersteps.append(Superstep(step, time.perf_counter() - s0, actions, changed, sent))
                progress.note(f"{changed:,} tuples changed, {sent:,} messages sent", changed=changed, sent=sent)
            if not changed and not sent and not delivered_now and not t.uses_clock and step > last_input:
                quiet_at = step
                break
        finals = state.finals()
        for (node, _step) in self.busy:
            _count(self.counts, node, "busy_steps")
        rows = [(WORLD, node) + tuple(self.counts.get(node, {}).get(k, 0) for k in COUNT_COLUMNS[2:])
                for node in self.nodes]
        out = StepsRun(t, steps, _trace(self.trace), pd.DataFrame(rows, columns=COUNT_COLUMNS), {WORLD: quiet_at},
                       {rel: _state([pd.DataFrame(finals.get(rel, []), columns=[f"c{i}" for i in range(n + 2)])]
                                    if finals.get(rel) else [], n) for rel, n in t.arity.items()},
                       time.perf_counter() - t0, len(self.nodes) * len(supersteps))
        out.supersteps = supersteps
        return out

    def messages(self, step: int, sends: dict) -> list:
        """This superstep's messages -> (relation, destination, tuple, source), delivered
        at the next."""
        t = self.t
        out = []
        for name, rows in sends.items():
            send = t.sends[name]
            n = t.arity[send.relation]
            for values in rows:
                msg, src = values[:n], values[n + 1]
                dst = msg[send.location]
                _count(self.counts, src, "sent")
                if dst not in self.nodes:
                    if send.relation in t.read:
                        raise unknown_address(send, dst, msg, self.nodes)
                    self.trace.append((WORLD, step + 1, dst, "external", send.relation, msg, src, step + 1))
                    continue
                self.trace.append((WORLD, step, src, "send", send.relation, msg, dst, step + 1))
                out.append((send.relation, dst, msg, src))
        return out


class _DriverState:
    """Small runs: every relation's tuples on the driver between supersteps; a superstep
    is one engine run whose inputs are literal rows in the statement and whose outputs
    come back in one action. Only the rules that may derive something new are evaluated
    (`runtime/fired.py`); a superstep where none may runs no Spark job."""

    def __init__(self, timed: Timed, spark):
        self.t = timed
        self.spark = spark
        self.edb: dict = {}
        for rel, node, values in timed.facts:
            self.edb.setdefault(rel, set()).add(tuple(values) + (WORLD, node))
        self.fired = fired.of(timed)
        self.carried: dict = {}
        self.given: dict = {}  # each relation's input tuples at the previous timestep (none before 0)
        self.held: dict = {}  # tick-program relation -> its tuples at the previous timestep
        self.first = True

    def step(self, flow, step: int, nodes: list, deliveries: list, arrived: dict):
        from .engine import SqlScope, run

        t = self.t
        known = [n for n in list(t.arity) + list(t.nexts) + list(t.sends) if n in flow.relations]
        rows: dict = {rel: set(v) for rel, v in self.edb.items()}
        for rel, v in self.carried.items():
            rows.setdefault(rel, set()).update(v)
        for rel, dst, msg, _src in deliveries:
            rows.setdefault(rel, set()).add(tuple(msg) + (WORLD, dst))
        for rel, got in arrived.items():
            rows.setdefault(rel, set()).update(tuple(values) + (WORLD, node) for node, values in got)
        changed = {rel for rel in set(rows) | set(self.given) if rows.get(rel, set()) != self.given.get(rel, set())}
        evaluated, rules = self.fired.fire(changed, {rel for rel, v in self.held.items() if v}, self.first)
        self.given, self.first = rows, False
        actions, got = 0, {}
        if rules:
            flow = self.fired.flow(rules)
            given = {}
            for rel in flow.relations:
                tuples = rows.get(rel) if rel in evaluated else self.held.get(rel)
                if tuples and rel in t.arity:
                    given[rel] = _literal(sorted(tuples, key=repr), t.arity[rel] + 2)
            given[MEMBER] = _literal([(c, a) for c, addrs in t.components.items() for a in addrs] or [("", "")], 2)
            given[CLOCK] = _literal([(step, WORLD, n) for n in nodes], 3)
            scope = SqlScope(self.spark)
            result = run(flow, self.spark, given, local=False, one_partition=True, scope=scope)
            wanted = [n for n in known if n in evaluated and n in result.relations]
            got = scope.collect([(n, result.table(n)) for n in wanted], one_partition=True)
            actions = result.actions + 1
        changes = []
        for rel in known:
            if rel not in evaluated:  # it holds what it held
                continue
            # evaluated: what its rules derived, or (no rule left to run) its inputs
            now, before = got.get(rel, rows.get(rel, set())), self.held.get(rel, set())
            if rel not in t.sends:
                changes += [("new", rel, v) for v in sorted(now - before, key=repr)]
                changes += [("gone", rel, v) for v in sorted(before - now, key=repr)]
            self.held[rel] = now
        self.carried = {rel: self.held[name] for name, rel in t.nexts.items() if name in self.held}
        sends = {name: sorted(self.held[name], key=repr) for name in t.sends if self.held.get(name)}
        return changes, sends, actions

    def finals(self) -> dict:
        return {rel: list(v) for rel, v in self.held.items() if rel in self.t.arity}


def _literal(rows: list, width: int):
    """Rows as an engine input written into the statement (no Spark call)."""
    from sqlglot import exp

    from .engine import SqlInput
    from .sql import array_literal, fn

    types = []
    for i in range(width):
        kinds = {type(r[i]) for r in rows}
        types.append("string" if kinds & {str} or not kinds else "double" if float in kinds
                     else "boolean" if kinds == {bool} else "bigint")
    return SqlInput(exp.select(fn("inline", array_literal(rows, types))), width)


class _SparkState:
    """Large runs: the state stays in Spark (checkpointed DataFrames between supersteps)."""

    def __init__(self, timed: Timed, spark):
        self.t = timed
        self.spark = spark
        self.edb = {}
        for rel in timed.arity:
            rows = [(node, values) for (r, node, values) in timed.facts if r == rel]
            if rows:
                self.edb[rel] = self.frame(rel, rows)
        self.carried: dict = {}
        self.previous: dict = {}
        self.outbox: dict = {}

    def frame(self, rel: str, rows: list):
        """rows: (node, values) -> a DataFrame c0..cN-1, world, node (types inferred by Spark)."""
        n = self.t.arity[rel]
        data = [tuple(values) + (WORLD, node) for node, values in rows]
        return self.spark.createDataFrame(data, [f"c{i}" for i in range(n + 2)]) if data else None

    def step(self, flow, step: int, nodes: list, deliveries: list, arrived: dict):
        from pyspark.sql import functions as F

        from .engine import run

        t, spark = self.t, self.spark
        delivered = self.outbox  # the messages of the superstep before, moved in Spark
        timed = {rel: self.frame(rel, got) for rel, got in arrived.items()}
        given = {}
        for rel in t.arity:
            parts = [df for df in (self.edb.get(rel), self.carried.get(rel), delivered.get(rel), timed.get(rel))
                     if df is not None]
            if parts:
                df = parts[0]
                for p in parts[1:]:
                    df = df.unionByName(p)
                given[rel] = df
        given[MEMBER] = spark.createDataFrame([(c, a) for c, addrs in t.components.items() for a in addrs]
                                              or [("", "")], ["c0", "c1"])
        given[CLOCK] = spark.createDataFrame([(step, WORLD, n) for n in nodes], ["c0", "c1", "c2"])
        result = run(flow, spark, given)
        state = {rel: result.relations[rel].localCheckpoint(eager=False)
                 for rel in list(t.arity) + list(t.nexts) + list(t.sends) if rel in result.relations}
        # One action, one shuffle: every tuple of now (1) and of before (2) meets its
        # twin or not; sends (0) pass whole. New: only now; gone: only before.
        parts = []
        for rel, df in state.items():
            parts.append(_tagged(df, 0 if rel in t.sends else 1, rel))
            if rel not in t.sends and rel in self.previous:
                parts.append(_tagged(self.previous[rel], 2, rel))
        union = parts[0]
        for x in parts[1:]:
            union = union.unionByName(x)
        met = union.groupBy("rel", "row").agg(F.min("tag").alias("lo"), F.max("tag").alias("hi"))
        changes, sends = [], {}
        for r in sorted(met.where((F.col("lo") != 1) | (F.col("hi") != 2)).collect(), key=lambda r: r["row"]):
            values = tuple(_plain(v) for v in json.loads(r["row"])[0].values())
            if r["lo"] == 0:
                sends.setdefault(r["rel"], []).append(values)
            else:
                changes.append(("new" if r["lo"] == 1 else "gone", r["rel"], values))
        self.carried = {rel: state[name] for name, rel in t.nexts.items() if name in state}
        self.previous = {rel: df for rel, df in state.items() if rel not in t.sends}
        # A message is an exchange to its destination's partitions: its node column
        # becomes the destination (messages leaving the system stay behind).
        self.outbox = {}
        for name, send in t.sends.items():
            if name in state:
                n, dst = t.arity[send.relation], F.col(f"c{send.location}")
                moved = state[name].where(dst.isin(nodes)).withColumn(f"c{n + 1}", dst)
                old = self.outbox.get(send.relation)
                self.outbox[send.relation] = moved if old is None else old.unionByName(moved)
        return changes, sends, result.actions + 1

    def finals(self) -> dict:
        from pyspark.sql import functions as F

        union = None
        for rel in self.t.arity:
            if rel in self.previous:
                df = self.previous[rel]
                part = df.select(F.lit(rel).alias("rel"), F.to_json(F.array(F.struct(*df.columns))).alias("row"))
                union = part if union is None else union.unionByName(part)
        got: dict = {}
        for r in union.collect() if union is not None else []:
            got.setdefault(r["rel"], []).append(tuple(_plain(v) for v in json.loads(r["row"])[0].values()))
        return got


def _tagged(df, tag: int, rel: str):
    from pyspark.sql import functions as F

    return df.select(F.lit(tag).alias("tag"), F.lit(rel).alias("rel"),
                     F.to_json(F.array(F.struct(*df.columns))).alias("row"))


def _count(counts: dict, node, what: str) -> None:
    c = counts.setdefault(node, {})
    c[what] = c.get(what, 0) + 1


def _plain(v):
    return tuple(_plain(x) for x in v) if isinstance(v, list) else v


def _places(t: Timed, rel: str, values: tuple, nodes: list) -> list:
    loc = t.location.get(rel)
    return [values[loc]] if loc is not None else nodes
