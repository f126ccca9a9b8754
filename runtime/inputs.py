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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError
from ..catalog.fs import Loc, joined

COMMAND_LINE = S.Span("<command line>", 0, 0)
# The parameters Evita reads, per direction (Soufflé's names and meanings).
IO_PARAMS = {"input": ("IO", "filename", "delimiter", "headers", "rfc4180"),
             "output": ("IO", "filename", "delimiter", "headers", "rfc4180"),
             "printsize": (),
             "limitsize": ("n",)}
# Soufflé's parameters and IO kinds Evita knows of but does not implement yet.
NOT_YET_PARAMS = {"compress": "compressed files", "columns": "reading some columns only",
                  "attributeNames": "column names in a header", "dbname": "SQLite", "params": "JSON parameters",
                  "name": "SQLite", "fact-dir": "a facts directory per relation",
                  "output-dir": "an output directory per relation"}
NOT_YET_IO = {"sqlite": "the SQLite format", "json": "the JSON format", "stdin": "reading standard input",
              "stdout": "writing standard output", "stdoutprintsize": "printing sizes through IO="}


@dataclass(frozen=True)
class InputFile:
    relation: str
    path: str
    delimiter: Optional[str]  # None: from the file's suffix
    span: S.Span  # the .input directive's relation name, else the command line
    option: bool = False  # given by --input (else by -F and the directive)
    headers: bool = False  # Soufflé headers=true: the first line names the columns
    quoted: bool = False  # Soufflé rfc4180=true: "..." fields, "" a quote inside them
    number_bits: int = 64  # the program's width of whole numbers: a value beyond it is an error


@dataclass(frozen=True)
class OutputFile:
    """Where `evita run -D DIR` writes one `.output` directive of a relation."""
    relation: str
    path: str
    delimiter: str
    headers: bool
    quoted: bool = False  # Soufflé rfc4180=true: each symbol written in "...", a quote inside doubled


def parse_input_option(text: str) -> tuple:
    """`REL=PATH` -> (REL, PATH)."""
    if "=" not in text:
        raise EvitaError([Diagnostic("bad-option", f"--input expects REL=PATH, got {text!r}", COMMAND_LINE, text,
                                     "for example --input edge=edges.csv")])
    rel, path = text.split("=", 1)
    return rel.strip(), path.strip()


def input_directives(program: S.Program) -> dict:
    """relation -> its first `.input` directive."""
    out: dict = {}
    for d in program.of(S.IODirective):
        if d.direction == "input":
            out.setdefault(d.relation, d)
    return out


def all_input_directives(program: S.Program) -> list:
    """(key, directive) per `.input`, in order: the relation for the first of a relation,
    `REL#2`, `REL#3`, ... for more (Soufflé reads each; the relation holds their union)."""
    seen: dict = {}
    out = []
    for d in program.of(S.IODirective):
        if d.direction == "input":
            seen[d.relation] = seen.get(d.relation, 0) + 1
            out.append((d.relation if seen[d.relation] == 1 else f"{d.relation}#{seen[d.relation]}", d))
    return out


