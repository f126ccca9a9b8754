"""Soufflé's `autoinc()`: a rule or fact with `autoinc()` in its head numbers its distinct
bindings through a helper relation and reads the numbers (docs/language.md, "autoinc()"):

    H(.., autoinc(), ..) :- BODY.
    ==>
    R_autoinc(t.., v.., w.., autoinc<*>) :- BODY.
    R: H(.., n, ..) :- R_autoinc(x.., y.., z.., k), n := k * K + i.

K (the number of rules with `autoinc()` in the program) and i (this rule's index among
them) are set once the whole program is known (`autoinc_numbered`), so the numbers are
unique across the program, as Soufflé's one counter gives them.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> print(format_program(parse_program('.decl a(x: symbol)\\n.decl r(x: symbol, n: number)\\n'
...                                    'r(x, autoinc()) :- a(x).', "t.dl")))
.decl a(x: symbol)
.decl r(x: symbol, n: number)
.decl rule1_autoinc(c0: any, number: any)
rule1_autoinc rule1_autoinc(x, autoinc<*>) :- a(x).
rule1 r(_ai0, _autoinc) :-
    rule1_autoinc(_ai0, _autoinc_k),
    _autoinc := as(_autoinc_k * 1 + 0, "number").
<BLANKLINE>
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..syntax import INT, STRING, Aggregate, Assign, Atom, BinOp, Call, Const, Fact, Rule, Var, Wildcard
from .aggregates import bound_by, outer_vars
from .raw import RawCall

__all__ = ["AutoincLowering", "autoinc_numbered", "is_autoinc"]


def is_autoinc(node, columns) -> bool:
    """Whether `node` is a call of autoinc() (not a relation of that name)."""
    if isinstance(node, (Call, RawCall)):
        name = node.func if isinstance(node, Call) else node.name
        return name == "autoinc" and name not in columns
    return False


class AutoincLowering:
    """The autoinc() part of `statements.Lowering` (a mixin): it uses the lowering's
    `resolve_literal`, `_rule` and `_helper_relation`."""

    def _autoinc(self, rule: Rule, out) -> Rule:
        """`H(.., autoinc(), ..) :- BODY.` as a helper relation that numbers the rule's
        distinct bindings, and the rule reading the numbers (docs/language.md, "autoinc()"):
            R_autoinc(t.., v.., w.., autoinc<*>) :- BODY.
            R: H(.., n, ..) :- R_autoinc(x.., y.., z.., k), n := k * K + i.
        t: H's other arguments, v: BODY's other variables (in name order), w: a variable
        for each `_` of an atom BODY scans (one with a variable or constant), since
        Soufflé evaluates autoinc() once per tuple it scans. autoinc<*> gives the
        bindings present at the start 0, 1, ... in ascending order and, inside recursion,
        each round's new bindings the numbers after all earlier ones. K is the number of
        rules with autoinc() in the program, i this rule's index among them in source
        order (`autoinc_numbered`, after components are expanded): numbers are unique
        across the program and do not depend on Spark's evaluation order."""
        span = next(a.span for a in rule.head.args if isinstance(a, Call) and a.func == "autoinc")
        terms = [a for a in rule.head.args if not (isinstance(a, Call) and a.func == "autoinc")]
        body, scanned = _wildcards_named(tuple(self.resolve_literal(b) for b in rule.body), rule.head.relation)
        if not body:  # a fact `r(1, autoinc()).`: one binding, from a unit fact
            out.append(Fact(Atom(f"{rule.name}_autoinc_unit", (Const(0, INT, span),), span=span), rule.component,
                            span))
            self._helper_relation(f"{rule.name}_autoinc_unit", ["unit"])
            body = (Atom(f"{rule.name}_autoinc_unit", (Wildcard(span),), span=span),)
        head_vars = set(outer_vars(rule.head))
        # every variable, `_y` too (a name, in Soufflé as here), but the wildcards named above
        extra = sorted(v for v in bound_by(list(body)) if v not in head_vars and not v.startswith("_autoinc_w"))
        name = f"{rule.name}_autoinc"
        cols = terms + [Var(v, span) for v in extra] + scanned
        n = len(cols)
        self._rule(Rule(name, Atom(name, tuple(cols) + (Aggregate("autoinc", None, span),), span=span), body,
                        False, None, rule.component, span), out)
        self._helper_relation(name, [f"c{j}" for j in range(n)] + ["number"])
        mine = [Var(f"_ai{j}", span) for j in range(n)]
        counted = Var("_autoinc_k", span)
        # K and i are set once the whole program is known (`autoinc_numbered`); `as`
        # tells the checks the result is a number
        value = Call("as", (BinOp("+", BinOp("*", counted, Const(1, INT, span), span), Const(0, INT, span), span),
                            Const("number", STRING, span)), span)
        result = Var("_autoinc", span)
        it = iter(mine)
        args = tuple(result if isinstance(a, Call) and a.func == "autoinc" else next(it) for a in rule.head.args)
        body = (Atom(name, tuple(mine) + (counted,), span=span), Assign(result, value, span))
        return replace(rule, head=replace(rule.head, args=args), body=body)


def autoinc_numbered(statements: list) -> list:
    """Each rule reading autoinc() numbers (`AutoincLowering._autoinc`: `_autoinc := as(_autoinc_k
    * K + i, number)`) with K the number of such rules in the whole program and i its
    index among them, in order: done once components are expanded and included files
    spliced in, so that each instance of a component and each file gets numbers of its
    own, unique across the program as Soufflé's one counter gives them."""
    def numbering(rule) -> Optional[int]:
        for n, lit in enumerate(rule.body):
            if isinstance(lit, Assign) and lit.var.name == "_autoinc" and isinstance(lit.expr, Call) \
                    and lit.expr.func == "as" and isinstance(lit.expr.args[0], BinOp):
                return n
        return None

    found = [(k, n) for k, st in enumerate(statements) if isinstance(st, Rule)
             for n in [numbering(st)] if n is not None]
    out = list(statements)
    for index, (k, n) in enumerate(found):
        rule = out[k]
        lit = rule.body[n]
        plus = lit.expr.args[0]  # (k * K) + i
        times = replace(plus.left, right=replace(plus.left.right, value=len(found)))
        expr = replace(lit.expr, args=(replace(plus, left=times, right=replace(plus.right, value=index)),)
                       + lit.expr.args[1:])
        out[k] = replace(rule, body=rule.body[:n] + (replace(lit, expr=expr),) + rule.body[n + 1:])
    return out


def _wildcards_named(body: tuple, head: str) -> tuple:
    """`body` with each `_` of a scanned atom (positive, with a variable or constant) as
    a variable `_autoinc_wK`, and those variables: a binding of autoinc()'s rule is a
    tuple of every scanned atom (`AutoincLowering._autoinc`). An atom of
    wildcards only is a test that its relation is not empty, as in Soufflé, except over
    the `head` relation itself: there Soufflé tests the tuples new in each round, and
    numbering each such tuple keeps the recursion going exactly as long as Soufflé's."""
    named: list = []
    out = []
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated and (lit.relation == head or
                                                          not all(isinstance(a, Wildcard) for a in lit.args)):
            args = []
            for a in lit.args:
                if isinstance(a, Wildcard):
                    a = Var(f"_autoinc_w{len(named) + 1}", a.span)
                    named.append(a)
                args.append(a)
            lit = replace(lit, args=tuple(args))
        out.append(lit)
    return tuple(out), named
