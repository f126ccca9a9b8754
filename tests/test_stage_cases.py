"""One generic test for every stage, shipped (stages/*.dl) or external (examples/stages/).

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

import difflib
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

import oracle
from evita.bootstrap import syntax as S
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_program
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program, format_statement, declared_columns

from conftest import EXAMPLES, FIXTURES, after_stage, stage_alone, stages

CASES = FIXTURES / "stages"
EXAMPLE_PROGRAMS = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))
UPDATE = bool(os.environ.get("EVITA_UPDATE_CASES"))
UNCHANGED = "unchanged"


# ---------------------------------------------------------------- the case file format

@dataclass
class Case:
    title: str
    line: int  # of the `// case:` line, 1-based
    input: str
    expect: str | None  # the expected program text; None: the stage changes nothing
    expect_line: int | None  # of the `// expect:` line; None when there is none (a no-op title)

    @property
    def no_op(self) -> bool:
        return self.expect is None


CASE_LINE = re.compile(r"^// case:(.*)$")
EXPECT_LINE = re.compile(r"^// expect:(.*)$")


def read_cases(path: Path) -> tuple:
    """(preamble text, [Case]) of a case file. Raises ValueError on a malformed file.

    >>> _, [case] = read_cases_text("// about\\n// case: no-op x\\np(1).\\n// expect: unchanged\\n")
    >>> case.title, case.input, case.no_op
    ('no-op x', 'p(1).\\n', True)
    """
    return read_cases_text(path.read_text(encoding="utf-8"), str(path))


def read_cases_text(text: str, where: str = "<cases>") -> tuple:
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if CASE_LINE.match(line.rstrip("\n"))]
    preamble = "".join(lines[:starts[0]] if starts else lines)
    cases, titles = [], set()
    for n, start in enumerate(starts):
        block = lines[start:starts[n + 1] if n + 1 < len(starts) else len(lines)]
        title = CASE_LINE.match(block[0].rstrip("\n")).group(1).strip()
        if not title:
            raise ValueError(f"{where}:{start + 1}: a case needs a title: `// case: WHAT IT SHOWS`")
        if title in titles:
            raise ValueError(f"{where}:{start + 1}: a second case titled {title!r}: titles name the tests")
        titles.add(title)
        marks = [i for i, line in enumerate(block) if EXPECT_LINE.match(line.rstrip("\n"))]
        if len(marks) > 1:
            raise ValueError(f"{where}:{start + marks[1] + 1}: case {title!r} has two `// expect:` lines")
        if not marks:
            if not title.startswith("no-op"):
                raise ValueError(f"{where}:{start + 1}: case {title!r} has no `// expect:` line "
                                 "(write `// expect: unchanged` if the stage must leave it alone)")
            cases.append(Case(title, start + 1, "".join(block[1:]), None, None))
            continue
        mark = marks[0]
        rest = EXPECT_LINE.match(block[mark].rstrip("\n")).group(1).strip()
        expected = "".join(block[mark + 1:])
        if rest not in ("", UNCHANGED):
            raise ValueError(f"{where}:{start + mark + 1}: `// expect:` is followed by the expected program on "
                             f"the next lines, or is `// expect: {UNCHANGED}`; found {rest!r}")
        if rest == UNCHANGED and expected.strip():
            raise ValueError(f"{where}:{start + mark + 1}: case {title!r} expects `{UNCHANGED}` and a program")
        if title.startswith("no-op") and rest != UNCHANGED:
            raise ValueError(f"{where}:{start + mark + 1}: case {title!r} is titled no-op: "
                             f"its expected block is `// expect: {UNCHANGED}`")
        cases.append(Case(title, start + 1, "".join(block[1:mark]), None if rest == UNCHANGED else expected,
                          start + mark + 1))
    return preamble, cases


def write_cases(path: Path, preamble: str, cases: list) -> None:
    """The case file back, each case's blocks separated by one blank line."""
    out = [preamble]
    for c in cases:
        out.append(f"// case: {c.title}\n{c.input.rstrip()}\n")
        if c.expect is None:
            if c.expect_line is not None or not c.title.startswith("no-op"):
                out.append(f"// expect: {UNCHANGED}\n")
        else:
            out.append(f"// expect:\n{c.expect.strip()}\n")
        out.append("\n")
    path.write_text("".join(out).rstrip("\n") + "\n", encoding="utf-8")


# ---------------------------------------------------------------- header examples

EXAMPLE_LINE = re.compile(r"^//  +\S")
ARROW = "// =>"


