"""The C preprocessor subset Soufflé programs use (Soufflé runs `mcpp` over a program).

    #include "FILE"          (or <FILE>; read by parser.py, relative to the including file)
    #define NAME text        object-like: NAME, as a whole token outside strings and comments
    #define F(a, b) text     function-like: F(x, y) with a and b replaced in text
    #undef NAME
    #ifdef NAME  #ifndef NAME  #if EXPR  #elif EXPR  #else  #endif
    #error message

The line count never changes: a directive line, a line of a group left out and a
`\\`-continued line become empty lines, so every position the parser reports is the
line of the original file (a column after an expanded macro counts the expanded text).
`#if` takes C's integer expressions (bootstrap/if_expr.py, a parser, never Python's
`eval`): numbers, `defined(NAME)`, macros, `! ~ - * / % + - << >> < <= > >= == != & ^ |
&& || ?:` and parentheses; a name no macro defines is 0, as in C.

>>> pre = preprocess('#define N 3\\n#ifdef N\\nr(N). s("N").\\n#else\\nr(0).\\n#endif\\n', "p.dl")
>>> pre.text.splitlines()
['', '', 'r(3). s("N").', '', '', '']
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .diagnostics import Diagnostic, EvitaError
from .syntax import Span

DIRECTIVES = ("include", "define", "undef", "ifdef", "ifndef", "if", "elif", "else", "endif", "error")


@dataclass(frozen=True)
class Macro:
    name: str
    params: Optional[tuple]  # None: object-like
    body: str


@dataclass(frozen=True)
class Include:
    line: int
    col: int
    name: str
    macros: dict  # the macros defined where the #include stands: the included file sees them


@dataclass
class Preprocessed:
    text: str
    includes: list = field(default_factory=list)
    macros: dict = field(default_factory=dict)  # as the file leaves them (for the includer)


@dataclass
class _Group:
    """One #if/#ifdef ... #endif: whether its current branch is kept, whether a branch
    was kept already, whether the enclosing text is kept."""
    active: bool
    taken: bool
    outer: bool
    span: Span
    word: str
    seen_else: bool = False


_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*([A-Za-z_]\w*)?(.*)")
_NAME = re.compile(r"[A-Za-z_]\w*")
# strings, comments, names; anything else one character at a time
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*|[A-Za-z_]\w*|[^"/A-Za-z_]+|/')


def preprocess(text: str, path: str, macros: Optional[dict] = None, *, including: tuple = ()) -> Preprocessed:
    """The text with every directive applied (same line count), the #include lines found
    in kept groups, and the macros at the end. Raises EvitaError at a bad directive."""
    if "#" not in text:  # the common case costs nothing
        return Preprocessed(text, [], dict(macros or {}))
    return _Preprocessor(text, path, dict(macros or {}), including).run()


class _Preprocessor:
    def __init__(self, text: str, path: str, macros: dict, including: tuple):
        self.text, self.path, self.macros, self.including = text, path, macros, including
        self.groups: list = []
        self.includes: list = []
        self.diagnostics: list = []
        self.in_comment = False

    def kept(self) -> bool:
        return not self.groups or self.groups[-1].active

    def error(self, message: str, line: int, col: int, text: str, hint: str):
        self.diagnostics.append(Diagnostic("preprocessor", message, Span(self.path, line, col, line,
                                                                          col + max(len(text), 1)), text, hint))

    def run(self) -> Preprocessed:
        lines = self.text.split("\n")
        out: list = []
        i = 0
        while i < len(lines):
            line = lines[i]
            directive = None if self.in_comment else _DIRECTIVE.fullmatch(line)
            if directive:
                first = i  # a directive may go on over lines ending in `\`
                while line.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line[:-1] + " " + lines[i]
                self.directive(line, first + 1)
                out.extend([""] * (i - first + 1))
            elif self.kept():
                out.append(self.expand_line(line, i + 1))
            else:
                self.skip_line(line)
                out.append("")
            i += 1
        for g in self.groups:
            self.error(f"#{g.word} without #endif", g.span.line, g.span.col, "#" + g.word,
                       "close every #if, #ifdef and #ifndef with #endif")
        if self.diagnostics:
            raise EvitaError(self.diagnostics, source=self.text)
        return Preprocessed("\n".join(out), self.includes, self.macros)

    # ------------------------------------------------------------ directives

    def directive(self, line: str, number: int):
        m = _DIRECTIVE.fullmatch(line)
        word, rest = m.group(1) or "", _strip_comment(m.group(2))
        col = line.index("#") + 1
        span = Span(self.path, number, col, number, col + 1 + len(word))
        if word in ("if", "ifdef", "ifndef"):
            outer = self.kept()
            active = outer and self.condition(word, rest, number, col)
            self.groups.append(_Group(active, active, outer, span, word))
        elif word in ("elif", "else", "endif"):
            self.branch(word, rest, number, col)
        elif not self.kept() or not word:
            return  # a left-out group's directives, and the null directive `#`, do nothing
        elif word == "define":
            self.define(rest, number, col)
        elif word == "undef":
            name = rest.strip()
            if not _NAME.fullmatch(name):
                self.error(f"#undef needs a macro name, got {name!r}", number, col, line.strip(), "write #undef NAME")
            self.macros.pop(name, None)
        elif word == "include":
            self.include(rest, number, col, line)
        elif word == "error":
            self.error(f"#error {rest.strip()}", number, col, line.strip(), "the program stops itself here")
        else:
            self.error(f"unknown preprocessor directive #{word}", number, col, "#" + word,
                       "supported: " + ", ".join("#" + d for d in DIRECTIVES))

    def branch(self, word: str, rest: str, number: int, col: int):
        if not self.groups:
            self.error(f"#{word} without #if", number, col, "#" + word,
                       "#elif, #else and #endif close a group opened by #if, #ifdef or #ifndef")
            return
        g = self.groups[-1]
        if word == "endif":
            self.groups.pop()
        elif g.seen_else:
            self.error(f"#{word} after #else", number, col, "#" + word, "#else is the last branch of a group")
        elif word == "else":
            g.seen_else, g.active = True, g.outer and not g.taken
            g.taken = g.taken or g.active
        else:
            g.active = g.outer and not g.taken and self.condition("if", rest, number, col)
            g.taken = g.taken or g.active

    def condition(self, word: str, rest: str, number: int, col: int) -> bool:
        if word in ("ifdef", "ifndef"):
            name = rest.strip()
            if not _NAME.fullmatch(name):
                self.error(f"#{word} needs a macro name, got {name!r}", number, col, "#" + word,
                           f"write #{word} NAME")
                return False
            return (name in self.macros) == (word == "ifdef")
        from .if_expr import BadExpression, evaluate

        written = rest.strip()
        expanded = self.expand(_defined(rest, self.macros), number, col)
        try:
            return evaluate(_strip_comment(expanded)) != 0
        except BadExpression as e:
            line = self.text.split("\n")[number - 1]
            start = line.find(written, col) if written else -1
            if start < 0:  # not found as written (a continued line): the directive itself
                start, token = col - 1, "#" + word
            elif expanded.strip() == written:  # no macro changed it: the offset is in the line
                start, token = start - (len(rest) - len(rest.lstrip())) + e.offset, e.token
            else:  # macros changed it: the expression as written, and what it became
                token = written
            shown = f"#{word} {written}" + (f" (after macros: {expanded.strip()})" if expanded.strip() != written
                                             else "")
            self.error(f"{shown}: {e}", number, start + 1, token,
                       "#if takes C's integer expressions: numbers, defined(NAME), ! ~ - * / % + - << >> "
                       "< <= > >= == != & ^ | && || ?: and parentheses")
            return False

    def define(self, rest: str, number: int, col: int):
        m = re.match(r"[ \t]*([A-Za-z_]\w*)(\(([^)]*)\))?", rest)
        if not m:
            self.error(f"#define needs a macro name, got {rest.strip()!r}", number, col, "#define",
                       "write #define NAME value or #define F(x) expression")
            return
        params = None
        if m.group(2) is not None:
            params = tuple(p.strip() for p in m.group(3).split(",")) if m.group(3).strip() else ()
            if not all(_NAME.fullmatch(p) for p in params):
                self.error(f"#define {m.group(1)}: parameters must be names, got ({m.group(3)})", number, col,
                           m.group(2), "write #define F(x, y) expression")
                return
        self.macros[m.group(1)] = Macro(m.group(1), params, rest[m.end():].strip())

    def include(self, rest: str, number: int, col: int, line: str):
        m = re.fullmatch(r'[ \t]*(?:"([^"\n]*)"|<([^>\n]*)>)[ \t]*', rest)
        if not m:
            self.error(f"#include needs a file name in quotes, got {rest.strip()!r}", number, col, line.strip(),
                       '#include "FILE" (relative to this file\'s folder)')
            return
        name = m.group(1) if m.group(1) is not None else m.group(2)
        self.includes.append(Include(number, col, name, dict(self.macros)))
        self.macros.update(self.included_macros(name))

    def included_macros(self, name: str) -> dict:
        """The macros as an included file leaves them (cpp reads it in place); a missing
        file or a cycle is the parser's error to report, at this line."""
        from .source import read_source

        here = Path(self.path).resolve() if self.path and not self.path.startswith("<") else None
        target = ((here.parent if here else Path.cwd()) / name).resolve()
        if not name or not target.is_file() or target in self.including or target == here:
            return self.macros
        inner = preprocess(read_source(target), str(target), self.macros,
                           including=self.including + ((here,) if here else ()))
        return inner.macros

    # ------------------------------------------------------------ text

    def skip_line(self, line: str):
        """A left-out line: only its comments matter (a `/*` may open here)."""
        for _ in self.code_pieces(line):
            pass

    def code_pieces(self, line: str):
        """(offset, code) of the parts of a line outside comments and strings; tracks
        block comments from line to line."""
        pos = 0
        while pos < len(line):
            if self.in_comment:
                end = line.find("*/", pos)
                if end < 0:
                    return
                self.in_comment, pos = False, end + 2
                continue
            m = _TOKEN.match(line, pos)
            tok = m.group()
            if tok == "/*":
                self.in_comment = True
            elif tok.startswith("//"):
                return
            elif not tok.startswith('"'):
                yield pos, tok
            pos = m.end()

    def expand_line(self, line: str, number: int, hiding: frozenset = frozenset()) -> str:
        if not self.macros:
            self.skip_line(line)
            return line
        out, last = [], 0
        pieces = list(self.code_pieces(line))
        skip_to = 0
        for offset, tok in pieces:
            if offset < skip_to or tok not in self.macros or tok in hiding:
                continue
            macro = self.macros[tok]
            end = offset + len(tok)
            if macro.params is None:
                replacement = self.expand(macro.body, number, offset + 1, hiding=frozenset([tok]))
            else:
                call = _call_arguments(line, end)
                if call is None:
                    continue  # `F` without `(`: not a call, left alone (as in C)
                args, end = call
                if len(args) != len(macro.params) and not (macro.params == () and args == [""]):
                    self.error(f"macro {tok} takes {len(macro.params)} argument"
                               f"{'s' if len(macro.params) != 1 else ''}, not {len(args)}", number, offset + 1,
                               line[offset:end], f"#define {tok}({', '.join(macro.params)})")
                    continue
                body = _pasted(_substitute(macro.body, dict(zip(macro.params, (a.strip() for a in args)))))
                replacement = self.expand(body, number, offset + 1, hiding=hiding | {tok})
                if any(m.params is not None and name not in hiding | {tok} and name in replacement
                       for name, m in self.macros.items()):  # calls the expansion makes: rescanned, as in C
                    replacement = self.expand_line(replacement, number, hiding | {tok})
            out.append(line[last:offset] + replacement)
            last = skip_to = end
        out.append(line[last:])
        return "".join(out)

    def expand(self, text: str, number: int, col: int, hiding: frozenset = frozenset()) -> str:
        """Macros expanded in a macro's body (or an #if expression), not again inside
        their own expansion."""
        def one(m):
            tok = m.group()
            if tok[0] == '"' or tok not in self.macros or tok in hiding:
                return tok
            macro = self.macros[tok]
            if macro.params is not None:
                return tok  # a call inside a body: expanded when the line is (see expand_line)
            return self.expand(macro.body, number, col, hiding | {tok})
        return re.sub(r'"(?:[^"\\\n]|\\.)*"?|[A-Za-z_]\w*', one, text)


