"""A deterministic discrete-event simulator for Dedalus programs (`evita simulate`).

Every node of every component address runs one timestep per tick of a global clock:
its component's rules to a fixpoint over its facts, its `@next` facts of the timestep
before and the messages the network delivers now (`docs/dedalus.md`). The network
gives each message a delay >= 1 drawn from a hash of the seed and the message's logical
content (source, destination, relation, tuple), so two versions of a protocol see the
same delay for the same message (the decoupling stages compare runs this way), and
arrivals group into timesteps at random.

Many runs at once: every seed is a *world*, a hidden column of every relation
(`runtime/dedalus.py`), so one timestep of every node of every world is one vectorized
fixpoint (`columnar.run_dataflow`), not a fixpoint per node. A world that quiesces
(nothing in flight, nothing changed) leaves the loop. No Spark job runs per timestep:
lock-step Spark rounds would hide the orderings the simulator exists to try.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.runtime.dedalus import lower
>>> t = lower(parse_program('''
...   component pinger @ "a" { ping(@"b", 1)@async :- start(@"a"). start(@"a"). }
...   component ponger @ "b" {
...     r1 got(@N, X)@next :- ping(@N, X).
...     r2 got(@N, X)@next :- got(@N, X). }
...   query got(N, X).''', "doc.olg"))
>>> run = Simulation(t, seeds=[1, 2], delay="uniform:1-5").run(steps=20)
>>> sorted(run.final("got").itertuples(index=False, name=None))
[(1, 'b', 'b', 1), (2, 'b', 'b', 1)]
>>> [k for k in run.trace["kind"].unique()]
['send', 'deliver', 'output']
"""
from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field
from typing import Optional

from ..bootstrap import activity
from ..bootstrap.diagnostics import Diagnostic, EvitaError
from ..bootstrap.syntax import Span
from .dedalus import CLOCK, MEMBER, Timed, unknown_address

# Where a diagnostic about the whole run points (Diagnostic.sort_key needs a span).
NOWHERE = Span("<simulate>", 0, 0)
TRACE_COLUMNS = ["seed", "step", "node", "kind", "relation", "tuple", "peer", "arrive"]
COUNT_COLUMNS = ["seed", "node", "sent", "received", "derived", "busy_steps"]


# ---------------------------------------------------------------- the network

@dataclass(frozen=True)
class Delay:
    """`uniform:LO-HI`, `geometric:P` (1 + failures before a success) or `fixed:D`."""
    kind: str
    low: int = 1
    high: int = 1
    p: float = 0.5

    @staticmethod
    def parse(text: str) -> "Delay":
        kind, _, arg = text.partition(":")
        try:
            if kind == "uniform":
                lo, _, hi = arg.partition("-")
                d = Delay("uniform", int(lo), int(hi or lo))
                if 1 <= d.low <= d.high:
                    return d
            elif kind == "geometric" and 0 < float(arg) <= 1:
                return Delay("geometric", p=float(arg))
            elif kind == "fixed" and int(arg) >= 1:
                return Delay("fixed", int(arg), int(arg))
        except ValueError:
            pass
        raise EvitaError([Diagnostic("bad-delay", f"--delay {text}: not a delay distribution", NOWHERE, text,
                                     "write uniform:LO-HI (1 <= LO <= HI), geometric:P (0 < P <= 1) or fixed:D")])

    def of(self, u: float) -> int:
        """The delay for a uniform draw u in [0, 1)."""
        if self.kind == "uniform":
            return self.low + int(u * (self.high - self.low + 1))
        if self.kind == "geometric":
            return 1 if self.p >= 1 else 1 + int(math.log1p(-u) / math.log1p(-self.p))
        return self.low


def logical(address) -> str:
    """The address a message's delay is keyed on: a decoupled copy `A/2` and a partition
    `A#1` are the logical node A, so rewritten and original programs draw alike."""
    text = str(address)
    while True:  # a partition of a decoupled copy, A/2#1, is A too
        head, s, tail = max(text.rpartition("/"), text.rpartition("#"), key=lambda p: len(p[0]))
        if not (s and tail.isdigit()):
            return text
        text = head


def draw(seed: int, salt: str, *parts) -> float:
    """A uniform number in [0, 1) from the seed and the parts: the same message in the
    same seed always draws the same number, on any machine."""
    h = hashlib.blake2b(repr((seed, salt) + parts).encode(), digest_size=8).digest()
    return struct.unpack(">Q", h)[0] / 2.0 ** 64


# ---------------------------------------------------------------- a run

