"""Soufflé's body aggregates: `F E : { BODY }`, in a rule's body or head, becomes helper
rules that come right before the rule, and the rule reads the helper's result.

The aggregate is evaluated per binding of its grouping variables (those of BODY the rest
of the rule also uses); count and sum of an empty group are 0 (docs/language.md,
"Lowering"):

    L_aggk(g.., F<E>) :- [L_aggk_dom(g..),] BODY.
    L_aggk_dom(g..) :- the rest of the rule's body.           (when needed)
    L_aggk_all(g.., v) :- L_aggk(g.., v).                     (count, sum)
    L_aggk_none L_aggk_all(g.., 0) :- L_aggk_dom(g..), !L_aggk(g.., _).

A variable only the head and the aggregate use is Soufflé's witness of a min or max: the
aggregate's body again, its value equal to the result.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> print(format_program(parse_program('.decl e(x: number, y: number)\\n.decl n(x: number, c: number)\\n'
...                                    'n(x, c) :- e(x, _), c = count : { e(x, _) }.', "t.dl")))
.decl e(x: number, y: number)
.decl n(x: number, c: number)
.decl rule1_agg1_dom(x: any)
rule1_agg1_dom rule1_agg1_dom(x) :- e(x, _).
.decl rule1_agg1(x: any, c: any)
rule1_agg1 rule1_agg1(x, count<*>) :- e(x, _).
.decl rule1_agg1_all(x: any, c: any)
rule1_agg1_all rule1_agg1_all(x, c) :- rule1_agg1(x, c).
rule1_agg1_none rule1_agg1_all(x, 0) :- rule1_agg1_dom(x), notin rule1_agg1(x, _).
rule1 n(x, c) :- e(x, _), rule1_agg1_all(x, c).
<BLANKLINE>
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import (
    INT, Aggregate, Assign, Atom, BinOp, BodyAggregate, Call, Column, Cond, Const, Declaration, Fact, ListExpr,
    Rule, Select, UnOp, Var, Wildcard, map_literal, map_subterms,
)

__all__ = ["AggregateLowering", "aggregate_terms", "bound_by", "outer_vars"]


class AggregateLowering:
    """The aggregate part of `statements.Lowering` (a mixin): it uses the lowering's
    `souffle`, `columns`, `error`, `resolve_literal`, `_rule` (every helper rule is
    lowered like any other) and `_finish_rule`."""

    def _lower_aggregates(self, rule: Rule, out):
        """Aggregates (Soufflé's, anywhere in the head or the body) become helper rules
        that come right before the rule; then `=` becomes `:=` or `==`."""
        body = [self.resolve_literal(b) for b in rule.body]
        # An aggregate groups by the variables the rest of the BODY shares with it. One
        # the head uses but only the aggregate binds is Soufflé's witness: for min and
        # max, a value of a tuple reaching the result (`_witnesses`); not a group.
        outside: set = set()
        for lit in body:
            outside.update(outer_vars(lit))
        head_only = set(outer_vars(rule.head)) - outside
        helpers: list = []
        lowered: list = []
        count = 0
        for i, lit in enumerate(body):
            if isinstance(lit, BodyAggregate) and lit.var is not None:  # `n = count : { ... }`
                count += 1
                lowered.append(self._aggregate_helper(rule, body, i, lit, lit.var, count, outside, helpers))
                continue
            results: dict = {}  # id(aggregate term) -> the variable holding its value
            for agg in aggregate_terms(lit):
                count += 1
                results[id(agg)] = Var(f"_agg{count}", agg.span)
                lowered.append(self._aggregate_helper(rule, body, i, agg, results[id(agg)], count, outside,
                                                      helpers))
                lowered += self._witnesses(agg, results[id(agg)], head_only, outside, count)
            lowered.append(_with_aggregates_replaced(lit, results) if results else lit)
        for i, lit in enumerate(body):  # after every literal: a witness binds nothing the rest uses
            if isinstance(lit, BodyAggregate) and lit.var is not None:
                lowered += self._witnesses(lit, lit.var, head_only, outside, i)
        head = rule.head
        results = {}
        for agg in aggregate_terms(head):  # `r(x, count : { ... }) :- ...`
            count += 1
            results[id(agg)] = Var(f"_agg{count}", agg.span)
            lowered.append(self._aggregate_helper(rule, body, None, agg, results[id(agg)], count, outside,
                                                  helpers))
            lowered += self._witnesses(agg, results[id(agg)], head_only, outside, count)
        if results:
            head = _with_aggregates_replaced(head, results)
        out.extend(helpers)
        self._finish_rule(replace(rule, head=head, body=tuple(lowered)), out)

    def _witnesses(self, agg: BodyAggregate, result: Var, head_only: set, outside: set, k: int) -> list:
        """Soufflé's witnesses of `min E : { BODY }` (or max): variables of BODY that only
        the head uses outside it. The aggregate is computed without them (they are not
        grouping variables), and they take their values from the tuples of BODY whose E
        equals the result: BODY again, its other variables renamed apart, and E = result.
        count, sum and mean have no witness (Soufflé's error too)."""
        witnesses = [v for v in _deep_vars(agg) if v in head_only]
        if not witnesses:
            return []
        if agg.func not in ("min", "max") or agg.expr is None:
            self.error("witness", f"variable {witnesses[0]} is bound only inside a {agg.func} aggregate, "
                        "but the head uses it", agg.span, "",
                        "bind it outside the aggregate too, or use min or max (whose witness it can be)")
            return []
        if any(not isinstance(b, (Atom, Select)) or aggregate_terms(b) for b in agg.body):
            self.error("witness", f"variable {witnesses[0]} is a witness of an aggregate whose body computes "
                        "or aggregates: not supported yet", agg.span, "",
                        "bind the witness in a rule of its own that joins the aggregate's result")
            return []
        mine = set(witnesses) | (set(_deep_vars(agg)) & outside)
        rename = {v: f"{v}_w{k}" for v in _deep_vars(agg) if v not in mine}

        def renamed(x):
            if isinstance(x, Var):
                return Var(rename.get(x.name, x.name), x.span)
            return map_subterms(x, renamed)
        again = [map_literal(b, renamed) for b in agg.body]
        return again + [Select(BinOp("==", renamed(agg.expr), result, agg.span), agg.span)]

    def _aggregate_helper(self, rule: Rule, body: list, at, agg: BodyAggregate, result: Var, k: int,
                          outside: set, out: list) -> Atom:
        """Soufflé's aggregate `F E : { BODY }` at body position `at` of `rule`, as helper
        rules (docs/language.md, "Lowering"); returns the atom that replaces it. The
        aggregate is evaluated per binding of its grouping variables (those of BODY the
        rest of the rule also uses); count and sum of an empty group are 0:
            L_aggk(g.., F<E>) :- [L_aggk_dom(g..),] BODY.
            L_aggk_dom(g..) :- the rest of the rule's body.           (when needed)
            L_aggk_all(g.., v) :- L_aggk(g.., v).                     (count, sum)
            L_aggk_none L_aggk_all(g.., 0) :- L_aggk_dom(g..), !L_aggk(g.., _).
        Without grouping variables the domain is the fact `L_aggk_unit(0).`"""
        name = f"{rule.name}_agg{k}"
        span = agg.span
        # `n = count : { ... }`: n is the result, not a grouping variable, unless an atom binds
        # it too (then the literal compares, as in Soufflé)
        result_only = {agg.var.name} - bound_by([b for b in body if isinstance(b, Atom)]) if agg.var else set()
        grouping = tuple(Var(v, span) for v in _deep_vars(agg) if v in outside and v not in result_only)
        with_default = agg.func in ("count", "sum")
        positive = any(isinstance(b, Atom) and not b.negated for b in agg.body)
        inner_alone = positive and {g.name for g in grouping} <= bound_by(agg.body)
        domain = None
        stmts: list = []
        if grouping and (with_default or not inner_alone):
            domain = Atom(f"{name}_dom", grouping, span=span)
            self._rule(Rule(domain.relation, domain, tuple(_domain_literals(body, at)), False, None,
                            rule.component, span), stmts)
            self._helper_relation(domain.relation, [g.name for g in grouping])
        elif not grouping and (with_default or not positive):
            stmts.append(Fact(Atom(f"{name}_unit", (Const(0, INT, span),), span=span), rule.component, span))
            domain = Atom(f"{name}_unit", (Wildcard(span),), span=span)
            self._helper_relation(f"{name}_unit", ["unit"])
        inner = ((domain,) if domain is not None and not inner_alone else ()) + tuple(agg.body)
        helper = Rule(name, Atom(name, grouping + (Aggregate(agg.func, agg.expr, span),), span=span), inner,
                      False, None, rule.component, span)
        self._rule(helper, stmts)  # nested aggregates and `=` inside the aggregate body
        self._helper_relation(name, [g.name for g in grouping] + [result.name])
        target = name
        if with_default:
            target = f"{name}_all"
            value = Var(_unique([g.name for g in grouping] + [result.name])[-1], span)  # `x = sum ..(x)..`
            stmts.append(Rule(target, Atom(target, grouping + (value,), span=span),
                              (Atom(name, grouping + (value,), span=span),), False, None, rule.component, span))
            stmts.append(Rule(f"{name}_none", Atom(target, grouping + (Const(0, INT, span),), span=span),
                              (domain, Atom(name, grouping + (Wildcard(span),), negated=True, span=span)),
                              False, None, rule.component, span))
            self._helper_relation(target, [g.name for g in grouping] + [result.name])
        out.extend(stmts)
        return Atom(target, grouping + (result,), span=span)

    def _helper_relation(self, name: str, columns: list):
        self.aggregate_helpers.append((name, _unique([c.lower().lstrip("_") or "v" for c in columns])))

    def declare_helpers(self, statements: list) -> list:
        """Soufflé programs declare every relation: declare the aggregate helpers too,
        each right before the first statement that derives it."""
        info = dict(self.aggregate_helpers)
        declared = set(self.columns)
        out = []
        for s in statements:
            atom = s.head if isinstance(s, Rule) else s.atom if isinstance(s, Fact) else None
            if atom is not None and atom.relation in info and atom.relation not in declared:
                declared.add(atom.relation)
                out.append(Declaration(atom.relation, tuple(Column(n, "any") for n in info[atom.relation]),
                                       None, "decl", s.span))
            out.append(s)
        return out


def _unique(names: list) -> list:
    out: list = []
    for n in names:
        m, i = n, 2
        while m in out:
            m, i = f"{n}{i}", i + 1
        out.append(m)
    return out


def _children_of(node) -> tuple:
    """The sub-terms of a term or literal (an aggregate's body is not among them: its
    variables are its own unless the rest of the rule shares them)."""
    if isinstance(node, (Atom, Call)):
        return node.args
    if isinstance(node, ListExpr):
        return node.items
    if isinstance(node, BinOp):
        return node.left, node.right
    if isinstance(node, UnOp):
        return (node.arg,)
    if isinstance(node, Cond):
        return node.test, node.then, node.other
    if isinstance(node, Aggregate):
        return () if node.arg is None else (node.arg,)
    if isinstance(node, Select):
        return (node.expr,)
    if isinstance(node, Assign):
        return node.var, node.expr
    return ()


def outer_vars(node) -> list:
    """Variables of a literal or term outside any aggregate body (an aggregate literal
    contributes its result variable)."""
    if isinstance(node, Var):
        return [node.name]
    if isinstance(node, BodyAggregate):
        return [node.var.name] if node.var is not None else []
    out: list = []
    for child in _children_of(node):
        out += [v for v in outer_vars(child) if v not in out]
    return out


def _deep_vars(agg: BodyAggregate) -> list:
    """Every variable of an aggregate's expression and body, nested aggregates included:
    those the rest of the rule also uses are its grouping variables."""
    out: list = []

    def walk(node):
        if isinstance(node, Var):
            if node.name not in out:
                out.append(node.name)
        elif isinstance(node, BodyAggregate):
            if node.var is not None:
                walk(node.var)
            if node.expr is not None:
                walk(node.expr)
            for lit in node.body:
                walk(lit)
        else:
            for child in _children_of(node):
                walk(child)
    if agg.expr is not None:
        walk(agg.expr)
    for lit in agg.body:
        walk(lit)
    return out


def aggregate_terms(node) -> list:
    """The outermost aggregate terms inside a literal or term, in source order."""
    if isinstance(node, BodyAggregate):
        return [node]
    return [a for child in _children_of(node) for a in aggregate_terms(child)]


def _with_aggregates_replaced(node, results: dict):
    """`node` with each aggregate term whose id is in `results` replaced by its variable."""
    if isinstance(node, BodyAggregate):
        return results.get(id(node), node)

    def sub(x):
        return _with_aggregates_replaced(x, results)
    if isinstance(node, (Atom, Select, Assign)):
        return map_literal(node, sub)
    return map_subterms(node, sub)


def _equated(lit):
    """(variable, expression) of `v = E`, `E = v` or `v := E`, else None."""
    if isinstance(lit, Assign):
        return lit.var.name, lit.expr
    if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op == "=":
        if isinstance(lit.expr.left, Var):
            return lit.expr.left.name, lit.expr.right
        if isinstance(lit.expr.right, Var):
            return lit.expr.right.name, lit.expr.left
    return None


def bound_by(body) -> set:
    """Variables a body binds by itself: positive atoms, aggregate results, then `=`
    whose other side is bound."""
    bound: set = set()
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            bound.update(a.name for a in lit.args if isinstance(a, Var))
        elif isinstance(lit, BodyAggregate) and lit.var is not None:
            bound.add(lit.var.name)
    changed = True
    while changed:
        changed = False
        for lit in body:
            eq = _equated(lit)
            if eq and eq[0] not in bound and set(outer_vars(eq[1])) <= bound:
                bound.add(eq[0])
                changed = True
    return bound


def _domain_literals(body: list, at) -> list:
    """The literals of a rule's body that bind the outer variables an aggregate sees: all
    but the aggregates and what depends on their results (`n > 3` after `n = count : ..`)."""
    # an aggregate's result taints what uses it, unless an atom binds the variable as well
    tainted = {lit.var.name for lit in body if isinstance(lit, BodyAggregate) and lit.var is not None} \
        - bound_by([lit for lit in body if isinstance(lit, Atom)])
    kept: list = []
    candidates = [lit for i, lit in enumerate(body) if i != at and not isinstance(lit, BodyAggregate)
                  and not aggregate_terms(lit)]
    changed = True
    while changed:  # taint spreads through `x = n + 1`
        changed = False
        for lit in candidates:
            eq = _equated(lit)
            if eq and eq[0] not in tainted and set(outer_vars(eq[1])) & tainted:
                tainted.add(eq[0])
                changed = True
    for lit in candidates:
        if not set(outer_vars(lit)) & tainted:
            kept.append(lit)
    return kept
