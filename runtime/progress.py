"""Progress you can see: what a long compile or run is doing, on the terminal and in
Python logging.

The compile scheduler, the engine and the Dedalus superstep runner report here:

    with progress.stage("magic_sets"): ...            # activities (bootstrap/activity.py):
    progress.skipped("const_prop")                    #   (a stage with nothing to do)
    with progress.stratum(1, ["path"]): ...           #   named in errors, shown while they run
    with progress.superstep(3, of=30): ...
    progress.iteration(4, {"path": 120}, mode="sql")  # a round of the innermost loop ended
    progress.note("12 tuples changed, 4 messages", changed=12, sent=4)

Only what the caller knows already is reported: the delta sizes are the ones the
semi-naive loop counts anyway (its one action per iteration), never a job of their own.

**Logging.** Every event is an INFO record of the logger `evita.progress`, its message
readable ("stratum 1 (path): iteration 4: new tuples path 120") and its fields in the
record (`event`, `activity`, and per event `stage`, `stratum`, `relations`, `step`,
`iteration`, `deltas`, `mode`, `seconds`). Nothing here configures logging: an API user
routes the logger where they want (docs/api.md).

**The terminal.** `shown()` (the CLI wraps every command in it) draws one line on stderr
when stderr is a terminal and `--quiet` was not given: a spinner, the time so far, the
activities (stage, stratum, superstep) with how far the innermost got, and the Spark job
in flight with its tasks done, which a thread of its own polls from Spark's status
tracker (none on Spark Connect: no SparkContext in this process). It appears only after
`DELAY` seconds, so a quick command prints nothing extra, and it is erased before
anything else is written to stdout or stderr, when the command ends, fails or is
interrupted.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Optional

from ..bootstrap import activity
from ..bootstrap.activity import doing

log = logging.getLogger("evita.progress")

DELAY = 1.5  # seconds before the line appears: commands quicker than this print nothing extra
PERIOD = 0.25  # seconds between redraws (the spinner moves, the Spark job is asked again)
PAUSE = 0.5  # after another write to the terminal, the line waits this long before it comes back
MODES = {"small": "on the driver", "local": "in tasks", "here": "in this process"}  # engine modes (IterationStats.mode) worth saying


# ---------------------------------------------------------------- events

@contextmanager
def _activity(what: str, kind: str, **fields):
    """An activity that logs its start and its end (with its duration)."""
    with doing(what):
        log.info("%s started", what, extra=dict(event=f"{kind} started", activity=what, **fields))
        t0 = time.perf_counter()
        try:
            yield
        except BaseException as e:
            seconds = time.perf_counter() - t0
            log.info("%s stopped after %.2f s (%s)", what, seconds, type(e).__name__,
                     extra=dict(event=f"{kind} failed", activity=what, seconds=seconds, **fields))
            raise
        seconds = time.perf_counter() - t0
        log.info("%s done in %.2f s", what, seconds,
                 extra=dict(event=f"{kind} done", activity=what, seconds=seconds, **fields))


def stage(name: str):
    """A compile stage runs (bootstrap/scheduler.py)."""
    return _activity(f"stage {name}", "stage", stage=name)


def skipped(name: str) -> None:
    """A compile stage did not run: its trigger found nothing to do (no Spark job)."""
    log.info("stage %s skipped: nothing to do", name, extra=dict(event="stage skipped", activity=f"stage {name}",
                                                                  stage=name))


def stratum(index: int, relations):
    """A stratum of a user program runs (runtime/engine.py), whatever its strategy."""
    relations = list(relations)
    return _activity(f"stratum {index} ({', '.join(relations)})", "stratum", stratum=index, relations=relations)


def superstep(step: int, of: int):
    """A Dedalus superstep runs (runtime/supersteps.py); `of`: the most that will run."""
    return _activity(f"superstep {step} (of at most {of})", "superstep", step=step)


def iteration(number: int, deltas: dict, mode: str = "") -> None:
    """A round of the innermost activity's fixpoint loop ended (0: its start, the
    init rules); `deltas`: relation -> the tuples it gained, as the loop counted them."""
    where = f" {MODES[mode]}" if mode in MODES else ""
    sizes = ", ".join(f"{rel} {n:,}" for rel, n in deltas.items())
    text = f"iteration {number}{where}" + (f": new tuples {sizes}" if sizes else "")
    _tell(text, event="iteration", iteration=number, deltas=dict(deltas), mode=mode)


def note(text: str, **fields) -> None:
    """How far the innermost activity got, in words (and `fields` for the log record)."""
    _tell(text, event="note", **fields)


def _tell(text: str, **fields) -> None:
    activity.note(text)
    running = activity.current()
    what = running[-1].what if running else ""
    log.info("%s: %s", what, text, extra=dict(activity=what, **fields))


# ---------------------------------------------------------------- the terminal

@contextmanager
def shown(quiet: bool = False, console=None, delay: float = DELAY, what: str = ""):
    """Show the progress line while the block runs, if `console` (default: this
    process's stderr) is a terminal and not `quiet`. Yields the Display, or None.
    `what`: the line's label while no activity runs (the command: `evita explain`)."""
    own = None
    if isinstance(sys.stderr, _Guarded):  # a line shows already (main() called inside a command)
        quiet = True
    if not quiet and console is None:
        console, own = _terminal()
    if quiet or console is None or not console.is_terminal or console.is_dumb_terminal:
        yield None
        return
    display = Display(console, delay, what)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Guarded(sys.stdout, display), _Guarded(sys.stderr, display)
    display.start()
    try:
        yield display
    finally:
        try:
            display.close()  # erased before the error or the interrupt is reported
        finally:
            sys.stdout, sys.stderr = saved
            if own is not None:
                own.close()


def _terminal():
    """A rich Console on a copy of stderr's file descriptor, or (None, None) when stderr
    is not a terminal. A copy: while the JVM starts, descriptor 2 points at the Spark
    log (runtime/session.py), and the line must still reach the terminal."""
    from rich.console import Console

    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by something with no descriptor
        return None, None
    if not os.isatty(fd):
        return None, None
    own = os.fdopen(os.dup(fd), "w", encoding=getattr(sys.stderr, "encoding", None) or "utf-8", errors="replace")
    return Console(file=own, highlight=False), own


class Display:
    """The progress line: a transient rich Live region of one line, redrawn by a thread
    of its own every PERIOD seconds."""

    def __init__(self, console, delay: float = DELAY, what: str = ""):
        from rich.live import Live
        from rich.spinner import Spinner

        self.console = console
        self.delay = delay
        self.what = what  # shown while no activity runs: never a spinner without a word
        self.started = time.monotonic()
        # No redirection of stdout by rich (it would send the answers to stderr): the
        # streams are guarded instead (`_Guarded`), so the line steps aside for them.
        self.live = Live(console=console, auto_refresh=False, transient=True, redirect_stdout=False,
                         redirect_stderr=False)
        self.spinner = Spinner("dots")
        self.jobs = SparkJobs()
        self.lock = threading.Lock()
        self.hidden_until = 0.0
        self.done = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="evita-progress", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(PERIOD):
            try:
                self.draw()
            except Exception:  # the line must never break a run: it goes, the run goes on
                log.debug("the progress line stopped", exc_info=True)
                self.hide(float("inf"))
                return

    def draw(self, now: Optional[float] = None) -> None:
        now = time.monotonic() if now is None else now
        if now - self.started < self.delay or now < self.hidden_until:
            return
        jobs = self.jobs.text()  # asked outside the lock: a write to stdout need not wait for the JVM
        with self.lock:
            if now < self.hidden_until:  # a write came meanwhile, or the line was closed
                return
            if not self.live.is_started:
                self.live.start()
            self.live.update(self.line(now, jobs), refresh=True)

    def line(self, now: float, jobs: str = ""):
        from rich.text import Text

        seconds = int(now - self.started)
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        out.append_text(self.spinner.render(now))
        out.append(f" {seconds // 60}:{seconds % 60:02d} ", style="dim")
        running = activity.current()
        if not running and self.what:
            out.append(self.what, style="bold")
        for i, a in enumerate(running):
            out.append(" › " if i else "", style="dim")
            out.append(a.what, style="bold")
            if a.detail:
                out.append(f" {a.detail}", style="cyan")
        if jobs:
            out.append(f"  {jobs}", style="dim")
        return out

    def hide(self, pause: float = PAUSE) -> None:
        """Erase the line (something else is about to be written) for `pause` seconds."""
        with self.lock:
            self.hidden_until = max(self.hidden_until, time.monotonic() + pause)
            if self.live.is_started:
                self.live.stop()  # transient: erases the line, shows the cursor again

    def close(self) -> None:
        self.done.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=2)
        self.hide(float("inf"))


