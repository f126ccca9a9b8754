"""Soufflé 2.4's `+` on symbols: `"pre-" + s` joins the two texts, as `cat` does.

The planner rewrites each `+` whose operands the checks type as symbols (a symbol
column, a string constant, a functor giving text, or another such `+`) into `cat`, which
every backend already runs; `+` on numbers stays arithmetic. Facts fold it
(`folding.py`); the oracle adds Python strings.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(s: symbol, n: number)\\n.decl h(s: symbol, n: number)\\n'
...                   'h(s + "-" + s, n + 1) :- a(s, n).', "t.dl")
>>> [format_rule(r) for r in joined_symbols(list(p.rules), p)]
['rule1 h(cat(cat(s, "-"), s), n + 1) :- a(s, n).']
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import STRING, BinOp, Call, Const, Rule, Var, map_literal, map_subterms, rule_terms, subterms
from .division import rule_kinds, typing_context

_TEXT_CALLS = ("cat", "to_string", "substr", "lower", "upper")


def joined_symbols(rules: list, program) -> list:
    """The rules, `+` on symbols as `cat`."""
    if program.dialect != "souffle" or not any(_adds(t) for r in rules for t in rule_terms(r)):
        return rules
    types, declared = typing_context(program)
    return [_rewritten(r, types, declared) for r in rules]


def _adds(t) -> bool:
    return (isinstance(t, BinOp) and t.op == "+") or any(_adds(s) for s in subterms(t))


def _rewritten(rule: Rule, types, declared) -> Rule:
    if not any(_adds(t) for t in rule_terms(rule)):
        return rule
    kinds = rule_kinds(rule, types, declared)

    def sub(t):
        t = map_subterms(t, sub)
        if isinstance(t, BinOp) and t.op == "+" and _text(t.left, kinds) and _text(t.right, kinds):
            return Call("cat", (t.left, t.right), t.span)
        return t

    return replace(rule, head=replace(rule.head, args=tuple(sub(a) for a in rule.head.args)),
                   body=tuple(map_literal(lit, sub) for lit in rule.body))


def _text(t, kinds: dict) -> bool:
    if isinstance(t, Var):
        return kinds.get(t.name) == "symbol"
    if isinstance(t, Const):
        return t.type == STRING
    return isinstance(t, Call) and t.func in _TEXT_CALLS
