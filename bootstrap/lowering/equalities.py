"""Soufflé's `=`: an assignment where it binds a variable, otherwise the comparison `==`.

`x = E` (or `E = x`) in a rule body becomes `x := E` when no positive atom binds x and
no earlier assignment did; every other `=`, inside any term, is Soufflé's spelling of
`==`. Run on every rule the parser lowers, and again on the rules inlining writes
(`inline.py`).

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(x: number)\\n.decl b(x: number, y: number)\\n'
...                   'b(x, y) :- a(x), y = x + 1, x = 2.', "t.dl")
>>> format_rule(p.rules[0])
'rule1 b(x, y) :- a(x), y := x + 1, x == 2.'
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import Aggregate, Assign, Atom, BinOp, Call, Cond, ListExpr, Select, UnOp, Var, atom_vars

__all__ = ["eq_to_eqeq", "lower_equalities"]


def eq_to_eqeq(term):
    """Every `=` left inside a term is Soufflé's spelling of the comparison `==`."""
    if isinstance(term, BinOp):
        op = "==" if term.op == "=" else term.op
        return BinOp(op, eq_to_eqeq(term.left), eq_to_eqeq(term.right), term.span)
    if isinstance(term, UnOp):
        return UnOp(term.op, eq_to_eqeq(term.arg), term.span)
    if isinstance(term, Call):
        return Call(term.func, tuple(eq_to_eqeq(a) for a in term.args), term.span)
    if isinstance(term, Cond):
        return Cond(eq_to_eqeq(term.test), eq_to_eqeq(term.then), eq_to_eqeq(term.other), term.span)
    if isinstance(term, ListExpr):
        return replace(term, items=tuple(eq_to_eqeq(a) for a in term.items))
    if isinstance(term, Aggregate) and term.arg is not None:
        return Aggregate(term.func, eq_to_eqeq(term.arg), term.span)
    return term


def lower_equalities(body: list) -> list:
    """The literals of a rule body with each `=` an assignment or a comparison."""
    bound: set = set()
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            bound.update(atom_vars(lit))
    out = []
    for lit in body:
        if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op == "=":
            left, right = lit.expr.left, lit.expr.right
            if isinstance(left, Var) and left.name not in bound:
                lit = Assign(left, eq_to_eqeq(right), lit.span)
            elif isinstance(right, Var) and right.name not in bound:
                lit = Assign(right, eq_to_eqeq(left), lit.span)
        if isinstance(lit, Assign):
            bound.add(lit.var.name)
            lit = Assign(lit.var, eq_to_eqeq(lit.expr), lit.span)
        elif isinstance(lit, Select):
            lit = Select(eq_to_eqeq(lit.expr), lit.span)
        elif isinstance(lit, Atom):
            lit = replace(lit, args=tuple(eq_to_eqeq(a) for a in lit.args))
        out.append(lit)
    return out