def header_example(text: str, where: str = "<stage>") -> tuple:
    """(input text, output text) of a stage file's header example; ValueError if it has none.

    The header is the file's leading run of `//` lines. Its example is the first run of
    consecutive header lines that are each either indented (`//` and two or more spaces,
    then text) or the arrow `// =>`, and that holds exactly one arrow: the input is the
    indented lines before the arrow, the output those after, both without the `//`.
    Input and output keep their line numbers (earlier lines become blank), so a parse
    error points at the stage file's own line.

    >>> header_example("// d: drop q.\\n//\\n//   p(1). q(2).\\n// =>\\n//   p(1).\\n//\\n// more\\nr1 x(1) :- y(1).\\n")
    ('\\n\\n   p(1). q(2).\\n', '\\n\\n\\n\\n   p(1).\\n')
    """
    return header_examples(text, where)[0]


def header_examples(text: str, where: str = "<stage>") -> list:
    """Every example of the header (a stage of two rewrites shows one each), in order:
    [(input text, output text)]; ValueError if there is none.

    >>> len(header_examples("// a\\n//   p(1).\\n// =>\\n//   p(1).\\n// b\\n//   q(1).\\n// =>\\n//   q(2).\\n"))
    2
    """
    header = []
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        header.append(line.rstrip())
    runs, run = [], []
    for i, line in enumerate(header + [""]):
        if EXAMPLE_LINE.match(line) or line == ARROW:
            run.append(i)
        elif run:
            runs.append(run)
            run = []
    examples = []
    for run in runs:
        arrows = [i for i in run if header[i] == ARROW]
        if not arrows:
            continue
        if len(arrows) > 1:
            raise ValueError(f"{where}:{arrows[1] + 1}: the header example has two `{ARROW}` lines")
        before = [i for i in run if i < arrows[0]]
        after = [i for i in run if i > arrows[0]]
        if not before:
            raise ValueError(f"{where}:{arrows[0] + 1}: the header example has no input before `{ARROW}`")

        def block(indices):
            return "\n" * indices[0] + "\n".join(header[i][2:] for i in indices) + "\n" if indices else ""

        examples.append((block(before), block(after)))
    if examples:
        return examples
    raise ValueError(f"{where}: the header has no example: indented `//   ` lines holding the input program, "
                     f"a line `{ARROW}`, then the output lines (docs/stages.md, \"Testing a stage\")")


# ---------------------------------------------------------------- canonical text

RANK = ((S.Declaration, 0), (S.Materialize, 0), (S.IODirective, 1), (S.Fact, 2), (S.Rule, 3), (S.Query, 4),
        (S.Plan, 5), (S.Component, 6))


def canonical(program: S.Program) -> str:
    """The program as it reads back from the catalog, printed one statement per line,
    statements sorted (declarations, I/O, facts, rules by label, queries): what two
    programs must share to count as the same. Programs with components keep their order."""
    program = decode(encode(program), program.name)
    if any(isinstance(s, S.Component) for s in program.statements):
        return format_program(program)
    declared = declared_columns(program)

    def key(s):
        return next(rank for kind, rank in RANK if isinstance(s, kind)), format_statement(s, declared)

    return format_program(replace(program, statements=tuple(sorted(program.statements, key=key))))


def assert_same_program(actual: str, expected: str, what: str) -> None:
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            "expected", "actual"))
        pytest.fail(f"{what}\n{diff}", pytrace=False)


# ---------------------------------------------------------------- parameters

STAGES = stages()
NO_CASE_FILE = "<no case file>"


def case_file(stage: str) -> Path:
    return CASES / f"{stage}.dl"


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


def the_case(stage: str, title: str) -> Case:
    path = case_file(stage)
    if not path.exists():
        pytest.fail(f"stage {stage} has no cases: write {path.relative_to(FIXTURES.parent.parent)} "
                    "(titled `// case:` blocks, each an input program, `// expect:` and the program the stage "
                    "makes of it, and at least one no-op case; docs/stages.md, \"Testing a stage\")", pytrace=False)
    try:
        _, cases = read_cases(path)
    except ValueError as e:
        cases, problem = [], str(e)
    else:
        problem = None
    if problem:
        pytest.fail(problem, pytrace=False)
    found = [c for c in cases if c.title == title]
    if not cases:
        pytest.fail(f"{path} has no cases: start each with `// case: TITLE`", pytrace=False)
    if not found:
        pytest.fail(f"{path} has no case titled {title!r}", pytrace=False)
    return found[0]


CASE_PARAMS = [pytest.param(stage, title, id=f"{stage}-{title}") for stage in sorted(STAGES)
               for title in case_titles(stage)]


def case_program(stage: str, case: Case) -> S.Program:
    """A case's input; blank lines before it keep the case file's line numbers."""
    try:
        return parse_program("\n" * case.line + case.input, str(case_file(stage)), "case")
    except EvitaError as e:
        problem = e.render()
    pytest.fail(f"the input of case {case.title!r} does not parse:\n{problem}", pytrace=False)


