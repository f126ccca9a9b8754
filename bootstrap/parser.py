"""The front end: program text -> `syntax.Program`.

`grammar.lark` (LALR, built once and cached) gives a parse tree, or syntax errors in the
user's terms (`syntax_diagnostics.py`); `_Builder` turns the tree into the raw statements
of `lowering/raw.py`, each with its `Span`; the `lowering` package then performs the
rewrites that are syntax rather than optimization (docs/language.md, "Lowering"): labels,
disjunctions, Soufflé aggregates, autoinc(), `=`, named fields, qualifiers
(`lowering/statements.py`), then, on the whole program, components
(`lowering/components.py`) and inline relations (`lowering/inline.py`).

Errors are `EvitaError`s carrying `Diagnostic`s in the user's terms.

>>> p = parse_program('link("a", "b", 1).\\nr1 path(X, Y) :- link(X, Y, _).', path="g.olg")
>>> p.name, p.dialect, [type(s).__name__ for s in p.statements]
('g', 'overlog', ['Fact', 'Rule'])
>>> parse_rule("p(X) :- q(X), X > 1").body[1]
Select(expr=BinOp(op='>', left=Var(name='X'), right=Const(value=1, type='int')))
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from .diagnostics import Diagnostic, EvitaError
from .lowering.autoinc import autoinc_numbered
from .lowering.components import expand_components
from .lowering.inline import inline_relations
from .lowering.lattice import extremum_heads
from .lowering.records import lower_records
from .lowering.raw import Clause, Group, RawCall, RawComponent, RawNot, Time, flatten, location
from .lowering.statements import Lowering
from .preprocess import Macro, preprocess
from .source import read_source
from .syntax import (
    BOOL, FLOAT, INFINITY, INT, NULL, STRING, Aggregate, Assign, Atom, BinOp, BodyAggregate, Call,
    Column, CompDecl, CompInit, CompType, Cond, Const, Declaration, IODirective, ListExpr,
    Materialize, NamedAtom, Override, Plan, Program, Rule, Select, Span, TypeDecl, UnOp, Var, Wildcard,
)
from .syntax_diagnostics import MAX_SYNTAX_ERRORS, error_offset, recovery_region, stopped_note, syntax_diagnostic


GRAMMAR = Path(__file__).with_name("grammar.lark")

__all__ = ["parse_program", "parse_file", "parse_rule", "parse_atom", "GRAMMAR"]


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                propagate_positions=True, start=["start", "literal_only"], maybe_placeholders=False,
                cache=True)  # the analysed grammar is cached in the temp dir: fast start-up


# ---------------------------------------------------------------- public API

def parse_program(text: str, path: str = "<string>", name: Optional[str] = None, *,
                  number_bits: int = 64, _including: tuple = (), _macros: Optional[dict] = None, _included: bool = False) -> Program:
    """Parse and lower a whole program. Raises `EvitaError` with every diagnostic found.
    The C preprocessor subset Soufflé programs use runs first (`preprocess.py`):
    `#define`, `#ifdef` and the like, and `#include "FILE"`, which brings in the
    statements of FILE, relative to the including file, where the line stands.
    Soufflé components are then expanded (`components.py`): no `.comp` or `.init` is
    left in the program returned."""
    text_as_given = text
    if _macros is None:  # Soufflé hands its preprocessor the width of its numbers
        _macros = {"RAM_DOMAIN_SIZE": Macro("RAM_DOMAIN_SIZE", None, str(number_bits))}
    pre = preprocess(text, path, _macros, including=_including)
    text = pre.text
    tree = _parse_tree(_accepted_without_effect(text), path, "start")
    builder = _Builder(path)
    try:
        items = builder.transform(tree)
    except VisitError as e:  # a bug in the builder, not the user's: let it surface plainly
        raise e.orig_exc from None
    lowering = Lowering(path, builder.diagnostics)
    lowering.number_bits = number_bits  # facts' constant expressions fold at the program's width
    if _included:  # generated labels name their file: rule1 of lib.dl is not rule1 of the includer
        lowering.label_prefix = re.sub(r"\W", "_", Path(path).stem) + "_"
    statements = lowering.run(items.children if hasattr(items, "children") else items)
    if lowering.diagnostics:
        raise EvitaError(lowering.diagnostics, source=text)
    if pre.includes:
        statements = _spliced(statements, pre.includes, path, text_as_given, _including, number_bits)
    if not _included:  # an included file's components are expanded with the includer's statements
        statements = autoinc_numbered(expand_components(statements, text, path))
    statements = extremum_heads(inline_relations(statements))  # btree_max, btree_min
    if not _included and any(isinstance(s, Declaration) and s.style == "decl" for s in statements):
        found: list = []
        statements = lower_records(statements, found)  # Soufflé's records: bootstrap/lowering/records.py
        if found:
            raise EvitaError(found, source=text)
    dialect = "souffle" if any(isinstance(s, Declaration) and s.style == "decl" for s in statements) \
        else "overlog"
    if lowering.aggregate_helpers and dialect == "souffle":
        statements = lowering.declare_helpers(statements)
    return Program(name or _program_name(path), tuple(statements), path, dialect, text_as_given, number_bits)


# Where an #include not found beside the including file is looked for last: Evita's own stages,
# so a stage in a --stage-path folder can `#include "include/egraph.dl"` as the shipped ones do.
SHIPPED_STAGES = Path(__file__).resolve().parent.parent / "stages"


def _spliced(statements: list, includes: list, path: str, text: str, including: tuple,
             number_bits: int = 64) -> list:
    here = Path(path).resolve() if path and not path.startswith("<") else None
    base = here.parent if here else Path.cwd()
    out = list(statements)
    for inc in reversed(includes):  # later lines first: earlier indices stay valid
        line, col, name = inc.line, inc.col, inc.name
        target = (base / name).resolve()
        if name and not target.is_file() and (SHIPPED_STAGES / name).is_file():
            target = (SHIPPED_STAGES / name).resolve()  # a user's stage includes a shipped include
        span = Span(path, line, col)
        if not name or not target.is_file():
            raise EvitaError([Diagnostic("include", f"#include names {name or 'nothing'}, which is not a file",
                                         span, f'#include "{name}"',
                                         f"give a path relative to {base} (the including file's folder)")],
                             source=text)
        if target in including or target == here:
            raise EvitaError([Diagnostic("include", f"{name} includes itself (through "
                                         f"{' -> '.join(p.name for p in including + ((here,) if here else ()))})",
                                         span, f'#include "{name}"', "remove the #include that closes the cycle")],
                             source=text)
        inner = parse_program(read_source(target), str(target), _including=including + ((here,) if here else ()),
                              _macros=inc.macros, _included=True, number_bits=number_bits)
        at = next((i for i, s in enumerate(out) if getattr(s, "span", None) is not None
                   and s.span.file == path and s.span.line > line), len(out))
        out[at:at] = list(inner.statements)
    return out


def parse_file(path, name: Optional[str] = None, number_bits: int = 64) -> Program:
    return parse_program(read_source(path), str(path), name, number_bits=number_bits)


def parse_rule(text: str) -> Rule:
    """The first rule of `text` (a trailing '.' may be left out)."""
    text = text.strip()
    if not text.endswith("."):
        text += "."
    return parse_program(text).rules[0]


def parse_atom(text: str):
    """One body literal: an atom (`notin`, `!`, `delta` and named fields allowed)."""
    tree = _parse_tree(text, "<string>", "literal_only")
    builder = _Builder("<string>")
    literal = builder.transform(tree)
    lowering = Lowering("<string>", builder.diagnostics)
    literal = lowering.resolve_literal(literal)
    if lowering.diagnostics:
        raise EvitaError(lowering.diagnostics, source=text)
    return literal


def _program_name(path: str) -> str:
    if path.startswith("<"):
        return "program"
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(path).stem)
    return name or "program"


def _parse_tree(text: str, path: str, start: str):
    """Parse, or raise every syntax error found.

    After an error the statement holding it is blanked out (newlines kept, so positions
    stay right) and the text is parsed again; this finds the next independent mistake
    without a cascade of follow-up errors.
    """
    diagnostics: list = []
    current = text
    while True:
        try:
            tree = _lark().parse(current, start=start)
        except UnexpectedInput as e:
            diagnostics.append(syntax_diagnostic(e, current, path))
            offset = error_offset(e, current)
            region = None if start != "start" else recovery_region(current, offset)
            if region is None:
                break
            lo, hi = region
            if len(diagnostics) >= MAX_SYNTAX_ERRORS:
                diagnostics.append(stopped_note(text, path, hi))
                break
            current = current[:lo] + re.sub(r"[^\n]", " ", current[lo:hi]) + current[hi:]
            continue
        if not diagnostics:
            return tree
        break
    raise EvitaError(diagnostics, source=text)


# `.pragma "option" "value"`: Soufflé's command-line options set in the program. They
# tune Soufflé's own compiler and runtime; Evita accepts them without effect and says
# so under --verbose (`checks.qualifier_notes`). Blanked before the grammar sees them.
PRAGMA = re.compile(r'^[ \t]*\.pragma\b[^\n]*', re.M)
# Soufflé's `.plan 0:(1,2), 1:(2,1)` after a rule: a join order per version of the rule
# for Soufflé's own evaluator. Evita's join order is the System R stage's choice, so the
# plan is accepted without effect (a note under --verbose), blanked like a pragma.
# (Evita's own `.plan relation ...`/`.plan rule ...` names a target and is parsed.)
# Soufflé's deprecated `.type Name` with no `<:` or `=`: parsed as `.type Name <: symbol`,
# as Soufflé reads it (with its warning "Deprecated type declaration used"); a note here.
DEPRECATED_TYPE = re.compile(r'^[ \t]*\.type[ \t]+[A-Za-z_][\w.]*[ \t]*(?://[^\n]*)?$', re.M)
SOUFFLE_PLAN = re.compile(r'\.plan[ \t]+\d+[ \t]*:[ \t]*\([^)\n]*\)(?:[ \t]*,[ \t]*\d+[ \t]*:[ \t]*\([^)\n]*\))*')


def _accepted_without_effect(text: str) -> str:
    """`text` with pragmas and Soufflé's rule plans blanked (positions kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group())  # noqa: E731
    return SOUFFLE_PLAN.sub(blank, PRAGMA.sub(blank, text))


