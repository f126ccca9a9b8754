"""What the parser's builder hands the lowering: statements as written, before lowering.

A clause keeps its words (label, `delete`, `query`), its head still a raw call, its body
with disjunctions as `Group`s; a component keeps its statements. The lowering
(`statements.Lowering`) turns them into the dataclasses of `syntax.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from lark import Token

from ..syntax import Span


@dataclass
class RawCall:
    """`name(args)` before we know whether it is an atom (body literal) or a function."""
    name: str
    args: tuple
    at: tuple  # ((index, span), ...) of `@` arguments
    span: Span


@dataclass
class RawNot:
    """`!name(args)`: a negated atom at literal level, `UnOp("!")` inside a term."""
    call: RawCall
    span: Span


@dataclass
class Clause:
    words: list
    head: object  # RawCall (head) or NamedAtom
    time: Optional[Token]
    body: Optional[list]
    span: Span
    # Soufflé's `head <= dominating :- body.`: the dominating atom (RawCall); None otherwise
    dominating: object = None


@dataclass
class Group:
    """A disjunction: a list of alternatives, each a list of body items."""
    alternatives: list


@dataclass
class RawComponent:
    name: str
    addresses: tuple
    statements: list
    span: Span


@dataclass
class Time:
    token: Token  # the NAME after `@` in `head@next`


def location(at: list, what: str, report) -> int | None:
    """The position of the `@` argument; a second `@` in one atom is reported."""
    for _, span in at[1:]:
        report("syntax", f"{what} has at most one location specifier '@'", span, "@",
               "mark only the argument that holds the tuple's location")
    return at[0][0] if at else None


def flatten(items: list) -> list:
    out = []
    for it in items:
        if isinstance(it, list):
            out.extend(flatten(it))
        else:
            out.append(it)
    return out
