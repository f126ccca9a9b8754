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

from ..bootstrap.diagnostics import Diagnostic, EvitaError
from .dedalus import CLOCK, MEMBER, Timed
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


def run_steps(timed: Timed, spark, steps: int, inputs: Optional[dict] = None) -> StepsRun:
    """Supersteps until the run quiesces or `steps` have run. Small runs (facts and
    inputs under SMALL_FACTS rows) tune Spark for tiny jobs, as the engine does."""
    from .engine import SMALL_CONF

    small = len(timed.facts) + sum(len(v) for v in (inputs or {}).values()) < SMALL_FACTS
    saved = {k: spark.conf.get(k, None) for k in SMALL_CONF} if small else {}
    for k in saved:
        spark.conf.set(k, SMALL_CONF[k])
    try:
        return _run_steps(timed, spark, steps, inputs)
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


SMALL_FACTS = 100_000


def _run_steps(timed: Timed, spark, steps: int, inputs: Optional[dict] = None) -> StepsRun:
    from pyspark.sql import functions as F

    from ..bootstrap.planner import plan
    from .engine import run

    t0 = time.perf_counter()
    t = timed
    flow = plan(t.program)
    nodes = list(t.nodes) or sorted({n for _, n, _ in t.facts}, key=str)

    def frame(rel: str, rows: list):
        """rows: (node, values) -> a DataFrame c0..cN-1, world, node (types inferred by Spark)."""
        n = t.arity[rel]
        data = [tuple(values) + (WORLD, node) for node, values in rows]
        return spark.createDataFrame(data, [f"c{i}" for i in range(n + 2)]) if data else None

    edb = {}
    for rel in t.arity:
        rows = [(node, values) for (r, node, values) in t.facts if r == rel]
        if rows:
            edb[rel] = frame(rel, rows)
    member = spark.createDataFrame([(c, a) for c, addrs in t.components.items() for a in addrs] or [("", "")],
                                   ["c0", "c1"])
    timed_in: dict = {}
    for rel, rows in (inputs or {}).items():
        for step, values in rows:
            timed_in.setdefault(step, {}).setdefault(rel, []).extend(
                [(node, tuple(values)) for node in _places(t, rel, tuple(values), nodes)])
    last_input = max(timed_in, default=-1)
    carried: dict = {}
    delivered: dict = {}
    previous: dict = {}
    trace: list = []
    counts: dict = {}
    busy: set = set()
    supersteps = []
    quiet_at = None
    deliveries = 0
    for step in range(steps):
        s0 = time.perf_counter()
        given = {}
        arrived = {rel: frame(rel, rows) for rel, rows in timed_in.get(step, {}).items()}
        for rel, rows in timed_in.get(step, {}).items():
            for node, values in rows:
                trace.append((WORLD, step, node, "input", rel, values, None, step))
        for rel in t.arity:
            parts = [df for df in (edb.get(rel), carried.get(rel), delivered.get(rel), arrived.get(rel))
                     if df is not None]
            if parts:
                df = parts[0]
                for p in parts[1:]:
                    df = df.unionByName(p, allowMissingColumns=False)
                given[rel] = df
        given[MEMBER] = member
        given[CLOCK] = spark.createDataFrame([(step, WORLD, n) for n in nodes], ["c0", "c1", "c2"])
        result = run(flow, spark, given)
        actions = result.actions
        state = {}
        for rel in list(t.arity) + list(t.nexts) + list(t.sends):
            if rel in result.relations:
                state[rel] = result.relations[rel].localCheckpoint(eager=False)
        # One action, one shuffle: every tuple of now (1) and of before (2) meets its
        # twin or not; sends (0) pass whole. New: only now; gone: only before.
        parts = []
        for rel, df in state.items():
            parts.append(_tagged(df, 0 if rel in t.sends else 1, rel))
            if rel not in t.sends and rel in previous:
                parts.append(_tagged(previous[rel], 2, rel))
        rows = []
        if parts:
            union = parts[0]
            for x in parts[1:]:
                union = union.unionByName(x)
            met = union.groupBy("rel", "row").agg(F.min("tag").alias("lo"), F.max("tag").alias("hi"))
            rows = met.where((F.col("lo") != 1) | (F.col("hi") != 2)).collect()
            actions += 1
        changed, sent = 0, 0
        sends: dict = {}
        for r in rows:
            values = tuple(_plain(v) for v in json.loads(r["row"])[0].values())
            if r["lo"] == 0:
                sends.setdefault(r["rel"], []).append(values)
                continue
            changed += 1
            rel = r["rel"]
            if r["lo"] == 1 and rel in t.arity:
                n = t.arity[rel]
                node = values[n + 1]
                _count(counts, node, "derived")
                busy.add((node, step))
                if rel in t.shown:
                    trace.append((WORLD, step, node, "output", rel, values[:n], None, step))
        # messages: delivered at the next superstep (delay 1)
        delivered = {}
        next_rows: dict = {}
        for name, out in sends.items():
            send = t.sends[name]
            n = t.arity[send.relation]
            for values in out:
                msg, src = values[:n], values[n + 1]
                dst = msg[send.location]
                sent += 1
                _count(counts, src, "sent")
                if dst not in nodes:
                    if send.relation in t.read:
                        raise EvitaError([Diagnostic(
                            "unknown-address", f"rule {'/'.join(send.rules)} sends {send.relation}{msg!r} to "
                            f"{dst!r}, an address no component has", send.spans[0], send.relation,
                            "send to a component's address, or add a component at that address")])
                    trace.append((WORLD, step + 1, dst, "external", send.relation, msg, src, step + 1))
                    continue
                trace.append((WORLD, step, src, "send", send.relation, msg, dst, step + 1))
                trace.append((WORLD, step + 1, dst, "deliver", send.relation, msg, src, step + 1))
                _count(counts, dst, "received")
                busy.add((dst, step + 1))
                next_rows.setdefault(send.relation, []).append((dst, msg))
        for rel, got in next_rows.items():
            delivered[rel] = frame(rel, got)
        carried = {rel: state[name] for name, rel in t.nexts.items() if name in state}
        previous = {rel: df for rel, df in state.items() if rel not in t.sends}
        supersteps.append(Superstep(step, time.perf_counter() - s0, actions, changed, sent))
        if not changed and not sent and not deliveries and not t.uses_clock and step > last_input:
            quiet_at = step
            break
        deliveries = sum(len(v) for v in next_rows.values())
    finals = {}
    if previous:
        union = None
        for rel in t.arity:
            if rel in previous:
                df = previous[rel]
                part = df.select(F.lit(rel).alias("rel"), F.to_json(F.array(F.struct(*df.columns))).alias("row"))
                union = part if union is None else union.unionByName(part)
        got: dict = {}
        for r in union.collect() if union is not None else []:
            got.setdefault(r["rel"], []).append(tuple(_plain(v) for v in json.loads(r["row"])[0].values()))
        import pandas as pd

        for rel in t.arity:
            n = t.arity[rel]
            rows = got.get(rel, [])
            finals[rel] = _state([pd.DataFrame(rows, columns=[f"c{i}" for i in range(n + 2)])] if rows else [], n)
    for (node, _step) in busy:
        _count(counts, node, "busy_steps")
    import pandas as pd

    count_rows = [(WORLD, node) + tuple(counts.get(node, {}).get(k, 0) for k in COUNT_COLUMNS[2:]) for node in nodes]
    out = StepsRun(t, steps, _trace(trace), pd.DataFrame(count_rows, columns=COUNT_COLUMNS), {WORLD: quiet_at},
                   finals, time.perf_counter() - t0, len(nodes) * len(supersteps))
    out.supersteps = supersteps
    return out


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
