"""A small `evita run` in this process: no JVM, no Spark job.

A JVM takes 4-5 s to start and its first SQL statement 1 s more, while a program of a
few rules over a few thousand input rows computes in milliseconds. So when nothing
asks for Spark (no `--master`, `--remote` or server; see `why_not_here`) `evita run`:
- reads and checks its inputs here (`runtime/inputs_here.py`: the Spark reader's
  checks and diagnostics, on pandas);
- compiles with a session on demand (`session.SparkOnDemand`): the stages run in this
  process on a small catalog (`bootstrap/stage.in_process_first`), so it starts only
  for a stage whose catalog is large;
- evaluates every stratum in the columnar backend (`runtime/columnar.py`, the pandas
  backend of `runtime/semantics.py`, which is what the engine's driver and per-partition
  strategies run too).

What cannot run here exactly as on Spark raises `NotHere` before anything is written
or shown, and the run starts over on Spark: inputs the reader leaves to Spark (Parquet,
remote filesystems, more than `inputs_here.HERE_BYTES`), a rule the columnar backend
lacks (`columnar.unsupported`, or a value only Spark's SQL semantics decide, such as a
division by zero), a deletion, facts holding lists or keyed facts. What only Spark
writes as Spark does (lists in an output file, as JSON text) starts Spark for itself
(`HereResult.relations`).
`--spark` (or `EVITA_IN_PROCESS=0`) asks for Spark always.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.bootstrap.planner import plan
>>> flow = plan(parse_program('''
...     edge(1, 2). edge(2, 3).
...     path(X, Y) :- edge(X, Y).
...     path(X, Z) :- path(X, Y), edge(Y, Z).''', "doc.dl"))
>>> sorted(map(tuple, run_here(flow, {}).held["path"].values.tolist()))
[(1, 2), (1, 3), (2, 3)]
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Optional

from . import columnar, progress, semantics
from .dataflow import IterationStats
from .session import real


class NotHere(Exception):
    """The run cannot be done in this process exactly as on Spark (the reason)."""


def spark_asked_for(args) -> Optional[str]:
    """Whether the command line or the environment asks for Spark (and how): a master, a
    Connect server, `--spark` or `EVITA_IN_PROCESS=0`. A compile then runs its stages
    with that session from the start; otherwise Spark starts only if a stage needs it."""
    if getattr(args, "spark", False) or os.environ.get("EVITA_IN_PROCESS", "1") in ("0", "false", "no", "off"):
        return "Spark was asked for (--spark or EVITA_IN_PROCESS=0)"
    if getattr(args, "master", None) or os.environ.get("EVITA_MASTER") or "PYSPARK_GATEWAY_PORT" in os.environ:
        return "a Spark master was named"
    if getattr(args, "remote", None) or os.environ.get("EVITA_REMOTE"):
        return "a Spark Connect server was named"
    return None


def why_not_here(args) -> Optional[str]:
    """Why this `evita run` runs on Spark, from its command line and environment; None
    when it may run here (its inputs and rules decide the rest)."""
    from .server import remote_to_use
    from .session import warehouse_dir

    asked = spark_asked_for(args)
    if asked:
        return asked
    if getattr(args, "no_local", False):
        return "--no-local asks for the distributed loop"
    if getattr(args, "output", None) and getattr(args, "format", "csv") == "parquet":
        return "--format parquet is written by Spark"
    url, _ = remote_to_use(None, None, warehouse_dir())
    if url is not None:  # started for this warehouse's commands: the user wants them there
        return f"evita server runs for this warehouse ({url})"
    return None


def why_not_flow(flow) -> Optional[str]:
    """Why the planned program cannot run here (None: it can)."""
    for name, s in flow.relations.items():
        if s.kind == "deletion":
            return f"{name} is a deletion target"
    for st in flow.strata:
        why = columnar.unsupported(st.init_rules + st.delta_rules, [flow.relations[n] for n in st.relations])
        if why:
            return f"stratum {st.index}: {why}"
    return None


@dataclass
class HereResult:
    """What a run in this process computed: the shape of `engine.Result` that the command
    line reads (every relation held as a pandas table, columns c0, c1, ...)."""
    dataflow: object
    held: dict  # relation -> pandas table
    stats: list = field(default_factory=list)
    seconds: float = 0.0
    notes: list = field(default_factory=list)
    spark: object = None  # a session on demand, for `relations`
    _traffic: Optional[list] = field(default=None, repr=False)

    @property
    def actions(self) -> int:
        return 0

    @property
    def relations(self) -> "SparkFrames":
        """relation -> Spark DataFrame of its held table, made when asked (which starts
        Spark): for what only Spark writes as Spark does, such as lists as JSON text."""
        return SparkFrames(self)

    def tuned(self):
        """Nothing to tune: the relations are held here (`engine.Result.tuned`)."""
        import contextlib

        return contextlib.nullcontext()

    def traffic(self) -> list:
        if self._traffic is None:
            from .traffic import measure_held

            self._traffic = measure_held(self)
        return self._traffic

    def stats_text(self) -> str:
        from .engine import Result

        return Result.stats_text(self)


class SparkFrames(Mapping):
    def __init__(self, result: HereResult):
        self.result = result

    def __getitem__(self, name: str):
        from .io import facts_frame

        table = self.result.held[name]
        rows = [[list(v) if isinstance(v, tuple) else v for v in row] for row in table.astype(object).values.tolist()]
        return facts_frame(real(self.result.spark), rows, self.result.dataflow.relations[name]).toDF(
            *self.result.dataflow.relations[name].columns)

    def __iter__(self):
        return iter(self.result.held)

    def __len__(self) -> int:
        return len(self.result.held)


def run_here(flow, inputs: dict, *, max_iterations: Optional[int] = None) -> HereResult:
    """Every stratum of `flow` in the columnar backend over `inputs` (relation -> pandas
    table, columns c0, c1, ...). Raises NotHere where only Spark decides, and the same
    no-fixpoint error as every strategy at the iteration limit."""
    started = time.perf_counter()
    why = why_not_flow(flow)
    if why:
        raise NotHere(why)
    keyed = [n for n in inputs if flow.relations[n].keys is not None]
    if keyed:  # the engine keeps every input row of a keyed relation; the columnar core one per key
        raise NotHere(f"{keyed[0]} is keyed and read from a file")
    try:
        inputs = {name: columnar.checked(table) for name, table in inputs.items()}  # nulls: Spark's join rules
        tables = columnar.base_tables(flow, inputs)
    except columnar.Unsupported as e:
        raise NotHere(str(e)) from None
    out = HereResult(flow, tables)
    for st in flow.strata:
        with progress.stratum(st.index, st.relations) if st.recursive else nullcontext():
            report = (lambda i, sizes: progress.iteration(i, sizes, "here")) if st.recursive else None
            try:
                done = columnar.run_stratum(st, flow.relations, tables, max_iterations=max_iterations,
                                            on_iteration=report)
            except columnar.NoFixpoint as e:
                raise semantics.no_fixpoint_error(st, flow.relations, e.sizes, max_iterations) from None
            except (columnar.Unsupported, ValueError, TypeError) as e:  # Spark's SQL semantics decide
                raise NotHere(f"stratum {st.index}: {e}") from None
        tables.update(done.tables)
        if done.stopped:
            out.notes.append(done.stopped)
        out.stats += [IterationStats(st.index, i, 0, sizes, seconds, mode="here")
                      for i, (seconds, sizes) in enumerate(done.iterations)]
    out.seconds = time.perf_counter() - started
    return out
