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
from .syntax import STRING, Aggregate, Assign, Atom, BinOp, Call, Cond, Const, ListExpr, Rule, Select, UnOp, Var

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
    body = []
    for lit in rule.body:
        if isinstance(lit, Atom):
            lit = replace(lit, args=tuple(sub(a) for a in lit.args))
        elif isinstance(lit, (Assign, Select)):
            lit = replace(lit, expr=sub(lit.expr))
        body.append(lit)
    return replace(rule, head=replace(rule.head, args=tuple(sub(a) for a in rule.head.args)), body=tuple(body))


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
    if isinstance(t, Call):
        return replace(t, args=tuple(sub(a) for a in t.args))
    if isinstance(t, BinOp):
        return replace(t, left=sub(t.left), right=sub(t.right))
    if isinstance(t, UnOp):
        return replace(t, arg=sub(t.arg))
    if isinstance(t, Cond):
        return replace(t, test=sub(t.test), then=sub(t.then), other=sub(t.other))
    if isinstance(t, ListExpr):
        return replace(t, items=tuple(sub(a) for a in t.items))
    if isinstance(t, Aggregate) and t.arg is not None:
        return replace(t, arg=sub(t.arg))
    return t


def casts_in(rule: Rule) -> list:
    """Every `as(...)` call of a rule, in its head and body."""
    found: list = []

    def walk(t):
        if isinstance(t, Call):
            if is_cast(t):
                found.append(t)
            for a in t.args:
                walk(a)
        elif isinstance(t, BinOp):
            walk(t.left)
            walk(t.right)
        elif isinstance(t, UnOp):
            walk(t.arg)
        elif isinstance(t, Cond):
            for x in (t.test, t.then, t.other):
                walk(x)
        elif isinstance(t, ListExpr):
            for x in t.items:
                walk(x)
        elif isinstance(t, Aggregate) and t.arg is not None:
            walk(t.arg)

    for a in rule.head.args:
        walk(a)
    for lit in rule.body:
        if isinstance(lit, Atom):
            for a in lit.args:
                walk(a)
        elif isinstance(lit, (Assign, Select)):
            walk(lit.expr)
    return found
