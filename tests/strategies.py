"""Hypothesis strategies for random Evita programs (syntax trees, not text).

The programs are syntactically valid, not necessarily safe or well-typed: they exercise
every construct the catalog stores — relations of random arity, variables, constants of
every type, expressions, negation, `delta` atoms, selections, assignments, head
aggregates, location specifiers, delete rules, @next/@async, named-field atoms of
declared relations and of sys:: catalog tables, queries, facts, materialize, define,
.decl, .input/.output and components.

They are built the way the parser builds trees, so printing and parsing one gives it
back: no unary minus on a number (the parser folds `-1` into a constant), no top-level
selection that reads as an atom (`foo(X)` or `!foo(X)` without the `f_` prefix), at most
one declaration per relation, named atoms only where column names are known.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from evita.bootstrap.syntax import (
    AGGREGATES, ARITHMETIC, BOOLEAN, COMPARISONS, Aggregate, Assign, Atom, BinOp, Call, Column,
    Component, Cond, Const, Declaration, Fact, IODirective, ListExpr, Materialize, Program, Query,
    Rule, Select, TypeDecl, UnOp, Var, Wildcard, map_literal, map_subterms,
)
from evita.catalog import schema

RESERVED = {"delete", "query", "notin", "delta", "materialize", "define", "component", "keys",
            "true", "false", "null", "infinity", "count", "sum", "min", "max", "avg", "mean",
            "set", "list", "autoinc"}

VARS = st.sampled_from(["X", "Y", "Z", "Src", "Dst", "N", "C1", "x", "y", "p_2"])
FUNCS = st.sampled_from(["f_cons", "f_size", "f_now", "cat", "strlen", "pow", "g"])
BOOL_FUNCS = st.sampled_from(["f_contains", "f_member", "f_lt"])
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda s: s not in RESERVED)

ints = st.integers(min_value=-(2 ** 40), max_value=2 ** 40).map(lambda v: Const(v, "int"))
floats = st.floats(allow_nan=False, allow_infinity=False).map(lambda v: Const(v, "float"))
_TEXT = st.one_of(st.text(st.sampled_from('ab Z09_.,;:-@"\\\n\t\r\0{}()[]<>=!'), max_size=8),
                  st.text(st.characters(blacklist_categories=("Cs",)), max_size=6))
strings = _TEXT.map(lambda v: Const(v, "string"))
others = st.sampled_from([Const(True, "bool"), Const(False, "bool"), Const(None, "null"),
                          Const("infinity", "infinity")])
constants = st.one_of(ints, floats, strings, others)
leaves = st.one_of(VARS.map(Var), constants, st.just(Wildcard()))


def _unary(arg):
    # The parser folds `-` applied to a number into a negative constant.
    if isinstance(arg, Const) and arg.type in ("int", "float"):
        return arg
    return UnOp("-", arg)


def _extend(children):
    return st.one_of(
        st.builds(Call, FUNCS, st.lists(children, max_size=3).map(tuple)),
        st.builds(BinOp, st.sampled_from(ARITHMETIC + COMPARISONS + BOOLEAN), children, children),
        children.map(_unary),
        st.builds(UnOp, st.just("!"), children),
        st.builds(Cond, children, children, children),
        st.builds(ListExpr, st.lists(children, max_size=3).map(tuple)),
    )


exprs = st.recursive(leaves, _extend, max_leaves=6)
compound = _extend(exprs)


def selections():
    """A body condition whose text cannot be read as an atom."""
    comparison = st.builds(BinOp, st.sampled_from(COMPARISONS + BOOLEAN), exprs, exprs)
    test = st.builds(Call, BOOL_FUNCS, st.lists(exprs, min_size=1, max_size=2).map(tuple))
    return st.one_of(comparison, test, test.map(lambda c: UnOp("!", c)), VARS.map(Var)).map(Select)


assignments = st.builds(Assign, VARS.map(Var), exprs)


@st.composite
def atom(draw, relation, arity, *, columns=None, body=True, head=False, ground=False):
    """An atom of `relation`; named-field form when `columns` are known (and drawn)."""
    if columns is not None and len(columns) == arity and arity and draw(st.booleans()):
        args = [draw(exprs) if draw(st.booleans()) else Wildcard() for _ in columns]
        if all(isinstance(a, Wildcard) for a in args):
            args[0] = Var("X")
        named, location = True, None
    else:
        if ground:
            term = constants
        elif head:
            term = st.one_of(exprs, exprs, st.builds(Aggregate, st.sampled_from(AGGREGATES), VARS.map(Var)),
                             st.just(Aggregate("count", None)))
        else:
            term = exprs
        args = [draw(term) for _ in range(arity)]
        seals = [i for i, a in enumerate(args) if isinstance(a, Aggregate) and a.func == "seal"]
        for i in seals[1:]:  # a head seals one batch: the parser refuses a second seal<...>
            args[i] = Aggregate("count", args[i].arg)
        named = False
        location = draw(st.none() | st.integers(0, arity - 1)) if arity else None
    negated = delta = False
    if body and not head:
        mode = draw(st.sampled_from(["plain", "plain", "notin", "delta"]))
        negated, delta = mode == "notin", mode == "delta"
    return Atom(relation, tuple(args), location, negated, delta, named)


SYS_TABLES = [t for t in schema.TABLES if t.name in ("rule", "predicate", "argument", "relation")]


# Qualifiers that stay on a declaration as they are (the parser acts on eqrel, inline,
# input and output, so a printed program would not parse back to the same tree).
HINTS = ["brie", "btree", "btree_delete", "no_inline", "magic", "no_magic", "overridable", "printsize"]
USER_TYPES = st.sampled_from([TypeDecl("T_user", "subtype", ("symbol",)), TypeDecl("T_user", "equivalence", ("number",)),
                              TypeDecl("T_user", "union", ("number", "unsigned"))])


@st.composite
def programs(draw, max_statements: int = 12):
    n_rel = draw(st.integers(1, 5))
    rel_names = [f"r{i}" if draw(st.booleans()) else f"ns::r{i}" for i in range(n_rel)]
    arities = {r: draw(st.integers(0, 4)) for r in rel_names}
    columns: dict = {}
    head: list = []  # declarations and I/O first, so named atoms resolve
    for r in rel_names:
        style = draw(st.sampled_from([None, None, "decl", "define", "materialize"]))
        if style == "decl":
            names = [f"c{i}_{draw(NAMES)}" for i in range(arities[r])]
            types = [draw(st.sampled_from(["number", "unsigned", "float", "symbol", "T_user"])) for _ in names]
            hints = tuple(draw(st.lists(st.sampled_from(HINTS), unique=True, max_size=2)))
            head.append(Declaration(r, tuple(map(Column, names, types)), None, "decl", qualifiers=hints))
            columns[r] = names
        elif style == "define":
            types = [draw(st.sampled_from(["symbol", "number", "float", "any"])) for _ in range(arities[r])]
            keys = draw(st.none() | st.lists(st.integers(0, 3), max_size=2).map(tuple))
            head.append(Declaration(r, tuple(Column(f"c{i}", t) for i, t in enumerate(types)), keys, "define"))
        elif style == "materialize":
            bound = st.one_of(st.just(Const("infinity", "infinity")), st.integers(0, 10 ** 6).map(lambda v: Const(v, "int")),
                              st.floats(0, 1e6).map(lambda v: Const(v, "float")))
            head.append(Materialize(r, draw(bound), draw(bound), tuple(draw(st.lists(st.integers(0, 3), max_size=3)))))
        for direction in ("input", "output"):
            if draw(st.integers(0, 5)) == 0:
                params = draw(st.lists(st.tuples(st.sampled_from(["IO", "filename", "delimiter"]),
                                                 st.text(max_size=6)), max_size=2))
                head.append(IODirective(direction, r, tuple(params)))

    if any(isinstance(d, Declaration) and any(c.type == "T_user" for c in d.columns) for d in head):
        head.insert(0, draw(USER_TYPES))

    def some_atom(**kw):
        r = draw(st.sampled_from(rel_names))
        return draw(atom(r, arities[r], columns=columns.get(r), **kw))

    def sys_atom():
        t = draw(st.sampled_from(SYS_TABLES))
        return draw(atom(f"sys::{t.name}", len(t.columns), columns=t.column_names))

    def rule(label, component=None):
        body = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["atom", "atom", "atom", "select", "assign", "sys"]))
            body.append(some_atom() if kind == "atom" else sys_atom() if kind == "sys" else
                        draw(selections()) if kind == "select" else draw(assignments))
        return Rule(label, some_atom(head=True), tuple(body), draw(st.booleans()),
                    draw(st.sampled_from([None, None, "next", "async"])), component)

    def fact(component=None):
        r = draw(st.sampled_from(rel_names))
        return Fact(draw(atom(r, arities[r], body=False, ground=True)), component)

    stmts = []
    n_rules = 0
    for _ in range(draw(st.integers(1, max_statements))):
        kind = draw(st.sampled_from(["rule", "rule", "rule", "fact", "query", "component"]))
        if kind == "rule":
            n_rules += 1
            stmts.append(rule(draw(NAMES | st.just(f"rule{n_rules}"))))
        elif kind == "fact":
            stmts.append(fact())
        elif kind == "query":
            stmts.append(Query(some_atom(body=False)))
        else:
            name = f"comp{len([s for s in stmts if isinstance(s, Component)])}"
            addrs = tuple(draw(st.lists(_TEXT, max_size=2)))
            stmts.append(Component(name, addrs))
            for _ in range(draw(st.integers(1, 3))):
                stmts.append(rule(draw(NAMES), name) if draw(st.booleans()) else fact(name))
    dialect = "souffle" if any(isinstance(s, Declaration) and s.style == "decl" for s in head) else "overlog"
    if dialect == "souffle":  # `[a, b]` is a record there, which needs a record type: keep lists Overlog's
        stmts = [_without_lists(s) for s in stmts]
    return Program(draw(NAMES), tuple(head + stmts), "", dialect)


def _list_free(t):
    t = map_subterms(t, _list_free)
    return Call("g", t.items) if isinstance(t, ListExpr) else t


def _without_lists(statement):
    """`statement` with each list `[a, ...]` written `g(a, ...)`."""
    def atom(a):
        return replace(a, args=tuple(_list_free(x) for x in a.args))

    if isinstance(statement, Rule):
        return replace(statement, head=atom(statement.head),
                       body=tuple(map_literal(lit, _list_free) for lit in statement.body))
    if isinstance(statement, (Fact, Query)):
        return replace(statement, atom=atom(statement.atom))
    return statement