class _Guarded:
    """sys.stdout or sys.stderr while the line is shown: anything written through it
    erases the line first, so answers, tables and messages never mix with it."""

    def __init__(self, stream, display: Display):
        self._stream = stream
        self._display = display

    def write(self, text: str) -> int:
        if text:
            self._display.hide()
        return self._stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class SparkJobs:
    """The Spark jobs in flight and their tasks done, from the status tracker of this
    process's SparkContext; '' when there is none (Spark not started, or Spark Connect,
    where the context lives in the server)."""

    def __init__(self):
        self.context = None
        self.tracker = None

    def text(self) -> str:
        tracker = self._tracker()
        if tracker is None:
            return ""
        try:
            ids = tracker.getActiveJobsIds()
            if not ids:
                return ""
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done, total = done + info.numCompletedTasks, total + info.numTasks
        except Exception:  # the context is stopping: no job to show, ask afresh next time
            self.context = self.tracker = None
            return ""
        jobs = ("Spark jobs " if len(ids) > 1 else "Spark job ") + ", ".join(str(i) for i in ids)
        return jobs + (f": {done}/{total} tasks" if total else "")

    def _tracker(self):
        if "pyspark" not in sys.modules:  # nothing has started Spark
            return None
        from pyspark import SparkContext
        from pyspark.sql.utils import is_remote

        if is_remote():
            return None
        sc = SparkContext._active_spark_context
        if sc is None or getattr(sc, "_jsc", None) is None:  # none, or still starting
            return None
        if sc is not self.context:
            self.context, self.tracker = sc, sc.statusTracker()
        return self.tracker
