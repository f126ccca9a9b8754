"""What Evita is doing right now, so that a failure deep inside Spark, a timeout or a
Ctrl-C can be reported as one line naming it ("stage magic_sets", "stratum 2 (path)")
instead of a Java stack trace, and so that the progress line on the terminal
(`runtime/progress.py`) can show it while it runs.

>>> try:
...     with doing("stage delta"):
...         with doing("stratum 1 (path)"):
...             raise KeyboardInterrupt
... except KeyboardInterrupt:
...     print(failed_in())
stage delta, stratum 1 (path)
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Activity:
    what: str
    started: float  # time.monotonic()
    detail: str = ""  # how far it got ("iteration 4: new path 120"), set by `note`


_stack: list = []  # Activity, outermost first
_failed: dict = {}  # the last exception to leave an activity, and the stack where it did


@contextmanager
def doing(what: str):
    _stack.append(Activity(what, time.monotonic()))
    try:
        yield
    except BaseException as e:
        if _failed.get("exception") is not e:  # the innermost activity sees it first
            _failed.update(exception=e, where=[a.what for a in _stack])
        raise
    finally:
        _stack.pop()


def note(detail: str) -> None:
    """Say how far the innermost activity got; shown next to it until it ends."""
    if _stack:
        _stack[-1].detail = detail


def current() -> list:
    """The activities running now, outermost first. A copy: the progress line reads it
    from its own thread while the main thread pushes and pops."""
    return list(_stack)


def failed_in(e: BaseException = None) -> str:
    """The activities exception `e` (else the last one) went through, outermost first;
    what runs now if `e` left none ('' if nothing runs)."""
    if e is not None and _failed.get("exception") is not e:
        return ", ".join(a.what for a in _stack)
    return ", ".join(_failed.get("where") or [a.what for a in _stack])