@dataclass
class Run:
    """What a simulation leaves: the trace, per-node counts, final states."""
    timed: Timed
    steps: int
    trace: object  # pandas DataFrame, TRACE_COLUMNS
    counts: object  # pandas DataFrame, COUNT_COLUMNS
    quiesced: dict  # seed -> step it quiesced at, or None
    states: dict = field(default_factory=dict)  # relation -> DataFrame (seed, node, c0, ...)
    seconds: float = 0.0
    node_steps: int = 0  # node-timesteps evaluated

    def final(self, relation: str):
        """What `relation` held at each node at the end: seed, node, c0, c1, ..."""
        return self.states[relation]

    @property
    def late(self) -> list:
        """Seeds that had not quiesced at the horizon."""
        return [s for s, q in self.quiesced.items() if q is None]


class Simulation:
    every_rule = False  # evaluate every rule at every timestep (the differential test's reference)

    def __init__(self, timed: Timed, seeds, delay: str = "uniform:1-3", drop: float = 0.0,
                 inputs: Optional[dict] = None, crash: Optional[dict] = None):
        """`inputs`: relation -> [(step, tuple)], tuples arriving over time (a located
        relation's at its location, others at every node). `crash`: node -> step from
        which it neither steps nor receives."""
        from ..bootstrap.planner import plan

        self.t = timed
        self.seeds = sorted(set(int(s) for s in seeds))
        self.delay = Delay.parse(delay) if isinstance(delay, str) else delay
        self.drop = drop
        self.crash = dict(crash or {})
        self.flow = plan(timed.program)
        self.inputs = inputs or {}
        self.nodes = list(timed.nodes) or sorted({n for _, n, _ in timed.facts}, key=str)
        for rel, rows in self.inputs.items():
            if rel not in timed.arity:
                raise EvitaError([Diagnostic("unknown-input", f"input {rel}: the program has no relation {rel}",
                                             NOWHERE, rel, "name a relation the program reads")])

    # ------------------------------------------------------------ tables

    def _frame(self, relation: str, rows: list):
        """rows: (world, node, values) -> the relation's table, hidden columns last."""
        import pandas as pd

        n = self.t.arity[relation]
        cols = {f"c{i}": [r[2][i] for r in rows] for i in range(n)}
        cols[f"c{n}"] = pd.Series([r[0] for r in rows], dtype="int64")
        cols[f"c{n + 1}"] = pd.Series([r[1] for r in rows], dtype="object")
        return pd.DataFrame(cols)

    def _located(self, relation: str, values: tuple, everywhere: list) -> list:
        loc = self.t.location.get(relation)
        return [values[loc]] if loc is not None else everywhere

    # ------------------------------------------------------------ the loop

    def run(self, steps: int = 100) -> Run:
        import time

        import numpy as np
        import pandas as pd

        from .columnar import NoFixpoint, Unsupported, run_dataflow

        t0 = time.perf_counter()
        t = self.t
        worlds = list(self.seeds)
        edb = {}
        for rel in t.arity:
            rows = [(w, node, values) for (r, node, values) in t.facts if r == rel for w in worlds]
            if rows:
                edb[rel] = self._frame(rel, rows)
        member = pd.DataFrame({"c0": [c for c, addrs in t.components.items() for _ in addrs],
                               "c1": [a for addrs in t.components.values() for a in addrs]})
        timed_in = {}
        for rel, rows in self.inputs.items():
            for step, values in rows:
                for node in self._located(rel, tuple(values), self.nodes):
                    timed_in.setdefault(step, []).append((rel, node, tuple(values)))
        carried: dict = {}
        pending: list = []  # (arrive, world, src, dst, relation, values)
        previous: dict = {}
        kept: dict = {}  # relation -> the row keys of previous[relation]
        quiesced = {w: None for w in worlds}
        active = set(worlds)
        trace: list = []
        counts: dict = {}
        busy: set = set()
        node_steps = 0
        states: dict = {}
        last_input = max(timed_in, default=-1)
        changes = None if self.every_rule else _WhatChanged(self.flow, t)

        def count(w, n, what, k=1):
            c = counts.setdefault((w, n), {"sent": 0, "received": 0, "derived": 0, "busy_steps": 0})
            c[what] += k

        for step in range(steps):
            if not active:
                break
            # for the progress line (runtime/progress.py); nothing is logged per timestep
            activity.note(f"timestep {step}: {len(active):,} of {len(worlds):,} runs going")
            live = sorted(active)
            now = [m for m in pending if m[0] == step and m[1] in active]
            pending = [m for m in pending if m[0] > step]
            arrivals: dict = {}
            for arrive, w, src, dst, rel, values in now:
                if dst in self.crash and step >= self.crash[dst]:
                    continue
                arrivals.setdefault(rel, []).append((w, dst, values))
                trace.append((w, step, dst, "deliver", rel, values, src, step))
                count(w, dst, "received")
                busy.add((w, dst, step))
            for rel, node, values in timed_in.get(step, ()):
                for w in live:
                    arrivals.setdefault(rel, []).append((w, node, values))
                    trace.append((w, step, node, "input", rel, values, None, step))
            up = [n for n in self.nodes if not (n in self.crash and step >= self.crash[n])]
            inputs = {}
            for rel in t.arity:
                parts = []
                if rel in edb:
                    parts.append(_worlds(edb[rel], t.arity[rel], active))
                if rel in carried:
                    parts.append(carried[rel])
                if rel in arrivals:
                    parts.append(self._frame(rel, arrivals[rel]))
                parts = [p for p in parts if len(p)]
                if parts:
                    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
                    inputs[rel] = _up(df, t.arity[rel], up)
            inputs[MEMBER] = member
            inputs[CLOCK] = pd.DataFrame({"c0": pd.Series([step] * (len(live) * len(up)), dtype="int64"),
                                          "c1": pd.Series([w for w in live for _ in up], dtype="int64"),
                                          "c2": pd.Series([n for _ in live for n in up], dtype="object")})
            try:
                if changes is None:
                    tables, evaluated = run_dataflow(self.flow, inputs), None
                else:
                    tables, evaluated = changes.timestep(inputs, up, live)
            except Unsupported as e:
                raise EvitaError([Diagnostic("simulate-unsupported", f"the simulator cannot evaluate this "
                                             f"program: {e}", NOWHERE, "", "evita run --steps N runs it on Spark")])
            except NoFixpoint:
                raise EvitaError([Diagnostic("no-fixpoint", f"timestep {step} reached no fixpoint", NOWHERE, "",
                                             "check the program's recursion")])
            node_steps += len(live) * len(up)
            # -- what holds now, what is new, what changed (per world)
            changed = set()
            for rel in list(t.arity) + list(t.nexts):
                cur = tables.get(rel)
                if cur is None or (evaluated is not None and rel not in evaluated):
                    continue  # (not evaluated: it holds its previous tuples, none new or gone)
                n = t.arity.get(rel, t.arity.get(t.nexts.get(rel, ""), 0))
                before = previous.get(rel)
                keys = _row_keys(cur) if len(cur) else None
                old = kept.get(rel) if before is not None and len(before) else None
                new = cur if old is None or keys is None else cur[~np.isin(keys, old)]
                gone = cur.iloc[0:0] if before is None or not len(before) else (
                    before if keys is None else before[~np.isin(old, keys)])
                for df in (new, gone):
                    if len(df):
                        changed.update(df[f"c{n}"].tolist())
                kept[rel] = keys
                if rel in t.arity and len(new):
                    for (w, node), k in new.groupby([f"c{n}", f"c{n + 1}"]).size().items():
                        count(w, node, "derived", int(k))
                        busy.add((w, node, step))
                    if rel in t.shown:
                        for row in new.itertuples(index=False, name=None):
                            trace.append((row[n], step, row[n + 1], "output", rel, tuple(row[:n]), None, step))
                previous[rel] = cur
            carried = {t.nexts[name]: tables[name] for name in t.nexts if name in tables and len(tables[name])}
            # -- messages
            sent_worlds = set()
            for name, send in t.sends.items():
                out = tables.get(name)
                if out is None or not len(out):
                    continue
                n = t.arity[send.relation]
                for row in out.itertuples(index=False, name=None):
                    values, w, src = tuple(row[:n]), row[n], row[n + 1]
                    dst = values[send.location]
                    # the message's logical content: addresses in it (its own location
                    # first) count as their logical node, like its source and destination
                    content = tuple(logical(v) if isinstance(v, str) else v for v in values)
                    if dst not in self.nodes:
                        if send.relation in t.read:
                            raise unknown_address(send, dst, values, self.nodes)
                        arrive = step + self.delay.of(draw(w, "delay", logical(src), logical(dst), send.relation,
                                                            content))
                        trace.append((w, arrive, dst, "external", send.relation, values, src, arrive))
                        count(w, src, "sent")
                        sent_worlds.add(w)
                        continue
                    if self.drop and draw(w, "drop", logical(src), logical(dst), send.relation, content) < self.drop:
                        continue
                    arrive = step + self.delay.of(draw(w, "delay", logical(src), logical(dst), send.relation, content))
                    pending.append((arrive, w, src, dst, send.relation, values))
                    trace.append((w, step, src, "send", send.relation, values, dst, arrive))
                    count(w, src, "sent")
                    sent_worlds.add(w)
            in_flight = {m[1] for m in pending}
            delivered = {m[1] for m in now}
            for w in live:
                # a world that sent anything now is not quiet (an external message is in
                # no one's pending list: a node replying to a client at every step would
                # otherwise quiesce while it goes on sending)
                if (w not in changed and w not in in_flight and w not in sent_worlds and not t.uses_clock
                        and step > last_input and w not in delivered):
                    quiesced[w] = step
                    active.discard(w)
            for rel, cur in previous.items():
                if rel in t.arity and len(cur):
                    n = t.arity[rel]
                    done = cur[~cur[f"c{n}"].isin(active)] if active else cur
                    if len(done):
                        states.setdefault(rel, []).append(done)
                        keep = (cur[f"c{n}"].isin(active)).to_numpy()
                        previous[rel] = cur[keep]
                        kept[rel] = kept[rel][keep] if kept.get(rel) is not None else None
            carried = {rel: df[df[f"c{t.arity[rel]}"].isin(active)] for rel, df in carried.items()}
        for rel, cur in previous.items():  # the worlds still running at the horizon
            if rel in t.arity and len(cur):
                states.setdefault(rel, []).append(cur)
        for (w, node, _step) in busy:
            count(w, node, "busy_steps")
        return Run(t, steps, _trace(trace), _counts(counts, self.seeds, self.nodes),
                   quiesced, {rel: _state(states.get(rel, []), t.arity[rel]) for rel in t.arity},
                   time.perf_counter() - t0, node_steps)


