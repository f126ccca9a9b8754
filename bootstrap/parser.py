"""The front end: program text -> `syntax.Program`.

`grammar.lark` (LALR, built once and cached) gives a parse tree; `_Builder` turns it into
the dataclasses of `syntax.py`, each with its `Span`; `_Lowering` then performs the
rewrites that are syntax rather than optimization (docs/language.md, "Lowering"):

* unlabelled rules get the label `rule{N}`;
* a disjunctive body becomes one rule per alternative (`L`, `L_or2`, `L_or3`, ...);
* a Soufflé body aggregate `V = count : { ... }` becomes a helper rule `L_agg1`;
* Soufflé `X = E` becomes `X := E` when X is bound nowhere else, otherwise `==`;
* named-field atoms `rel{col: T}` become positional atoms (`Atom(named=True)`).

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
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, VisitError

from .diagnostics import Diagnostic, EvitaError, plural
from .folding import FoldError, fold
from .components import expand_components
from .dedalus_checks import _term_calls, tick_in_fact
from .inline import inline_relations
from . import casts, ranges
from .preprocess import preprocess
from .syntax import (
    BOOL, FLOAT, INFINITY, INT, NULL, STRING, Aggregate, Assign, Atom, BinOp, BodyAggregate, Call,
    Column, CompDecl, CompInit, CompType, Component, Cond, Const, Declaration, Fact, IODirective, ListExpr,
    Materialize, NamedAtom, Override, Plan, Program, Query, Rule, Select, Span, TypeDecl, UnOp, Var, Wildcard, atom_vars, map_literal,
    map_subterms,
)

GRAMMAR = Path(__file__).with_name("grammar.lark")

__all__ = ["parse_program", "parse_file", "parse_rule", "parse_atom", "GRAMMAR"]


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(GRAMMAR.read_text(encoding="utf-8"), parser="lalr", lexer="contextual",
                propagate_positions=True, start=["start", "literal_only"], maybe_placeholders=False,
                cache=True)  # the analysed grammar is cached in the temp dir: fast start-up


# ---------------------------------------------------------------- public API

def parse_program(text: str, path: str = "<string>", name: Optional[str] = None, *,
                  _including: tuple = (), _macros: Optional[dict] = None, _included: bool = False) -> Program:
    """Parse and lower a whole program. Raises `EvitaError` with every diagnostic found.
    The C preprocessor subset Soufflé programs use runs first (`preprocess.py`):
    `#define`, `#ifdef` and the like, and `#include "FILE"`, which brings in the
    statements of FILE, relative to the including file, where the line stands.
    Soufflé components are then expanded (`components.py`): no `.comp` or `.init` is
    left in the program returned."""
    text_as_given = text
    pre = preprocess(text, path, _macros, including=_including)
    text = pre.text
    tree = _parse_tree(_accepted_without_effect(text), path, "start")
    builder = _Builder(path)
    try:
        items = builder.transform(tree)
    except VisitError as e:  # a bug in the builder, not the user's: let it surface plainly
        raise e.orig_exc from None
    lowering = _Lowering(path, builder.diagnostics)
    if _included:  # generated labels name their file: rule1 of lib.dl is not rule1 of the includer
        lowering.label_prefix = re.sub(r"\W", "_", Path(path).stem) + "_"
    statements = lowering.run(items.children if hasattr(items, "children") else items)
    if lowering.diagnostics:
        raise EvitaError(lowering.diagnostics, source=text)
    if pre.includes:
        statements = _spliced(statements, pre.includes, path, text_as_given, _including)
    if not _included:  # an included file's components are expanded with the includer's statements
        statements = _autoinc_numbered(expand_components(statements, text, path))
    statements = inline_relations(statements)
    dialect = "souffle" if any(isinstance(s, Declaration) and s.style == "decl" for s in statements) \
        else "overlog"
    if lowering.aggregate_helpers and dialect == "souffle":
        statements = lowering.declare_helpers(statements)
    return Program(name or _program_name(path), tuple(statements), path, dialect, text_as_given)


# Where an #include not found beside the including file is looked for last: Evita's own stages,
# so a stage in a --stage-path folder can `#include "include/egraph.dl"` as the shipped ones do.
SHIPPED_STAGES = Path(__file__).resolve().parent.parent / "stages"


def _spliced(statements: list, includes: list, path: str, text: str, including: tuple) -> list:
    from .source import read_source

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
                              _macros=inc.macros, _included=True)
        at = next((i for i, s in enumerate(out) if getattr(s, "span", None) is not None
                   and s.span.file == path and s.span.line > line), len(out))
        out[at:at] = list(inner.statements)
    return out


def parse_file(path, name: Optional[str] = None) -> Program:
    from .source import read_source

    return parse_program(read_source(path), str(path), name)


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
    lowering = _Lowering("<string>", builder.diagnostics)
    literal = lowering.resolve_literal(literal)
    if lowering.diagnostics:
        raise EvitaError(lowering.diagnostics, source=text)
    return literal


def _program_name(path: str) -> str:
    if path.startswith("<"):
        return "program"
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(path).stem)
    return name or "program"


_MAX_SYNTAX_ERRORS = 20


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
            diagnostics.append(_syntax_diagnostic(e, current, path))
            offset = _error_offset(e, current)
            region = None if start != "start" else _unsupported_region(current, offset) \
                or _component_header(current, offset) or _statement_region(current, offset)
            if region is None:
                break
            lo, hi = region
            if len(diagnostics) >= _MAX_SYNTAX_ERRORS:
                diagnostics.append(_stopped_note(text, path, hi))
                break
            current = current[:lo] + re.sub(r"[^\n]", " ", current[lo:hi]) + current[hi:]
            continue
        if not diagnostics:
            return tree
        break
    raise EvitaError(diagnostics, source=text)


def _unsupported_region(text: str, offset: int):
    """(start, end) of a construct reported as not supported yet (`.functor` and other
    directives, a record or ADT type), so that its braces do not cause a cascade of
    errors; else None."""
    rest = text[offset:]
    if rest.startswith(".functor"):
        return offset, offset + len(rest.split("\n", 1)[0])
    if rest[:1] in "[{" and re.search(r"\.type[ \t]+\w+[ \t]*=[ \t]*(\w+[ \t]*)?$", text[:offset].rsplit("\n", 1)[-1]):
        return text.rfind(".type", 0, offset), _past_groups(text, offset)
    if rest.startswith("-domain") and text[:offset].endswith("choice") and ".decl" in text[:offset]:
        return text.rfind(".decl", 0, offset), offset + len(rest.split("\n", 1)[0])
    return None


def _past_groups(text: str, offset: int) -> int:
    """The end of the bracketed groups from `offset` on: `{ ... }`, then `| B { ... }` ...
    (an ADT's branches), strings and comments skipped."""
    depth, i, seen = 0, offset, False
    while i < len(text):
        m = _SCAN.match(text, i)
        if m and m.group()[0] in '"/':
            i = m.end()
            continue
        ch = text[i]
        if ch in "{[":
            depth, seen = depth + 1, True
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                after = re.match(r"\s*(\|\s*\w+\s*)?", text[i + 1:])
                if not after.group(1):
                    return i + 1
                i += 1 + after.end()
                continue
        i += 1
    return len(text) if seen else offset + 1


def _stopped_note(text: str, path: str, offset: int) -> Diagnostic:
    """Says that checking stopped at the cap, so that a file of noise does not look
    like a file with exactly 20 mistakes."""
    line = text.count("\n", 0, offset) + 1
    rest = text.count("\n", offset) + (0 if text.endswith("\n") else 1)
    return Diagnostic("error-limit", f"stopped after {_MAX_SYNTAX_ERRORS} errors; {plural(rest, 'more line')} not checked",
                      Span(path, line, 1), "", "fix the errors above and run again", severity="note")


def _error_offset(e: UnexpectedInput, text: str) -> int:
    if isinstance(e, UnexpectedCharacters):
        return e.pos_in_stream
    tok = getattr(e, "token", None)
    if tok is None or tok.type == "$END" or tok.start_pos is None:
        return len(text)
    return tok.start_pos


_SCAN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*.*?(?:\*/|\Z)|\.(?=\s|\Z)|[{}]', re.S)


def _open_braces(text: str, offset: int) -> int:
    """How many `{` before `offset` are not closed (strings and comments skipped)."""
    depth = 0
    for m in _SCAN.finditer(text, 0, offset):
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
    return depth


def _statement_region(text: str, offset: int):
    """(start, end) of the statement around `offset`, or None when blanking cannot help."""
    if offset >= len(text.rstrip()):
        return None  # the error is at the end: nothing after it to recover
    lo = 0
    hi = None
    depth = 0  # of the braces open before the error
    for m in _SCAN.finditer(text):
        tok = m.group()
        if tok[0] in '"/':
            continue
        if m.start() < offset:
            lo = m.end()  # after the last '.', '{' or '}' before the error
            depth += {"{": 1, "}": -1}.get(tok, 0)
        elif tok == ".":
            hi = m.end()
            break
        else:  # a brace after the error closes (or opens) the enclosing block: stop before it
            # (a '}' the error is at is kept too when it closes a block: `r(1) }`)
            hi = m.start() if m.start() > offset or (tok == "}" and depth > 0 and m.start() > lo) else m.end()
            break
    if hi is None:
        hi = len(text)
    if not lo <= offset < hi:
        return None
    return lo, hi


# ---------------------------------------------------------------- syntax errors in plain words

_WORDS = {
    "_DOT": "'.'", "_COMMA": "','", "_SEMI": "';'", "_IF": "':-'", "_ASSIGN": "':='",
    "_LPAR": "'('", "_RPAR": "')'", "_LSQB": "'['", "_RSQB": "']'", "_LBRACE": "'{'",
    "_RBRACE": "'}'", "AT": "'@'", "COLON": "':'", "DCOLON": "'::'", "NAME": "a name", "DOTTED": "a name",
    "INT": "a number", "STRING": "a string",
    "QUALIFIER": "a relation qualifier", "AGG_OPEN": "an aggregate such as min<C>",
    "$END": "the end of the file",
}
_STATEMENT_START = {"COMPONENT", "MATERIALIZE", "DEFINE", "DECL", "INPUT", "OUTPUT", "PRINTSIZE", "PLAN", "TYPE",
                    "OLD_TYPE", "COMP", "INIT", "OVERRIDE"}
_OPERATORS = {"QMARK", "OROR", "ANDAND", "EQEQ", "NEQ", "LE", "GE", "LT", "GT", "EQ", "PLUS",
              "MINUS", "STAR", "SLASH", "PERCENT", "CARET", "POWER",
              "LOR", "LXOR", "LAND", "BOR", "BXOR", "BAND", "BSHL", "BSHR", "BSHRU"}
_COMPARISONS = {"EQEQ", "NEQ", "LE", "GE", "LT", "GT", "EQ"}
_NUMBERS = {"INT", "FLOAT", "HEX_INT", "BIN_INT", "UNSIGNED_INT", "IPV4"}
_TERM_START = {"NAME", "STRING", "_LSQB", "_LPAR", "MINUS", "BANG", "BNOT", "LNOT"} | _NUMBERS
# implied by the words we print for their neighbours ("a number" stands for every notation)
_NOISE = {"AGG_COUNT", "AGG_FN", "DOTTED"} | (_NUMBERS - {"INT"})  # DOTTED: "a name" says it


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "NAME":
        return f"name '{token.value}'"
    if token.type in _NUMBERS:
        return f"number {token.value}"
    if token.type == "STRING":
        return f"string {token.value}"
    return f"'{token.value}'"


def _expected(expected: set, literal_start: bool = False) -> str:
    """A short list of what would have been accepted, in the user's terms."""
    exp = set(expected) - _NOISE
    parts: list = []
    if "_DOT" in exp and "_IF" in exp:  # after a head (a `,` there starts another head)
        parts.append("':-' to start a rule body or '.' to end the fact")
        exp -= {"_DOT", "_IF", "AT", "_COMMA"}
    elif "_DOT" in exp and ("_COMMA" in exp or "_SEMI" in exp):
        parts.append("',' before another literal or '.' to end the rule")
        exp -= {"_DOT", "_COMMA", "_SEMI"}
    if "NAME" in exp and exp & _STATEMENT_START:
        parts.append("a statement (a rule, a fact or a declaration)")
        exp -= {"NAME"} | _STATEMENT_START
    if {"NAME", "INT", "STRING"} <= exp:
        parts.append("an atom or a term" if literal_start else "a term")
        exp -= _TERM_START | {"AT", "AGG_OPEN"}
    if parts:  # operators could always continue an expression: not worth listing then
        exp -= _OPERATORS
    for name in sorted(exp, key=lambda n: (n in _OPERATORS, n)):
        word = _WORDS.get(name) or ("an operator" if name in _OPERATORS else name.lower())
        if word not in parts:
            parts.append(word)
    if not parts:
        return "something else"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def _previous_token_end(text: str, offset: int) -> tuple:
    """(line, col) of the last non-blank, non-comment character before `offset`."""
    head = re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group()), text[:offset],
                  flags=re.S).rstrip()
    if not head:
        return 1, 0
    line = head.count("\n") + 1
    return line, len(head) - (head.rfind("\n") + 1)


