"""Titled cases for every lowering (bootstrap/lowering/, and the Dedalus tick program of
runtime/dedalus.py), in the format of the stage cases (tests/test_stage_cases.py).

`tests/fixtures/lowering/<lowering>.dl` (or `.olg`) holds `// case: TITLE` blocks: an
input program, `// expect:` and the program text the lowering makes of it, or
`// expect: unchanged` (a title starting with `no-op`) for a program it must leave as
written. Every lowering has a case file, and every case file a no-op case.

The output is the lowered program printed (`format_program`), compared as text, so the
expected block is written as the printer writes; for a no-op case the input itself is
written so, and the lowered program must print back to it exactly. The parser's lowerings
run together (a case shows its lowering's effect; labels and `=` are lowered too); the
division and the 32-bit width run on the parsed rules, as the planner runs them; Dedalus prints the tick
program of a program with time. EVITA_UPDATE_CASES=1 rewrites the expected blocks from what the lowering does:
read them before committing.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from evita.bootstrap import syntax as S
from evita.bootstrap.lowering.conversions import spelled_numbers
from evita.bootstrap.lowering.division import whole_divisions
from evita.bootstrap.lowering.symbols import joined_symbols
from evita.bootstrap.lowering.unsigned import unsigned_order
from evita.bootstrap.lowering.width import at_width
from evita.bootstrap.parser import parse_program
from evita.bootstrap.stage_check import read_cases, write_cases
from evita.catalog.printer import format_program
from evita.runtime import dedalus

from conftest import FIXTURES

CASES = FIXTURES / "lowering"
LOWERING_PACKAGE = Path(S.__file__).parent / "lowering"
UPDATE = bool(os.environ.get("EVITA_UPDATE_CASES"))


def parsed(program: S.Program) -> S.Program:
    """The parser's lowerings: they ran while parsing."""
    return program


def divided(program: S.Program) -> S.Program:
    """The planner's division rewrite, on the program's rules."""
    rules = iter(whole_divisions(list(program.rules), program))
    return replace(program, statements=tuple(next(rules) if isinstance(s, S.Rule) else s
                                             for s in program.statements))


def widened(program: S.Program) -> S.Program:
    """The planner's rewrite for `--number-bits 32`, on the program's rules at 32 bits."""
    program = replace(program, number_bits=32)
    rules = iter(at_width(list(program.rules), program))
    return replace(program, statements=tuple(next(rules) if isinstance(s, S.Rule) else s
                                             for s in program.statements))


def unsigned(program: S.Program) -> S.Program:
    """The planner's unsigned rewrite, after the division rewrite, as the planner runs them."""
    rules = iter(unsigned_order(whole_divisions(list(program.rules), program), program))
    return replace(program, statements=tuple(next(rules) if isinstance(s, S.Rule) else s
                                             for s in program.statements))


def converted(program: S.Program) -> S.Program:
    """The planner's guard on conversions of text to numbers."""
    return _rules_by(spelled_numbers, program)


def joined(program: S.Program) -> S.Program:
    """The planner's rewrite of `+` on symbols into `cat`."""
    return _rules_by(joined_symbols, program)


def _rules_by(rewrite, program: S.Program) -> S.Program:
    rules = iter(rewrite(list(program.rules), program))
    return replace(program, statements=tuple(next(rules) if isinstance(s, S.Rule) else s
                                             for s in program.statements))


def ticked(program: S.Program) -> S.Program:
    """Dedalus time as one timestep's program; a program without time runs as it is
    (the runtime lowers only what `is_dedalus`)."""
    return dedalus.lower(program).program if dedalus.is_dedalus(program) else program


# lowering -> what it makes of a parsed program
LOWERINGS = {
    "statements": parsed, "disjunction": parsed, "aggregates": parsed, "autoinc": parsed,
    "equalities": parsed, "eqrel": parsed, "components": parsed, "inline": parsed,
    "subsumption": parsed, "records": parsed, "division": divided, "width": widened, "unsigned": unsigned,
    "lattice": parsed, "conversions": converted, "symbols": joined,
    "dedalus": ticked,
}


def case_file(lowering: str) -> Path:
    found = sorted(CASES.glob(f"{lowering}.*"))
    return found[0] if found else CASES / f"{lowering}.dl"


def lowered(lowering: str, case) -> str:
    """The case's input lowered and printed; blank lines keep the case file's line numbers."""
    program = parse_program("\n" * case.line + case.input, str(case_file(lowering)), "case")
    return format_program(LOWERINGS[lowering](program)).strip()


def case_params() -> list:
    params = []
    for lowering in sorted(LOWERINGS):
        for case in read_cases(case_file(lowering))[1] if case_file(lowering).exists() else []:
            params.append(pytest.param(lowering, case.title, id=f"{lowering}-{case.title}"))
    return params


@pytest.mark.parametrize("lowering,title", case_params())
def test_case(lowering, title):
    path = case_file(lowering)
    preamble, cases = read_cases(path)
    case = next(c for c in cases if c.title == title)
    actual = lowered(lowering, case)
    if UPDATE and not case.no_op:
        write_cases(path, preamble, [replace(c, expect=actual) if c is case else c for c in cases])
        return
    expected = case.input.strip() if case.no_op else case.expect.strip()
    where = f"{path.name}:{case.expect_line or case.line}"
    assert actual == expected, f"{where}: case {title!r} ({'no-op' if case.no_op else 'expected'}):\n" \
                               f"--- expected\n{expected}\n--- lowered\n{actual}"


def test_every_lowering_has_cases_with_a_no_op():
    modules = {p.stem for p in LOWERING_PACKAGE.glob("*.py")} - {"__init__", "raw"}
    assert modules <= set(LOWERINGS), f"lowerings without cases here: {sorted(modules - set(LOWERINGS))}"
    for lowering in LOWERINGS:
        path = case_file(lowering)
        assert path.exists(), f"lowering {lowering} has no cases: write {path}"
        titles = [c.title for c in read_cases(path)[1] if c.no_op]
        assert titles, f"{path.name} has no no-op case (`// expect: unchanged`, title starting with no-op)"