class _WhatChanged:
    """A timestep's tables, all worlds at once, evaluating only the rules its changes
    reach (`runtime/fired.py`): a relation's inputs changed when they differ, as a set,
    from the previous timestep's in some world still running; `__clock` changed (beyond
    its timestep, which only the rules reading `tick()` see) at timestep 0 and when the
    nodes up change; every relation not evaluated holds its previous tuples, restricted
    to the worlds still running (so a world that left the loop leaves no tuples)."""

    def __init__(self, flow, timed: Timed):
        from . import fired

        self.flow = flow
        self.fired = fired.of(timed)
        self.held: dict = {}  # relation -> its table at the previous timestep
        self.given: dict = {}  # relation -> its inputs at the previous timestep
        self.up = None  # the nodes up at the previous timestep (None: before timestep 0)
        self.worlds = None  # the worlds `held` and `given` hold

    def timestep(self, inputs: dict, up: list, live: list) -> tuple:
        """(every relation's table, the relations evaluated) for this timestep's
        `inputs`. Raises what `run_dataflow` raises."""
        from .columnar import combine, run_dataflow

        if self.up is None:
            _check_supported(self.flow)  # what the whole dataflow refuses, it refuses at timestep 0
        if self.worlds != live:
            self.held = {rel: _in_worlds(df, live) for rel, df in self.held.items()}
            self.given = {rel: _in_worlds(df, live) for rel, df in self.given.items()}
            self.worlds = live
        changed = {rel for rel in set(inputs) | set(self.given)
                   if rel not in (MEMBER, CLOCK) and not _same_rows(inputs.get(rel), self.given.get(rel))}
        nonempty = {rel for rel, df in self.held.items() if len(df)}
        evaluated, rules = self.fired.fire(changed, nonempty, up != self.up)
        got: dict = {}
        if rules:
            sub = self.fired.flow(rules)
            read = self.fired.reads(rules)
            given = {MEMBER: inputs[MEMBER], CLOCK: inputs[CLOCK]}
            for rel in sub.relations:
                if rel in evaluated and rel in inputs:
                    given[rel] = inputs[rel]
                elif rel not in evaluated and rel in read and rel in self.held:
                    given[rel] = self.held[rel]
            got = run_dataflow(sub, given)
        tables = dict(self.held)
        for rel in evaluated:
            if rel in got:
                tables[rel] = got[rel]
            elif rel in self.flow.relations:  # no rule reads or derives it now: its inputs
                tables[rel] = combine(self.flow.relations[rel], [inputs[rel]] if rel in inputs else [])
        self.held, self.given, self.up = tables, {rel: df for rel, df in inputs.items()
                                                  if rel not in (MEMBER, CLOCK)}, list(up)
        return tables, evaluated