def _strip_comment(text: str) -> str:
    return re.sub(r"//.*$|/\*.*?\*/", " ", text)


def _call_arguments(line: str, pos: int):
    """([argument text, ...], end) of `(a, (b, c), "x,y")` at `pos` (spaces before it
    allowed), or None when no `(` follows or it does not close on the line."""
    m = re.compile(r"[ \t]*\(").match(line, pos)
    if not m:
        return None
    depth, args, start, i = 1, [], m.end(), m.end()
    while i < len(line):
        ch = line[i]
        if ch == '"':
            s = re.compile(r'"(?:[^"\\\n]|\\.)*"?').match(line, i)
            i = s.end()
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(line[start:i])
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(line[start:i])
            start = i + 1
        i += 1
    return None


def _substitute(body: str, values: dict) -> str:
    return re.sub(r'"(?:[^"\\\n]|\\.)*"?|[A-Za-z_]\w*', lambda m: values.get(m.group(), m.group()), body)


def _pasted(body: str) -> str:
    """C's `##`: the tokens on either side joined into one (`sym_##op` is `sym_max`)."""
    return re.sub(r'("(?:[^"\\\n]|\\.)*"?)|\s*##\s*', lambda m: m.group(1) or "", body)


def _defined(text: str, macros: dict) -> str:
    return re.sub(r"\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", text)
