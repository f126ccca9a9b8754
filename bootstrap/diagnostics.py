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

from .syntax import Span


@dataclass(frozen=True)
class Diagnostic:
    code: str  # short kebab-case name, stable for tests: syntax, unsafe-rule, arity, ...
    message: str
    span: Span
    text: str = ""  # the offending text
    hint: str = ""

    def render(self, source: str | None = None) -> str:
        lines = [f"{self.span}: error[{self.code}]: {self.message}"]
        src_line = _line_of(source, self.span.line)
        if src_line is not None:
            gutter = f"{self.span.line:>4}"
            lines.append(f"{gutter} | {src_line}")
            width = max(1, len(self.text)) if self.text and self.span.end_line in (0, self.span.line) else 1
            lines.append(f"{' ' * len(gutter)} | {' ' * (max(self.span.col, 1) - 1)}{'^' * width}")
        elif self.text:
            lines.append(f"  offending text: {self.text}")
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)

    def sort_key(self):
        return (self.span.file, self.span.line, self.span.col, self.code)


def _line_of(source: str | None, line: int) -> str | None:
    if not source or line < 1:
        return None
    lines = source.splitlines()
    return lines[line - 1].expandtabs(1) if line <= len(lines) else None


class EvitaError(Exception):
    """One or more diagnostics. Raised before anything is written to the catalog."""

    def __init__(self, diagnostics, source: str | None = None):
        self.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render(self.source) for d in self.diagnostics)

    @property
    def first(self) -> Diagnostic:
        return self.diagnostics[0]
