"""Soufflé's subsumption: `R(x..) <= R(y..) :- body.` removes a tuple of R matching the
left atom when a tuple matching the right atom exists and the body holds (the left is
dominated by the right). The rule becomes an ordinary rule of a helper relation that
collects the dominated tuples,

    R_dominated(x..) :- R(x..), R(y..), body, (x1 != y1 ; x2 != y2 ; ...).

and a `.plan relation R_dominated(role=dominated, made_for=R)` that ties it to R (the
catalog's relation.role and made_for). The last condition is Evita's reading of
"dominated": only by a *different* tuple, so that `dist(x, d1) <= dist(x, d2) :- d2 <= d1.`
does not remove every tuple by itself; it names only the positions where the two atoms
are written differently. Removing the dominated tuples is the runtime's: after the
stratum's start and after every round of its fixpoint (`runtime/semantics.py`,
`subsumed`), the same on every backend.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> print(format_program(parse_program('''.decl d(x: number, c: number)
... d(x, c1) <= d(x, c2) :- c2 <= c1.''', "t.dl")))
.decl d(x: number, c: number)
.decl d_dominated(x: any, c: any)
rule1 d_dominated(x, c1) :- d(x, c1), d(x, c2), c2 <= c1, c1 != c2.
.plan relation d_dominated(role=dominated, made_for=d)
<BLANKLINE>
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import Aggregate, Atom, BinOp, Plan, Select, Var, Wildcard
from .raw import Clause, Group, RawCall

DOMINATED_ROLE = "dominated"


def dominated_relation(relation: str) -> str:
    """The helper relation holding the tuples of `relation` that another one dominates."""
    return relation + "_dominated"


class SubsumptionLowering:
    """Mixin of `statements.Lowering`: `_subsumption` lowers one subsumptive clause."""

    def _subsumption(self, c: Clause, component, out):
        left, right = c.head, c.dominating
        if component is not None or self.comp_depth:
            self.error("syntax", "subsumption inside a component is not supported yet", c.span, "<=",
                       "write the subsumptive rule outside the .comp, over the instance's relation (g.R)")
            return
        if left.name != right.name:
            self.error("subsumption", f"a subsumptive rule compares two tuples of one relation; this one names "
                       f"{left.name} and {right.name}", right.span, right.name,
                       f"write {left.name}(...) <= {left.name}(...) :- ..., as Soufflé requires")
            return
        if len(left.args) != len(right.args):
            self.error("arity", f"{left.name} has {len(left.args)} arguments on the left of <= and "
                       f"{len(right.args)} on the right", right.span, right.name,
                       "give both atoms every column of the relation")
            return
        if any(isinstance(a, Aggregate) for a in left.args + right.args) or left.at or right.at:
            self.error("subsumption", "the atoms of a subsumptive rule hold variables and constants only",
                       c.span, "<=", "compute values in the body: d(x, c1) <= d(x, c2) :- c2 < c1.")
            return
        if any(w.value == "delete" for w in c.words):
            self.error("syntax", "a subsumptive rule cannot be a delete rule", c.span, "delete",
                       "drop 'delete': the dominated tuple is removed by the rule itself")
            return
        largs = tuple(_named_wildcards(left.args, "_l"))
        rargs = tuple(_named_wildcards(right.args, "_r"))
        helper = dominated_relation(left.name)
        differ = [(a, b) for a, b in zip(largs, rargs) if a != b]
        # a different tuple: some position differs (positions written alike never do)
        if not differ:
            self.error("subsumption", f"both sides of <= are the same tuple of {left.name}, and a tuple is never "
                       "dominated by itself, so this rule removes nothing", c.span, "<=",
                       "name the dominating tuple with other variables: r(x, a) <= r(x, b) :- a < b.")
            return
        different = [Group([[Select(BinOp("!=", a, b, c.span), c.span)] for a, b in differ])]
        body = [_atom_call(left, largs), _atom_call(right, rargs)] + list(c.body) + different
        self._clause(Clause(c.words, RawCall(helper, largs, (), left.span), None,
                            [self._literal_atom(x) for x in body], c.span), None, out)
        if helper not in self.subsumed:
            self.subsumed[helper] = left.name
            self.aggregate_helpers.append((helper, _column_names(self.columns.get(left.name), len(largs))))
            out.append(Plan("relation", helper, (("role", DOMINATED_ROLE), ("made_for", left.name)), c.span))

    @staticmethod
    def _literal_atom(x):
        if isinstance(x, RawCall):
            return Atom(x.name, x.args, None, span=x.span)
        return x


def _atom_call(call: RawCall, args: tuple) -> RawCall:
    return replace(call, args=args)


def _named_wildcards(args, prefix: str):
    """`_` in a subsumptive atom is a variable of its own: named, so the two sides' differ."""
    for i, a in enumerate(args):
        yield Var(f"{prefix}{i}", a.span) if isinstance(a, Wildcard) else a


def _column_names(names, n: int) -> list:
    return list(names) if names and len(names) == n else [f"c{i}" for i in range(n)]
