"""`to_number`, `to_unsigned` and `to_float` of text that spells no number: the rule
derives no tuple for that binding, on every backend.

Each backend's conversion gives null for such text (`runtime/columnar.py`,
`runtime/sql.py`, `runtime/oracle.py`), and a null that reaches a head would be written
as an empty field. Rather than teach every backend to drop it, the planner gives the
rule one condition per conversion of a term not known to be a number,
`to_number(t) == to_number(t)`, placed before the literal that converts: a comparison
with null holds on no backend, so the binding goes (Soufflé stops with an error there;
docs/language.md says what Evita does instead).

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(t: symbol, n: number)\\n.decl h(x: number, y: number)\\n'
...                   'h(to_number(t), to_number(n)) :- a(t, n).', "t.dl")
>>> [format_rule(r) for r in spelled_numbers(list(p.rules), p)]
['rule1 h(to_number(t), to_number(n)) :- a(t, n), to_number(t) == to_number(t).']
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import BinOp, Call, Rule, Select, map_literal, map_subterms, rule_terms, subterms
from .division import number_kind, rule_kinds, typing_context

_CONVERSIONS = ("to_number", "to_unsigned", "to_float")
_NUMBER_KINDS = ("int", "number", "unsigned", "float")


def spelled_numbers(rules: list, program) -> list:
    """The rules, each conversion of text guarded so that text spelling no number derives
    nothing."""
    if not any(_converts(t) for r in rules for t in rule_terms(r)):
        return rules
    types, declared = typing_context(program)
    return [_guarded(r, types, declared) for r in rules]


def _converts(t) -> bool:
    if isinstance(t, Call) and t.func in _CONVERSIONS:
        return True
    return any(_converts(s) for s in subterms(t))


def _guarded(rule: Rule, types, declared) -> Rule:
    if not any(_converts(t) for t in rule_terms(rule)):
        return rule
    kinds = rule_kinds(rule, types, declared)
    guards: list = []  # for the literal at hand
    seen: list = []  # the conversions guarded already (terms compare without their places)

    def collect(t):
        if isinstance(t, Call) and t.func in _CONVERSIONS and number_kind(t.args[0], kinds) not in _NUMBER_KINDS:
            if t not in seen:
                seen.append(t)
                guards.append(Select(BinOp("==", t, t, t.span), t.span))
        map_subterms(t, collect)
        return t

    body = []
    for lit in rule.body:
        map_literal(lit, collect)
        body.extend(guards)
        guards.clear()
        body.append(lit)
    for a in rule.head.args:
        collect(a)
    return replace(rule, body=tuple(body + guards))
