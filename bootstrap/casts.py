"""Soufflé's type cast `as(x, T)`: x, read as a value of type T.

At run time it is x itself (every evaluator: the built-in `as` returns its first
argument). It changes what the static checks know: the term has type T, so Soufflé's
subtype rule accepts `r(as(x, Id)) :- a(x).` with r's column of type Id and a's of type
number. Soufflé's `as` between kinds (a number as a float) reinterprets the bits; Evita
stores values by kind, so a cast must stay within its value's kind (number, unsigned,
float, symbol): across kinds the checks report a `type-mismatch` and point to
`to_float`, `to_number`, `to_unsigned`, `to_string`.

The user writes the type as a bare name; the parser turns it into a string constant,
`as(x, "Id")`, so that the call prints, and parses, back as it is.
"""
from __future__ import annotations

from dataclasses import replace

from .diagnostics import Diagnostic
from .syntax import STRING, Call, Const, Rule, Var, map_literal, map_subterms, rule_terms, subterms

NAME = "as"


def is_cast(term) -> bool:
    return isinstance(term, Call) and term.func == NAME


def target_type(call: Call):
    """T of `as(x, T)`, once the parser has normalized it; None when malformed."""
    if len(call.args) == 2 and isinstance(call.args[1], Const) and call.args[1].type == STRING:
        return call.args[1].value
    return None


def normalized(rule: Rule, report) -> Rule:
    """`rule` with the type of each `as(x, T)` as the constant "T"; `report(diagnostic)`
    for a cast without two arguments or whose second is not a type name."""
    sub = lambda t: _term(t, report)  # noqa: E731
    return replace(rule, head=replace(rule.head, args=tuple(sub(a) for a in rule.head.args)),
                   body=tuple(map_literal(lit, sub) for lit in rule.body))


def _term(t, report):
    sub = lambda x: _term(x, report)  # noqa: E731
    if is_cast(t):
        args = tuple(sub(a) for a in t.args)
        if len(args) != 2:
            report(Diagnostic("function-arity", f"as takes 2 arguments, not {len(args)}", t.span, "as",
                              "as(x, T): x read as a value of type T, e.g. as(n, Id)"))
            return replace(t, args=args)
        kind = args[1]
        if isinstance(kind, Var):
            return replace(t, args=(args[0], Const(kind.name, STRING, kind.span)))
        if not (isinstance(kind, Const) and kind.type == STRING):
            report(Diagnostic("syntax", "the second argument of as(x, T) is a type name", getattr(kind, "span", t.span),
                              "", "write the type's name, e.g. as(n, number) or as(s, Name)"))
        return replace(t, args=args)
    return map_subterms(t, sub)


def casts_in(rule: Rule) -> list:
    """Every `as(...)` call of a rule, in its head and body."""
    found: list = []

    def walk(t):
        if is_cast(t):
            found.append(t)
        for s in subterms(t):
            walk(s)

    for t in rule_terms(rule):
        walk(t)
    return found
