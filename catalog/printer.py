"""Canonical program text: `format_program(parse(text))` parses back to the same catalog.

The layout follows /tmp/evita_syntax_spec.md "Printing": one statement per line, rules
always with their label, `notin` for negation, `:=` for assignments and `==` for
equality (never Soufflé's ambiguous `=`), strings double-quoted with escapes, floats by
`repr`, and only the parentheses that precedence requires.

>>> from evita.bootstrap.syntax import Atom, BinOp, Const, Rule, Select, Var
>>> X, Y, Z = Var("X"), Var("Y"), Var("Z")
>>> format_expr(BinOp("*", BinOp("+", X, Const(1, "int")), Y))
'(X + 1) * Y'
>>> format_expr(BinOp("-", X, BinOp("-", Y, Z)))
'X - (Y - Z)'
>>> format_atom(Atom("link", (X, Const("a\\"b", "string")), location=0, negated=True))
'notin link(@X, "a\\\\"b")'
>>> print(format_rule(Rule("r1", Atom("path", (X, Z)), (Atom("link", (X, Y)), Atom("path", (Y, Z)),
...                        Select(BinOp("!=", X, Z))))))
r1 path(X, Z) :- link(X, Y), path(Y, Z), X != Z.
"""
from __future__ import annotations

import re

import math

from evita.bootstrap.syntax import (
    BOOL, FLOAT, INFINITY, INT, NULL, Aggregate, Assign, Atom, BinOp, Call, Component, Cond,
    Const, Declaration, Fact, IODirective, ListExpr, Materialize, Plan, Program, Query, Rule, Select,
    TypeDecl, UnOp, Var, Wildcard,
)

from . import schema

WIDTH = 100  # rules longer than this break after `:-` and after each comma
INDENT = "    "

# Precedence levels, lowest first, as in the grammar (bootstrap/grammar.lark).
COND, OR, AND, CMP, SUM, PROD, UNARY, PRIMARY = range(1, 9)
BINARY = {"||": OR, "&&": AND, "+": SUM, "-": SUM, "*": PROD, "/": PROD, "%": PROD,
          **{op: CMP for op in ("==", "!=", "<", "<=", ">", ">=")}}

# define(...) spells types the JOL way; the parser maps them back (String -> symbol, ...).
DEFINE_TYPES = {"symbol": "String", "number": "Integer", "float": "Float"}


# ---------------------------------------------------------------- expressions

def format_const(c: Const) -> str:
    """A constant as the lexer reads it back.

    >>> [format_const(Const(v, t)) for v, t in [(-1, "int"), (2.5, "float"), (None, "null")]]
    ['-1', '2.5', 'null']
    >>> print(format_const(Const('say "hi"\\n', "string")))
    "say \\"hi\\"\\n"
    """
    if c.type == STRING_TYPE:
        return quote(str(c.value))
    if c.type == "record":  # a Soufflé record: written as the program writes it (bootstrap/records.py)
        from ..bootstrap.records import surface

        return surface(str(c.value))
    if c.type == BOOL:
        return "true" if c.value else "false"
    if c.type == NULL:
        return "null"
    if c.type == INFINITY:
        return "infinity"
    if c.type == FLOAT:
        if not math.isfinite(c.value):
            raise ValueError(f"cannot print the float {c.value!r}: the language has no literal for it")
        return repr(float(c.value))
    if c.type == INT:
        return str(int(c.value))
    return quote(str(c.value))


STRING_TYPE = "string"
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def quote(s: str) -> str:
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in s) + '"'


def _prec(t) -> int:
    if isinstance(t, Cond):
        return COND
    if isinstance(t, BinOp):
        return BINARY.get(t.op, CMP)
    if isinstance(t, UnOp):
        return UNARY
    if isinstance(t, Const) and t.type in (INT, FLOAT) and str(format_const(t)).startswith("-"):
        return UNARY  # `-1` is read as unary minus applied to 1
    return PRIMARY


def _wrap(t, least: int) -> str:
    """t, parenthesized when its precedence is below `least`."""
    text = format_expr(t)
    return f"({text})" if _prec(t) < least else text


