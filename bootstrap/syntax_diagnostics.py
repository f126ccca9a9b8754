"""Syntax errors in the user's terms: what lark reports, as `Diagnostic`s.

The parser (`parser._parse_tree`) parses, and on an error asks this module for the
diagnostic (`syntax_diagnostic`: what was found, what would have been accepted, and a
hint for the common mistakes) and for the region to blank before parsing again
(`recovery_region`), so that one run reports every independent mistake.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.bootstrap.diagnostics import EvitaError
>>> try:
...     parse_program('p(x) :- q(x)\\nr(1).', "t.olg")
... except EvitaError as e:
...     d = e.diagnostics[0]
>>> d.span.line, d.span.col, d.message
(1, 13, "missing '.' at the end of the statement (the next line starts with name 'r')")
"""
from __future__ import annotations

import re
from typing import Optional

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

from .diagnostics import Diagnostic, plural
from .syntax import Span

__all__ = ["MAX_SYNTAX_ERRORS", "error_offset", "recovery_region", "stopped_note", "syntax_diagnostic"]

MAX_SYNTAX_ERRORS = 20


def recovery_region(text: str, offset: int):
    """(start, end) of the text to blank after the error at `offset` before parsing
    again (a construct not supported yet, a component header, else the statement), or
    None when blanking cannot help."""
    return _unsupported_region(text, offset) or _component_header(text, offset) or _statement_region(text, offset)


def _unsupported_region(text: str, offset: int):
    """(start, end) of a construct reported as not supported yet (`.functor` and other
    directives, a record type), so that its brackets do not cause a cascade of
    errors; else None."""
    rest = text[offset:]
    if rest.startswith(".functor"):
        return offset, offset + len(rest.split("\n", 1)[0])
    if rest[:1] == "[" and re.search(r"\.type[ \t]+\w+[ \t]*=[ \t]*(\w+[ \t]*)?$", text[:offset].rsplit("\n", 1)[-1]):
        return text.rfind(".type", 0, offset), _past_groups(text, offset)
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


def stopped_note(text: str, path: str, offset: int) -> Diagnostic:
    """Says that checking stopped at the cap, so that a file of noise does not look
    like a file with exactly 20 mistakes."""
    line = text.count("\n", 0, offset) + 1
    rest = text.count("\n", offset) + (0 if text.endswith("\n") else 1)
    return Diagnostic("error-limit", f"stopped after {MAX_SYNTAX_ERRORS} errors; {plural(rest, 'more line')} not checked",
                      Span(path, line, 1), "", "fix the errors above and run again", severity="note")


def error_offset(e: UnexpectedInput, text: str) -> int:
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
    if rest.startswith("[") and re.search(r"\.type[ \t]+\w+[ \t]*=[ \t]*(\w+[ \t]*)?$",
                                         text[:offset].rsplit("\n", 1)[-1]):
        what = "record types"
        return Diagnostic("syntax", f"{what} are not supported yet", span, rest[0],
                          "declare the columns with primitive types or .type NAME <: number/symbol")
    if rest.startswith("<=") and re.search(r"(?:^|[.}])\s*(?:\w+\s+)?[\w.:]+\s*\([^.]*\)\s*$", text[:offset]):
        return Diagnostic("syntax", "subsumption (a <= rule) is not supported yet", Span(path, line, col, line, col + 2),
                          "<=", "keep the dominated tuples, or choose the best per group with a min/max aggregate")
    if rest.startswith(":") and rest[1:2] in _QUOTES:
        return Diagnostic("syntax", f"unexpected character {rest[1]!r}", Span(path, line, col + 1), rest[1],
                          _QUOTES[rest[1]])
    return None


_DIRECTIVES = (".decl", ".input", ".output", ".printsize", ".limitsize", ".type", ".number_type", ".symbol_type", ".plan",
               ".comp", ".init", ".override")
# Soufflé directives Evita knows of but does not run yet.
_NOT_YET = {".functor": "user-defined functors"}

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


def syntax_diagnostic(e: UnexpectedInput, text: str, path: str) -> Diagnostic:
    offset = error_offset(e, text)
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
