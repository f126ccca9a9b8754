"""Soufflé's `btree_max` and `btree_min` qualifiers: the last column of the relation
keeps, per value of the other columns, only the greatest (least) value derived, inside
recursion too (`.decl path(x: number, y: number, c: number) btree_max`).

That is what a head aggregate `max`/`min` already means (one grouping fed by all the
relation's rules, PreM inside recursion, docs/language.md "Aggregates"), so each rule
deriving the relation gets its last head argument wrapped in the aggregate; the qualifier
is dropped. `btree_sum` (a sum that Soufflé adds up as tuples arrive) is "not supported
yet", reported by `statements.py`.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl e(x: number, c: number)\\n.decl p(x: number, c: number) btree_min\\n'
...                   'p(x, c + 1) :- e(x, c).', "t.dl")
>>> [format_rule(r) for r in p.rules]
['rule1 p(x, min<c + 1>) :- e(x, c).']
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import Aggregate, Declaration, Rule

EXTREMA = {"btree_max": "max", "btree_min": "min"}


def extremum_heads(statements: list) -> list:
    """The statements, each rule deriving a `btree_max`/`btree_min` relation with its last
    head argument under `max`/`min`, and those qualifiers dropped."""
    kept: dict = {}
    for s in statements:
        if isinstance(s, Declaration) and s.columns:
            func = next((EXTREMA[q] for q in s.qualifiers if q in EXTREMA), None)
            if func:
                kept[s.relation] = func
    if not kept:
        return statements
    out = []
    for s in statements:
        if isinstance(s, Declaration) and s.relation in kept:
            s = replace(s, qualifiers=tuple(q for q in s.qualifiers if q not in EXTREMA))
        elif isinstance(s, Rule) and s.head.relation in kept and s.head.args \
                and not isinstance(s.head.args[-1], Aggregate):
            last = s.head.args[-1]
            s = replace(s, head=replace(s.head, args=s.head.args[:-1] + (Aggregate(kept[s.head.relation], last,
                                                                                     last.span),)))
        out.append(s)
    return out