def example_programs(stage: str, which: int = 0) -> tuple:
    """(header input, header output) of a stage file's first (or `which`) example as programs."""
    path = STAGES[stage].path
    before, after = header_examples(path.read_text(encoding="utf-8"), str(path))[which]
    return parse_program(before, str(path), "example"), parse_program(after, str(path), "example")


def example_count(stage: str) -> int:
    path = STAGES[stage].path
    try:
        return len(header_examples(path.read_text(encoding="utf-8"), str(path)))
    except ValueError:
        return 1  # test_header_example reports it


# ---------------------------------------------------------------- the tests

@pytest.mark.parametrize("stage,title", CASE_PARAMS)
def test_case(spark, stage, title):
    case = the_case(stage, title)
    program = case_program(stage, case)
    actual, unchanged = canonical(stage_alone(spark, stage, program)), canonical(program)

    def expected_text() -> str:
        if case.no_op:
            return unchanged
        return canonical(parse_program("\n" * case.expect_line + case.expect, str(case_file(stage)), "case"))

    if UPDATE and not title.startswith("no-op"):  # a no-op title is a claim: it is never rewritten
        try:
            current = expected_text()
        except EvitaError:  # the expected text does not parse: replace it too
            current = None
        if current != actual:
            preamble, cases = read_cases(case_file(stage))
            new = None if actual == unchanged else actual
            write_cases(case_file(stage), preamble, [replace(c, expect=new) if c.title == title else c for c in cases])
            return
    try:
        expected = expected_text()
    except EvitaError as e:
        expected, problem = None, e.render()
    if expected is None:
        pytest.fail(f"the expected program of case {title!r} does not parse:\n{problem}", pytrace=False)
    what = "the stage changed a program it must leave alone" if case.no_op else "the stage's output differs"
    assert_same_program(actual, expected, f"{case_file(stage)}:{case.line}: {what} (case {title!r})")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_cases_include_a_no_op(stage):
    path = case_file(stage)
    if not path.exists():
        pytest.skip("no case file (test_case fails for it)")
    _, cases = read_cases(path)
    assert any(c.no_op for c in cases), (
        f"{path}: no no-op case: add one whose program the stage must leave alone "
        f"(`// expect: {UNCHANGED}`, or a title starting with no-op)")


@pytest.mark.parametrize("stage,which", [(s, i) for s in sorted(STAGES) for i in range(example_count(s))],
                         ids=[f"{s}-{i + 1}" for s in sorted(STAGES) for i in range(example_count(s))])
def test_header_example(spark, stage, which):
    try:
        before, after = example_programs(stage, which)
    except Exception as e:  # no example, or one that does not parse
        problem = _message(e)
    else:
        problem = None
    if problem:
        pytest.fail(f"the header example of {STAGES[stage].path} is not executable:\n{problem}", pytrace=False)
    assert_same_program(canonical(stage_alone(spark, stage, before)), canonical(after),
                        f"{STAGES[stage].path}: the stage does not turn its header example's input into its output")


def test_the_formats_doctests():
    import doctest
    import sys

    assert doctest.testmod(sys.modules[__name__]).failed == 0


def _message(e: Exception) -> str:
    render = getattr(e, "render", None)
    return render() if callable(render) else str(e)


# ---------------------------------------------------------------- the differential check

def differential_params() -> list:
    out = []
    for stage in sorted(STAGES):
        out += [pytest.param(stage, f"example {p.name}", id=f"{stage}-example {p.name}") for p in EXAMPLE_PROGRAMS]
        out.append(pytest.param(stage, "header example", id=f"{stage}-header example"))
        out += [pytest.param(stage, f"case: {t}", id=f"{stage}-case: {t}") for t in case_titles(stage)
                if t != NO_CASE_FILE and not t.startswith("<malformed")]
    return out


def read_facts(program: S.Program, folder: Path) -> dict:
    """The `.input` relations of a Soufflé program from `folder/<relation>.facts` (tab
    separated), typed by their declarations; {} when the folder does not exist."""
    if not folder.is_dir():
        return {}
    from evita.runtime.io import DECLARED

    python = {"bigint": int, "double": float, "boolean": lambda v: v == "true", "string": str}
    types = {d.relation: [python[DECLARED.get(c.type, "string")] for c in d.columns]
             for d in program.of(S.Declaration)}
    out = {}
    for io in program.of(S.IODirective):
        path = folder / f"{io.relation}.facts"
        if io.direction == "input" and path.exists():
            rows = [line.split("\t") for line in path.read_text().splitlines() if line]
            out[io.relation] = {tuple(convert(v) for convert, v in zip(types.get(io.relation) or [str] * len(r), r))
                                for r in rows}
    return out


