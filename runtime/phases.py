"""Where the time of one `evita run` goes: wall time and Spark jobs per phase.

Relations are lazy, so a phase is charged for the work its own actions start: a
non-recursive relation computed by the preview is preview time, not fixpoint time.

>>> phases = Phases()
>>> with phases.phase("parse and check"):
...     pass
>>> list(phases.seconds)
['parse and check']
"""
from __future__ import annotations

import itertools
import resource
import time
from contextlib import contextmanager

from .session import not_started, spark_context

# what SparkContext.setJobGroup sets
JOB_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


class SparkWork:
    """The Spark jobs the caller's thread starts from now on (in its job group), and the
    bytes their stages write to the exchange, as Spark's own status store counts them.
    Over Spark Connect (no context here) neither is known: `since` gives (None, None)."""

    def __init__(self, spark):
        self.sc = spark_context(spark)
        self.before = self._jobs()

    def _jobs(self) -> set:
        if self.sc is None:
            return set()
        return set(self.sc.statusTracker().getJobIdsForGroup(self.sc.getLocalProperty("spark.jobGroup.id")))

    def since(self) -> tuple:
        """(jobs started, bytes their stages wrote to the exchange)."""
        if self.sc is None:
            return None, None
        core = self.sc._jsc.sc()
        core.listenerBus().waitUntilEmpty()  # a stage's metrics reach the store through the listener bus
        jobs = sorted(self._jobs() - self.before)
        store, written = core.statusStore(), 0
        for job in jobs:
            info = self.sc.statusTracker().getJobInfo(job)
            for stage in (info.stageIds if info is not None else ()):
                data = store.lastStageAttempt(stage)
                if data.status().toString() == "COMPLETE":
                    written += data.shuffleWriteBytes()
        return len(jobs), written


_GROUPS = itertools.count()


class Phases:
    def __init__(self):
        self.seconds: dict = {}
        self.jobs: dict = {}
        self.spark = None  # set once Spark runs: jobs are then counted per phase

    @contextmanager
    def phase(self, name: str):
        started = time.perf_counter()
        # a group of its own: Spark's status tracker keeps earlier runs' groups in a long-lived session
        group = f"evita-phase-{next(_GROUPS)}"
        sc = spark_context(self.spark)  # None over Spark Connect: no job counts there
        # The job group is a property of the caller's thread: an API user may have set
        # one of their own, which is theirs again after the phase.
        saved = {k: sc.getLocalProperty(k) for k in JOB_GROUP} if sc is not None else {}
        if sc is not None:
            sc.setJobGroup(group, name)
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            if sc is not None:
                self.jobs[name] = self.jobs.get(name, 0) + len(sc.statusTracker().getJobIdsForGroup(group))
                for k, v in saved.items():
                    sc.setLocalProperty(k, v)
            elif not_started(self.spark):  # Spark on demand that nothing needed: no job
                self.jobs[name] = self.jobs.get(name, 0)

    def text(self) -> str:
        total = sum(self.seconds.values()) or 1.0
        lines = ["phase                          seconds   share  Spark jobs"]
        for name, s in self.seconds.items():
            jobs = self.jobs.get(name)
            lines.append(f"{name:<30} {s:>7.2f}  {100 * s / total:>5.1f}%  {'' if jobs is None else jobs:>10}")
        jobs = sum(self.jobs.values()) if self.jobs else ""
        lines.append(f"{'total':<30} {total:>7.2f}  {'':>6}  {jobs:>10}")
        # the driver's own peak: what a user sizes the machine that runs `evita` by
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        lines.append(f"driver peak resident memory: {peak:,.0f} MiB")
        return "\n".join(lines)
