"""Testing a stage: the checks `evita test-stage` runs and `tests/test_stage_cases.py`
runs on every stage of the repository, one code for both.

For a stage:
- its cases: titled input programs with the program the stage alone must turn them into
  (`// case: TITLE`, input, `// expect:`, expected; `// expect: unchanged`, or a title
  starting with `no-op`, for a case the stage must leave alone; every stage needs at
  least one);
- its header example(s): the `//   ` indented input, `// =>`, and output at the top of
  the stage file, run as a case;
- the differential check: every example program, case input and header example answers
  the same with and without the stage, on the reference evaluator (`runtime/oracle.py`);
- trigger soundness: where the stage's trigger (`stage::applies`) finds nothing to do,
  the stage changes nothing.

Programs compare as canonical text: parsed, stored in the catalog, read back and printed
(`format_program`), one statement per line, statements sorted; so layout, comments and
the order of statements do not matter. The format is in docs/stages.md, "Testing a stage".
A check that fails raises `CheckFailed` with the message a user reads; one that cannot
say anything raises `CheckSkipped`.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from . import syntax as S
from .diagnostics import EvitaError

UNCHANGED = "unchanged"


class CheckFailed(Exception):
    """A check found the stage wrong; the message says where and how."""


class CheckSkipped(Exception):
    """A check that cannot say anything here (the oracle cannot evaluate the program)."""


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
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode
    from evita.catalog.printer import declared_columns, format_program, format_statement

    program = decode(encode(program), program.name)
    if any(isinstance(s, S.Component) for s in program.statements):
        return format_program(program)
    declared = declared_columns(program)

    def key(s):
        return next(rank for kind, rank in RANK if isinstance(s, kind)), format_statement(s, declared)

    return format_program(replace(program, statements=tuple(sorted(program.statements, key=key))))


def same_program(actual: str, expected: str, what: str) -> None:
    """Raises CheckFailed with `what` and a unified diff when the texts differ."""
    if actual != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            "expected", "actual"))
        raise CheckFailed(f"{what}\n{diff}")


def rendered(e: Exception) -> str:
    render = getattr(e, "render", None)
    return render() if callable(render) else str(e)


# ---------------------------------------------------------------- the differential check's answers

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


def logical_value(v):
    """A value as its logical node when it is an address (`A/2`, `A#1`, `A/2#1` are A):
    decouple and partition move a component's work to such copies."""
    from evita.runtime.simulate import logical

    return logical(v) if isinstance(v, str) else v


def user_answers(original: S.Program, program: S.Program, inputs: dict) -> dict:
    """What a user of `original` reads, evaluated for `program` on the reference
    evaluator: its query answers and `.output` relations when it has any, else every
    relation of `original` (helper relations a stage adds are not compared)."""
    from evita.catalog.printer import format_statement
    from evita.runtime import oracle

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
        answers = {name: {tuple(map(logical_value, t)) for t in rows} for name, rows in answers.items()}
    return answers


def relations_of(program: S.Program) -> set:
    names = {f.atom.relation for f in program.facts} | {d.relation for d in program.of(S.Declaration)}
    names |= {d.relation for d in program.of(S.Materialize)}
    for r in program.rules:
        names.add(r.head.relation)
        names |= {lit.relation for lit in r.body if isinstance(lit, S.Atom)}
    return names


def wide_rule(program: S.Program) -> bool:
    """Some rule has three positive atoms or more: what the statistics are for."""
    return any(sum(isinstance(lit, S.Atom) and not lit.negated for lit in r.body) >= 3 for r in program.rules)


# ---------------------------------------------------------------- one stage's checks

