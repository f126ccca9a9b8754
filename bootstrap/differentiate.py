"""The bootstrap differentiation: rules into event-condition-action form, in Python.

This is what the planner does by itself when no delta stage has run, and what
`stages/delta.dl` does in Datalog; a test holds the two equal on every stage and example
(self-hosting). The convention is seed 002's Fig 3.6: a rule with k body atoms of
materialized relations becomes k rules, the i-th driven by the delta of the i-th such
atom; a rule that already has an event (a delta atom, or an atom of an event relation)
is left alone.

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program('''materialize(link, infinity, infinity, keys(1,2)).
... materialize(path, infinity, infinity, keys(1,2)).
... r1 path(X, Y) :- link(X, Y).
... r2 path(X, Z) :- link(X, Y), path(Y, Z).''')
>>> [(r.name, [l.delta for l in r.body]) for r in differentiate(p).rules]
[('r1_d1', [True]), ('r2_d1', [True, False]), ('r2_d2', [False, True])]
"""
from __future__ import annotations

from dataclasses import replace

from . import syntax as S


def materialized_relations(program: S.Program) -> set:
    """Relations stored across timesteps: materialize/define/.decl, and catalog tables."""
    out = {s.relation for s in program.statements if isinstance(s, (S.Materialize, S.Declaration))}
    for r in program.rules:
        for a in [r.head] + [l for l in r.body if isinstance(l, S.Atom)]:
            if a.relation.startswith("sys::"):
                out.add(a.relation)
    return out


def drivers(rule: S.Rule, materialized: set) -> list:
    """Body indexes of the atoms whose deltas drive the rule's ECA versions ([] = leave alone)."""
    atoms = [(i, l) for i, l in enumerate(rule.body) if isinstance(l, S.Atom)]
    if any(a.delta for _, a in atoms):
        return []
    positive = [(i, a) for i, a in atoms if not a.negated]
    if any(a.relation not in materialized for _, a in positive):
        return []  # an event relation already drives it
    return [i for i, _ in positive]


def differentiate(program: S.Program) -> S.Program:
    """The program with every rule replaced by its ECA rules (labels `L_d{position}`)."""
    materialized = materialized_relations(program)
    out = []
    for st in program.statements:
        if not isinstance(st, S.Rule) or not drivers(st, materialized):
            out.append(st)
            continue
        for i in drivers(st, materialized):
            body = tuple(replace(l, delta=True) if j == i else l for j, l in enumerate(st.body))
            out.append(replace(st, name=f"{st.name}_d{i + 1}", body=body))
    return replace(program, statements=tuple(out))