def check_io_params(program: S.Program) -> list:
    """Diagnostics for `.input`/`.output`/`.printsize`/`.limitsize` parameters that would
    be ignored or cannot work, each at the parameter: a parameter that changes how a file
    reads or writes, or where a recursion stops, must never be dropped silently."""
    out = []
    limits_seen: dict = {}
    for d in program.of(S.IODirective):
        def bad(key, message, hint, text=None):
            out.append(Diagnostic("io-param", f".{d.direction} {d.relation}: {message}", _at_text(program, d, key),
                                  text if text is not None else key, hint))
        params = dict(d.params)
        kind = str(params.get("IO", "file"))
        if kind != "file":  # the other kinds' parameters are theirs: one error says it all
            bad("IO", f"IO={kind} ({NOT_YET_IO[kind]}) is not supported yet" if kind in NOT_YET_IO else
                f"IO={kind} is not an IO kind", "write IO=file, or leave IO out", f"IO={kind}")
            continue
        for key, value in d.params:
            if key in NOT_YET_PARAMS and not (key == "compress" and str(value) == "false"):
                bad(key, f"{key}= ({NOT_YET_PARAMS[key]}) is not supported yet",
                    f"parameters Evita reads here: {', '.join(IO_PARAMS[d.direction]) or 'none'}")
            elif key not in IO_PARAMS[d.direction]:
                bad(key, f"Evita does not support parameter {key}",
                    f"parameters Evita reads here: {', '.join(IO_PARAMS[d.direction]) or 'none'}")
            elif key in ("headers", "rfc4180") and str(value) not in ("true", "false"):
                bad(key, f"{key}={value} is neither true nor false", f"write {key}=true or {key}=false")
        # Soufflé splits on the whole delimiter, so it may be several characters (", ")
        if "delimiter" in params and not _unescape(str(params["delimiter"])):
            bad("delimiter", "the delimiter is empty",
                'for example delimiter="\\t" or delimiter=","', str(params["delimiter"]))
        elif "delimiter" in params and str(params.get("rfc4180")) == "true" and '"' in _unescape(str(params["delimiter"])):
            bad("delimiter", "with rfc4180=true the delimiter cannot hold a quote", 'for example delimiter=","',
                str(params["delimiter"]))
        if d.direction == "limitsize":
            if "n" not in params:
                out.append(Diagnostic("io-param", f".limitsize {d.relation}: the size limit n= is missing",
                                      _at_relation(program, d), d.relation, f"write .limitsize {d.relation}(n=100)"))
            elif not re.fullmatch(r"[0-9]+", str(params["n"]).strip()):
                out.append(Diagnostic("io-param", f".limitsize {d.relation}: n={params['n']} is not a number of "
                                      "tuples", _at_text(program, d, "n="), "n", "write a whole number: n=100"))
            if d.relation in limits_seen:
                out.append(Diagnostic("io-param", f".limitsize {d.relation}: a second size limit (the first is at "
                                      f"line {limits_seen[d.relation].line})", _at_relation(program, d), d.relation,
                                      "give each relation one .limitsize"))
            limits_seen.setdefault(d.relation, d.span)
    return out


def size_limits(program: S.Program) -> dict:
    """relation -> N of its `.limitsize R(n=N)` (checked by `check_io_params`)."""
    return {d.relation: int(str(dict(d.params)["n"]).strip()) for d in program.of(S.IODirective)
            if d.direction == "limitsize" and re.fullmatch(r"[0-9]+", str(dict(d.params).get("n", "")).strip())}


def output_files(program: S.Program, directory: str, outputs=None) -> list:
    """An OutputFile per `.output` directive (Soufflé: DIR/`filename`, default REL.csv,
    tab-separated unless `delimiter` says otherwise); `outputs` limits the relations
    (those the compiled program still has)."""
    files = []
    for d in program.of(S.IODirective):
        if d.direction != "output" or (outputs is not None and d.relation not in outputs):
            continue
        params = dict(d.params)
        quoted = str(params.get("rfc4180")) == "true"
        files.append(OutputFile(d.relation, joined(directory, str(params.get("filename", f"{d.relation}.csv"))),
                                _unescape(str(params.get("delimiter", "," if quoted else "\t"))),
                                str(params.get("headers")) == "true", quoted))
    return files


def printsize_relations(program: S.Program) -> list:
    """The relations of `.printsize` directives, in order, each once."""
    names: list = []
    for d in program.of(S.IODirective):
        if d.direction == "printsize" and d.relation not in names:
            names.append(d.relation)
    return names


DEFAULT_FACTS_DIR = "."  # Soufflé's `-F .`: without -F, facts are read from the current directory


