"""Soufflé's `eqrel` qualifier: an equivalence relation, as three ordinary rules that close
what the program derives under reflexivity, symmetry and transitivity (so every backend
runs it). The qualifier itself is dropped from the declaration.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> print(format_program(parse_program('.decl same(a: number, b: number) eqrel', "t.dl")))
.decl same(a: number, b: number)
eqrel_same_reflexive same(x, x) :- same(x, _).
eqrel_same_symmetric same(y, x) :- same(x, y).
eqrel_same_transitive same(x, z) :- same(x, y), same(y, z).
<BLANKLINE>
"""
from __future__ import annotations

from ..syntax import Atom, Declaration, Rule, Var, Wildcard

__all__ = ["equivalence_rules"]


def equivalence_rules(d: Declaration) -> list:
    """Soufflé's `eqrel`: the reflexive, symmetric, transitive closure of what the
    program derives, as three ordinary rules (so every backend runs it):
        R(x, x) :- R(x, _).    R(y, x) :- R(x, y).    R(x, z) :- R(x, y), R(y, z).
    Labelled after the relation; they point at its .decl."""
    x, y, z = (Var(n, d.span) for n in ("x", "y", "z"))
    label = "eqrel_" + d.relation.replace("::", "_")

    def atom(*args):
        return Atom(d.relation, args, span=d.span)
    return [Rule(f"{label}_reflexive", atom(x, x), (atom(x, Wildcard(d.span)),), span=d.span),
            Rule(f"{label}_symmetric", atom(y, x), (atom(x, y),), span=d.span),
            Rule(f"{label}_transitive", atom(x, z), (atom(x, y), atom(y, z)), span=d.span)]