def _check_supported(flow) -> None:
    """Raise Unsupported as `run_dataflow` over the whole `flow` would, before any data."""
    from .columnar import Unsupported, base_tables, unsupported

    base_tables(flow, {})
    for st in flow.strata:
        why = unsupported(st.init_rules + st.delta_rules, [flow.relations[n] for n in st.relations])
        if why:
            raise Unsupported(why)


def _in_worlds(df, worlds: list):
    """A tick-program table's rows of these worlds (the world is its next-to-last column)."""
    if not len(df):
        return df
    keep = df[df.columns[-2]].isin(worlds).to_numpy()
    return df if keep.all() else df[keep].reset_index(drop=True)


def _same_rows(a, b) -> bool:
    """Whether two tables hold the same set of rows (None: no rows)."""
    import numpy as np

    if a is None or not len(a):
        return b is None or not len(b)
    if b is None or not len(b) or list(a.columns) != list(b.columns):
        return False
    return np.array_equal(np.unique(_row_keys(a)), np.unique(_row_keys(b)))


def _worlds(df, n: int, active: set):
    return df[df[f"c{n}"].isin(active)]


def _up(df, n: int, up: list):
    return df[df[f"c{n + 1}"].isin(up)].reset_index(drop=True)


def _row_keys(df):
    import pandas as pd

    try:
        return pd.util.hash_pandas_object(df, index=False, categorize=False).to_numpy()
    except TypeError:  # a column of tuples (a set or list aggregate): hash its text
        return pd.util.hash_pandas_object(df.astype(str), index=False, categorize=False).to_numpy()


