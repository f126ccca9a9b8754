"""Disjunction: a body with alternatives (`;`) becomes one rule per alternative, the first
keeping the rule's label, the others `L_or2`, `L_or3`, ... in source order. Negated
groups were already turned into groups of negated literals by the builder (De Morgan).

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('r1 p(x) :- a(x), (b(x) ; c(x)).', "t.olg")
>>> [format_rule(r) for r in p.rules]
['r1 p(x) :- a(x), b(x).', 'r1_or2 p(x) :- a(x), c(x).']
"""
from __future__ import annotations

from .raw import Group, flatten

__all__ = ["expand"]


def expand(items: list) -> list:
    """All conjunctions a body with `Group`s denotes, in source order of the alternatives."""
    results: list = [[]]
    for it in items:
        if isinstance(it, Group):
            options: list = []
            for alt in it.alternatives:
                options.extend(expand(flatten(alt) if isinstance(alt, list) else [alt]))
            results = [r + o for r in results for o in options]
        else:
            results = [r + [it] for r in results]
    return results