def _source_trouble(text: str, offset: int, path: str, line: int, col: int) -> Optional[Diagnostic]:
    """Mistakes best recognized from the text itself, whatever lark made of them."""
    rest = text[offset:]
    span = Span(path, line, col, line, col + 1)
    ch = rest[:1]
    if ch == '"' and not re.match(r'"(?:[^"\\\n]|\\.)*"', rest):
        return Diagnostic("syntax", "unterminated string", span, rest.split("\n", 1)[0],
                          "close the string with '\"' on the same line; write \\\" for a quote inside it")
    if rest.startswith("/*") and "*/" not in rest:
        return Diagnostic("syntax", "unterminated comment", span, "/*", "close the comment with '*/'")
    if ch in _QUOTES:
        return Diagnostic("syntax", f"unexpected character {ch!r}", span, ch, _QUOTES[ch])
    directive = re.match(r"\.[A-Za-z_]+", rest)
    if directive and directive.group() not in _DIRECTIVES:
        word = directive.group()
        what = f"{word} ({_NOT_YET[word]}) is not supported yet" if word in _NOT_YET \
            else f"unknown directive {word}"
        return Diagnostic("syntax", what, Span(path, line, col, line, col + len(word)),
                          word, "supported directives: " + ", ".join(_DIRECTIVES))
    if rest.startswith(("[", "{")) and re.search(r"\.type[ \t]+\w+[ \t]*=[ \t]*(\w+[ \t]*)?$",
                                                 text[:offset].rsplit("\n", 1)[-1]):
        what = "record types" if rest[0] == "[" else "algebraic data types"
        return Diagnostic("syntax", f"{what} are not supported yet", span, rest[0],
                          "declare the columns with primitive types or .type NAME <: number/symbol")
    if rest.startswith("<=") and re.search(r"(?:^|[.}])\s*(?:\w+\s+)?[\w.:]+\s*\([^.]*\)\s*$", text[:offset]):
        return Diagnostic("syntax", "subsumption (a <= rule) is not supported yet", Span(path, line, col, line, col + 2),
                          "<=", "keep the dominated tuples, or choose the best per group with a min/max aggregate")
    if rest.startswith("-domain") and text[:offset].endswith("choice"):
        return Diagnostic("syntax", "choice-domain is not supported yet", Span(path, line, col - 6), "choice-domain",
                          "drop the choice-domain clause and choose with a rule (e.g. min/max aggregates)")
    if rest.startswith(":") and rest[1:2] in _QUOTES:
        return Diagnostic("syntax", f"unexpected character {rest[1]!r}", Span(path, line, col + 1), rest[1],
                          _QUOTES[rest[1]])
    return None


