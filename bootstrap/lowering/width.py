"""Whole numbers of 32 bits (`--number-bits 32`, bootstrap/numbers.py): the planner's
rewrite that makes every backend wrap around as Soufflé's default build does.

Every backend holds whole numbers in 64-bit columns. At 32 bits the planner wraps each
whole-number result that can leave the 32-bit range with the operator `wrap32` (its
value modulo 2^32, as two's complement; never written in a program), and each whole
`sum` becomes the aggregate `sum32` (the sum, wrapped). The two are defined once per
backend beside its other operators: `runtime/columnar.py` (`_vector`, `_AGGREGATES`),
`runtime/sql.py` (`Expr.compile`) and `runtime/engine.py` (the SQL aggregates). What
wraps:

- `+`, `-`, `*`, `/` (`//`), unary `-`, `abs`, on operands whose kind is whole
  (number, unsigned or a whole constant; `division._kind`);
- `to_number` and `to_unsigned` (a float or text may spell any value);
- the shifts: the distance counts modulo 32; `bshl` wraps; `bshru` shifts the 32-bit
  pattern (`x band 0xFFFFFFFF`);
- `udiv` and `umod` (lowering/unsigned.py) divide the 32-bit patterns (`x band
  0xFFFFFFFF`), and wrap;
- a whole literal above 2^31 - 1 (an unsigned one, such as 255.255.255.255) becomes its
  bit pattern, as the facts' folding gives it.

`band`, `bor`, `bxor`, `bnot`, `%`, `min`, `max` of 32-bit values stay 32-bit. A float
never wraps. An operand of unknown kind is left as it is (the static checks type every
column of a Soufflé program).

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(x: number, f: float)\\n.decl h(x: number, g: float)\\n'
...                   'h(x + 1, f + 1) :- a(x, f).', "t.dl", number_bits=32)
>>> [format_rule(r) for r in at_width(list(p.rules), p)]
['rule1 h(wrap32(x + 1), f + 1) :- a(x, f).']
"""
from __future__ import annotations

from dataclasses import replace

from .. import numbers
from ..builtins import canonical
from ..syntax import INT, Aggregate, BinOp, Call, Const, Rule, UnOp, map_literal, map_subterms
from ..types import TypeSystem
from .division import _WHOLE, WHOLE_DIVISION, _joined, _kind, rule_kinds, typing_context
from .unsigned import UDIV, UMOD

WRAP32 = "wrap32"  # the planner's unary operator; never written in a program
SUM32 = "sum32"  # the planner's aggregate: a whole sum, wrapped
_WRAPPED_OPS = ("+", "-", "*", "/", WHOLE_DIVISION, UDIV)
_UNSIGNED_DIVISIONS = (UDIV, UMOD)  # lowering/unsigned.py: on the 32-bit patterns
_BITWISE = ("band", "bor", "bxor", "bnot", "bshl", "bshr", "bshru", "land", "lor", "lxor", "lnot")


def at_width(rules: list, program) -> list:
    """The rules, wrapping at the program's width: unchanged at 64 bits (the backends'
    own, where each wraps as it computes: numpy, and Spark as runtime/sql.py writes it)."""
    if program.number_bits == 64:
        return rules
    types, declared = typing_context(program)
    return [_rewritten(r, types, declared) for r in rules]


def _rewritten(rule: Rule, types: TypeSystem, declared: dict) -> Rule:
    kinds = rule_kinds(rule, types, declared)
    sub = lambda t: _term(t, kinds)  # noqa: E731
    head = replace(rule.head, args=tuple(sub(a) for a in rule.head.args))
    return replace(rule, head=head, body=tuple(map_literal(lit, sub) for lit in rule.body))


def kind(t, kinds: dict):
    """`division._kind`, with the bitwise functors (whole when their operands are)."""
    if isinstance(t, Call) and canonical(t.func) in _BITWISE:
        return _joined([kind(a, kinds) for a in t.args])
    if isinstance(t, BinOp):
        joined = _joined([kind(t.left, kinds), kind(t.right, kinds)])
        return joined if t.op in _WRAPPED_OPS + ("%", UMOD) else _kind(t, kinds)
    return _kind(t, kinds)


def _whole(t, kinds: dict) -> bool:
    return kind(t, kinds) in _WHOLE


def _wrapped(t):
    return UnOp(WRAP32, t, t.span)


def _term(t, kinds: dict):
    sub = lambda x: _term(x, kinds)  # noqa: E731
    if isinstance(t, Const) and t.type == INT and not isinstance(t.value, bool):
        return replace(t, value=numbers.held(t.value, 32))
    if isinstance(t, Aggregate):
        whole_sum = t.func == "sum" and t.arg is not None and _whole(t.arg, kinds)
        return replace(map_subterms(t, sub), func=SUM32 if whole_sum else t.func)
    if isinstance(t, BinOp) and t.op in _UNSIGNED_DIVISIONS:  # the 32-bit patterns divided, wrapped
        masked = [Call("band", (sub(x), Const(0xFFFFFFFF, INT, t.span)), t.span) for x in (t.left, t.right)]
        return _wrapped(replace(t, left=masked[0], right=masked[1]))
    if isinstance(t, BinOp) and t.op in _WRAPPED_OPS:
        return _wrapped(map_subterms(t, sub)) if _whole(t, kinds) else map_subterms(t, sub)
    if isinstance(t, UnOp) and t.op == "-":
        return _wrapped(map_subterms(t, sub)) if _whole(t.arg, kinds) else map_subterms(t, sub)
    if isinstance(t, Call):
        return _call(canonical(t.func), map_subterms(t, sub), kinds, t)
    return map_subterms(t, sub)


def _call(name: str, call: Call, kinds: dict, written: Call):
    if name in ("to_number", "to_unsigned"):
        return _wrapped(call)
    if name == "abs" and _whole(written, kinds):
        return _wrapped(call)
    if name not in ("bshl", "bshr", "bshru"):
        return call
    value, distance = call.args
    distance = Call("band", (distance, Const(31, INT, call.span)), call.span)
    if name == "bshru":  # the 32-bit pattern, shifted in 64 bits: zeros come in from bit 32
        value = Call("band", (value, Const(0xFFFFFFFF, INT, call.span)), call.span)
    shifted = replace(call, args=(value, distance))
    return shifted if name == "bshr" else _wrapped(shifted)
