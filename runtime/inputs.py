"""Which file each input relation is read from, decided before Spark starts.

A missing file, an `--input` that names no relation of the program and an `.input`
parameter Evita does not understand are all known from the program text and the
command line: they are reported here, at the `.input` directive that asked for the file
(or at the command line), in milliseconds instead of after a compile on Spark.

Soufflé's rules: `-F DIR` reads each `.input` relation from DIR/`filename` (default
`REL.facts`), tab-separated unless the directive gives `delimiter`. `--input REL=PATH`
overrides it for one relation; its format follows the suffix (.csv, .tsv/.facts/.tab,
.parquet).
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError

COMMAND_LINE = S.Span("<command line>", 0, 0)
IO_PARAMS = ("IO", "filename", "delimiter")  # the .input parameters Evita reads


@dataclass(frozen=True)
class InputFile:
    relation: str
    path: str
    delimiter: Optional[str]  # None: from the file's suffix
    span: S.Span  # the .input directive's relation name, else the command line
    option: bool = False  # given by --input (else by -F and the directive)


def parse_input_option(text: str) -> tuple:
    """`REL=PATH` -> (REL, PATH)."""
    if "=" not in text:
        raise EvitaError([Diagnostic("bad-option", f"--input expects REL=PATH, got {text!r}", COMMAND_LINE, text,
                                     "for example --input edge=edges.csv")])
    rel, path = text.split("=", 1)
    return rel.strip(), path.strip()


def input_directives(program: S.Program) -> dict:
    return {d.relation: d for d in program.of(S.IODirective) if d.direction == "input"}


def check_io_params(program: S.Program) -> list:
    """Diagnostics for `.input` parameters that would be ignored or cannot work: a
    parameter that changes how a file reads must never be dropped silently."""
    out = []
    for d in input_directives(program).values():
        params = dict(d.params)
        for key, value in d.params:
            if key not in IO_PARAMS:
                out.append(Diagnostic("io-param", f".input {d.relation}: Evita does not support parameter {key}",
                                      d.span, key, f"parameters Evita reads: {', '.join(IO_PARAMS)}"))
        if params.get("IO", "file") != "file":
            out.append(Diagnostic("io-param", f".input {d.relation}: IO={params['IO']} is not supported",
                                  d.span, str(params["IO"]), "write IO=file, or leave IO out"))
        if "delimiter" in params and len(_unescape(str(params["delimiter"]))) != 1:
            out.append(Diagnostic("io-param", f".input {d.relation}: the delimiter must be one character, "
                                  f"got {params['delimiter']!r}", d.span, str(params["delimiter"]),
                                  'for example delimiter="\\t" or delimiter=","'))
    return out


def resolve_inputs(program: S.Program, options=(), facts_dir: Optional[str] = None) -> dict:
    """relation -> InputFile for every relation that is read from a file. Raises one
    EvitaError with every missing file and bad option at once."""
    problems = check_io_params(program)
    directives = input_directives(program)
    files: dict = {}
    if facts_dir:
        for rel, d in directives.items():
            params = dict(d.params)
            path = Path(facts_dir) / str(params.get("filename", f"{rel}.facts"))
            files[rel] = InputFile(rel, str(path), _unescape(str(params.get("delimiter", "\t"))),
                                   _at_relation(program, d))
    known = _relations(program)
    for text in options:
        rel, path = parse_input_option(text)
        if rel not in known:
            problems.append(Diagnostic("unknown-relation", f"--input names {rel}, which the program does not use",
                                       COMMAND_LINE, text, "known: " + ", ".join(sorted(known))))
            continue
        files[rel] = InputFile(rel, path, None,
                               _at_relation(program, directives[rel]) if rel in directives else COMMAND_LINE, True)
    problems += missing_files(files)
    if problems:
        raise EvitaError(problems, source=program.text, source_file=program.path)
    return files


def missing_files(files: dict) -> list:
    """An input-missing diagnostic for every file that is not there, at what asked for it."""
    return [Diagnostic("input-missing", f"{'--input' if f.option else '.input'} {f.relation}: no file {f.path}",
                       f.span, f.relation, "check the path given to -F or --input")
            for f in files.values() if not Path(f.path).exists()]


def not_given(program: S.Program, files: dict) -> list:
    """Warnings for `.input` relations no file was given for: they hold only the
    program's own facts, which is rarely what was meant."""
    return [Diagnostic("input-not-given", f".input {rel}: no file given, so {rel} holds only the program's facts",
                       _at_relation(program, d), rel, f"give -F DIR (reads DIR/{rel}.facts) or --input {rel}=PATH", severity="warning")
            for rel, d in input_directives(program).items() if rel not in files]


def _relations(program: S.Program) -> set:
    names = {d.relation for d in program.of(S.Declaration)} | set(input_directives(program))
    for r in program.rules:
        names.add(r.head.relation)
        names.update(a.relation for a in r.body if isinstance(a, S.Atom))
    names.update(f.atom.relation for f in program.facts)
    return names


def _at_relation(program: S.Program, d: S.IODirective) -> S.Span:
    """The span of the relation's name in `.input REL(...)`, for the caret."""
    lines = program.text.splitlines()
    line = lines[d.span.line - 1] if 0 < d.span.line <= len(lines) else ""
    at = line.find(d.relation, d.span.col - 1 + len(".input"))
    return S.Span(d.span.file, d.span.line, at + 1 if at >= 0 else d.span.col)


def _unescape(value: str) -> str:
    """`\\t` written in the program is a tab, whether or not the lexer already made it one."""
    return codecs.decode(value, "unicode_escape") if "\\" in value else value