def user_answers(original: S.Program, program: S.Program, inputs: dict) -> dict:
    """What a user of `original` reads, evaluated for `program` on the reference
    evaluator: its query answers and `.output` relations when it has any, else every
    relation of `original` (helper relations a stage adds are not compared)."""
    db = oracle.evaluate(program, inputs)
    queries = list(original.of(S.Query))
    outputs = [io.relation for io in original.of(S.IODirective) if io.direction == "output"]
    if not queries and not outputs:
        outputs = sorted(relations_of(original))
    answers = {format_statement(q): {t for t in db.get(q.atom.relation, ())
                                      if oracle._match(q.atom.args, t, {}) is not None} for q in queries}
    answers.update({name: set(db.get(name, ())) for name in outputs})
    if any(isinstance(s, S.Component) for s in original.statements):
        # decouple and partition move a component's work to A/2 or A#1: the same node A
        from conftest import logical_value

        answers = {name: {tuple(map(logical_value, t)) for t in rows}
                   for name, rows in answers.items()}
    return answers


def relations_of(program: S.Program) -> set:
    names = {f.atom.relation for f in program.facts} | {d.relation for d in program.of(S.Declaration)}
    names |= {d.relation for d in program.of(S.Materialize)}
    for r in program.rules:
        names.add(r.head.relation)
        names |= {lit.relation for lit in r.body if isinstance(lit, S.Atom)}
    return names


def differential_program(spark, stage: str, which: str) -> tuple:
    """(input program, program after the stage, inputs) for one differential parameter."""
    if which.startswith("example "):
        path = EXAMPLES / which[len("example "):]
        before, after = after_stage(spark, stage, path)
        return before, after, read_facts(before, path.with_suffix(""))
    if which == "header example":
        try:
            before, _ = example_programs(stage)
        except Exception as e:
            pytest.skip(f"the header example is not executable (test_header_example fails): {str(e)[:200]}")
    else:
        before = case_program(stage, the_case(stage, which[len("case: "):]))
    return before, stage_alone(spark, stage, before), {}


@pytest.mark.parametrize("stage,which", differential_params())
def test_same_answers_with_and_without_the_stage(spark, stage, which):
    before, after, inputs = differential_program(spark, stage, which)
    try:
        want = user_answers(before, before, inputs)
    except (oracle.Unstratifiable, NotImplementedError, RuntimeError) as e:
        pytest.skip(f"the reference evaluator cannot evaluate it: {type(e).__name__}: {e}")
    have = user_answers(before, after, inputs)
    if canonical(after) != canonical(before):
        assert any(want.values()), (f"{stage} changes {which}, but its answers are all empty, so this check "
                                    "shows nothing: give it facts")
    differ = {name: (sorted(want[name] - have[name], key=str)[:5], sorted(have[name] - want[name], key=str)[:5])
              for name in want if have[name] != want[name]}
    assert not differ, (f"{stage} changes what {which} answers (missing, extra; at most 5 each): {differ}\n"
                        f"after the stage:\n{format_program(after)}")


# ---------------------------------------------------------------- triggers

TRIGGERED = sorted(name for name, f in STAGES.items() if f.trigger is not None)


def trigger_says(stage: str, program: S.Program):
    """True/False: the stage's trigger, asked in this process as the scheduler asks it;
    None when it needs Spark (the stage then always runs)."""
    from evita.bootstrap.scheduler import in_process_or_none
    from evita.bootstrap.stage import APPLIES

    out = in_process_or_none(STAGES[stage].trigger, encode(program), program.name, [APPLIES], stage)
    return None if out is None else bool(out.tuples[APPLIES])


def wide_rule(program: S.Program) -> bool:
    """Some rule has three positive atoms or more: what the statistics are for."""
    return any(sum(isinstance(lit, S.Atom) and not lit.negated for lit in r.body) >= 3 for r in program.rules)


@pytest.mark.parametrize("stage,which", [p for p in differential_params() if p.values[0] in TRIGGERED])
def test_a_trigger_that_finds_nothing_means_the_stage_changes_nothing(spark, stage, which):
    """A skipped stage must be one that would have changed nothing (stats: nothing a
    join-order stage would read). The stage's run is the differential check's, cached."""
    before, after, _ = differential_program(spark, stage, which)
    says = trigger_says(stage, before)
    if says is not False:
        return
    if stage == "stats" and canonical(after) != canonical(before):
        assert not wide_rule(before), f"stats skips {which}, but a rule there has three positive atoms"
    else:
        assert_same_program(canonical(after), canonical(before),
                            f"{stage}'s trigger found nothing to do in {which}, but the stage changes it")


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