_DIRECTIVES = (".decl", ".input", ".output", ".printsize", ".limitsize", ".type", ".number_type", ".symbol_type", ".plan",
               ".comp", ".init", ".override")
# Soufflé directives Evita knows of but does not run yet.
_NOT_YET = {".functor": "user-defined functors"}
# `.pragma "option" "value"`: Soufflé's command-line options set in the program. They
# tune Soufflé's own compiler and runtime; Evita accepts them without effect and says
# so under --verbose (`checks.qualifier_notes`). Blanked before the grammar sees them.
PRAGMA = re.compile(r'^[ \t]*\.pragma\b[^\n]*', re.M)
# Soufflé's `.plan 0:(1,2), 1:(2,1)` after a rule: a join order per version of the rule
# for Soufflé's own evaluator. Evita's join order is the System R stage's choice, so the
# plan is accepted without effect (a note under --verbose), blanked like a pragma.
# (Evita's own `.plan relation ...`/`.plan rule ...` names a target and is parsed.)
SOUFFLE_PLAN = re.compile(r'\.plan[ \t]+\d+[ \t]*:[ \t]*\([^)\n]*\)(?:[ \t]*,[ \t]*\d+[ \t]*:[ \t]*\([^)\n]*\))*')


def _accepted_without_effect(text: str) -> str:
    """`text` with pragmas and Soufflé's rule plans blanked (positions kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group())  # noqa: E731
    return SOUFFLE_PLAN.sub(blank, PRAGMA.sub(blank, text))

_QUOTES = {"'": "strings use double quotes: \"text\"",
           "\u2018": "strings use plain double quotes: \"text\"",
           "\u2019": "strings use plain double quotes: \"text\"",
           "\u201c": "strings use plain double quotes: \"text\"",
           "\u201d": "strings use plain double quotes: \"text\"",
           "\u2212": "write ':-' with an ASCII minus sign"}


# The punctuation of `.comp C<T> : B { ... }` and `.init c = C<T>`, in words.
_HEADER_WORDS = {"NAME": "a name", "LT": "'<'", "_COMMA": "','", "GT": "'>'", "COLON": "':'", "EQ": "'='",
                 "_LBRACE": "'{'"}
_HEADER_FORMS = {".comp": ".comp NAME<T, ...> : BASE<T, ...> { ... } (type parameters and bases optional)",
                 ".init": ".init INSTANCE = COMPONENT<TYPE, ...> (type arguments only if it declares parameters)"}


def _component_header(text: str, offset: int):
    """(start, end) of the `.comp` or `.init` header the error at `offset` is in (a
    `.comp` up to its body's `{`, an `.init` on its line), for the whole statement to
    be skipped after the error; else None."""
    line_start = text.rfind("\n", 0, len(text[:offset].rstrip())) + 1  # at the end: the last line
    init = text.rfind(".init", line_start, offset + 1)
    if init >= 0 and _HEADER.match(text, init + 5, offset) and "//" not in text[line_start:init]:
        end = text.find("\n", offset)
        return init, end if end >= 0 else len(text)
    comp = text.rfind(".comp", 0, offset + 1)
    if comp >= 0 and _HEADER.match(text, comp + 5, offset) and \
            "//" not in text[text.rfind("\n", 0, comp) + 1:comp]:
        return comp, _past_groups(text, comp)
    return None


# What may stand between `.comp`/`.init` and an error in its header: names and punctuation.
_HEADER = re.compile(r"(?:\s+[\w\s<>,:=]*)?\Z")


def _syntax_diagnostic(e: UnexpectedInput, text: str, path: str) -> Diagnostic:
    offset = _error_offset(e, text)
    if isinstance(e, UnexpectedCharacters):
        trouble = _source_trouble(text, offset, path, e.line, e.column)
        if trouble:
            return trouble
        return Diagnostic("syntax", f"unexpected character {e.char!r}", Span(path, e.line, e.column),
                          e.char, "this character has no meaning in a program")
    tok = getattr(e, "token", None) or Token("$END", "")  # lark's LALR reports the end as a $END token
    prev_line, prev_col = _previous_token_end(text, offset)
    if tok.type != "$END":
        trouble = _source_trouble(text, offset, path, tok.line, tok.column)
        if trouble:
            return trouble
    try:
        expected = set(e.interactive_parser.accepts())
    except Exception:  # older lark, or a state it cannot copy: the raw set is still right
        expected = set(e.expected)
    expected.discard("$END") if tok.type != "$END" else None
    before = text[:offset].rstrip()
    found, wanted = _found(tok), _expected(expected, before.endswith((":-", ",", ";", "{")))
    after_previous = Span(path, prev_line, prev_col + 1)
    header = _component_header(text, offset)
    if header is not None:  # `<`, `>`, `=` and `:` are punctuation here, not operators
        words = [w for t, w in _HEADER_WORDS.items() if t in expected]
        wanted = ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else (words or ["more"])[0]
        where = after_previous if tok.type == "$END" else Span(path, tok.line, tok.column, tok.end_line or 0,
                                                                tok.end_column or 0)
        word = text[header[0]:header[0] + 5]
        return Diagnostic("syntax", f"unexpected {found} in {word}; expected {wanted}", where, tok.value,
                          "write " + _HEADER_FORMS[word])
    if tok.type == "$END":
        hint = "every rule and fact ends with '.'" if "_DOT" in expected else \
            "the file ends before the statement is complete: check for a missing ')', '}' or '.'"
        return Diagnostic("syntax", f"the program ends in the middle of a statement; expected {wanted}",
                          after_previous, "", hint)
    if "_DOT" in expected and prev_line < tok.line and (tok.type == "NAME" or tok.type in _STATEMENT_START):
        # The classic: a statement without its final '.'; point where the '.' belongs.
        return Diagnostic("syntax", f"missing '.' at the end of the statement (the next line starts "
                          f"with {found})", after_previous, "", "every rule and fact ends with '.'")
    span = Span(path, tok.line, tok.column, tok.end_line or 0, tok.end_column or 0)
    hint = ""
    if (tok.type == "NAME" or tok.type in _NUMBERS) and before.endswith('"') and not text[offset - 1].isspace():
        hint = "a string seems to end early: is a closing '\"' missing, or a '\"' inside it not written \\\"?"
    elif tok.type == "_DOT" and before.endswith(":-"):
        hint = "a rule body needs at least one literal after ':-'"
    elif tok.type == "GT" and "STAR" in expected:
        hint = "write what to aggregate: min<C>, sum<X>, or count<*>"
    elif tok.type in ("LT", "GT") and re.search(r"[A-Za-z_]\w*<[^<>()]*$", before + tok.value if
                                                 tok.type == "LT" else before):
        word = re.search(r"([A-Za-z_]\w*)<[^<>()]*$", before + ("<" if tok.type == "LT" else "")).group(1)
        hint = f"'{word}' is not an aggregate; head aggregates are min, max, sum, avg, count, set, list " \
               "(optionally a_-prefixed, e.g. a_min<C>), written right after the name: min<C>"
    elif tok.type in _COMPARISONS and tok.type not in expected:
        hint = "comparisons do not chain: write X < Y, Y < Z"
    elif tok.type == "_RPAR" and "_RPAR" not in expected:
        hint = "an argument is missing" if expected & _TERM_START else "this ')' has no matching '('"
    elif "_RPAR" in expected and tok.type in ("_IF", "_DOT", "_SEMI", "_RBRACE", "_ASSIGN"):
        hint = "every '(' needs a matching ')'"
    elif tok.type == "_IF" and "_IF" not in expected:
        hint = "a rule has one ':-' between its head and its body"
    elif tok.type == "NAME" and "_IF" in expected:
        hint = "did you forget ':-' between the head and the body?"
    elif tok.type == "_ASSIGN":
        hint = "':=' assigns to a variable: write `X := expr` as a literal of a rule body"
    elif tok.type == "COLON" and text[offset:offset + 2] != "::" and "_IF" in expected:
        hint = "rules write ':-' between head and body"
    elif tok.type == "AT" and "_IF" in expected:
        hint = "a head has at most one time suffix: @next or @async"
    elif (tok.type in ("NAME", "STRING") or tok.type in _NUMBERS) and "_COMMA" in expected:
        hint = "separate arguments and literals with ','"
    elif tok.type == "_RBRACE" and "_RBRACE" not in expected:
        hint = "end the statement with '.' before the '}'" if _open_braces(text, offset) > 0 \
            and "_DOT" in expected else "this '}' has no matching '{'"
    elif tok.type == "SLASH" and text[offset:offset + 2] == "/*":
        hint = "close the comment with '*/'"
    return Diagnostic("syntax", f"unexpected {found}; expected {wanted}", span, tok.value, hint)


# ---------------------------------------------------------------- tree -> syntax objects

@dataclass
class _RawCall:
    """`name(args)` before we know whether it is an atom (body literal) or a function."""
    name: str
    args: tuple
    at: tuple  # ((index, span), ...) of `@` arguments
    span: Span


@dataclass
class _RawNot:
    """`!name(args)`: a negated atom at literal level, `UnOp("!")` inside a term."""
    call: _RawCall
    span: Span


@dataclass
class _Clause:
    words: list
    head: object  # _RawCall (head) or NamedAtom
    time: Optional[Token]
    body: Optional[list]
    span: Span


@dataclass
class _Group:
    """A disjunction: a list of alternatives, each a list of body items."""
    alternatives: list


@dataclass
class _RawComponent:
    name: str
    addresses: tuple
    statements: list
    span: Span


@dataclass
class _Time:
    token: Token  # the NAME after `@` in `head@next`


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


def _location(at: list, what: str, report) -> int | None:
    """The position of the `@` argument; a second `@` in one atom is reported."""
    for _, span in at[1:]:
        report("syntax", f"{what} has at most one location specifier '@'", span, "@",
               "mark only the argument that holds the tuple's location")
    return at[0][0] if at else None


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
        if isinstance(x, _RawCall):
            for _, span in x.at:
                self._error("syntax", "a location specifier '@' may only mark an argument of an atom",
                            span, "@", "remove the '@' from this function argument")
            return Call(x.name, x.args, x.span)
        if isinstance(x, _RawNot):
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
        return Const(_int_value(ch[0].value), INT, self._tspan(ch[0]))

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

    def qname(self, meta, ch):
        return "::".join(t.value for t in ch if t.type in ("NAME", "DOTTED"))

    def arg(self, meta, ch):
        at = ch[0] if isinstance(ch[0], Token) and ch[0].type == "AT" else None
        return (at, self._term(ch[-1]))

    head_arg = arg

    def call(self, meta, ch):
        name, args = ch[0], ch[1:]
        at = tuple((i, self._tspan(a[0])) for i, a in enumerate(args) if a[0] is not None)
        return _RawCall(name, tuple(a[1] for a in args), at, self._span(meta))

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
        if op == "!" and isinstance(arg, _RawCall):
            return _RawNot(arg, span)
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
        if isinstance(x, _RawCall):
            if x.name.startswith("f_"):  # an Overlog boolean built-in: a selection
                return Select(self._term(x), span)
            return self._atom(x)
        if isinstance(x, _RawNot):
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

    def _atom(self, call: _RawCall, what: str = "an atom") -> Atom:
        return Atom(call.name, call.args, _location(call.at, what, self._error), span=call.span)

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
        if isinstance(x, _RawCall):
            return [self._atom(x)]
        return [x]

    def _negate_source(self, x, span):
        atom = self._atom(x) if isinstance(x, _RawCall) else x
        return replace(atom, negated=True, span=span)

    def agg_count_term(self, meta, ch):  # Soufflé `count : { ... }` as a term
        return self._body_aggregate("count", None, ch[1], self._span(meta))

    def agg_term(self, meta, ch):  # `sum x : { ... }`, `max s : r(s)`
        fn, expr, _, body = ch
        return self._body_aggregate(_AGG_NAMES[fn.value], self._term(expr), body, self._span(meta))

    def _body_aggregate(self, func, expr, body, span):
        """A Soufflé aggregate term (`var` None); `V = AGG` at a literal's top level becomes
        the literal form (`var` V), see `_literal`."""
        body = _flatten(body)
        if any(isinstance(b, _Group) for b in body):
            self._error("syntax", "an aggregate body cannot hold a disjunction", span, "",
                        "write one aggregate per alternative")
            body = [b for b in body if not isinstance(b, _Group)]
        return BodyAggregate(None, func, expr, tuple(body), span)

    # -- bodies
    def conj(self, meta, ch):
        return list(ch)

    def group(self, meta, ch):
        return ch[0] if len(ch) == 1 else _Group(list(ch))

    def body(self, meta, ch):
        return ch[0] if len(ch) == 1 else [_Group(list(ch))]

    def neg_group(self, meta, ch):
        """`!(A ; B)` is `!A, !B`, and `!(a, b)` is `!a ; !b` (De Morgan, as Soufflé
        negates a parenthesized body): a conjunction of groups whose alternatives are
        negated literals, which the disjunction lowering expands like any other group."""
        return self._negated(ch[1], self._span(meta))

    def _negated(self, group, span) -> list:
        alternatives = group.alternatives if isinstance(group, _Group) else [group]
        out = []
        for alt in alternatives:
            items = _flatten(alt) if isinstance(alt, list) else [alt]
            options = [self._negated_item(it, span) for it in items]
            out.append(_Group(options) if len(options) > 1 else options[0])
        return out

    def _negated_item(self, item, span):
        if isinstance(item, (_Group, list)):
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
        return _Time(ch[1])

    def clause(self, meta, ch):
        words = [c for c in ch if isinstance(c, Token) and c.type == "NAME"]
        rest = [c for c in ch if not (isinstance(c, Token) and c.type == "NAME")]
        heads = [c for c in rest if isinstance(c, (_RawCall, NamedAtom))]
        time = next((c.token for c in rest[1:] if isinstance(c, _Time)), None)
        body = next((c for c in rest[1:] if isinstance(c, list)), None)
        # A one-literal group `(a)` in a body comes back as a bare list: flatten it.
        if body is not None:
            body = _flatten(body)
        if len(heads) > 1 and words:
            self._error("syntax", "a rule with several heads takes no label", self._tspan(words[0]),
                        words[0].value, "give each head its own labelled rule")
        # `a(x), b(x) :- c(x).` (Soufflé): one rule per head, each with the whole body
        clauses = [_Clause(words if i == 0 else [], head, time, body, self._span(meta))
                   for i, head in enumerate(heads)]
        return clauses[0] if len(clauses) == 1 else clauses

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
        qualifiers = tuple(t.value for t in ch if isinstance(t, Token) and t.type == "QUALIFIER")
        return [Declaration(n, columns, None, "decl", self._span(meta), qualifiers) for n in names]

    def type_subtype(self, meta, ch):
        return TypeDecl(ch[1].value, "subtype", (ch[3],), self._span(meta))

    def type_equal(self, meta, ch):
        bases = tuple(c for c in ch[3:] if not isinstance(c, Token))
        return TypeDecl(ch[1].value, "union" if len(bases) > 1 else "equivalence", bases, self._span(meta))

    def type_old(self, meta, ch):  # .number_type N / .symbol_type S
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
        statements = _flatten([c for c in ch[2:] if not isinstance(c, (tuple, Token))])
        return _RawComponent(name, addresses, statements, self._span(meta))

    # -- Soufflé components (expanded by components.py once the whole program is lowered)
    def comp_type(self, meta, ch):
        names = [t.value for t in ch if isinstance(t, Token) and t.type == "NAME"]
        return CompType(names[0], tuple(names[1:]), self._span(meta))

    def comp_decl(self, meta, ch):
        types = [c for c in ch if isinstance(c, CompType)]
        body = _flatten([c for c in ch[1:] if not isinstance(c, (CompType, Token))])
        return CompDecl(types[0], tuple(types[1:]), tuple(body), self._span(meta))

    def comp_init(self, meta, ch):
        return CompInit(ch[1].value, ch[3], self._span(meta), self._tspan(ch[1]))

    def comp_override(self, meta, ch):
        return Override(ch[1].value, self._tspan(ch[1]))

    def literal_only(self, meta, ch):
        return ch[0]


def _flatten(items: list) -> list:
    out = []
    for it in items:
        if isinstance(it, list):
            out.extend(_flatten(it))
        else:
            out.append(it)
    return out


def _name_of(x) -> str:
    return getattr(x, "name", None) or getattr(x, "relation", "?")


# ---------------------------------------------------------------- lowering

# Soufflé terms the lowering rejects: word -> (what it is, the hint).
_NOT_YET_TERMS = {
    "nil": ("nil (the empty record; records are not supported)",
            "declare the column with a primitive type and use a sentinel value such as 0 or \"\""),
}


def _is_autoinc(node, columns) -> bool:
    if isinstance(node, (Call, _RawCall)):
        name = node.func if isinstance(node, Call) else node.name
        return name == "autoinc" and name not in columns
    return False


def _raw_nodes(node):
    """Every node under a raw clause (atoms, terms, groups, aggregate bodies), depth first."""
    if isinstance(node, (str, int, float, bool, type(None), Span, Token)):
        return
    yield node
    if isinstance(node, (list, tuple)):
        children = node
    elif hasattr(node, "__dataclass_fields__"):
        children = [getattr(node, f) for f in node.__dataclass_fields__]
    else:
        return
    for child in children:
        yield from _raw_nodes(child)


# Python's messages for regular expressions that Java rejects as well.
_MALFORMED_IN_JAVA_TOO = ("missing )", "unbalanced parenthesis", "unterminated character set", "nothing to repeat",
                          "multiple repeat", "min repeat greater than max repeat")


# Soufflé's binary string constraints, written like atoms: name -> the hint for misuse.
_STRING_CONSTRAINTS = {"contains": "contains(sub, s): whether s contains the string sub",
                       "match": "match(regex, s): whether the whole of s matches regex"}


class _Lowering:
    def __init__(self, path: str, diagnostics: list):
        self.path = path
        self.diagnostics = list(diagnostics)
        self.columns: dict = {}  # relation -> column names, or None if declared without names
        self.component_columns: dict = {}  # the same, for the relations a `.comp` declares
        self.rule_count = 0
        self.label_prefix = ""  # for the labels of unlabelled rules (`rule7`): an included file's name
        self.aggregate_helpers: list = []  # (helper relation, its column names) for declare_helpers
        self.directives: set = set()  # (direction, relation) of the .input/.output written
        self.souffle = False  # a `.decl` anywhere: Soufflé's constraints `contains`/`match` are words

    def error(self, code, message, span, text="", hint=""):
        self.diagnostics.append(Diagnostic(code, message, span, text, hint))

    # -- driver
    def run(self, items) -> list:
        items = _flatten(list(items))  # `.decl A, B(...)` is one Declaration per relation
        self._collect_declarations(items)
        out: list = []
        for item in items:
            self._statement(item, None, out)
        return out

    def _collect_declarations(self, items):
        for item in items:
            if isinstance(item, _RawComponent):
                self._collect_declarations(item.statements)
            elif isinstance(item, CompDecl):
                self._collect_declarations(item.body)
                # `g.edge{x: 1}` outside the component: the columns of its `edge` (None
                # when components declare an `edge` with other columns)
                for d in item.body:
                    if isinstance(d, Declaration) and d.style == "decl":
                        names = [c.name for c in d.columns]
                        known = self.component_columns.setdefault(d.relation, names)
                        if known != names:
                            self.component_columns[d.relation] = _AMBIGUOUS
            elif isinstance(item, Declaration):
                self.souffle = self.souffle or item.style == "decl"
                names = [c.name for c in item.columns] if item.style == "decl" else None
                self.columns.setdefault(item.relation, names)
            elif isinstance(item, Materialize):
                self.columns.setdefault(item.relation, None)
            elif isinstance(item, IODirective):
                self.directives.add((item.direction, item.relation))

    def _statement(self, item, component, out):
        if isinstance(item, _RawComponent):
            if component is not None:
                self.error("syntax", f"component {item.name} is inside component {component}",
                           item.span, item.name, "components do not nest")
            out.append(Component(item.name, item.addresses, item.span))
            for s in item.statements:
                self._statement(s, item.name, out)
        elif isinstance(item, CompDecl):
            body: list = []
            for s in item.body:
                self._statement(s, component, body)
            if self.souffle:  # helper relations of its aggregates belong to each instance
                body = self.declare_helpers(body)
            out.append(replace(item, body=tuple(body)))
        elif isinstance(item, _Clause):
            if not self._has_unsupported_term(item) and not self._misplaced_autoinc(item, component):
                self._clause(item, component, out)
        elif isinstance(item, Declaration) and item.qualifiers:
            self._qualified(item, out)
        else:
            out.append(item)

    def _has_unsupported_term(self, c: _Clause) -> bool:
        """Report the first Soufflé term not supported yet in `c` (`nil`,
        `autoinc()`), once: the clause is then dropped, so no follow-up errors."""
        if not self.souffle:
            return False
        node = next((n for n in _raw_nodes(c) if self._unsupported_term(n)), None)
        if node is None:
            return False
        word = node.func if isinstance(node, Call) else node.name
        what, hint = _NOT_YET_TERMS[word]
        self.error("syntax", f"{what} is not supported yet", node.span, word, hint)
        return True

    def _misplaced_autoinc(self, c: _Clause, component) -> bool:
        """Report `autoinc()` anywhere but as an argument of a rule's or a fact's head,
        outside Dedalus components (docs/language.md, "autoinc()"), once; the clause is
        then dropped."""
        if not self.souffle:
            return False
        calls = [n for n in _raw_nodes(c) if _is_autoinc(n, self.columns)]
        if not calls:
            return False
        allowed = set()
        if isinstance(c.head, _RawCall) and (c.body is not None or not c.words):  # a rule or a fact
            allowed = {id(a) for a in c.head.args}
        for call in calls:
            if call.args:
                why, hint = "autoinc() takes no arguments", "write autoinc()"
            elif component is not None:  # a Dedalus component: its rules run at every timestep
                why, hint = ("autoinc() in a Dedalus component is not supported",
                             "number the relation in a rule outside the component")
            elif id(call) not in allowed:
                why, hint = ("autoinc() is supported only as an argument of a rule's head",
                             "write r(x, autoinc()) :- ..., not n = autoinc() or autoinc() + 1")
            else:
                continue
            self.error("syntax", why, call.span, "autoinc", hint)
            return True
        return False

    def _is_range_call(self, node) -> bool:
        if isinstance(node, (Call, _RawCall)):
            name = node.func if isinstance(node, Call) else node.name
            return name == ranges.NAME and name not in self.columns
        return False

    def _unsupported_term(self, node) -> bool:
        if isinstance(node, Var):
            return node.name == "nil"
        return False

    # -- qualifiers
    def _qualified(self, d: Declaration, out):
        """`input`/`output` become directives (their old spelling); `eqrel` becomes the
        rules of an equivalence relation; the rest are hints that stay on the declaration."""
        kept = tuple(q for q in d.qualifiers if q not in _LOWERED_QUALIFIERS)
        out.append(replace(d, qualifiers=kept))
        for direction in ("input", "output"):
            if direction in d.qualifiers and (direction, d.relation) not in self.directives:
                out.append(IODirective(direction, d.relation, (), d.span))
        if "eqrel" in d.qualifiers:
            if len(d.columns) != 2:
                self.error("eqrel", f"eqrel relation {d.relation} has {len(d.columns)} column{'' if len(d.columns) == 1 else 's'}", d.span,
                           d.relation, "an equivalence relation is binary: .decl R(a: T, b: T) eqrel")
            else:
                out.extend(_equivalence_rules(d))

    # -- clauses
    def _clause(self, c: _Clause, component, out):
        words = [w.value for w in c.words]
        if c.body is None and words != ["query"] and isinstance(c.head, _RawCall) \
                and any(_aggregate_terms(a) for a in c.head.args):
            c = replace(c, body=[])  # `total(sum x : v(x)).`: a rule; its aggregates make its body
        elif c.body is None and words != ["query"] and isinstance(c.head, _RawCall) \
                and any(self._is_range_call(n) for n in _raw_nodes(c.head.args)):
            c = replace(c, body=[])  # `n(range(0, 3)).`: a rule whose range makes its body
        elif c.body is None and not words and self.souffle and isinstance(c.head, _RawCall) \
                and any(_is_autoinc(a, self.columns) for a in c.head.args):
            c = replace(c, body=[])  # `r(1, autoinc()).`: a rule with one binding (`_autoinc`)
        if c.body is None:
            if words == ["query"]:
                out.append(Query(self._head(c, "a query"), c.span))
            else:
                if words:
                    self.error("syntax", f"a fact cannot be preceded by '{' '.join(words)}'", c.span,
                               " ".join(words), "add ':-' and a body to make a rule, or write `query ATOM.`")
                if c.time is not None:
                    self.error("syntax", f"a fact cannot have a time suffix @{c.time.value}",
                               _tok_span(self.path, c.time), c.time.value,
                               "write a rule with a body to derive facts @next")
                atom = self._folded(self._head(c, "a fact"))
                self._check_ground(atom)
                out.append(Fact(atom, component, c.span))
            return
        self.rule_count += 1
        label, delete = self._label(c.words)
        time = None
        if c.time is not None:
            if c.time.value in ("next", "async"):
                time = c.time.value
            else:
                self.error("syntax", f"unknown time suffix @{c.time.value}", _tok_span(self.path, c.time),
                           c.time.value, "a head may end with @next or @async")
        head = self._head(c, "a rule head")
        alternatives = _expand(c.body)
        for k, body in enumerate(alternatives):
            name = label if k == 0 else f"{label}_or{k + 1}"
            rule = Rule(name, head, tuple(body), delete, time, component, c.span)
            self._rule(rule, out)

    def _label(self, words):
        values = [w.value for w in words]
        label, delete = None, False
        if values and values[-1] == "delete":
            delete = True
            values = values[:-1]
        if len(values) > 1:
            extra = words[1]
            self.error("syntax", f"unexpected word '{extra.value}' before the rule head",
                       _tok_span(self.path, extra), extra.value,
                       "a rule may start with a label and 'delete', then its head atom")
        if values:
            label = values[0]
        return label or f"{self.label_prefix}rule{self.rule_count}", delete

    def _head(self, c: _Clause, what: str) -> Atom:
        head = c.head
        if isinstance(head, NamedAtom):
            return self.resolve_atom(head)
        location = _location(head.at, what, self.error)
        if what != "a rule head":
            for a in head.args:
                if isinstance(a, Aggregate):
                    self.error("syntax", f"aggregates belong in rule heads, not in {what}", a.span,
                               "", "write a rule whose head computes the aggregate")
        args = tuple(_eq_to_eqeq(a) for a in head.args)
        return Atom(head.name, args, location, span=head.span)

    def _folded(self, atom: Atom) -> Atom:
        """A fact's constant expressions (`rel(2^32-5).`) evaluated, as Soufflé does."""
        args = []
        for a in atom.args:
            try:
                value = fold(a)
            except FoldError as e:
                self.error("constant-expression", f"fact {atom.relation}: {e}", a.span, "",
                           "write a value a 64-bit number holds, without dividing by zero")
                value = Const(None, NULL, a.span)  # reported: the fact goes no further
            args.append(value if value is not None else a)
        return replace(atom, args=tuple(args))

    def _check_ground(self, atom: Atom):
        if atom.named and any(isinstance(a, Wildcard) for a in atom.args):
            self.error("non-ground-fact", f"fact {atom.relation} leaves fields without a value",
                       atom.span, atom.relation, "a fact names every field with a constant")
            return
        for a in atom.args:
            ticks = _tick_calls(a)
            if ticks:  # a fact holds at every timestep: reported as Dedalus time, at the tick()
                for call in ticks:
                    self.diagnostics.append(tick_in_fact(call, atom.relation))
                continue
            if not isinstance(a, Const):
                what = "the variable " + a.name if isinstance(a, Var) else \
                    "the wildcard _" if isinstance(a, Wildcard) else "an expression"
                self.error("non-ground-fact", f"fact {atom.relation} holds {what}; facts hold constants only",
                           a.span, getattr(a, "name", ""),
                           "write constants (\"text\", 42, true), or make it a rule with ':-' and a body")

    # -- rules
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
        order (`_autoinc_numbered`, after components are expanded): numbers are unique
        across the program and do not depend on Spark's evaluation order."""
        span = next(a.span for a in rule.head.args if isinstance(a, Call) and a.func == "autoinc")
        terms = [a for a in rule.head.args if not (isinstance(a, Call) and a.func == "autoinc")]
        body, scanned = _wildcards_named(tuple(self.resolve_literal(b) for b in rule.body), rule.head.relation)
        if not body:  # a fact `r(1, autoinc()).`: one binding, from a unit fact
            out.append(Fact(Atom(f"{rule.name}_autoinc_unit", (Const(0, INT, span),), span=span), rule.component,
                            span))
            self._helper_relation(f"{rule.name}_autoinc_unit", ["unit"])
            body = (Atom(f"{rule.name}_autoinc_unit", (Wildcard(span),), span=span),)
        head_vars = set(_outer_vars(rule.head))
        # every variable, `_y` too (a name, in Soufflé as here), but the wildcards named above
        extra = sorted(v for v in _bound_by(list(body)) if v not in head_vars and not v.startswith("_autoinc_w"))
        name = f"{rule.name}_autoinc"
        cols = terms + [Var(v, span) for v in extra] + scanned
        n = len(cols)
        self._rule(Rule(name, Atom(name, tuple(cols) + (Aggregate("autoinc", None, span),), span=span), body,
                        False, None, rule.component, span), out)
        self._helper_relation(name, [f"c{j}" for j in range(n)] + ["number"])
        mine = [Var(f"_ai{j}", span) for j in range(n)]
        counted = Var("_autoinc_k", span)
        # K and i are set once the whole program is known (`_autoinc_numbered`); `as`
        # tells the checks the result is a number
        value = Call("as", (BinOp("+", BinOp("*", counted, Const(1, INT, span), span), Const(0, INT, span), span),
                            Const("number", STRING, span)), span)
        result = Var("_autoinc", span)
        it = iter(mine)
        args = tuple(result if isinstance(a, Call) and a.func == "autoinc" else next(it) for a in rule.head.args)
        body = (Atom(name, tuple(mine) + (counted,), span=span), Assign(result, value, span))
        return replace(rule, head=replace(rule.head, args=args), body=body)

    def _rule(self, rule: Rule, out):
        """Aggregates (Soufflé's, anywhere in the head or the body) become helper rules
        that come right before the rule; then `=` becomes `:=` or `==`."""
        if self.souffle and any(isinstance(a, Call) and a.func == "autoinc" and a.func not in self.columns
                                for a in rule.head.args):
            rule = self._autoinc(rule, out)
        body = [self.resolve_literal(b) for b in rule.body]
        # An aggregate groups by the variables the rest of the BODY shares with it. One
        # the head uses but only the aggregate binds is Soufflé's witness: for min and
        # max, a value of a tuple reaching the result (`_witnesses`); not a group.
        outside: set = set()
        for lit in body:
            outside.update(_outer_vars(lit))
        head_only = set(_outer_vars(rule.head)) - outside
        helpers: list = []
        lowered: list = []
        count = 0
        for i, lit in enumerate(body):
            if isinstance(lit, BodyAggregate) and lit.var is not None:  # `n = count : { ... }`
                count += 1
                lowered.append(self._aggregate_helper(rule, body, i, lit, lit.var, count, outside, helpers))
                continue
            results: dict = {}  # id(aggregate term) -> the variable holding its value
            for agg in _aggregate_terms(lit):
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
        for agg in _aggregate_terms(head):  # `r(x, count : { ... }) :- ...`
            count += 1
            results[id(agg)] = Var(f"_agg{count}", agg.span)
            lowered.append(self._aggregate_helper(rule, body, None, agg, results[id(agg)], count, outside,
                                                  helpers))
            lowered += self._witnesses(agg, results[id(agg)], head_only, outside, count)
        if results:
            head = _with_aggregates_replaced(head, results)
        out.extend(helpers)
        self._rule_equalities(replace(rule, head=head, body=tuple(lowered)), out)

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
        if any(not isinstance(b, (Atom, Select)) or _aggregate_terms(b) for b in agg.body):
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

    def _rule_equalities(self, rule: Rule, out):
        rule = casts.normalized(replace(rule, body=tuple(_lower_equalities(list(rule.body)))), self.diagnostics.append)
        out.append(ranges.hoisted(rule))

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
        result_only = {agg.var.name} - _bound_by([b for b in body if isinstance(b, Atom)]) if agg.var else set()
        grouping = tuple(Var(v, span) for v in _deep_vars(agg) if v in outside and v not in result_only)
        with_default = agg.func in ("count", "sum")
        positive = any(isinstance(b, Atom) and not b.negated for b in agg.body)
        inner_alone = positive and {g.name for g in grouping} <= _bound_by(agg.body)
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

    # -- named fields
    def resolve_literal(self, lit):
        if isinstance(lit, NamedAtom):
            return self.resolve_atom(lit)
        if isinstance(lit, BodyAggregate):
            return replace(lit, body=tuple(self.resolve_literal(b) for b in lit.body))
        if isinstance(lit, Atom) and self._is_string_constraint(lit):
            return self._string_constraint(lit)
        return lit

    def _is_string_constraint(self, atom: Atom) -> bool:
        # In Soufflé `contains` and `match` are keywords, never relations; a program that
        # declares a relation of that name keeps it (Overlog spells its built-ins f_...).
        return self.souffle and atom.relation in _STRING_CONSTRAINTS and atom.relation not in self.columns

    def _string_constraint(self, atom: Atom) -> Select:
        """`contains(sub, s)` / `match(regex, s)` as a body literal: a condition."""
        if len(atom.args) != 2:
            self.error("function-arity", f"{atom.relation} takes 2 arguments, not {len(atom.args)}", atom.span,
                       atom.relation, _STRING_CONSTRAINTS[atom.relation])
        pattern = atom.args[0] if atom.args else None
        if atom.relation == "match" and isinstance(pattern, Const) and pattern.type == STRING:
            self._check_regex(pattern)
        call = Call(atom.relation, tuple(_eq_to_eqeq(a) for a in atom.args), atom.span)
        return Select(UnOp("!", call, atom.span) if atom.negated else call, atom.span)

    def _check_regex(self, pattern: Const):
        # Python's `re` stands in for Java's regex parser, but only for the mistakes both
        # reject (unbalanced groups and sets, dangling quantifiers): Java also accepts
        # escapes and groups Python does not (`\p{L}`, `\z`, `(?<name>...)`).
        try:
            re.compile(pattern.value)
        except re.error as e:
            if not e.msg.startswith(_MALFORMED_IN_JAVA_TOO):
                return
            self.error("bad-regex", f"match: {pattern.value!r} is not a regular expression ({e.msg})",
                       pattern.span, f'"{pattern.value}"', "escape a special character with a backslash, "
                       "or balance the brackets")

    def resolve_atom(self, atom: NamedAtom) -> Atom:
        columns = self._columns_of(atom)
        if columns is None:
            return Atom(atom.relation, (), negated=atom.negated, delta=atom.delta, named=True, span=atom.span)
        args: list = [None] * len(columns)
        for name, term, span in atom.fields:
            if name not in columns:
                self.error("unknown-field", f"{atom.relation} has no field '{name}'", span, name,
                           f"its fields are: {', '.join(columns)}")
                continue
            i = columns.index(name)
            if args[i] is not None:
                self.error("syntax", f"field '{name}' of {atom.relation} is named twice", span, name,
                           "name each field at most once")
            args[i] = _eq_to_eqeq(term)
        args = [a if a is not None else Wildcard(atom.span) for a in args]
        return Atom(atom.relation, tuple(args), None, atom.negated, atom.delta, True, atom.span)

    def _columns_of(self, atom: NamedAtom):
        rel = atom.relation
        instance_of = rel.rsplit(".", 1)[-1] if "." in rel else None  # g.edge: edge of a component
        if rel in self.columns or instance_of in self.component_columns:
            names = self.columns[rel] if rel in self.columns else self.component_columns[instance_of]
            if names is _AMBIGUOUS:
                self.error("unknown-field", f"the fields of {rel} cannot be named: components declare "
                           f"{instance_of} with different columns", atom.span, rel, "use positional arguments")
                return None
            if names is None:
                self.error("unknown-field", f"{rel} is declared without column names, so its fields "
                           "cannot be named", atom.span, rel,
                           "use positional arguments, or declare it with .decl and named columns")
            return names
        if rel.startswith("sys::"):
            from ..catalog.schema import table  # the catalog declares the sys:: relations
            try:
                return table(rel).column_names
            except KeyError:
                from .stage import unknown_table

                d = unknown_table(rel, atom.span)
                self.error(d.code, d.message, atom.span, rel, d.hint)
                return None
        self.error("undeclared-relation", f"{rel} is not declared, so its fields cannot be named",
                   atom.span, rel, "declare it with .decl NAME(col: type, ...) or use positional arguments")
        return None


_LOWERED_QUALIFIERS = ("eqrel", "input", "output")
_AMBIGUOUS = ["<ambiguous>"]  # the columns of a component relation declared differently by two components


def _equivalence_rules(d: Declaration) -> list:
    """Soufflé's `eqrel`: the reflexive, symmetric, transitive closure of what the
    program derives, as three ordinary rules (so every backend runs it):
        R(x, x) :- R(x, _).    R(y, x) :- R(x, y).    R(x, z) :- R(x, y), R(y, z).
    Labelled after the relation; they point at its .decl."""
    x, y, z = (Var(n, d.span) for n in ("x", "y", "z"))
    label = "eqrel_" + d.relation.replace("::", "_")

    def atom(*args):
        return Atom(d.relation, args, span=d.span)
    return [Rule(f"{label}_reflexive", atom(x, x), (atom(x, Wildcard(d.span)),), span=d.span),
            Rule(f"{label}_symmetric", atom(y, x), (atom(x, y),), span=d.span),
            Rule(f"{label}_transitive", atom(x, z), (atom(x, y), atom(y, z)), span=d.span)]


def _tok_span(path: str, tok: Token) -> Span:
    return Span(path, tok.line, tok.column, tok.end_line, tok.end_column)


def _unique(names: list) -> list:
    out: list = []
    for n in names:
        m, i = n, 2
        while m in out:
            m, i = f"{n}{i}", i + 1
        out.append(m)
    return out


# -- disjunction

def _expand(items: list) -> list:
    """All conjunctions a body with `_Group`s denotes, in source order of the alternatives."""
    results: list = [[]]
    for it in items:
        if isinstance(it, _Group):
            options: list = []
            for alt in it.alternatives:
                options.extend(_expand(_flatten(alt) if isinstance(alt, list) else [alt]))
            results = [r + o for r in results for o in options]
        else:
            results = [r + [it] for r in results]
    return results


# -- Soufflé aggregates

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


def _outer_vars(node) -> list:
    """Variables of a literal or term outside any aggregate body (an aggregate literal
    contributes its result variable)."""
    if isinstance(node, Var):
        return [node.name]
    if isinstance(node, BodyAggregate):
        return [node.var.name] if node.var is not None else []
    out: list = []
    for child in _children_of(node):
        out += [v for v in _outer_vars(child) if v not in out]
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


def _aggregate_terms(node) -> list:
    """The outermost aggregate terms inside a literal or term, in source order."""
    if isinstance(node, BodyAggregate):
        return [node]
    return [a for child in _children_of(node) for a in _aggregate_terms(child)]


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


def _autoinc_numbered(statements: list) -> list:
    """Each rule reading autoinc() numbers (`_Lowering._autoinc`: `_autoinc := as(_autoinc_k
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
    tuple of every scanned atom (bootstrap/parser.py, `_autoinc`). An atom of
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


def _bound_by(body) -> set:
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
            if eq and eq[0] not in bound and set(_outer_vars(eq[1])) <= bound:
                bound.add(eq[0])
                changed = True
    return bound


def _domain_literals(body: list, at) -> list:
    """The literals of a rule's body that bind the outer variables an aggregate sees: all
    but the aggregates and what depends on their results (`n > 3` after `n = count : ..`)."""
    # an aggregate's result taints what uses it, unless an atom binds the variable as well
    tainted = {lit.var.name for lit in body if isinstance(lit, BodyAggregate) and lit.var is not None} \
        - _bound_by([lit for lit in body if isinstance(lit, Atom)])
    kept: list = []
    candidates = [lit for i, lit in enumerate(body) if i != at and not isinstance(lit, BodyAggregate)
                  and not _aggregate_terms(lit)]
    changed = True
    while changed:  # taint spreads through `x = n + 1`
        changed = False
        for lit in candidates:
            eq = _equated(lit)
            if eq and eq[0] not in tainted and set(_outer_vars(eq[1])) & tainted:
                tainted.add(eq[0])
                changed = True
    for lit in candidates:
        if not set(_outer_vars(lit)) & tainted:
            kept.append(lit)
    return kept


# -- Soufflé `=`

def _eq_to_eqeq(term):
    """Every `=` left inside a term is Soufflé's spelling of the comparison `==`."""
    if isinstance(term, BinOp):
        op = "==" if term.op == "=" else term.op
        return BinOp(op, _eq_to_eqeq(term.left), _eq_to_eqeq(term.right), term.span)
    if isinstance(term, UnOp):
        return UnOp(term.op, _eq_to_eqeq(term.arg), term.span)
    if isinstance(term, Call):
        return Call(term.func, tuple(_eq_to_eqeq(a) for a in term.args), term.span)
    if isinstance(term, Cond):
        return Cond(_eq_to_eqeq(term.test), _eq_to_eqeq(term.then), _eq_to_eqeq(term.other), term.span)
    if isinstance(term, ListExpr):
        return ListExpr(tuple(_eq_to_eqeq(a) for a in term.items), term.span)
    if isinstance(term, Aggregate) and term.arg is not None:
        return Aggregate(term.func, _eq_to_eqeq(term.arg), term.span)
    return term


def _lower_equalities(body: list) -> list:
    bound: set = set()
    for lit in body:
        if isinstance(lit, Atom) and not lit.negated:
            bound.update(atom_vars(lit))
    out = []
    for lit in body:
        if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op == "=":
            left, right = lit.expr.left, lit.expr.right
            if isinstance(left, Var) and left.name not in bound:
                lit = Assign(left, _eq_to_eqeq(right), lit.span)
            elif isinstance(right, Var) and right.name not in bound:
                lit = Assign(right, _eq_to_eqeq(left), lit.span)
        if isinstance(lit, Assign):
            bound.add(lit.var.name)
            lit = Assign(lit.var, _eq_to_eqeq(lit.expr), lit.span)
        elif isinstance(lit, Select):
            lit = Select(_eq_to_eqeq(lit.expr), lit.span)
        elif isinstance(lit, Atom):
            lit = replace(lit, args=tuple(_eq_to_eqeq(a) for a in lit.args))
        out.append(lit)
    return out


def _tick_calls(term) -> list:
    """The tick() calls in a term (`dedalus_checks.py`)."""
    return _term_calls([term], "tick")