# ---------------------------------------------------------------- tree -> raw statements

_CONSTANT_NAMES = {"true": (True, BOOL), "false": (False, BOOL), "null": (None, NULL),
                   "infinity": ("infinity", INFINITY)}
_AGG_NAMES = {"min": "min", "max": "max", "sum": "sum", "avg": "avg", "mean": "avg",
              "count": "count", "set": "set", "list": "list", "autoinc": "autoinc",
              "seal": "seal"}
_DEFINE_TYPES = {"string": "symbol", "integer": "number", "long": "number", "int": "number",
                 "float": "float", "double": "float"}
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _int_value(text: str) -> int:
    """42, 0x1F, 0b101, and any of them with Soufflé's unsigned suffix: 5u."""
    digits = text[:-1] if text.endswith("u") else text
    return int(digits, 16 if digits.startswith("0x") else 2 if digits.startswith("0b") else 10)


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


@dataclass(frozen=True)
class _ChoiceDomains:
    """A `.decl`'s `choice-domain` clause as written: per domain, its name tokens (and
    the qualifiers written after the clause)."""
    domains: tuple
    qualifiers: tuple = ()

    def __iter__(self):
        return iter(self.domains)


@v_args(meta=True)
class _Builder(Transformer):
    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.diagnostics: list = []

    # -- helpers
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.path, 0, 0)
        return Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> Span:
        return Span(self.path, tok.line, tok.column, tok.end_line, tok.end_column)

    def _error(self, code, message, span, text="", hint=""):
        self.diagnostics.append(Diagnostic(code, message, span, text, hint))

    def _term(self, x):
        """Finish a term that sits inside another term: raw calls become functions."""
        if isinstance(x, RawCall):
            for _, span in x.at:
                self._error("syntax", "a location specifier '@' may only mark an argument of an atom",
                            span, "@", "remove the '@' from this function argument")
            return Call(x.name, x.args, x.span)
        if isinstance(x, RawNot):
            return UnOp("!", self._term(x.call), x.span)
        return x

    # -- terms
    def name_term(self, meta, ch):
        tok = ch[0]
        span = self._tspan(tok)
        if tok.value == "_":
            return Wildcard(span)
        if tok.value in _CONSTANT_NAMES:
            value, typ = _CONSTANT_NAMES[tok.value]
            return Const(value, typ, span)
        return Var(tok.value, span)

    def int_const(self, meta, ch):
        const = Const(_int_value(ch[0].value), INT, self._tspan(ch[0]))
        if ch[0].value.endswith("u"):  # `5u` is unsigned, as `as(5, unsigned)`: ordered and divided so
            return Call("as", (const, Const("unsigned", STRING, const.span)), const.span)
        return const

    def ipv4_const(self, meta, ch):
        tok = ch[0]
        parts = [int(p) for p in tok.value.split(".")]
        if any(p > 255 for p in parts):
            self._error("syntax", f"{tok.value} is not an IPv4 address (a part is above 255)", self._tspan(tok),
                        tok.value, "each of the four parts of an address is 0 to 255")
        return Const((parts[0] << 24) + (parts[1] << 16) + (parts[2] << 8) + parts[3], INT, self._tspan(tok))

    def float_const(self, meta, ch):
        return Const(float(ch[0].value), FLOAT, self._tspan(ch[0]))

    def string_const(self, meta, ch):
        return Const(_unescape(ch[0].value[1:-1]), STRING, self._tspan(ch[0]))

    def list_expr(self, meta, ch):
        return ListExpr(tuple(self._term(c) for c in ch), self._span(meta))

    def branch_expr(self, meta, ch):  # Soufflé's ADT constructor: $Add(l, r), $Nil(), $Nil
        return ListExpr(tuple(self._term(c) for c in ch[1:]), self._span(meta), branch=ch[0].value[1:])

    def qname(self, meta, ch):
        return "::".join(t.value for t in ch if t.type in ("NAME", "DOTTED"))

    def arg(self, meta, ch):
        at = ch[0] if isinstance(ch[0], Token) and ch[0].type == "AT" else None
        return (at, self._term(ch[-1]))

    head_arg = arg

    def call(self, meta, ch):
        name, args = ch[0], ch[1:]
        at = tuple((i, self._tspan(a[0])) for i, a in enumerate(args) if a[0] is not None)
        return RawCall(name, tuple(a[1] for a in args), at, self._span(meta))

    def binop(self, meta, ch):
        left, op, right = ch
        return BinOp(op.value, self._term(left), self._term(right), self._span(meta))

    def power(self, meta, ch):
        return Call("pow", (self._term(ch[0]), self._term(ch[2])), self._span(meta))

    def functor_op(self, meta, ch):  # Soufflé's infix functors: `x band 1` is band(x, 1)
        left, op, right = ch
        return Call(op.value, (self._term(left), self._term(right)), self._span(meta))

    def functor_unop(self, meta, ch):  # `bnot x`, `lnot x`
        return Call(ch[0].value, (self._term(ch[1]),), self._span(meta))

    def unop(self, meta, ch):
        op, arg = ch[0].value, ch[1]
        span = self._span(meta)
        if op == "!" and isinstance(arg, RawCall):
            return RawNot(arg, span)
        arg = self._term(arg)
        if op == "-" and isinstance(arg, Const) and arg.type in (INT, FLOAT):
            return Const(-arg.value, arg.type, span)  # negative literals are constants
        return UnOp(op, arg, span)

    def ternary(self, meta, ch):
        test, _, then, _, other = ch
        return Cond(self._term(test), self._term(then), self._term(other), self._span(meta))

    def aggregate(self, meta, ch):
        opener = ch[0].value[:-1]
        func = opener.lower()
        if func.startswith("a_"):
            func = func[2:]
        arg = None if isinstance(ch[1], Token) and ch[1].type == "STAR" else self._term(ch[1])
        values = [c for c in ch[1:] if not (isinstance(c, Token) and c.type == "GT")]
        span = self._span(meta)
        if len(values) > 1:  # seal<X, Y>: the sealed columns, spread over the head by head_atom
            if func != "seal":
                self._error("syntax", f"{opener}<...> aggregates one value, not {len(values)}", span, opener,
                            f"write {opener}<C>; only seal<X, Y, ...> names several columns")
            return Aggregate(_AGG_NAMES[func], ListExpr(tuple(self._term(v) for v in values), span), span)
        return Aggregate(_AGG_NAMES[func], arg, span)

    # -- atoms and literals
    def field(self, meta, ch):
        return (ch[0].value, self._term(ch[2]), self._span(meta))

    def named_atom(self, meta, ch):
        return NamedAtom(ch[0], tuple(ch[1:]), span=self._span(meta))

    def head_atom(self, meta, ch):
        """A head; its seal<X, Y> becomes one seal<> argument per sealed column (the
        relation's columns; the printer writes a run of them back as one seal<X, Y>)."""
        call = self.call(meta, ch)
        seals = [a for a in call.args if isinstance(a, Aggregate) and a.func == "seal"]
        if not seals:
            return call
        if len(seals) > 1:
            self._error("misused-seal", f"{call.name} has {len(seals)} seal<...> arguments: a head seals one batch",
                        seals[1].span, "seal", "list every sealed column in one seal<X, Y, ...>")
        args, shift = [], {}
        for i, a in enumerate(call.args):
            shift[i] = len(args)
            if isinstance(a, Aggregate) and a.func == "seal" and isinstance(a.arg, ListExpr):
                args.extend(Aggregate("seal", v, a.span) for v in a.arg.items)
            else:
                args.append(a)
        at = tuple((shift[i], sp) for i, sp in call.at)
        return replace(call, args=tuple(args), at=at)

    def lit_expr(self, meta, ch):
        return self._literal(ch[0], self._span(meta))

    def _literal(self, x, span):
        if isinstance(x, RawCall):
            if x.name.startswith("f_"):  # an Overlog boolean built-in: a selection
                return Select(self._term(x), span)
            return self._atom(x)
        if isinstance(x, RawNot):
            if x.call.name.startswith("f_"):
                return Select(self._term(x), span)
            return replace(self._atom(x.call), negated=True, span=span)
        if isinstance(x, BodyAggregate):
            self._error("syntax", "an aggregate is a value, not a condition", span, "",
                        "compare it or bind it: n = count : { ... }, or count : { ... } > 0")
        if isinstance(x, BinOp) and x.op == "=":  # `n = count : { ... }`: the literal form
            if isinstance(x.left, Var) and isinstance(x.right, BodyAggregate):
                return replace(x.right, var=x.left, span=span)
            if isinstance(x.right, Var) and isinstance(x.left, BodyAggregate):
                return replace(x.left, var=x.right, span=span)
        return Select(self._term(x), span)

    def _atom(self, call: RawCall, what: str = "an atom") -> Atom:
        return Atom(call.name, call.args, location(call.at, what, self._error), span=call.span)

    def lit_assign(self, meta, ch):
        var = ch[0]
        return Assign(Var(var.value, self._tspan(var)), self._term(ch[1]), self._span(meta))

    def lit_prefixed(self, meta, ch):
        word, target = ch[0], ch[1]
        span = self._span(meta)
        if word.value not in ("notin", "delta"):
            self._error("syntax", f"unexpected word '{word.value}' before the atom {_name_of(target)}",
                        self._tspan(word), word.value,
                        "only 'notin' and 'delta' may precede an atom; separate literals with ','")
        flag = {"negated": True} if word.value == "notin" else {"delta": True}
        if isinstance(target, NamedAtom):
            return replace(target, span=span, **flag)
        return replace(self._atom(target), span=span, **flag)

    def lit_named(self, meta, ch):
        return ch[0]

    def lit_neg_named(self, meta, ch):
        return replace(ch[1], negated=True, span=self._span(meta))

    def agg_source(self, meta, ch):
        if not ch:  # `{ }`
            self._error("syntax", "an aggregate body needs at least one literal", self._span(meta), "{ }",
                        "write what to count or sum over: count : { edge(x, _) }")
            return [Const(True, BOOL, self._span(meta))]
        if len(ch) == 2:  # `! atom`
            return [self._negate_source(ch[1], self._span(meta))]
        x = ch[0]
        if isinstance(x, list):
            return x
        if isinstance(x, RawCall):
            return [self._atom(x)]
        return [x]

    def _negate_source(self, x, span):
        atom = self._atom(x) if isinstance(x, RawCall) else x
        return replace(atom, negated=True, span=span)

    def agg_count_term(self, meta, ch):  # Soufflé `count : { ... }` as a term
        return self._body_aggregate("count", None, ch[1], self._span(meta))

    def agg_term(self, meta, ch):  # `sum x : { ... }`, `max s : r(s)`
        fn, expr, _, body = ch
        return self._body_aggregate(_AGG_NAMES[fn.value], self._term(expr), body, self._span(meta))

    def _body_aggregate(self, func, expr, body, span):
        """A Soufflé aggregate term (`var` None); `V = AGG` at a literal's top level becomes
        the literal form (`var` V), see `_literal`."""
        body = flatten(body)
        if any(isinstance(b, Group) for b in body):
            self._error("syntax", "an aggregate body cannot hold a disjunction", span, "",
                        "write one aggregate per alternative")
            body = [b for b in body if not isinstance(b, Group)]
        return BodyAggregate(None, func, expr, tuple(body), span)

    # -- bodies
    def conj(self, meta, ch):
        return list(ch)

    def group(self, meta, ch):
        return ch[0] if len(ch) == 1 else Group(list(ch))

    def body(self, meta, ch):
        return ch[0] if len(ch) == 1 else [Group(list(ch))]

    def neg_group(self, meta, ch):
        """`!(A ; B)` is `!A, !B`, and `!(a, b)` is `!a ; !b` (De Morgan, as Soufflé
        negates a parenthesized body): a conjunction of groups whose alternatives are
        negated literals, which the disjunction lowering expands like any other group.
        `!!(...)` negates the negation again (De Morgan twice)."""
        return self._negated(ch[1], self._span(meta))

    def _negated(self, group, span) -> list:
        alternatives = group.alternatives if isinstance(group, Group) else [group]
        out = []
        for alt in alternatives:
            items = flatten(alt) if isinstance(alt, list) else [alt]
            options = [self._negated_item(it, span) for it in items]
            out.append(Group(options) if len(options) > 1 else options[0])
        return out

    def _negated_item(self, item, span):
        if isinstance(item, (Group, list)):
            return self._negated(item, span)
        if isinstance(item, (Atom, NamedAtom)) and not item.delta:
            return replace(item, negated=not item.negated)
        if isinstance(item, Select):
            return replace(item, expr=UnOp("!", item.expr, item.span))
        self._error("syntax", "only atoms, negated atoms and conditions can be negated", span, "",
                    "bind variables outside the negation: write !(a(x) ; b(x)) over variables bound before it")
        return item

    # -- statements
    def time(self, meta, ch):
        return Time(ch[1])

    def clause(self, meta, ch):
        words = [c for c in ch if isinstance(c, Token) and c.type == "NAME"]
        rest = [c for c in ch if not (isinstance(c, Token) and c.type == "NAME")]
        heads = [c for c in rest if isinstance(c, (RawCall, NamedAtom))]
        time = next((c.token for c in rest[1:] if isinstance(c, Time)), None)
        body = next((c for c in rest[1:] if isinstance(c, list)), None)
        # A one-literal group `(a)` in a body comes back as a bare list: flatten it.
        if body is not None:
            body = flatten(body)
        if len(heads) > 1 and words:
            self._error("syntax", "a rule with several heads takes no label", self._tspan(words[0]),
                        words[0].value, "give each head its own labelled rule")
        # `a(x), b(x) :- c(x).` (Soufflé): one rule per head, each with the whole body
        clauses = [Clause(words if i == 0 else [], head, time, body, self._span(meta))
                   for i, head in enumerate(heads)]
        return clauses[0] if len(clauses) == 1 else clauses

    def subsume_clause(self, meta, ch):
        """`dominated <= dominating :- body.` (Soufflé's subsumption; lowered in
        `lowering/subsumption.py`)."""
        words = [c for c in ch if isinstance(c, Token) and c.type == "NAME"]
        head, dominating = [c for c in ch if isinstance(c, RawCall)][:2]
        body = flatten(next(c for c in ch if isinstance(c, list)))
        return Clause(words, head, None, body, self._span(meta), dominating)

    def bound(self, meta, ch):
        tok = ch[0]
        if tok.type == "NAME":
            if tok.value != "infinity":
                self._error("syntax", f"'{tok.value}' is not a lifetime or size", self._tspan(tok),
                            tok.value, "write infinity or a number")
            return Const("infinity", INFINITY, self._tspan(tok))
        if tok.type == "INT":
            return Const(int(tok.value), INT, self._tspan(tok))
        return Const(float(tok.value), FLOAT, self._tspan(tok))

    def keys(self, meta, ch):
        word = ch[0]
        if word.value != "keys":
            self._error("syntax", f"expected keys(...), found '{word.value}'", self._tspan(word),
                        word.value, "write keys(1, 2) to name the key columns")
        return (tuple(int(t.value) for t in ch[1:]), self._span(meta))

    def materialize(self, meta, ch):
        _, name, lifetime, size, (keys, kspan) = ch
        if any(k < 1 for k in keys):
            self._error("syntax", "materialize keys are 1-based", kspan, "",
                        "the first column is keys(1); define(...) uses 0-based keys")
        return Materialize(name, lifetime, size, tuple(k - 1 for k in keys), self._span(meta))

    def define(self, meta, ch):
        name = ch[1]
        keys = next((c[0] for c in ch[2:] if isinstance(c, tuple)), None)
        types = [c.value for c in ch[2:] if isinstance(c, Token) and c.type == "NAME"]
        columns = tuple(Column(f"c{i}", _DEFINE_TYPES.get(t.lower(), "any")) for i, t in enumerate(types))
        return Declaration(name, columns, keys, "define", self._span(meta))

    def column(self, meta, ch):
        # The span covers the type name: an unknown type is reported there.
        name, typ = ch[0].value, ch[2]
        span = Span(self.path, meta.end_line, meta.end_column - len(typ), meta.end_line, meta.end_column)
        return Column(name, typ, span)

    def decl(self, meta, ch):
        """`.decl A, B(x: number) btree`: one Declaration per relation named."""
        names = [c for c in ch[1:] if isinstance(c, str) and not isinstance(c, Token)]
        columns = tuple(c for c in ch if isinstance(c, Column))
        domains = next((c for c in ch if isinstance(c, _ChoiceDomains)), None)
        qualifiers = tuple(t.value for t in ch + list(domains.qualifiers if domains else ())
                           if isinstance(t, Token) and t.type == "QUALIFIER")
        choice = self._choice_positions(domains, columns, names[0]) if domains else ()
        return [Declaration(n, columns, None, "decl", self._span(meta), qualifiers, choice) for n in names]

    def choice_domain(self, meta, ch):
        return _ChoiceDomains(tuple(c for c in ch if isinstance(c, list)),
                              tuple(c for c in ch if isinstance(c, Token) and c.type == "QUALIFIER"))

    def domain(self, meta, ch):
        return [c for c in ch if isinstance(c, Token) and c.type == "NAME"]

    def _choice_positions(self, domains, columns: tuple, relation: str) -> tuple:
        """`choice-domain x, (x, y)` -> ((0,), (0, 1)): each domain's column positions,
        in the order the columns are declared. A name no column has, or one written
        twice in a domain, is reported at the name; a domain written twice counts once."""
        where = {c.name: i for i, c in enumerate(columns)}
        out = []
        for names in domains:
            positions = []
            for tok in names:
                if tok.value not in where:
                    self._error("choice-domain", f"choice-domain names {tok.value}, which is not an attribute of "
                                f"{relation}", self._tspan(tok), tok.value,
                                f"name attributes of {relation}: {', '.join(where) or '(it has none)'}")
                elif where[tok.value] in positions:
                    self._error("choice-domain", f"{tok.value} is written twice in one choice-domain",
                                self._tspan(tok), tok.value, "name each attribute of a domain once: (x, y)")
                else:
                    positions.append(where[tok.value])
            domain = tuple(sorted(positions))
            if len(positions) == len(names) and domain not in out:
                out.append(domain)
        return tuple(out)

    def type_subtype(self, meta, ch):
        return TypeDecl(ch[1].value, "subtype", (ch[3],), self._span(meta))

    def type_equal(self, meta, ch):
        bases = tuple(c for c in ch[3:] if not isinstance(c, Token))
        return TypeDecl(ch[1].value, "union" if len(bases) > 1 else "equivalence", bases, self._span(meta))

    def type_record(self, meta, ch):
        fields = [c for c in ch if isinstance(c, Column)]
        return TypeDecl(ch[1].value, "record", tuple(c.type for c in fields), self._span(meta),
                        tuple(c.name for c in fields))

    def adt_branch(self, meta, ch):
        return ch[0].value, tuple(c for c in ch if isinstance(c, Column)), self._span(meta)

    def type_adt(self, meta, ch):  # .type E = Num {n: number} | Nil {}: bootstrap/types.py, adt_branches
        fields, bases = [], []
        for name, columns, _ in (c for c in ch if isinstance(c, tuple)):
            fields += ["$" + name] + [c.name for c in columns]
            bases += [""] + [c.type for c in columns]
        return TypeDecl(ch[1].value, "adt", tuple(bases), self._span(meta), tuple(fields))

    def type_old(self, meta, ch):  # .number_type N / .symbol_type S / .type S (Soufflé: deprecated, a symbol)
        base = "number" if ch[0].value == ".number_type" else "symbol"
        return TypeDecl(ch[1].value, "subtype", (base,), self._span(meta))

    def param(self, meta, ch):
        key, _, value = ch
        text = _unescape(value.value[1:-1]) if value.type == "STRING" else value.value
        return (key.value, text)

    def io(self, meta, ch):
        direction = {"INPUT": "input", "OUTPUT": "output", "PRINTSIZE": "printsize",
                     "LIMITSIZE": "limitsize"}[ch[0].type]
        names = [c for c in ch[1:] if isinstance(c, str) and not isinstance(c, Token)]
        params = tuple(c for c in ch[1:] if isinstance(c, tuple))
        # `.output A, B`: one directive per relation, each with the parameters
        return [IODirective(direction, n, params, self._span(meta)) for n in names]

    def plan(self, meta, ch):
        return Plan(ch[1].value, ch[2], tuple(ch[3:]), self._span(meta))

    def addresses(self, meta, ch):
        return tuple(_unescape(t.value[1:-1]) for t in ch)

    def component(self, meta, ch):
        name = ch[1].value
        addresses = next((c for c in ch[2:] if isinstance(c, tuple)), ())
        statements = flatten([c for c in ch[2:] if not isinstance(c, (tuple, Token))])
        return RawComponent(name, addresses, statements, self._span(meta))

    # -- Soufflé components (expanded by components.py once the whole program is lowered)
    def comp_type(self, meta, ch):
        names = [t.value for t in ch if isinstance(t, Token) and t.type == "NAME"]
        return CompType(names[0], tuple(names[1:]), self._span(meta))

    def comp_decl(self, meta, ch):
        types = [c for c in ch if isinstance(c, CompType)]
        body = flatten([c for c in ch[1:] if not isinstance(c, (CompType, Token))])
        return CompDecl(types[0], tuple(types[1:]), tuple(body), self._span(meta))

    def comp_init(self, meta, ch):
        return CompInit(ch[1].value, ch[3], self._span(meta), self._tspan(ch[1]))

    def comp_override(self, meta, ch):
        return Override(ch[1].value, self._tspan(ch[1]))

    def literal_only(self, meta, ch):
        return ch[0]


def _name_of(x) -> str:
    return getattr(x, "name", None) or getattr(x, "relation", "?")
