"""What Evita is doing right now, so that a failure deep inside Spark, a timeout or a
Ctrl-C can be reported as one line naming it ("stage magic_sets", "stratum 2 (path)")
instead of a Java stack trace.

>>> try:
...     with doing("stage delta"):
...         with doing("stratum 1 (path)"):
...             raise KeyboardInterrupt
... except KeyboardInterrupt:
...     print(failed_in())
stage delta, stratum 1 (path)
"""
from __future__ import annotations

from contextlib import contextmanager

_stack: list = []
_failed: dict = {}  # the last exception to leave an activity, and the stack where it did


@contextmanager
def doing(what: str):
    _stack.append(what)
    try:
        yield
    except BaseException as e:
        if _failed.get("exception") is not e:  # the innermost activity sees it first
            _failed.update(exception=e, where=list(_stack))
        raise
    finally:
        _stack.pop()


def failed_in(e: BaseException = None) -> str:
    """The activities exception `e` (else the last one) went through, outermost first;
    what runs now if `e` left none ('' if nothing runs)."""
    if e is not None and _failed.get("exception") is not e:
        return ", ".join(_stack)
    return ", ".join(_failed.get("where") or _stack)
