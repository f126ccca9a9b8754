"""Soufflé's `inline` qualifier: the rules of an inline relation are substituted into the
rules that use it, and the relation itself is no longer computed.

A rule with an inline atom becomes one rule per rule of the inline relation (several
inline atoms multiply out), labelled `L`, `L_inl2`, `L_inl3`, ... The inline rule's
variables are renamed apart (`y` -> `y_inl1`); a head variable takes the argument it meets
when that is a variable, and otherwise stays and is compared with it (`v == "a"`), so
atoms keep plain arguments.

    .decl hop(x: number, z: number) inline
    hop(x, z) :- edge(x, y), edge(y, z).
    r1 far(a, c) :- hop(a, b), hop(b, c).
    ==>
    r1 far(a, c) :- edge(a, y_inl1), edge(y_inl1, b), edge(b, y_inl2), edge(y_inl2, c).

A relation stays computed (the qualifier is then only a hint) when inlining it would not
be a plain substitution: it is recursive, an input or output, has facts, aggregates in a
head, is deleted from, or some rule uses it negated, as a delta or under an aggregate. Inlining is done before
the catalog, so every backend and every stage sees the expanded rules.

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program('.decl e(x: number, y: number)\\n.decl hop(x: number, z: number) inline\\n'
...                   '.decl far(x: number, z: number)\\n'
...                   'hop(x, z) :- e(x, y), e(y, z).\\nr1 far(a, c) :- hop(a, b), hop(b, c).', "t.dl")
>>> from evita.catalog.printer import format_rule
>>> [format_rule(r) for r in p.rules]
['r1 far(a, c) :- e(a, y_inl1), e(y_inl1, b), e(b, y_inl2), e(y_inl2, c).']
"""
from __future__ import annotations

from dataclasses import replace
from itertools import product

from ..syntax import (
    Aggregate, Assign, Atom, BinOp, Call, Cond, Declaration, Fact, IODirective, ListExpr, Rule, Select,
    UnOp, Var, Wildcard, subterms,
)
from .equalities import lower_equalities


def inline_relations(statements: list) -> list:
    """The statements with every inlinable relation's uses expanded and its rules gone."""
    wanted = {s.relation for s in statements if isinstance(s, Declaration) and "inline" in s.qualifiers}
    inline = {r for r in wanted if _inlinable(r, statements)}
    if not inline:
        return statements
    definitions = {r: [s for s in statements if isinstance(s, Rule) and s.head.relation == r] for r in inline}
    out = []
    for s in statements:
        if isinstance(s, Rule) and s.head.relation in inline:
            continue
        if isinstance(s, Rule) and any(_inline_atom(lit, inline) for lit in s.body):
            out.extend(_expanded(s, definitions, inline))
        else:
            out.append(s)
    return out


def _inline_atom(lit, inline: set) -> bool:
    return isinstance(lit, Atom) and lit.relation in inline


def _inlinable(relation: str, statements: list) -> bool:
    rules = [s for s in statements if isinstance(s, Rule)]
    for s in statements:
        if isinstance(s, (Fact, IODirective)) and getattr(s, "relation", None) == relation:
            return False
        if isinstance(s, Fact) and s.atom.relation == relation:
            return False
    for r in rules:
        if r.head.relation == relation and (r.delete or r.time or any(isinstance(a, Aggregate) for a in r.head.args)):
            return False
        uses = [lit for lit in r.body if isinstance(lit, Atom) and lit.relation == relation]
        if any(lit.negated or lit.delta for lit in uses):
            return False
        if uses and any(isinstance(a, Aggregate) for a in r.head.args):
            return False  # an aggregate counts the relation's tuples, not the valuations of its rules' bodies
    return relation not in _reachable(relation, rules)


def _reachable(relation: str, rules: list) -> set:
    """The relations the rules of `relation` read, directly or not."""
    seen, todo = set(), [relation]
    while todo:
        head = todo.pop()
        for r in rules:
            if r.head.relation == head:
                for lit in r.body:
                    if isinstance(lit, Atom) and lit.relation not in seen:
                        seen.add(lit.relation)
                        todo.append(lit.relation)
    return seen


def _expanded(rule: Rule, definitions: dict, inline: set) -> list:
    """One rule per choice of a defining rule for each inline atom of `rule`."""
    options = []  # per body literal: the alternatives it becomes (lists of literals)
    counter = [0]
    for lit in rule.body:
        if _inline_atom(lit, inline):
            options.append([_instance(lit, d, counter) for d in definitions[lit.relation]])
        else:
            options.append([[lit]])
    out = []
    for k, choice in enumerate(product(*options)):
        body = _assignments_settled([lit for part in choice for lit in part])
        name = rule.name if k == 0 else f"{rule.name}_inl{k + 1}"
        out.append(replace(rule, name=name, body=body))
    return out


def _assignments_settled(body: list) -> tuple:
    """The equalities inlining wrote as Soufflé's `=` become assignments or comparisons,
    as the parser decides for any rule: `x = E` assigns when no positive atom binds x."""
    return tuple(lower_equalities(body))


def _instance(atom: Atom, definition: Rule, counter: list) -> list:
    """The body of `definition` standing for `atom`: its variables renamed apart, its
    head variables replaced by the atom's variables; other arguments become equalities."""
    counter[0] += 1
    suffix = f"_inl{counter[0]}"
    names = set()
    for lit in (definition.head,) + definition.body:
        names |= {v.name for v in _vars(lit)}
    renamed = {n: Var(n + suffix, atom.span) for n in names}
    checks = []
    for head_arg, arg in zip(definition.head.args, atom.args):
        if isinstance(head_arg, Var) and isinstance(arg, Var) and renamed[head_arg.name].name.endswith(suffix):
            renamed[head_arg.name] = arg  # the first meeting names the variable
        elif isinstance(arg, Wildcard):
            continue
        else:  # `arg = value`: binds arg when nothing else does (see _assignments_settled)
            checks.append(Select(BinOp("=", arg, _substitute(head_arg, renamed), atom.span), atom.span))
    return [_substitute_literal(lit, renamed) for lit in definition.body] + checks


def _vars(node) -> list:
    if isinstance(node, Var):
        return [node]
    if isinstance(node, Atom):
        return [v for a in node.args for v in _vars(a)]
    if isinstance(node, (Select, Assign)):
        return (_vars(node.var) if isinstance(node, Assign) else []) + _vars(node.expr)
    out = []
    for child in subterms(node):
        out += _vars(child)
    return out


def _substitute(t, names: dict):
    if isinstance(t, Var):
        return names.get(t.name, t)
    if isinstance(t, Call):
        return replace(t, args=tuple(_substitute(a, names) for a in t.args))
    if isinstance(t, ListExpr):
        return replace(t, items=tuple(_substitute(a, names) for a in t.items))
    if isinstance(t, BinOp):
        return replace(t, left=_substitute(t.left, names), right=_substitute(t.right, names))
    if isinstance(t, UnOp):
        return replace(t, arg=_substitute(t.arg, names))
    if isinstance(t, Cond):
        return replace(t, test=_substitute(t.test, names), then=_substitute(t.then, names),
                       other=_substitute(t.other, names))
    return t


def _substitute_literal(lit, names: dict):
    if isinstance(lit, Atom):
        return replace(lit, args=tuple(_substitute(a, names) for a in lit.args))
    if isinstance(lit, Select):
        return replace(lit, expr=_substitute(lit.expr, names))
    if isinstance(lit, Assign):  # decided again once the rule around it is known
        return Select(BinOp("=", _substitute(lit.var, names), _substitute(lit.expr, names), lit.span), lit.span)
    return lit
