"""Soufflé's multi-valued functor `range(a, b[, step])`: its values, and where it may stand.

`x = range(a, b, s)` binds x once per value a, a+s, a+2s, ... strictly before b (below b
when s > 0, above it when s < 0). Without s the step is 1, or -1 when a > b. With s = 0
the value is a alone, unless a = b (then nothing): Soufflé's own evaluator does that
(`runRange` in its EvaluatorUtil.h). Every evaluator (Spark SQL in runtime/sql.py, the
columnar evaluator, the test oracle) follows `values` below.

Floats: the k-th value is a + k*s, not Soufflé's running sum a+s+s+...; the two can
differ in the last bit (and so in whether a value just below b is produced).

The planner evaluates a range only as a whole assignment `x = range(...)` (a generator
step: runtime/dataflow.py's `generate`). `hoisted` gives every other range its own
variable: `r(range(1, 3))` becomes `r(_range1) :- _range1 = range(1, 3)`, and
`y = range(1, 4) + 1` becomes `_range1 = range(1, 4), y = _range1 + 1`; `x = range(..)`
where an atom binds x too stays a generator (the planner then filters on x).
"""
from __future__ import annotations

import math
from dataclasses import replace

from .builtins import canonical
from .syntax import Assign, BinOp, Call, Rule, Select, Var, map_literal, map_subterms

NAME = "range"


def is_range(term) -> bool:
    return isinstance(term, Call) and canonical(term.func) == NAME  # also Overlog's f_range


def step_of(a, b, step=None):
    """The step `range(a, b[, step])` counts by."""
    if step is not None:
        return step
    return 1 if a <= b else -1


def values(a, b, step=None) -> list:
    """The values of range(a, b[, step]); none when an argument is None."""
    if a is None or b is None:
        return []
    s = step_of(a, b, step)
    if s is None:
        return []
    if s == 0:
        return [a] if a != b else []
    if (s > 0 and a >= b) or (s < 0 and a <= b):
        return []
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b, s)):
        return list(range(a, b, s))
    count = math.ceil((b - a) / s)  # floats: a + k*s, for k while before b
    out = [a + k * s for k in range(max(count, 0))]
    return [v for v in out if (v < b if s > 0 else v > b)]


def hoisted(rule: Rule) -> Rule:
    """`rule` with every range call not already a whole assignment `x = range(...)` moved
    into one of its own, placed before the literal that used it."""
    fresh = _Fresh()
    body: list = []
    for lit in rule.body:
        if isinstance(lit, Assign) and is_range(lit.expr):
            call = replace(lit.expr, args=tuple(fresh.term(a, body) for a in lit.expr.args))
            body.append(replace(lit, expr=call))
        elif isinstance(lit, Select) and _var_in_range(lit.expr):
            # `y = range(..)` where an atom binds y too: still a generator, so that the
            # planner joins the atom on y (the generator with y bound filters)
            var, call = (lit.expr.left, lit.expr.right) if is_range(lit.expr.right) else (lit.expr.right, lit.expr.left)
            call = replace(call, args=tuple(fresh.term(a, body) for a in call.args))
            body.append(Assign(var, call, lit.span))
            fresh.count += 1
        else:
            body.append(map_literal(lit, lambda t: fresh.term(t, body)))
    head = replace(rule.head, args=tuple(fresh.term(a, body) for a in rule.head.args))
    if not fresh.count:
        return rule
    return replace(rule, head=head, body=tuple(body))


def _var_in_range(expr) -> bool:
    """`v == range(...)` or `range(...) == v`."""
    return isinstance(expr, BinOp) and expr.op == "==" and (
        (isinstance(expr.left, Var) and is_range(expr.right)) or (isinstance(expr.right, Var) and is_range(expr.left)))


class _Fresh:
    """Numbers the variables `_range1`, `_range2`, ... of one rule."""

    def __init__(self):
        self.count = 0

    def term(self, t, body: list):
        """`t` with its range calls replaced by fresh variables, their assignments added to `body`."""
        sub = lambda x: self.term(x, body)  # noqa: E731
        if is_range(t):
            call = replace(t, args=tuple(sub(a) for a in t.args))
            self.count += 1
            var = Var(f"_range{self.count}", t.span)
            body.append(Assign(var, call, t.span))
            return var
        return map_subterms(t, sub)