class StageChecks:
    """The checks of one stage (`stage`, a StageFile), with its case file `cases` (None:
    it has none) and the example programs the differential check also runs on (each
    with its facts in a folder of its name, if any)."""

    def __init__(self, spark, stage, cases: Optional[Path], examples=(), alone=None):
        self.spark, self.stage, self.cases, self.examples = spark, stage, cases, list(examples)
        self._alone: dict = {}
        self._run_alone = alone  # (program) -> program after the stage, where the caller keeps its own runs

    # -- running the stage alone

    def alone(self, program: S.Program) -> S.Program:
        """`program` after the stage alone (encode -> run_stage -> apply -> decode), once
        per program text."""
        from evita.catalog.decode import decode
        from evita.catalog.encode import encode

        from . import stage as st

        if self._run_alone is not None:
            return self._run_alone(program)
        key = (program.name, program.path, program.text)
        if key not in self._alone:
            rows = encode(program)
            out = st.run_stage(self.spark, self.stage, rows, program.name)
            self._alone[key] = decode(st.apply(rows, out), program.name)
        return self._alone[key]

    # -- the cases

    def case_titles(self) -> list:
        """The titles of the cases; ValueError for a malformed file, [] when there is none."""
        if self.cases is None or not self.cases.exists():
            return []
        return [c.title for c in read_cases(self.cases)[1]]

    def missing_cases(self) -> str:
        where = self.cases if self.cases is not None else f"cases/{self.stage.name}.dl beside the stage"
        return (f"stage {self.stage.name} has no cases: write {where} (titled `// case:` blocks, each an input "
                "program, `// expect:` and the program the stage makes of it, and at least one no-op case; "
                "docs/stages.md, \"Testing a stage\")")

    def the_case(self, title: str) -> Case:
        if self.cases is None or not self.cases.exists():
            raise CheckFailed(self.missing_cases())
        try:
            _, cases = read_cases(self.cases)
        except ValueError as e:
            raise CheckFailed(str(e)) from None
        if not cases:
            raise CheckFailed(f"{self.cases} has no cases: start each with `// case: TITLE`")
        found = [c for c in cases if c.title == title]
        if not found:
            raise CheckFailed(f"{self.cases} has no case titled {title!r}")
        return found[0]

    def case_program(self, case: Case) -> S.Program:
        """A case's input; blank lines before it keep the case file's line numbers."""
        from .parser import parse_program

        try:
            return parse_program("\n" * case.line + case.input, str(self.cases), "case")
        except EvitaError as e:
            raise CheckFailed(f"the input of case {case.title!r} does not parse:\n{e.render()}") from None

    def expected_text(self, case: Case, program: S.Program) -> str:
        from .parser import parse_program

        if case.no_op:
            return canonical(program)
        try:
            return canonical(parse_program("\n" * case.expect_line + case.expect, str(self.cases), "case"))
        except EvitaError as e:
            raise CheckFailed(f"the expected program of case {case.title!r} does not parse:\n{e.render()}") from None

    def check_case(self, title: str, update: bool = False) -> None:
        """The stage alone turns the case's input into its expected program. `update`:
        rewrite the expected block from what the stage does instead (never a no-op's)."""
        case = self.the_case(title)
        program = self.case_program(case)
        actual, unchanged = canonical(self.alone(program)), canonical(program)
        if update and not title.startswith("no-op"):  # a no-op title is a claim: it is never rewritten
            try:
                current = self.expected_text(case, program)
            except CheckFailed:  # the expected text does not parse: replace it too
                current = None
            if current != actual:
                preamble, cases = read_cases(self.cases)
                new = None if actual == unchanged else actual
                write_cases(self.cases, preamble, [replace(c, expect=new) if c.title == title else c for c in cases])
                return
        expected = self.expected_text(case, program)
        what = "the stage changed a program it must leave alone" if case.no_op else "the stage's output differs"
        same_program(actual, expected, f"{self.cases}:{case.line}: {what} (case {title!r})")

    def check_no_op_present(self) -> None:
        if self.cases is None or not self.cases.exists():
            raise CheckSkipped("no case file (its cases fail for it)")
        _, cases = read_cases(self.cases)
        if not any(c.no_op for c in cases):
            raise CheckFailed(f"{self.cases}: no no-op case: add one whose program the stage must leave alone "
                              f"(`// expect: {UNCHANGED}`, or a title starting with no-op)")

    # -- the header example(s)

    def example_count(self) -> int:
        try:
            return len(header_examples(self.stage.path.read_text(encoding="utf-8"), str(self.stage.path)))
        except ValueError:
            return 1  # check_header reports it

    def example_programs(self, which: int = 0) -> tuple:
        """(header input, header output) of the stage file's first (or `which`) example."""
        from .parser import parse_program

        path = self.stage.path
        before, after = header_examples(path.read_text(encoding="utf-8"), str(path))[which]
        return parse_program(before, str(path), "example"), parse_program(after, str(path), "example")

    def check_header(self, which: int = 0) -> None:
        try:
            before, after = self.example_programs(which)
        except Exception as e:  # no example, or one that does not parse
            raise CheckFailed(f"the header example of {self.stage.path} is not executable:\n{rendered(e)}") from None
        same_program(canonical(self.alone(before)), canonical(after),
                     f"{self.stage.path}: the stage does not turn its header example's input into its output")

    # -- the differential check and the trigger

    def differential_names(self) -> list:
        """What the differential check runs on: 'example NAME', 'header example', 'case: TITLE'."""
        try:
            titles = self.case_titles()
        except ValueError:
            titles = []
        return ([f"example {p.name}" for p in self.examples] + ["header example"]
                + [f"case: {t}" for t in titles])

    def differential_program(self, which: str) -> tuple:
        """(input program, program after the stage, inputs) for one of `differential_names`."""
        from .parser import parse_file

        if which.startswith("example "):
            path = next(p for p in self.examples if p.name == which[len("example "):])
            before = parse_file(path)
            return before, self.alone(before), read_facts(before, path.with_suffix(""))
        if which == "header example":
            try:
                before, _ = self.example_programs()
            except Exception as e:
                raise CheckSkipped(f"the header example is not executable (its own check fails): {str(e)[:200]}"
                                   ) from None
        else:
            before = self.case_program(self.the_case(which[len("case: "):]))
        return before, self.alone(before), {}

    def check_differential(self, which: str) -> None:
        """The program answers the same with and without the stage (the oracle)."""
        from evita.catalog.printer import format_program
        from evita.runtime import oracle

        before, after, inputs = self.differential_program(which)
        try:
            want = user_answers(before, before, inputs)
        except (oracle.Unstratifiable, NotImplementedError, RuntimeError) as e:
            raise CheckSkipped(f"the reference evaluator cannot evaluate it: {type(e).__name__}: {e}") from None
        have = user_answers(before, after, inputs)
        if canonical(after) != canonical(before) and not any(want.values()):
            raise CheckFailed(f"{self.stage.name} changes {which}, but its answers are all empty, so this check "
                              "shows nothing: give it facts")
        differ = {name: (sorted(want[name] - have[name], key=str)[:5], sorted(have[name] - want[name], key=str)[:5])
                  for name in want if have[name] != want[name]}
        if differ:
            raise CheckFailed(f"{self.stage.name} changes what {which} answers (missing, extra; at most 5 each): "
                              f"{differ}\nafter the stage:\n{format_program(after)}")

    def trigger_says(self, program: S.Program) -> Optional[bool]:
        """True/False: the stage's trigger, asked in this process as the scheduler asks it;
        None when it needs Spark (the stage then always runs), or the stage has none."""
        from evita.catalog.encode import encode

        from .scheduler import in_process_or_none
        from .stage import APPLIES

        if self.stage.trigger is None:
            return None
        out = in_process_or_none(self.stage.trigger, encode(program), program.name, [APPLIES], self.stage.name)
        return None if out is None else bool(out.tuples[APPLIES])

    def check_trigger(self, which: str) -> None:
        """A skipped stage must be one that would have changed nothing (stats: nothing a
        join-order stage would read)."""
        before, after, _ = self.differential_program(which)
        if self.trigger_says(before) is not False:
            return
        if self.stage.name == "stats" and canonical(after) != canonical(before):
            if wide_rule(before):
                raise CheckFailed(f"stats skips {which}, but a rule there has three positive atoms")
            return
        same_program(canonical(after), canonical(before),
                     f"{self.stage.name}'s trigger found nothing to do in {which}, but the stage changes it")

    # -- all of them, for `evita test-stage`

    def all_checks(self) -> list:
        """[(name, check)] of every check of the stage, each a call taking no argument."""
        try:
            titles = self.case_titles()
        except ValueError as e:
            problem = str(e)

            def malformed():
                raise CheckFailed(problem)
            return [("case file", malformed)]
        checks = [(f"case: {t}", lambda t=t: self.check_case(t)) for t in titles]
        if not titles:
            checks.append(("cases", lambda: self.the_case("")))
        checks.append(("a no-op case", self.check_no_op_present))
        checks += [(f"header example {i + 1}", lambda i=i: self.check_header(i)) for i in range(self.example_count())]
        for name in self.differential_names():
            checks.append((f"same answers: {name}", lambda n=name: self.check_differential(n)))
            if self.stage.trigger is not None:
                checks.append((f"trigger sound: {name}", lambda n=name: self.check_trigger(n)))
        return checks
