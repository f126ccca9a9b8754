"""Diagnostics: every error a user sees names the file, line and column, shows the
offending text and says what to do about it.

>>> d = Diagnostic("unsafe-rule", "variable Z in the head is not bound",
...                Span("p.olg", 2, 10), "Z", "bind Z in a positive body atom")
>>> print(d.render("a(X) :- b(X).\\nc(X, Z) :- b(X).\\n"))
p.olg:2:10: error[unsafe-rule]: variable Z in the head is not bound
   2 | c(X, Z) :- b(X).
     |          ^
  hint: bind Z in a positive body atom
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .syntax import Span


@dataclass(frozen=True)
class Diagnostic:
    code: str  # short kebab-case name, stable for tests: syntax, unsafe-rule, arity, ...
    message: str
    span: Span
    text: str = ""  # the offending text
    hint: str = ""
    severity: str = "error"  # "error", "warning", or "note" (a remark on the errors before it)
    # The offending line itself, for text that is not the program (a row of an input file
    # of gigabytes is shown without reading the file again).
    source_line: str | None = None

    def render(self, source: str | None = None) -> str:
        lines = [f"{self.span}: {self.severity}[{self.code}]: {self.message}"]
        src_line = (self.source_line.expandtabs(1) if self.source_line is not None
                    else _line_of(source, self.span.line))
        if src_line is not None:
            gutter = f"{self.span.line:>4}"
            shown, before = _shown_line(src_line, max(self.span.col, 1) - 1)
            lines.append(f"{gutter} | {shown}")
            width = max(1, len(_printable(self.text))) if self.text and self.span.end_line in (0, self.span.line) \
                else 1
            width = max(1, min(width, len(shown) - before))  # under the shown part of the line, no further
            lines.append(f"{' ' * len(gutter)} | {' ' * before}{'^' * width}")
        elif self.text and not _said(self.text, self.message):
            shown = _printable(self.text[:LINE_SHOWN]) + (f"... ({len(self.text):,} characters)"
                                                         if len(self.text) > LINE_SHOWN else "")
            lines.append(f"  offending text: {shown}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def sort_key(self):
        # A note remarks on the errors (how many were left unchecked): it comes last.
        return (self.severity == "note", self.span.file, self.span.line, self.span.col, self.code)


LINE_SHOWN = 120  # characters of a longer source line shown around the column


def _shown_line(line: str, col0: int) -> tuple:
    """(the line as printed, the printed width before column `col0`, 0-based): control
    characters escaped (`_printable`), a long line cut to a window around the column.

    >>> _shown_line("a\\x00b", 2)
    ('a\\\\x00b', 5)
    """
    start = max(0, min(col0 - LINE_SHOWN // 2, len(line) - LINE_SHOWN))
    cut = line[start:start + LINE_SHOWN]
    head, tail = ("..." if start > 0 else ""), ("..." if start + LINE_SHOWN < len(line) else "")
    return head + _printable(cut) + tail, len(head) + len(_printable(line[start:col0]))


QUOTED_SHOWN = 60  # characters of a longer value a message quotes


def quoted(text: str) -> str:
    """A value as a message quotes it: `repr`, a long one cut, saying how long it is (a
    300,000-character field must not become a 300,000-character error line).

    >>> quoted("12x"), quoted("9" * 1000)
    ("'12x'", "'999999999999999999999999999999999999999999999999999999999999'... (1,000 characters)")
    """
    if len(text) <= QUOTED_SHOWN:
        return repr(text)
    return f"{text[:QUOTED_SHOWN]!r}... ({len(text):,} characters)"


def plural(n, word: str, many: str | None = None, fmt: str = "") -> str:
    """`n` and the word in number: "1 row", "2 rows", "0 rows" (`many`: an irregular
    plural; `fmt`: how `n` is written, e.g. "," for thousands). Every count a message
    gives goes through here, so none says "1 columns".

    >>> plural(1, "column"), plural(3, "column"), plural(1, "entry", "entries"), plural(12000, "tuple", fmt=",")
    ('1 column', '3 columns', '1 entry', '12,000 tuples')
    """
    return f"{n:{fmt}} {word if n == 1 else many or word + 's'}"


def _said(text: str, message: str) -> bool:
    """Whether the message already shows the offending text (a name, a character, a URL
    it quotes): then a line repeating it is noise.

    >>> _said("n", "variable n in the head is not bound"), _said("n", "no rule binds x")
    (True, False)
    """
    import re

    return re.search(rf"(?<![\w]){re.escape(text.strip())}(?![\w])", message) is not None if text.strip() else True


def _printable(text: str) -> str:
    """Text as it can go to a terminal: control characters and bytes that were not text
    (a binary file read as text) escaped, never sent raw.

    >>> _printable("ok\\x1b[2J\\x00\\ufffd")
    'ok\\\\x1b[2J\\\\x00\\\\ufffd'
    """
    return "".join(c if c.isprintable() and c != "\ufffd" else c.encode("unicode_escape").decode("ascii")
                    for c in text)


def _line_of(source: str | None, line: int) -> str | None:
    if not source or line < 1:
        return None
    lines = source.splitlines()
    return lines[line - 1].expandtabs(1) if line <= len(lines) else None


class EvitaError(Exception):
    """One or more diagnostics. Raised before anything is written to the catalog."""

    def __init__(self, diagnostics, source: str | None = None, source_file: str | None = None):
        self.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
        self.source = source
        self.source_file = source_file  # the file `source` is the text of, when known
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render(self._source_of(d)) for d in self.diagnostics)

    def _source_of(self, d: Diagnostic) -> str | None:
        # A program put together from several files (a stage and its explain view) has
        # the text of one of them: the others are read back for their lines.
        if self.source_file is None or d.span.file == self.source_file:
            return self.source
        try:
            return Path(d.span.file).read_text()
        except (OSError, ValueError):  # gone, or not text: the diagnostic shows its text alone
            return None

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]


class UserError(Exception):
    """A mistake in how a command or a call was made (not in the program): one line."""