def format_expr(t) -> str:
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Wildcard):
        return "_"
    if isinstance(t, Const):
        return format_const(t)
    if isinstance(t, Call):
        return f"{t.func}({', '.join(format_expr(a) for a in t.args)})"
    if isinstance(t, ListExpr) and t.branch is not None:  # Soufflé's ADT constructor
        return f"${t.branch}({', '.join(format_expr(a) for a in t.items)})"
    if isinstance(t, ListExpr):
        return f"[{', '.join(format_expr(a) for a in t.items)}]"
    if isinstance(t, UnOp) and t.op.isalnum():  # the planner's wrap32 (bootstrap/lowering/width.py)
        return f"{t.op}({format_expr(t.arg)})"
    if isinstance(t, UnOp):
        return f"{t.op}{_wrap(t.arg, UNARY)}"
    if isinstance(t, BinOp):
        level = BINARY.get(t.op, CMP)
        if level == CMP:  # comparisons do not chain: both sides one level up
            return f"{_wrap(t.left, SUM)} {t.op} {_wrap(t.right, SUM)}"
        return f"{_wrap(t.left, level)} {t.op} {_wrap(t.right, level + 1)}"
    if isinstance(t, Cond):
        return f"{_wrap(t.test, OR)} ? {format_expr(t.then)} : {format_expr(t.other)}"
    if isinstance(t, Aggregate):
        return f"{t.func}<{'*' if t.arg is None else _wrap(t.arg, SUM)}>"
    raise TypeError(f"cannot print {t!r}")


# ---------------------------------------------------------------- atoms and rules

def field_names(relation: str, declared: dict | None = None):
    """Column names for named-field printing: the program's declaration, else the
    catalog schema for sys::NAME, else None."""
    if declared and relation in declared:
        return declared[relation]
    if relation.startswith("sys::"):
        try:
            return schema.table(relation).column_names
        except KeyError:
            return None
    return None


def format_atom(a: Atom, declared: dict | None = None) -> str:
    """An atom with its `notin` / `delta` prefix. `declared` maps relation -> column names
    (see `declared_columns`), needed only to print named-field atoms."""
    prefix = "notin " if a.negated else "delta " if a.delta else ""
    names = field_names(a.relation, declared) if a.named else None
    if names is not None and len(names) == a.arity and a.location is None:
        fields = [f"{n}: {format_expr(t)}" for n, t in zip(names, a.args) if not isinstance(t, Wildcard)]
        return f"{prefix}{a.relation}{{{', '.join(fields)}}}"
    args = [("@" if i == a.location else "") + format_expr(t) for i, t in enumerate(a.args)]
    sealed = [i for i, t in enumerate(a.args) if isinstance(t, Aggregate) and t.func == "seal"]
    if len(sealed) > 1 and sealed == list(range(sealed[0], sealed[-1] + 1)):  # seal<X, Y>: one column each
        inner = ", ".join(format_expr(a.args[i].arg) if a.args[i].arg is not None else "*" for i in sealed)
        args[sealed[0]:sealed[-1] + 1] = [f"seal<{inner}>"]
    return f"{prefix}{a.relation}({', '.join(args)})"


def format_literal(lit, declared: dict | None = None) -> str:
    if isinstance(lit, Atom):
        return format_atom(lit, declared)
    if isinstance(lit, Assign):
        return f"{lit.var.name} := {format_expr(lit.expr)}"
    if isinstance(lit, Select):
        return format_expr(lit.expr)
    raise TypeError(f"cannot print body literal {lit!r}")


def format_rule(r: Rule, declared: dict | None = None, indent: str = "") -> str:
    head = f"{r.name} {'delete ' if r.delete else ''}{format_atom(r.head, declared)}"
    head += f"@{r.time}" if r.time else ""
    body = [format_literal(lit, declared) for lit in r.body]
    line = f"{indent}{head} :- {', '.join(body)}."
    if len(line) <= WIDTH or len(body) < 2:
        return line
    inner = indent + INDENT
    return f"{indent}{head} :-\n" + ",\n".join(inner + b for b in body) + "."


# ---------------------------------------------------------------- statements

def declared_columns(program: Program) -> dict:
    """relation -> column names, from the program's .decl / define statements."""
    return {s.relation: [c.name for c in s.columns] for s in program.of(Declaration)}


def _choice_text(d: Declaration) -> str:
    """` choice-domain x, (x, y)`, or "" without one."""
    names = [", ".join(d.columns[i].name for i in domain) for domain in d.choice]
    return " choice-domain " + ", ".join(n if "," not in n else f"({n})" for n in names) if names else ""