def _trace(rows: list):
    import pandas as pd

    rows = sorted(rows, key=lambda r: (r[0], r[1], str(r[2]), r[3], r[4], repr(r[5])))
    return pd.DataFrame(rows, columns=TRACE_COLUMNS)


def _counts(counts: dict, seeds: list, nodes: list):
    import pandas as pd

    rows = []
    for w in seeds:
        for node in nodes:
            c = counts.get((w, node), {})
            rows.append((w, node, c.get("sent", 0), c.get("received", 0), c.get("derived", 0), c.get("busy_steps", 0)))
    return pd.DataFrame(rows, columns=COUNT_COLUMNS)


def _state(parts: list, n: int):
    import pandas as pd

    if not parts:
        return pd.DataFrame({c: [] for c in ["seed", "node"] + [f"c{i}" for i in range(n)]})
    df = pd.concat(parts, ignore_index=True)
    out = df.rename(columns={f"c{n}": "seed", f"c{n + 1}": "node"})[["seed", "node"] + [f"c{i}" for i in range(n)]]
    return out.sort_values(["seed", "node"] + [f"c{i}" for i in range(n)], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- from a file

def compile_timed(path: str, spark=None, *, skip=(), stage_paths=(), only=None, choose=()) -> Timed:
    """Parse, check and compile a Dedalus program through the stages (as `evita compile`
    does, the catalog kept), then lower it to its tick program. `choose`: GROUP=STAGE texts."""
    from ..bootstrap.cli import parse_and_check, print_note, report_warning
    from ..bootstrap.compiling import StageOptions, compile_and_store
    from ..bootstrap.dedalus_checks import is_dedalus
    from ..catalog import store
    from ..catalog.decode import decode
    from .dedalus import lower
    from .session import SparkOnDemand, not_started, spark_session

    program = parse_and_check(str(path))
    if not is_dedalus(program):
        raise EvitaError([Diagnostic("not-dedalus", f"{path} has no @next or @async rule and no component: "
                                     "nothing happens over time", NOWHERE, "", "use evita run")])

    def started():
        session = spark_session()
        store.attach(session)
        return session

    if spark is None:  # small catalogs compile with no JVM
        spark = SparkOnDemand(started)
    elif not not_started(spark):
        store.attach(spark)
    options = StageOptions(tuple(stage_paths), tuple(skip), tuple(only) if only is not None else None,
                           dict(item.split("=", 1) for item in choose))
    comp, _ = compile_and_store(program, spark, options, notes=print_note, warnings=report_warning)
    return lower(decode(comp.final, program.name))


def simulate(path: str, *, seeds=(0,), steps: int = 100, delay: str = "uniform:1-3", drop: float = 0.0,
             inputs: Optional[dict] = None, crash: Optional[dict] = None, spark=None, **stages) -> Run:
    """Compile the program at `path` and simulate it once per seed (all seeds together)."""
    timed = compile_timed(path, spark, **stages)
    return Simulation(timed, seeds, delay, drop, inputs, crash).run(steps)
