"""`evita test-suite DIR`: a conformance corpus of small programs, run in one JVM.

A case is a directory `DIR/<construct>/<case>/` holding

    prog.dl              the program
    facts/               its input files (Soufflé's tab-separated .facts), if it has any
    expected/<rel>.csv   one file per `.output` directive, as Soufflé writes it (named
                         as the directive's `filename=` says, if it does)
    expected/error.txt   instead: the program must be rejected with a diagnostic whose
                         code or message contains each non-empty line of this file
    options              optional: `evita run` options the case runs with, as written on a
                         command line (`--number-bits 32`: Soufflé's default 32-bit build);
                         an `options` file in `DIR/<construct>/` holds for each of its cases
                         (the case's own come after, so they win)

Each case runs as `evita run prog.dl -F facts -D out` does (`cli_commands.run_file`:
the same parse, checks, stages, planner, engine and output writer), in the session
already running. Outputs are compared as Soufflé's own test harness compares them:
the lines of each file, sorted. A file the program writes that `expected/` does not
hold, or the other way round, is a failure.

`DIR/KNOWN_FAILURES` lists cases Evita gets wrong today, one a line: the case path
(`construct/case`), then a one-line reason. They are run and reported apart (xfail);
one that passes is an error too, so the list stays honest.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

PASS, FAIL, XFAIL, XPASS = "pass", "FAIL", "xfail", "XPASS"


@dataclass
class Case:
    construct: str
    name: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.construct}/{self.name}"

    @property
    def options(self) -> list:
        """The `evita run` options of the case: its construct's `options` file, then its own."""
        import shlex

        found = []
        for f in (self.path.parent / "options", self.path / "options"):
            if f.is_file():
                found += shlex.split(f.read_text(encoding="utf-8"), comments=True)
        return found

    @property
    def expected_error(self) -> Optional[list]:
        f = self.path / "expected" / "error.txt"
        if not f.exists():
            return None
        return [line.strip() for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class Outcome:
    case: Case
    status: str  # PASS, FAIL, XFAIL or XPASS
    seconds: float
    problem: str = ""  # why it failed (empty when it passed)
    reason: str = ""  # the KNOWN_FAILURES reason, if listed
    phases: dict = field(default_factory=dict)


def find_cases(root: Path, construct: Optional[str] = None) -> list:
    """Every case under `root`, sorted by construct and name; a directory is a case when
    it holds prog.dl."""
    root = Path(root)
    cases = []
    for prog in sorted(root.glob("*/*/prog.dl")):
        c = Case(prog.parent.parent.name, prog.parent.name, prog.parent)
        if construct is None or c.construct == construct:
            cases.append(c)
    return cases


def known_failures(root: Path) -> dict:
    """case id -> reason, from `root/KNOWN_FAILURES` (`#` starts a comment line)."""
    f = Path(root) / "KNOWN_FAILURES"
    if not f.exists():
        return {}
    out = {}
    for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        case, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{f}:{n}: {case} has no reason; write `construct/case  why it fails`")
        out[case.strip("/")] = reason.strip()
    return out


def compare(expected_dir: Path, out_dir: Path) -> str:
    """'' when every expected file matches the written one as sorted lines, else what differs."""
    want = {p.name: p for p in expected_dir.iterdir() if p.is_file() and p.name != "error.txt"}
    got = {p.name: p for p in out_dir.iterdir() if p.is_file()} if out_dir.exists() else {}
    problems = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            problems.append(f"{name}: not written")
            continue
        if name not in want:
            problems.append(f"{name}: written, but not in expected/")
            continue
        a = sorted(_lines(want[name]))
        b = sorted(_lines(got[name]))
        if a != b:
            missing = [x for x in a if x not in b]
            extra = [x for x in b if x not in a]
            problems.append(f"{name}: missing {_show(missing)}; unexpected {_show(extra)}"
                            if missing or extra else f"{name}: the same lines, other multiplicities")
    return "; ".join(problems)


def _lines(path: Path) -> list:
    return path.read_text(encoding="utf-8").splitlines()


def _show(lines: list, limit: int = 4) -> str:
    shown = ", ".join(repr(x) for x in lines[:limit])
    return f"[{shown}{', ...' if len(lines) > limit else ''}]" if lines else "[]"


def run_case(spark, case: Case, out_dir: Path, verbose: bool = False) -> tuple:
    """(problem, phases): problem is '' when the case passed."""
    from ..bootstrap.cli import build_parser, err
    from ..bootstrap.diagnostics import EvitaError
    from ..bootstrap.source import empty_warning
    from ..bootstrap.stopping import describe_failure
    from .cli_commands import run_file

    argv = ["run", str(case.path / "prog.dl"), "-D", str(out_dir)]
    if (case.path / "facts").is_dir():
        argv += ["-F", str(case.path / "facts")]
    try:
        args = build_parser().parse_args(argv + case.options + (["--verbose"] if verbose else []))
    except SystemExit:  # argparse has said what is wrong on stderr
        return f"its options file holds options `evita run` does not take: {' '.join(case.options)}", {}
    # A case's catalog is not stored: writing hundreds of catalogs to the warehouse took a
    # quarter of the corpus' time, and a case is judged by its outputs (`evita run` on the
    # same program stores it).
    args.store = False
    wanted = case.expected_error
    found: list = []  # (code, rendered text) of the diagnostics the program got
    done = None
    with err.capture() as captured:  # warnings and notes: shown with -v only
        try:
            done = run_file(args, spark=spark)
        except EvitaError as e:
            found = [(d.code, d.render(e._source_of(d))) for d in e.diagnostics]
        except Exception as e:  # noqa: BLE001 - a crash is this case's failure, not the run's
            if wanted is not None:
                return f"crashed instead of a diagnostic: {describe_failure(e)}", {}
            return f"crashed: {describe_failure(e)}", {}
    if verbose and captured.get().strip():
        err.print(captured.get(), markup=False, end="")
    if done is None and not found:  # the program computes nothing: a warning (and `evita run` exits 0)
        from ..bootstrap.parser import parse_file

        w = empty_warning(parse_file(args.program))
        found = [(w.code, w.render())] if w is not None else []
    phases = dict(done[4].seconds) if done is not None else {}
    if wanted is not None:
        if not found:
            return f"ran, but a diagnostic was expected: {' / '.join(wanted)}", phases
        missing = [w for w in wanted if not any(w in code or w in text for code, text in found)]
        if missing:
            return (f"diagnostic {_first_line(found)} does not mention {' / '.join(missing)}"), phases
        return "", phases
    if found:
        return f"rejected: {_first_line(found)}", phases
    return compare(case.path / "expected", out_dir), phases


def _first_line(found: list) -> str:
    code, text = found[0]
    return f"[{code}] {text.splitlines()[0] if text else ''}"


def run_suite(spark, root: Path, construct: Optional[str] = None, verbose: bool = False,
              on_case=None) -> list:
    """Run every case (of one construct) in `spark`; an Outcome per case. `on_case`:
    called with each Outcome as it is known (progress)."""
    root = Path(root)
    known = known_failures(root)
    cases = find_cases(root, construct)
    unknown = sorted(set(known) - {c.id for c in find_cases(root)})
    if unknown:
        raise ValueError(f"{root / 'KNOWN_FAILURES'} lists cases that do not exist: {', '.join(unknown)}")
    outcomes = []
    scratch = Path(tempfile.mkdtemp(prefix="evita-suite-"))
    try:
        for i, case in enumerate(cases):
            out_dir = scratch / f"{i}"
            started = time.perf_counter()
            problem, phases = run_case(spark, case, out_dir, verbose)
            seconds = time.perf_counter() - started
            reason = known.get(case.id, "")
            if case.id in known:
                status = XFAIL if problem else XPASS
                if not problem:
                    problem = "passes, but KNOWN_FAILURES lists it: take it off the list"
            else:
                status = FAIL if problem else PASS
            outcome = Outcome(case, status, seconds, problem, reason, phases)
            outcomes.append(outcome)
            if on_case is not None:
                on_case(outcome)
            shutil.rmtree(out_dir, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcomes


def failed(outcomes: list) -> list:
    """The outcomes that make the suite fail: unexpected failures and unexpected passes."""
    return [o for o in outcomes if o.status in (FAIL, XPASS)]


def by_construct(outcomes: list) -> dict:
    """construct -> {status: count}, constructs in order."""
    table: dict = {}
    for o in outcomes:
        row = table.setdefault(o.case.construct, {PASS: 0, FAIL: 0, XFAIL: 0, XPASS: 0})
        row[o.status] += 1
    return table


def markdown_table(outcomes: list) -> str:
    """The pass rate by construct as a Markdown table (docs/language.md)."""
    lines = ["| construct | cases | pass | known failures | rate |", "|---|---:|---:|---:|---:|"]
    total = {PASS: 0, FAIL: 0, XFAIL: 0, XPASS: 0}
    for construct, row in by_construct(outcomes).items():
        n = sum(row.values())
        passed = row[PASS] + row[XPASS]
        for k in total:
            total[k] += row[k]
        lines.append(f"| {construct} | {n} | {passed} | {row[XFAIL] + row[FAIL]} | {100 * passed / n:.0f}% |")
    n = sum(total.values())
    passed = total[PASS] + total[XPASS]
    lines.append(f"| **all** | {n} | {passed} | {total[XFAIL] + total[FAIL]} | {100 * passed / max(n, 1):.0f}% |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the command

def add_arguments(subparsers, parents) -> None:
    c = subparsers.add_parser("test-suite", parents=parents,
                              help="run a conformance corpus (DIR/<construct>/<case>/prog.dl) in one JVM")
    c.add_argument("dir", help="the corpus, e.g. tests/souffle")
    c.add_argument("--construct", metavar="NAME", help="only the cases of this construct")
    c.add_argument("-v", action="store_true", dest="each", help="a line per case, with what went wrong")
    c.add_argument("--markdown", action="store_true", help="also print the pass table as Markdown")
    c.set_defaults(func=cmd_test_suite)


def cmd_test_suite(args) -> int:
    import sys

    from rich.console import Console

    from ..bootstrap.diagnostics import UserError
    from .session import spark_session

    root = Path(args.dir)
    if not root.is_dir():
        raise UserError(f"{args.dir}: no such directory")
    if not find_cases(root, args.construct):
        raise UserError(f"{args.dir}: no cases" + (f" of construct {args.construct}" if args.construct else ""))
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    spark = spark_session(master=getattr(args, "master", None), remote=getattr(args, "remote", None))

    def progress(o: Outcome) -> None:
        if args.each or o.status in (FAIL, XPASS):
            console.print(f"{o.status:<5} {o.case.id} ({o.seconds:.2f} s)" + (f": {o.problem}" if o.problem else ""),
                          markup=False, soft_wrap=True)

    started = time.perf_counter()
    try:
        outcomes = run_suite(spark, root, args.construct, getattr(args, "verbose", False), progress)
    except ValueError as e:
        raise UserError(str(e)) from None
    report(console, outcomes, time.perf_counter() - started)
    if args.each:
        console.print(phase_table(outcomes))
    if args.markdown:
        console.print(markdown_table(outcomes), markup=False)
    return 1 if failed(outcomes) else 0


def report(console, outcomes: list, seconds: float) -> None:
    from rich.table import Table

    t = Table(title=f"{len(outcomes)} cases in {seconds:.1f} s")
    for col in ("construct", "cases", "pass", "fail", "xfail", "xpass", "rate"):
        t.add_column(col, justify="left" if col == "construct" else "right")
    for construct, row in by_construct(outcomes).items():
        n = sum(row.values())
        t.add_row(construct, str(n), str(row[PASS]), _red(row[FAIL]), str(row[XFAIL]), _red(row[XPASS]),
                  f"{100 * (row[PASS] + row[XPASS]) / n:.0f}%")
    console.print(t)
    xfails = [o for o in outcomes if o.status == XFAIL]
    if xfails:
        console.print(f"known failures ({len(xfails)}):")
        for o in xfails:
            console.print(f"  xfail {o.case.id}: {o.reason}", markup=False, soft_wrap=True)
    bad = failed(outcomes)
    n_pass = sum(o.status == PASS for o in outcomes)
    console.print(f"{n_pass} passed, {len(xfails)} known failures, "
                  f"{sum(o.status == FAIL for o in outcomes)} failed, {sum(o.status == XPASS for o in outcomes)} "
                  f"passed unexpectedly" + ("" if not bad else ": the suite fails"), markup=False)


def phase_table(outcomes: list):
    """Where the time of the cases went: `evita run`'s phases summed over the cases, and
    the slowest cases."""
    from rich.table import Table

    total: dict = {}
    for o in outcomes:
        for name, seconds in o.phases.items():
            total[name] = total.get(name, 0.0) + seconds
    t = Table(title="time by phase, all cases")
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    t.add_column("per case", justify="right")
    for name, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        t.add_row(name, f"{seconds:.1f}", f"{seconds / max(len(outcomes), 1):.2f}")
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    t.caption = "slowest: " + ", ".join(f"{o.case.id} {o.seconds:.1f} s" for o in slowest)
    return t


def _red(n: int) -> str:
    return f"[red]{n}[/]" if n else "0"