def format_statement(s, declared: dict | None = None, indent: str = "") -> str:
    if isinstance(s, Rule):
        return format_rule(s, declared, indent)
    if isinstance(s, Fact):
        return f"{indent}{format_atom(s.atom, declared)}."
    if isinstance(s, Query):
        return f"{indent}query {format_atom(s.atom, declared)}."
    if isinstance(s, Materialize):
        keys = ", ".join(str(k + 1) for k in s.keys)
        return (f"{indent}materialize({s.relation}, {format_const(s.lifetime)}, "
                f"{format_const(s.size)}, keys({keys})).")
    if isinstance(s, Declaration) and s.style == "define":
        keys = "" if s.keys is None else f"keys({', '.join(str(k) for k in s.keys)}), "
        types = ", ".join(DEFINE_TYPES.get(c.type, "Object") for c in s.columns)
        return f"{indent}define({s.relation}, {keys}{{{types}}})."
    if isinstance(s, Declaration):
        cols = ", ".join(f"{c.name}: {c.type}" for c in s.columns)
        return f"{indent}.decl {s.relation}({cols})" + "".join(" " + q for q in s.qualifiers) + _choice_text(s)
    if isinstance(s, TypeDecl) and s.kind == "record":
        return f"{indent}.type {s.name} = [{', '.join(f'{n}: {t}' for n, t in zip(s.fields, s.bases))}]"
    if isinstance(s, TypeDecl) and s.kind == "adt":
        from ..bootstrap.types import adt_branches

        branches = " | ".join(f"{name} {{{', '.join(f'{n}: {t}' for n, t in zip(fields, bases))}}}"
                              for name, fields, bases in adt_branches(s))
        return f"{indent}.type {s.name} = {branches}"
    if isinstance(s, TypeDecl):
        return f"{indent}.type {s.name} {'<:' if s.kind == 'subtype' else '='} {' | '.join(s.bases)}"
    if isinstance(s, IODirective):
        params = ", ".join(f"{k}={quote(str(v))}" for k, v in s.params)
        return f"{indent}.{s.direction} {s.relation}" + (f"({params})" if s.params else "")
    if isinstance(s, Plan):
        params = ", ".join(f"{k}={v if _BARE.fullmatch(str(v)) else quote(str(v))}" for k, v in s.params)
        return f"{indent}.plan {s.kind} {s.name}({params})"
    raise TypeError(f"cannot print statement {s!r}")


def _component_header(c: Component) -> str:
    at = f" @ [{', '.join(quote(str(a)) for a in c.addresses)}]" if c.addresses else ""
    return f"component {c.name}{at} {{"


def _block_end(stmts: tuple, start: int, name: str) -> int:
    """Index after the last statement of component `name`'s block opened at `start`:
    the run of its rules and facts, crossing statements that carry no component."""
    end = start + 1
    for j in range(start + 1, len(stmts)):
        s = stmts[j]
        if isinstance(s, (Rule, Fact)) and s.component == name:
            end = j + 1
        elif isinstance(s, Component) or isinstance(s, (Rule, Fact)):
            break
    return end


def format_program(program: Program) -> str:
    """The canonical text of a program, one statement per line (components as blocks)."""
    declared = declared_columns(program)
    stmts = program.statements
    names = {s.name for s in stmts if isinstance(s, Component)}
    # A stage that moves a rule to another component (decouple) leaves its position
    # alone: a member standing outside its block's run is printed at the block's end.
    runs, strays = {}, {}
    for i, s in enumerate(stmts):
        if isinstance(s, Component):
            runs[s.name] = (i, _block_end(stmts, i, s.name))
    for i, s in enumerate(stmts):
        if isinstance(s, (Rule, Fact)) and s.component in names:
            start, end = runs[s.component]
            if not start < i < end:
                strays.setdefault(s.component, []).append(i)
    skip = {i for ids in strays.values() for i in ids}
    out = []
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if isinstance(s, Component):
            end = runs[s.name][1]
            out.append(_component_header(s))
            out += [format_statement(t, declared, INDENT) for j, t in enumerate(stmts[i + 1:end], i + 1)
                    if j not in skip]
            out += [format_statement(stmts[j], declared, INDENT) for j in strays.get(s.name, ())]
            out.append("}")
            i = end
            continue
        if i in skip:
            i += 1
            continue
        if isinstance(s, (Rule, Fact)) and s.component is not None:
            # A member of no component (only rows edited by hand get here).
            out.append(f"// component {s.component}")
        out.append(format_statement(s, declared))
        i += 1
    return "\n".join(out) + ("\n" if out else "")


def print_catalog(rows, program_id: str) -> str:
    """The program `program_id` as text, read back from catalog rows."""
    from .decode import decode

    return format_program(decode(rows, program_id))
