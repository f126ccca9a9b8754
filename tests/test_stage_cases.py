"""One generic test for every stage, shipped (stages/*.dl) or external (examples/stages/).

The checks themselves are `evita.bootstrap.stage_check`'s, which `evita test-stage` runs
on any stage; here they run on every stage of the repository.

The stages are found the way the lattice finds them (`conftest.stages`, i.e.
`find_stages`), so a new stage is tested as soon as its file exists. For each stage:

- its cases, `tests/fixtures/stages/<stage>.dl`: titled input programs with the program
  the stage alone must turn them into (`// case: TITLE`, input, `// expect:`, expected;
  `// expect: unchanged`, or a title starting with `no-op`, for a case the stage must
  leave alone; every stage needs at least one). EVITA_UPDATE_CASES=1 rewrites the
  expected blocks from what the stage does: read them before committing;
- its header example: the `//   ` indented input, `// =>`, and output at the top of the
  stage file run as a case;
- the differential check: every example program, case input and the header example
  answer the same with and without the stage, on the reference evaluator (oracle.py).

Programs compare as canonical text: parsed, stored in the catalog, read back and printed
(`format_program`), one statement per line, statements sorted; so layout, comments and
the order of statements do not matter. The format is in docs/stages.md, "Testing a stage".
"""
from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from evita.bootstrap import syntax as S
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_program
from evita.bootstrap.stage_check import (UNCHANGED, CheckFailed, CheckSkipped, StageChecks, header_example,
                                         read_cases, read_cases_text, same_program, user_answers, read_facts,
                                         write_cases)

from conftest import EXAMPLES, FIXTURES, stage_alone, stages

CASES = FIXTURES / "stages"
EXAMPLE_PROGRAMS = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))
UPDATE = bool(os.environ.get("EVITA_UPDATE_CASES"))
STAGES = stages()
NO_CASE_FILE = "<no case file>"


def case_file(stage: str) -> Path:
    return CASES / f"{stage}.dl"


def checks(spark, stage: str) -> StageChecks:
    """The stage's checks, its runs shared with the other tests (`conftest.stage_alone`)."""
    return StageChecks(spark, STAGES[stage], case_file(stage), EXAMPLE_PROGRAMS,
                       alone=lambda program: stage_alone(spark, stage, program))


def run(check) -> None:
    """A check of `stage_check` as a test: its failure a test failure with its message."""
    try:
        check()
    except CheckFailed as e:
        pytest.fail(str(e), pytrace=False)
    except CheckSkipped as e:
        pytest.skip(str(e))


def assert_same_program(actual: str, expected: str, what: str) -> None:
    run(lambda: same_program(actual, expected, what))


# ---------------------------------------------------------------- parameters

def case_titles(stage: str) -> list:
    """The titles of a stage's cases, for the test ids (a malformed or missing file
    still gives one test, which fails and says why)."""
    path = case_file(stage)
    if not path.exists():
        return [NO_CASE_FILE]
    try:
        return [c.title for c in read_cases(path)[1]] or [NO_CASE_FILE]
    except ValueError as e:
        return [f"<malformed: {e}>"]


def the_case(stage: str, title: str):
    path = case_file(stage)
    if not path.exists():
        pytest.fail(f"stage {stage} has no cases: write {path.relative_to(FIXTURES.parent.parent)} "
                    "(titled `// case:` blocks, each an input program, `// expect:` and the program the stage "
                    "makes of it, and at least one no-op case; docs/stages.md, \"Testing a stage\")", pytrace=False)
    found = []
    run(lambda: found.append(StageChecks(None, STAGES[stage], path).the_case(title)))
    return found[0]


def case_program(stage: str, case) -> S.Program:
    """A case's input as a program; blank lines before it keep the case file's line numbers."""
    try:
        return parse_program("\n" * case.line + case.input, str(case_file(stage)), "case")
    except EvitaError as e:
        problem = e.render()
    pytest.fail(f"the input of case {case.title!r} does not parse:\n{problem}", pytrace=False)


CASE_PARAMS = [pytest.param(stage, title, id=f"{stage}-{title}") for stage in sorted(STAGES)
               for title in case_titles(stage)]


def example_count(stage: str) -> int:
    return StageChecks(None, STAGES[stage], None).example_count()


# ---------------------------------------------------------------- the tests

@pytest.mark.parametrize("stage,title", CASE_PARAMS)
def test_case(spark, stage, title):
    the_case(stage, title)  # a missing file says which file to write
    run(lambda: checks(spark, stage).check_case(title, update=UPDATE))


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_cases_include_a_no_op(stage):
    run(StageChecks(None, STAGES[stage], case_file(stage)).check_no_op_present)


@pytest.mark.parametrize("stage,which", [(s, i) for s in sorted(STAGES) for i in range(example_count(s))],
                         ids=[f"{s}-{i + 1}" for s in sorted(STAGES) for i in range(example_count(s))])
def test_header_example(spark, stage, which):
    run(lambda: checks(spark, stage).check_header(which))


def test_the_formats_doctests():
    import doctest

    from evita.bootstrap import stage_check

    assert doctest.testmod(stage_check).failed == 0


