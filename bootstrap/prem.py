"""PreM: a min or max inside recursion is accepted only where it may be applied early.

Seed 003 (Theorem 1): evaluating `dist(Y, min<D>) :- dist(X, D1), edge(X, Y, W), D := D1 + W`
with the minimum taken after every iteration gives the answers of taking it at the end
exactly when the rule preserves the order of the value it reads: the head's value is a
non-decreasing function of the body's aggregated value (for both min and max), and the
aggregated value does nothing else — no join on it, no group column made of it, and no
condition that keeps a worse value while dropping a better one. Every strategy
(the driver, the distributed loop, rounds) relies on it; a rule that breaks it would
give answers that depend on the order improvements arrive in.

The check follows each value read from the aggregated column of a relation of the
recursion through the rule's assignments (`D := D1 + W`), and classifies each term as
constant, non-decreasing or non-increasing in it:

>>> from evita.bootstrap.parser import parse_program
>>> ok = parse_program("e(1, 2, 3).\\nr1 d(Y, min<D>) :- e(0, Y, D).\\n"
...                    "r2 d(Y, min<D>) :- d(X, D1), e(X, Y, W), D := D1 + 2 * W, D1 < 100.\\n")
>>> [d.code for d in prem_diagnostics(ok)]
[]
>>> bad = parse_program("e(1, 2, 3).\\nr1 d(Y, min<D>) :- e(0, Y, D).\\n"
...                     "r2 d(Y, min<D>) :- d(X, D1), e(X, Y, W), D := W - D1.\\n")
>>> [d.message for d in prem_diagnostics(bad)]  # doctest: +ELLIPSIS
['rule r2: min<D> inside the recursion of d must not decrease as D1 grows (PreM), but W - D1 falls as D1 grows']

A user who knows better (a function the check cannot see through) says so in the
program: `.plan relation d(prem=asserted)`.
"""
from __future__ import annotations

from typing import Iterator, Optional

from . import syntax as S
from .diagnostics import Diagnostic
from ..runtime.dataflow import term_text

CONST, UP, DOWN, UNKNOWN = "constant", "up", "down", "unknown"
_FLIP = {UP: DOWN, DOWN: UP, CONST: CONST, UNKNOWN: UNKNOWN}


def _plus(a: str, b: str) -> str:
    if CONST in (a, b):
        return b if a == CONST else a
    return a if a == b else UNKNOWN


def direction(term, rec: set, defs: dict, depth: int = 0) -> str:
    """How `term` moves as the values in `rec` grow: CONST, UP, DOWN or UNKNOWN."""
    if depth > 50:
        return UNKNOWN
    if isinstance(term, S.Var):
        if term.name in rec:
            return UP
        if term.name in defs:
            return direction(defs[term.name], rec, defs, depth + 1)
        return CONST
    if isinstance(term, (S.Const, S.Wildcard)):
        return CONST
    if isinstance(term, S.UnOp) and term.op == "-":
        return _FLIP[direction(term.arg, rec, defs, depth + 1)]
    if isinstance(term, S.BinOp) and term.op in ("+", "-", "*"):
        left = direction(term.left, rec, defs, depth + 1)
        right = direction(term.right, rec, defs, depth + 1)
        if term.op == "+":
            return _plus(left, right)
        if term.op == "-":
            return _plus(left, _FLIP[right])
        if left == CONST and right == CONST:
            return CONST
        for factor, other in ((term.left, right), (term.right, left)):
            if isinstance(factor, S.Const) and isinstance(factor.value, (int, float)) \
                    and not isinstance(factor.value, bool):
                return CONST if factor.value == 0 else other if factor.value > 0 else _FLIP[other]
        return UNKNOWN
    if isinstance(term, S.Call) and term.func in ("min", "max"):
        moves = {direction(a, rec, defs, depth + 1) for a in term.args} - {CONST}
        return CONST if not moves else moves.pop() if len(moves) == 1 else UNKNOWN
    return CONST if not (set(S.term_vars(term)) & _reaching(rec, defs)) else UNKNOWN


def _reaching(rec: set, defs: dict) -> set:
    """`rec` and every variable assigned from one of them, directly or not."""
    out = set(rec)
    changed = True
    while changed:
        changed = False
        for v, e in defs.items():
            if v not in out and set(S.term_vars(e)) & out:
                out.add(v)
                changed = True
    return out


def _condition_keeps_order(expr, func: str, rec: set, defs: dict) -> bool:
    """A comparison that drops a value only when it drops every worse one: for min an
    upper bound on something that grows with the value, for max a lower bound."""
    if not (isinstance(expr, S.BinOp) and expr.op in ("<", "<=", ">", ">=")):
        return False
    left, right = direction(expr.left, rec, defs), direction(expr.right, rec, defs)
    if right == CONST and left in (UP, DOWN):
        moving, below = left, expr.op in ("<", "<=")  # moving < constant
    elif left == CONST and right in (UP, DOWN):
        moving, below = right, expr.op in (">", ">=")  # constant > moving
    else:
        return False
    grows_ok = (moving == UP) == below  # an upper bound on a growing term
    return grows_ok if func == "min" else not grows_ok


