"""Facts written in the program must fit their relation's declared column types, just
as rows of input files must (runtime/validate.py): a symbol in a number column would
otherwise become a null on Spark and spread through the rules.

>>> from .parser import parse_program
>>> for d in check_fact_types(parse_program('.decl e(x: number)\\ne("two").', "f.dl")): print(d.message)
column 1 (x) of e is number, but "two" is a symbol
"""
from __future__ import annotations

from typing import Iterator

from .diagnostics import Diagnostic
from .syntax import FLOAT, INFINITY, INT, STRING, Const, Declaration, Program

# declared type -> the constant types it accepts (io.DECLARED names the same types)
ACCEPTS = {"number": {INT}, "unsigned": {INT}, "int": {INT}, "integer": {INT}, "long": {INT},
           "float": {INT, FLOAT, INFINITY}, "double": {INT, FLOAT, INFINITY},
           "symbol": {STRING}, "string": {STRING}, "bool": {"bool"}}
_SHOWN = {INT: "a number", FLOAT: "a float", STRING: "a symbol", "bool": "a boolean", "null": "null",
          INFINITY: "infinity"}


def check_fact_types(program: Program) -> Iterator[Diagnostic]:
    from .types import TypeSystem

    types = TypeSystem.of(program)  # a column of a declared type takes the constants of its primitive
    declared = {}
    for d in program.of(Declaration):
        declared.setdefault(d.relation, d)
    for f in program.facts:
        decl = declared.get(f.atom.relation)
        if decl is None:
            continue
        for i, (a, col) in enumerate(zip(f.atom.args, decl.columns)):
            primitive = types.primitive(col.type)
            accepts = ACCEPTS.get(primitive)
            if types.held_as_text(col.type) is not None:  # records, ADTs: the lowering checked them (lowering/records.py)
                accepts = ("record",)
            if not isinstance(a, Const) or accepts is None:
                continue
            if a.type not in accepts:
                text = _text(a)
                yield Diagnostic("fact-type", f"column {i + 1} ({col.name}) of {f.atom.relation} is {col.type}, "
                                 f"but {text} is {_SHOWN.get(a.type, a.type)}", a.span if a.span.line else f.span,
                                 text, f"write {article(col.type)} value, or declare the column to match")
            elif primitive == "unsigned" and a.value < 0:
                yield Diagnostic("fact-type", f"column {i + 1} ({col.name}) of {f.atom.relation} is unsigned, but "
                                 f"{a.value} is negative", a.span if a.span.line else f.span, str(a.value),
                                 "write a whole number of 0 or more")


def _text(c: Const) -> str:
    if c.type == STRING:
        return '"' + str(c.value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return {True: "true", False: "false", None: "null"}.get(c.value, str(c.value)) if c.type != INT else str(c.value)


def article(t: str) -> str:
    return f"an {t}" if t[0] in "aeiou" else f"a {t}"