# ---------------------------------------------------------------- the differential check

def differential_params() -> list:
    out = []
    for stage in sorted(STAGES):
        out += [pytest.param(stage, f"example {p.name}", id=f"{stage}-example {p.name}") for p in EXAMPLE_PROGRAMS]
        out.append(pytest.param(stage, "header example", id=f"{stage}-header example"))
        out += [pytest.param(stage, f"case: {t}", id=f"{stage}-case: {t}") for t in case_titles(stage)
                if t != NO_CASE_FILE and not t.startswith("<malformed")]
    return out


@pytest.mark.parametrize("stage,which", differential_params())
def test_same_answers_with_and_without_the_stage(spark, stage, which):
    run(lambda: checks(spark, stage).check_differential(which))


# ---------------------------------------------------------------- triggers

TRIGGERED = sorted(name for name, f in STAGES.items() if f.trigger is not None)


def trigger_says(stage: str, program: S.Program):
    return StageChecks(None, STAGES[stage], None).trigger_says(program)


@pytest.mark.parametrize("stage,which", [p for p in differential_params() if p.values[0] in TRIGGERED])
def test_a_trigger_that_finds_nothing_means_the_stage_changes_nothing(spark, stage, which):
    """A skipped stage must be one that would have changed nothing (stats: nothing a
    join-order stage would read). The stage's run is the differential check's, cached."""
    run(lambda: checks(spark, stage).check_trigger(which))


def test_triggers_are_asked_without_spark_on_the_examples():
    """Every shipped trigger is answered in process on every example (a trigger that
    falls back to Spark costs the job it was meant to save)."""
    from evita.bootstrap.parser import parse_file

    needs_spark = [(stage, p.name) for stage in TRIGGERED if STAGES[stage].origin == "built-in"
                   for p in EXAMPLE_PROGRAMS if trigger_says(stage, parse_file(p)) is None]
    assert not needs_spark, f"triggers asked on Spark: {needs_spark}"


# ---------------------------------------------------------------- the format itself (no Spark)

@pytest.mark.parametrize("path", sorted(CASES.glob("*.dl")), ids=lambda p: p.name)
def test_case_files_read_back_as_written(path, tmp_path):
    """What EVITA_UPDATE_CASES writes is the file it read: an update changes only the
    expected blocks it must."""
    preamble, cases = read_cases(path)
    write_cases(tmp_path / path.name, preamble, cases)
    assert (tmp_path / path.name).read_text() == path.read_text()


@pytest.mark.parametrize("text,problem", [
    ("// case:\np(1).\n// expect: unchanged\n", "needs a title"),
    ("// case: a\np(1).\n// expect: unchanged\n// case: a\np(1).\n// expect: unchanged\n", "a second case"),
    ("// case: a\np(1).\n", "no `// expect:` line"),
    ("// case: a\np(1).\n// expect:\np(1).\n// expect:\np(1).\n", "two `// expect:` lines"),
    ("// case: a\np(1).\n// expect: same\n", "found 'same'"),
    ("// case: a\np(1).\n// expect: unchanged\np(1).\n", "expects `unchanged` and a program"),
    ("// case: no-op a\np(1).\n// expect:\np(1).\n", "titled no-op"),
])
def test_malformed_case_files_are_rejected(text, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        read_cases_text(text)


def test_header_examples_must_be_complete():
    with pytest.raises(ValueError, match="has no example"):
        header_example("// s: no example here.\n//\n//   p(1).\n//\n")
    with pytest.raises(ValueError, match="two `// =>` lines"):
        header_example("//   p(1).\n// =>\n//   p(1).\n// =>\n")
    with pytest.raises(ValueError, match="no input"):
        header_example("// =>\n//   p(1).\n")


def test_a_missing_case_file_fails_and_says_what_to_write():
    with pytest.raises(pytest.fail.Exception, match="has no cases: write tests/fixtures/stages/no_such_stage.dl"):
        the_case("no_such_stage", NO_CASE_FILE)


def test_a_mismatch_shows_a_unified_diff():
    with pytest.raises(pytest.fail.Exception) as info:
        assert_same_program("p(1).\nq(2).\n", "p(1).\nq(3).\n", "differs")
    assert "--- expected\n+++ actual\n" in str(info.value) and "-q(3).\n+q(2)." in str(info.value)


def test_the_differential_check_sees_a_wrong_rewrite():
    """Without Spark: dropping tc.dl's recursive rule loses answers, and the check's
    answers (the .output relation, read with the example's facts) show it."""
    from evita.bootstrap.parser import parse_file

    path = EXAMPLES / "tc.dl"
    before = parse_file(path)
    inputs = read_facts(before, path.with_suffix(""))
    broken = replace(before, statements=tuple(s for s in before.statements
                                              if not (isinstance(s, S.Rule) and len(s.body) == 2)))
    want, have = user_answers(before, before, inputs), user_answers(before, broken, inputs)
    assert set(want) == {"path"} and len(inputs["edge"]) == 11 and len(want["path"]) == 48  # as tc.dl says
    assert have["path"] < want["path"]