def _why_not(rule: S.Rule, agg: S.Aggregate, agg_pos: int, rec: set, defs: dict) -> Optional[str]:
    """Why the rule breaks PreM, or None when it keeps it."""
    reach = _reaching(rec, defs)
    for i, a in enumerate(rule.head.args):
        if i != agg_pos and set(S.term_vars(a)) & reach:
            return f"the head's column {i + 1} is made of it ({term_text(a)})"
    for lit in rule.body:
        if isinstance(lit, S.Atom):
            if {v for a in lit.args for v in S.term_vars(a)} & reach:
                return f"the atom {term_text(lit)} {'excludes' if lit.negated else 'joins'} on it"
        elif isinstance(lit, S.Select) and set(S.term_vars(lit.expr)) & reach:
            if not _condition_keeps_order(lit.expr, agg.func, rec, defs):
                return (f"the condition {term_text(lit.expr)} may keep a worse value and drop a better one")
    moves = direction(agg.arg, rec, defs)
    if moves == DOWN:
        return f"{term_text(defs.get(getattr(agg.arg, 'name', None), agg.arg))} falls as {_names(rec)} grows"
    if moves == UNKNOWN:
        return (f"{term_text(defs.get(getattr(agg.arg, 'name', None), agg.arg))} is not known to grow with "
                f"{_names(rec)}: only +, - of a term, * by a constant, min and max are followed")
    return None


def _names(rec: set) -> str:
    return " and ".join(sorted(rec))


def prem_diagnostics(program: S.Program) -> list:
    return list(_check(program))


def _check(program: S.Program) -> Iterator[Diagnostic]:
    from .strata import components, dependency_graph, head_of, premappable, relation_shapes, same_timestep

    rules = same_timestep(program)
    graph = dependency_graph(rules)
    shapes = relation_shapes(rules)
    asserted = {p.name for p in program.of(S.Plan) if dict(p.params).get("prem") == "asserted"}
    heads = list(dict.fromkeys(head_of(r) for r in rules))
    rules_of: dict = {}  # head -> [(position in the program, rule)]: each component reads only its own
    for i, rule in enumerate(rules):
        rules_of.setdefault(head_of(rule), []).append((i, rule))
    for comp in components(heads, graph):
        members = set(comp)
        valued = {n: shapes[n][0] for n in premappable(comp, graph, shapes)}  # relation -> (column, func)
        for _, rule in sorted((ir for n in valued for ir in rules_of.get(n, ())), key=lambda ir: ir[0]):
            head = head_of(rule)
            if head in asserted:
                continue
            col, func = valued[head]
            agg = rule.head.args[col]
            if not isinstance(agg, S.Aggregate):
                continue
            rec, sources = set(), []
            for lit in rule.body:
                if isinstance(lit, S.Atom) and not lit.negated and lit.relation in valued:
                    c, f = valued[lit.relation]
                    arg = lit.args[c] if c < len(lit.args) else None
                    if isinstance(arg, S.Var):
                        if f != func:
                            yield _diagnostic(rule, agg, head, arg.name,
                                              f"it reads the {f} of {lit.relation}, against the {func} of {head}")
                            break
                        rec.add(arg.name)
                        sources.append((lit, c))
            else:
                if not rec or not any(isinstance(l, S.Atom) and l.relation in members for l in rule.body):
                    continue
                defs = {l.var.name: l.expr for l in rule.body if isinstance(l, S.Assign)}
                why = _why_not(_marked(rule, sources), agg, col, rec, defs)
                if why:
                    yield _diagnostic(rule, agg, head, _names(rec), why)


def _marked(rule: S.Rule, sources: list) -> S.Rule:
    """The rule with each atom that reads an aggregated value marked, so that reading it
    there is no join on it (its other uses still are)."""
    body = []
    for lit in rule.body:
        src = next((c for a, c in sources if a is lit), None)
        if src is not None:
            others = {v for i, a in enumerate(lit.args) if i != src for v in S.term_vars(a)}
            proxy = S.Atom(lit.relation, tuple(a if i != src else S.Wildcard() for i, a in enumerate(lit.args)))
            body.append(proxy if not others & {lit.args[src].name} else lit)
        else:
            body.append(lit)
    return S.Rule(rule.name, rule.head, tuple(body), rule.delete, rule.time, rule.component, rule.span)


def _diagnostic(rule: S.Rule, agg: S.Aggregate, head: str, value: str, why: str) -> Diagnostic:
    return Diagnostic(
        "prem", f"rule {rule.name}: {term_text(agg)} inside the recursion of {head} must not decrease as "
        f"{value} grows (PreM), but {why}", agg.span if agg.span != S.NOWHERE else rule.span, term_text(agg),
        f"take the {agg.func} in a later stratum (derive the candidates in the recursion, aggregate them in a rule "
        f"outside it), or, if the order is preserved in a way this check cannot see, say so: "
        f".plan relation {head}(prem=asserted)")
