"""Reading a program file: what is not a readable text file is a positioned diagnostic,
never a Python exception (a directory, a missing file, binary data, invalid UTF-8).

>>> import tempfile, os
>>> f = tempfile.NamedTemporaryFile(suffix=".olg", delete=False); _ = f.write(b"a(1).\\nb(\\xff).\\n"); f.close()
>>> try: read_source(f.name)
... except EvitaError as e: print(e.first.code, e.first.span.line, e.first.span.col, e.first.message)
not-text 2 3 not a text file: invalid UTF-8 at byte 8 (0xff)
>>> os.unlink(f.name)
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .diagnostics import Diagnostic, EvitaError
from .syntax import Span

HINT = "give the path of a .olg or .dl program (UTF-8 text)"


_watching: list = []  # the open `files_read` collections, innermost last


@contextmanager
def files_read():
    """Collects {resolved path: bytes} of every file `read_source` reads inside the block:
    the files an #include brought in, which a cache of the parse must check too."""
    seen: dict = {}
    _watching.append(seen)
    try:
        yield seen
    finally:
        _watching.remove(seen)


def read_source(path) -> str:
    """The text of a program file, or EvitaError saying why there is none."""
    file = Path(path)
    where = Span(str(path), 0, 0)
    if file.is_dir():
        raise EvitaError([Diagnostic("not-a-file", f"{path} is a directory, not a program file", where,
                                     str(path), HINT)])
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise EvitaError([Diagnostic("no-such-file", f"{path}: no such file", where, str(path), HINT)]) from None
    except OSError as e:
        raise EvitaError([Diagnostic("unreadable", f"{path} cannot be read: {e.strerror}", where, str(path),
                                     "check the file's permissions")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_text(path, data, e.start, f"invalid UTF-8 at byte {e.start}") from None
    if "\0" in text:  # valid UTF-8 can still be binary: a NUL never occurs in program text
        at = len(text[:text.index("\0")].encode("utf-8"))
        raise _not_text(path, data, at, f"NUL byte at byte {at}")
    for seen in _watching:
        seen[str(file.resolve())] = data
    return text


def _not_text(path, data: bytes, at: int, why: str) -> EvitaError:
    """Positioned at the bad byte: line, and column in characters of the text before it."""
    start = data.rfind(b"\n", 0, at) + 1
    line = data.count(b"\n", 0, at) + 1
    col = len(data[start:at].decode("utf-8", "replace")) + 1
    shown = data.decode("utf-8", "replace").replace("\0", "\ufffd")
    return EvitaError([Diagnostic("not-text", f"not a text file: {why} (0x{data[at]:02x})",
                                  Span(str(path), line, col), "\ufffd", HINT)], source=shown)


def empty_warning(program) -> Diagnostic | None:
    """A program with neither rules nor facts nor inputs computes nothing: almost surely
    the wrong file. (One that only reads an `.input` and writes it out is Soufflé's way
    to copy or check a facts file.)"""
    from .syntax import IODirective

    if program.rules or program.facts or any(d.direction == "input" for d in program.of(IODirective)):
        return None
    return Diagnostic("empty-program", "the program has no rules and no facts: it computes nothing",
                      Span(program.path, 1, 1), "", "is this the file you meant?", severity="warning")