def resolve_inputs(program: S.Program, options=(), facts_dir: Optional[str] = None, *,
                   missing_ok: bool = False) -> dict:
    """relation -> InputFile for every relation that is read from a file. Raises one
    EvitaError with every missing file and bad option at once. `missing_ok`: a file
    an `.input` directive names that is not in `facts_dir` is left out (the directory
    was not asked for: the default one, see `facts_dir_of`), `not_given` warns of it."""
    problems = check_io_params(program)
    directives = input_directives(program)
    files: dict = {}
    if facts_dir:
        for key, d in all_input_directives(program):
            f = _directive_file(program, d, facts_dir)
            if not (missing_ok and not Loc.of(f.path).exists()):
                files[key] = f
    known = _relations(program)
    for text in options:
        rel, path = parse_input_option(text)
        if rel not in known:
            problems.append(Diagnostic("unknown-relation", f"--input names {rel}, which the program does not use",
                                       COMMAND_LINE, text, "known: " + ", ".join(sorted(known))))
            continue
        for key in [k for k, f in files.items() if f.relation == rel and not f.option]:
            del files[key]  # --input replaces the files the .input directives name
        files[rel if rel not in files else f"{rel}#{len(files)}"] = InputFile(
            rel, path, None, _at_relation(program, directives[rel]) if rel in directives else COMMAND_LINE, True)
    problems += missing_files(files)
    if problems:
        raise EvitaError(problems, source=program.text, source_file=program.path)
    return files


def facts_dir_of(args) -> tuple:
    """(the directory `.input` files are read from, whether it was asked for): `-F DIR`,
    else the current directory, as Soufflé's `-F` defaults to `.`."""
    given = getattr(args, "facts_dir", None)
    return (given, True) if given else (DEFAULT_FACTS_DIR, False)


def _directive_file(program: S.Program, d: S.IODirective, facts_dir: str) -> "InputFile":
    """The file an `.input` directive reads under `facts_dir`: its filename= (default
    REL.facts), delimiter=, headers= and rfc4180=."""
    rel, params = d.relation, dict(d.params)
    path = joined(facts_dir, str(params.get("filename", f"{rel}.facts")))
    quoted = str(params.get("rfc4180")) == "true"
    return InputFile(rel, str(path), _unescape(str(params.get("delimiter", "," if quoted else "\t"))),
                     _at_relation(program, d), headers=str(params.get("headers")) == "true", quoted=quoted)


def missing_files(files: dict) -> list:
    """An input-missing diagnostic for every file that is not there, at what asked for it."""
    return [Diagnostic("input-missing", f"{'--input' if f.option else '.input'} {f.relation}: no file {f.path}",
                       f.span, f.relation, "check the path given to -F or --input")
            for f in files.values() if not Loc.of(f.path).exists()]


def not_given(program: S.Program, files: dict, default_dir: Optional[str] = None) -> list:
    """Warnings for `.input` relations no file was given for: they hold only the
    program's own facts, which is rarely what was meant. `default_dir`: the directory
    looked in without -F (the current one), named in the warning."""
    def warning(rel, d):
        path = _directive_file(program, d, default_dir).path if default_dir else None
        where = (f"no file {path} in the current directory (where facts are read from without -F, as in Soufflé)"
                 if path else "no file given")
        return Diagnostic("input-not-given", f".input {rel}: {where}, so {rel} holds only the program's facts",
                          _at_relation(program, d), rel,
                          (f"put {path} here, give " if path else "give ")
                          + f"-F DIR (reads DIR/{rel}.facts) or --input {rel}=PATH", severity="warning")

    return [warning(rel, d) for rel, d in input_directives(program).items()
            if not any(f.relation == rel for f in files.values())]


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
    at = line.find(d.relation, d.span.col - 1 + len(f".{d.direction}"))
    return S.Span(d.span.file, d.span.line, at + 1 if at >= 0 else d.span.col)


def _at_text(program: S.Program, d: S.IODirective, text: str) -> S.Span:
    """The span of `text` (a parameter's name) in the directive, else the relation's name."""
    lines = program.text.splitlines()
    line = lines[d.span.line - 1] if 0 < d.span.line <= len(lines) else ""
    params = line.find("(", d.span.col - 1)  # in the parameters: `m` of `.limitsize p(m=3)`, not of `.limitsize`
    at = line.find(text, params if params >= 0 else d.span.col - 1) if text else -1
    return S.Span(d.span.file, d.span.line, at + 1, d.span.line, at + 1 + len(text)) if at >= 0 \
        else _at_relation(program, d)


def _unescape(value: str) -> str:
    """`\\t` written in the program is a tab, whether or not the lexer already made it one."""
    return codecs.decode(value, "unicode_escape") if "\\" in value else value
