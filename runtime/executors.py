"""Executors that are gone: a clear error instead of a run that waits forever.

On a cluster, Spark re-runs the tasks of a lost executor on the others. When a worker
dies and no executor is left (or none ever joined: no worker has the cores and memory
asked for), Spark does not fail: the job waits for resources without end, and the
user sees nothing. While a job is active, a watcher thread of the driver counts the
application's executors; once there has been none for `GRACE` seconds it cancels the
jobs, and the command reports why (`lost()`, read by the command line's failure
report) instead of Spark's "Job cancelled" with a Java trace.

Only for classic sessions on a standalone master (`spark://`). Local mode has its
executor in the driver's JVM; on YARN or Kubernetes a job waiting for executors is
often a queue doing its work (and dynamic allocation may hold none while idle), so a
wait there is not taken for a failure.
"""
from __future__ import annotations

import os
import threading
import time

GRACE = float(os.environ.get("EVITA_EXECUTOR_GRACE", "30"))  # seconds with no executor while a job waits
_lost: list = []
_watched: set = set()


def lost() -> str | None:
    """Why the watcher cancelled this process's jobs, or None if it did not."""
    return _lost[0] if _lost else None


def executor_count(sc) -> int:
    """Executors registered with the application, the driver not counted."""
    return max(0, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)


def ever_had_executors(sc) -> bool:
    """Whether an executor ever registered with the application, gone ones included
    (Spark's status store keeps the dead): the watcher may start after executors came
    and went, e.g. while the session's first job (the workers' Python probe) ran."""
    try:
        listed = sc._jsc.sc().statusStore().executorList(False)
        return any(listed.apply(i).id() != "driver" for i in range(listed.size()))
    except Exception:  # no status store to ask: what the watcher saw itself decides
        return False


def watch(sc) -> None:
    """Start the watcher for this SparkContext (once; None, over Spark Connect: nothing)."""
    if sc is None or not sc.master.startswith("spark://") or id(sc) in _watched:
        return
    _watched.add(id(sc))
    threading.Thread(target=_watch, args=(sc,), name="evita-executor-watch", daemon=True).start()


def _watch(sc) -> None:
    seen_any, missing_since = False, None
    while True:
        time.sleep(1.0)
        try:
            count = executor_count(sc)
            waiting = bool(sc.statusTracker().getActiveJobsIds())
        except Exception:  # the context stopped, or the JVM is gone: nothing left to watch
            return
        if count:
            seen_any, missing_since = True, None
            continue
        if not waiting:
            missing_since = None
            continue
        missing_since = missing_since or time.monotonic()
        if time.monotonic() - missing_since < GRACE:
            continue
        if seen_any or ever_had_executors(sc):
            why = (f"the Spark application lost every executor while a job ran, and none came back within "
                   f"{GRACE:g} s (a worker died or was killed: Spark re-runs a lost executor's tasks elsewhere, "
                   f"but no executor was left)")
        else:
            why = (f"no executor joined the Spark application within {GRACE:g} s of its first job: the cluster "
                   f"has no worker with the cores and memory asked for")
        _lost.append(f"{why}; its jobs were cancelled (master {sc.master})")
        try:
            sc.cancelAllJobs()
        except Exception:
            pass
        return


HINT = ("check the workers: scripts/local-cluster status on this machine, or the master's web UI and the "
        "workers' logs; then run again. The catalog holds only saves that completed; no output was written")
