"""Soufflé's `unsigned`: the planner's rewrite that makes every backend order and divide
unsigned values as unsigned, at both widths.

An unsigned value is held as its bit pattern in a signed 64-bit column (`numbers.py`; at
32 bits sign-extended from 32), so the backends' own `<`, `min` and `/` would read
2^63 (2^31 at 32 bits) and above as negative. In a rule whose terms the checks type as
unsigned (`division.rule_kinds`):

- `a < b` (`<=`, `>`, `>=`) becomes `ukey(a) < ukey(b)`: `ukey` flips bit 63
  (`x bxor -2^63`), which maps the unsigned order of 64-bit patterns onto the signed
  order. At 32 bits it serves as it is: a sign-extended pattern's 64-bit unsigned order
  is its 32-bit unsigned order. `ukey` is its own inverse;
- `min(a, b)` and `max(a, b)` (the functors) become `ukey(min(ukey(a), ukey(b)))`;
- the aggregates `min` and `max` become `umin` and `umax` (the least and greatest by
  unsigned order; PreM-able as min and max are);
- `//` (division.py's whole division) and `%` become `udiv` and `umod`, the division of
  the 64-bit patterns read unsigned; at 32 bits `width.py` masks their operands to the
  32-bit pattern first and wraps the result.

The five operators are the planner's, never written in a program, and each backend
defines them beside its other operators: `runtime/columnar.py`, `runtime/sql.py`,
`runtime/engine.py` (the aggregates). `==` and `!=` compare bit patterns already.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(x: unsigned, y: unsigned)\\n.decl h(x: unsigned)\\n'
...                   'h(x / y) :- a(x, y), x < y.', "t.dl")
>>> from evita.bootstrap.lowering.division import whole_divisions
>>> [format_rule(r) for r in unsigned_order(whole_divisions(list(p.rules), p), p)]
['rule1 h(x udiv y) :- a(x, y), ukey(x) < ukey(y), y != 0.']
"""
from __future__ import annotations

from dataclasses import replace

from ..builtins import canonical
from ..syntax import Aggregate, BinOp, Call, Declaration, Rule, UnOp, map_literal, map_subterms, rule_terms, subterms
from ..types import TypeSystem
from .division import WHOLE_DIVISION, rule_kinds, typing_context

UKEY = "ukey"  # unary: the order key of an unsigned value (x bxor -2^63)
UDIV = "udiv"  # binary: unsigned division of the patterns
UMOD = "umod"  # binary: unsigned remainder of the patterns
UMIN, UMAX = "umin", "umax"  # aggregates: least and greatest by unsigned order
_ORDERING = ("<", "<=", ">", ">=")
_AGGREGATES = {"min": UMIN, "max": UMAX}
_DIVISIONS = {WHOLE_DIVISION: UDIV, "%": UMOD}


def unsigned_order(rules: list, program) -> list:
    """The rules, with unsigned comparisons, extremes and divisions as unsigned ones."""
    if not _mentions_unsigned(program, rules):
        return rules
    types, declared = typing_context(program)
    return [_rewritten(r, types, declared) for r in rules]


def _mentions_unsigned(program, rules: list) -> bool:
    """Whether any term can be unsigned: a column of an unsigned kind, or `to_unsigned`
    (a literal `5u` is `as(5, unsigned)`). Skips the typing of the
    rules of the many programs without one."""
    types = TypeSystem.of(program)
    if any(types.kind(c.type) == "unsigned" for d in program.of(Declaration) for c in d.columns):
        return True
    return any(_calls_to_unsigned(t) for r in rules for t in rule_terms(r))


def _calls_to_unsigned(t) -> bool:
    if isinstance(t, Call) and canonical(t.func) == "to_unsigned":
        return True
    if isinstance(t, Call) and t.func == "as" and len(t.args) == 2 and getattr(t.args[1], "value", None) == "unsigned":
        return True  # a literal `5u`, or a cast to unsigned
    return any(_calls_to_unsigned(s) for s in subterms(t))


def _rewritten(rule: Rule, types: TypeSystem, declared: dict) -> Rule:
    from .width import kind  # width.py imports this module's operators

    kinds = rule_kinds(rule, types, declared)

    def unsigned(*terms) -> bool:
        return any(kind(t, kinds) == "unsigned" for t in terms)

    def sub(t):
        if isinstance(t, BinOp) and t.op in _ORDERING and unsigned(t.left, t.right):
            return replace(t, left=_key(sub(t.left)), right=_key(sub(t.right)))
        if isinstance(t, BinOp) and t.op in _DIVISIONS and unsigned(t.left, t.right):
            return replace(t, op=_DIVISIONS[t.op], left=sub(t.left), right=sub(t.right))
        if isinstance(t, Aggregate) and t.func in _AGGREGATES and t.arg is not None and unsigned(t.arg):
            return replace(map_subterms(t, sub), func=_AGGREGATES[t.func])
        if isinstance(t, Call) and canonical(t.func) in ("min", "max") and unsigned(*t.args):
            return _key(replace(t, args=tuple(_key(sub(a)) for a in t.args)))
        return map_subterms(t, sub)

    head = replace(rule.head, args=tuple(sub(a) for a in rule.head.args))
    return replace(rule, head=head, body=tuple(map_literal(lit, sub) for lit in rule.body))


def _key(t):
    return UnOp(UKEY, t, t.span)
