"""Soufflé's `/` on whole numbers: C's division, truncated toward zero (`7 / 2` is 3,
`-7 / 2` is -3), where Spark's `/` is always fractional.

In a Soufflé program (dialect "souffle") the planner rewrites each `/` whose operands are
both whole numbers (number, unsigned, or whole constants) into the operator `//`, which
every evaluator runs as truncating division; `/` with a float operand stays fractional.
Overlog programs keep Spark's `/` (docs/language.md). Division by zero has no value in
C (Soufflé's behaviour is undefined); here it derives nothing, rather than failing the
run: each `//` brings the condition `divisor != 0`, placed before the literal that
divides (an evaluator that meets `// 0` anyway gives null).

The kinds come from the static checks' view of the rule (`types._RuleTypes`: columns,
constants), extended through arithmetic and assignments, since `(a + b) / 2` and
`m = a * 2, q = m / 3` divide whole numbers too. A `/` with an operand of unknown kind
stays Spark's.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.decl a(x: number, f: float)\\n.decl h(x: number, g: float)\\n'
...                   'h(y, g) :- a(x, f), y = x / 2, g = f / 2.', "t.dl")
>>> [format_rule(r) for r in whole_divisions(list(p.rules), p)]
['rule1 h(y, g) :- a(x, f), y := x // 2, g := f / 2.']
"""
from __future__ import annotations

from dataclasses import replace

from ..syntax import (
    FLOAT, INT, Aggregate, Assign, Atom, BinOp, Call, Cond, Const, Declaration, ListExpr, Rule, Select, UnOp, Var,
    map_literal, map_subterms,
)
from ..types import TypeSystem, _RuleTypes

WHOLE_DIVISION = "//"  # the planner's operator; never written in a program
_WHOLE = {"int", "number", "unsigned"}
_ARITHMETIC = {"+", "-", "*", "/", "%"}


def whole_divisions(rules: list, program) -> list:
    """The rules of a Soufflé program with `/` on whole numbers as `//`."""
    if program.dialect != "souffle":
        return rules
    types, declared = typing_context(program)
    return [_rewritten(r, types, declared) for r in rules]


def typing_context(program) -> tuple:
    """(the program's type system, relation -> its first declaration): what `rule_kinds`
    reads to type a rule's terms (the division and the width rewrites)."""
    declared: dict = {}
    for d in program.of(Declaration):
        declared.setdefault(d.relation, d)
    return TypeSystem.of(program), declared


def _rewritten(rule: Rule, types: TypeSystem, declared: dict) -> Rule:
    if not any(_divides(lit) for lit in (rule.head,) + tuple(rule.body)):
        return rule
    kinds = rule_kinds(rule, types, declared)
    guards: list = []  # `d != 0` for each divisor d of a `//`: placed before its literal
    sub = lambda t: _term(t, kinds, guards)  # noqa: E731
    body = []
    for lit in rule.body:
        lit = map_literal(lit, sub)
        body.extend(guards)
        guards.clear()
        body.append(lit)
    head = replace(rule.head, args=tuple(sub(a) for a in rule.head.args))
    return replace(rule, head=head, body=tuple(body + guards))


def rule_kinds(rule: Rule, types: TypeSystem, declared: dict) -> dict:
    """variable -> its kind ("number", "unsigned", "float", ...; `_kind`), from the
    rule's columns and constants, then through its assignments."""
    checker = _RuleTypes(rule, types, declared)
    checker.check()
    kinds = {name: held[0] for name, held in checker.held.items()}
    for _ in range(len(rule.body)):  # assignments in any order: until nothing new is known
        known = len(kinds)
        for lit in rule.body:
            if isinstance(lit, Assign) and lit.var.name not in kinds:
                k = _kind(lit.expr, kinds)
                if k is not None:
                    kinds[lit.var.name] = k
        if len(kinds) == known:
            break
    return kinds


def _divides(node) -> bool:
    if isinstance(node, BinOp):
        return node.op == "/" or _divides(node.left) or _divides(node.right)
    if isinstance(node, Atom):
        return any(_divides(a) for a in node.args)
    if isinstance(node, (Assign, Select)):
        return _divides(node.expr)
    if isinstance(node, UnOp):
        return _divides(node.arg)
    if isinstance(node, Call):
        return any(_divides(a) for a in node.args)
    if isinstance(node, Cond):
        return _divides(node.test) or _divides(node.then) or _divides(node.other)
    if isinstance(node, ListExpr):
        return any(_divides(a) for a in node.items)
    if isinstance(node, Aggregate):
        return node.arg is not None and _divides(node.arg)
    return False


def _kind(t, kinds: dict):
    """"int" (a whole constant), "number", "unsigned", "float", or None (not known)."""
    if isinstance(t, Var):
        return kinds.get(t.name)
    if isinstance(t, Const):
        return {INT: "int", FLOAT: "float"}.get(t.type)
    if isinstance(t, UnOp) and t.op in ("-", "ukey"):  # ukey: lowering/unsigned.py
        return _kind(t.arg, kinds)
    if isinstance(t, BinOp) and t.op in _ARITHMETIC | {WHOLE_DIVISION, "udiv", "umod"}:
        return _joined([_kind(t.left, kinds), _kind(t.right, kinds)])
    if isinstance(t, Call) and t.func == "as":  # a cast stays within its kind
        if len(t.args) == 2 and isinstance(t.args[1], Const) and t.args[1].value == "unsigned":
            return "unsigned"  # `5u` is written so
        return _kind(t.args[0], kinds)
    if isinstance(t, Call) and t.func in ("min", "max", "abs", "range"):
        return _joined([_kind(a, kinds) for a in t.args])
    if isinstance(t, Call) and t.func in ("strlen", "ord", "to_number"):
        return "number"
    if isinstance(t, Call) and t.func == "to_unsigned":
        return "unsigned"
    return None


number_kind = _kind  # what the other rewrites read a term's kind with


def _joined(kinds: list):
    if any(k is None for k in kinds):
        return None
    if "float" in kinds:
        return "float" if all(k in ("float", "int") for k in kinds) else None
    if not all(k in _WHOLE for k in kinds):
        return None
    named = [k for k in kinds if k != "int"]
    return named[0] if named else "int"


def _term(t, kinds: dict, guards: list):
    sub = lambda x: _term(x, kinds, guards)  # noqa: E731
    if isinstance(t, BinOp):
        op = t.op
        if op == "/" and _kind(t.left, kinds) in _WHOLE and _kind(t.right, kinds) in _WHOLE:
            op = WHOLE_DIVISION
            if not (isinstance(t.right, Const) and t.right.value != 0):
                guards.append(Select(BinOp("!=", sub(t.right), Const(0, INT, t.span), t.span), t.span))
        return replace(t, op=op, left=sub(t.left), right=sub(t.right))
    return map_subterms(t, sub)
