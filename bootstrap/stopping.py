"""A run that Spark fails, a timeout stops or Ctrl-C interrupts ends with one line: what
was running (`activity.failed_in`) and why. The Python and Java traces are behind
`--verbose`. An interrupt cancels the Spark jobs still running; the catalog is safe
because every save is atomic (catalog/store.py), whenever the interrupt comes.

>>> describe_failure(ValueError("bad"))
'internal error in Evita: ValueError: bad'
"""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

from .activity import failed_in


class Stopped(Exception):
    """A signal that asks the process to end (SIGTERM, as `timeout` sends)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


@contextmanager
def stopped_by_signals():
    """SIGTERM raises Stopped in the main thread, so it is handled like Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Stopped(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cancel_spark_jobs() -> bool:
    """Cancel every running Spark job of this process; False if there was no Spark."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return _interrupt_remote()
    try:
        sc.cancelAllJobs()
        return True
    except Exception:  # the JVM is gone already: nothing left to cancel
        return False


def _interrupt_remote() -> bool:
    """Over Spark Connect the jobs run in the server: ask it to interrupt this session's."""
    if "pyspark.sql.connect.session" not in sys.modules:
        return False
    from pyspark.sql.connect.session import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        return False
    try:
        spark.interruptAll()
        return True
    except Exception:  # the server is gone: nothing left to cancel
        return False


def describe_stop(e: BaseException, cancelled: bool) -> str:
    why = "interrupted (Ctrl-C)" if isinstance(e, KeyboardInterrupt) else f"terminated by {e} (a timeout?)"
    where = failed_in(e)
    return (f"{why}{' in ' + where if where else ''}; "
            + ("its Spark jobs were cancelled; " if cancelled else "")
            + "the catalog holds only the saves that completed")


def describe_failure(e: Exception) -> str:
    where = failed_in(e)
    during = f" in {where}" if where else ""
    reason = _spark_reason(e)
    if reason is None:
        return f"internal error in Evita{during}: {type(e).__name__}: {_first_line(str(e))}"
    return f"Spark failed{during}: {reason}"


def _spark_reason(e: Exception):
    """The one line that says why Spark failed, or None for an exception not from Spark."""
    module = type(e).__module__ or ""
    if not (module.startswith("py4j") or module.startswith("pyspark")):
        return None
    text = str(e)
    if type(e).__name__ == "Py4JJavaError":  # "An error occurred while calling o8.x.\n: java.Error: why\n\tat ..."
        for line in text.splitlines():
            if line.startswith(": "):
                return line[2:].strip()
    if module.startswith("py4j"):
        return ("the connection to Spark's Java process was lost (it was killed, or ran out of memory); "
                f"{_first_line(text)}")
    return _first_line(text)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else "(no message)"
