"""Helpers the Soufflé-language tests share (test_souffle_lang, _more, _functors)."""
from __future__ import annotations

from evita.bootstrap import syntax as S
from evita.bootstrap.checks import check_program, diagnose
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from evita.catalog.encode import encode
from evita.catalog.printer import format_program
from evita.catalog.rows import diff


def errors(text: str, path: str = "t.dl") -> list:
    """(code, line, col, message) of every diagnostic, from parsing or the static checks."""
    try:
        found = diagnose(parse_program(text, path))
    except EvitaError as e:
        found = e.diagnostics
    return [(d.code, d.span.line, d.span.col, d.message) for d in found]


def round_trips(program: S.Program) -> bool:
    """The program prints and parses back to the same catalog rows."""
    again = parse_program(format_program(program), "again.dl", program.name, number_bits=program.number_bits)
    return not diff(encode(program), encode(again))


def run_planned(spark, text: str, path: str, backend: str, number_bits: int = 64):
    """(program, engine result): planned straight from the parsed program, on the
    columnar backend ("small") or the SQL loop ("sql"). The stages have nothing to do
    with the language tested, and compiling through them costs seconds a program."""
    from evita.runtime.engine import run

    program = check_program(parse_program(text, path, number_bits=number_bits))
    return program, run(plan(program), spark, local=backend == "small")
