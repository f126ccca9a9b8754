"""The `evita` command line.

    evita load PROGRAM            parse, check and store a program in the catalog
    evita catalog [TABLE]         show catalog tables (all programs, or --program NAME)
    evita sql "QUERY"             Spark SQL over the catalog (tables evita.rule, ...)
    evita print NAME              the program text, read back from the catalog
    evita plan / run PROGRAM      the physical dataflow / run it (runtime)

Parsing and checking happen before Spark starts, so a bad program fails fast and
leaves the catalog untouched.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from .activity import doing
from .compiling import CompileFailed, StageOptions, compile_and_store, wants_dataflow  # noqa: F401 (re-exported)
from .diagnostics import EvitaError, UserError, plural

# Piped output gets a wide page instead of rich's 80 columns, so tables stay one row per row.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 240)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 240)


# One command, then the process ends: Python's cycle collector, tuned for long-lived
# processes, would scan the parse tree and the catalog's rows again and again (at 5,000
# rules, half of the parse's time went to collections, growing faster than the program).
# Collecting young objects 100 times less often keeps that linear and small.
GC_THRESHOLD = (100_000, 50, 50)


def main(argv: list | None = None) -> int:
    import gc

    gc.set_threshold(*GC_THRESHOLD)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "warehouse", None):
        # a URI (hdfs://, s3a://, file://) is kept as given: catalog/fs.py reads it
        os.environ["EVITA_WAREHOUSE"] = (args.warehouse if "://" in args.warehouse
                                         else str(Path(args.warehouse).resolve()))
    from evita.catalog.store import WarehouseBusy
    from evita.runtime.session import spark_logs

    spark_logs(shown=getattr(args, "verbose", False))  # Spark's own loggers: quiet unless --verbose
    from . import outcome

    outcome.reset()  # what this command stores or writes, for its error to tell (bootstrap/outcome.py)

    from evita.runtime.progress import shown

    from .stopping import Stopped, stopped_by_signals

    try:
        # the progress line is erased when the command ends, before any error is reported
        with stopped_by_signals(), shown(quiet=getattr(args, "quiet", False), what=_command_name(args)):
            return args.func(args) or 0
    except EvitaError as e:
        report(e)
        return 1
    except (UserError, WarehouseBusy) as e:
        err.print(f"[bold red]error:[/] {_escape(str(e))}", markup=True, soft_wrap=True)
        _left_behind(already_said=isinstance(e, CompileFailed))
        return 1
    except (KeyboardInterrupt, Stopped) as e:  # Ctrl-C, or a timeout's SIGTERM
        return _stopped(e, getattr(args, "verbose", False))
    except Exception as e:  # Spark failed, the JVM died, or a bug: one line, the trace on request
        return _failed(e, getattr(args, "verbose", False))


def _command_name(args) -> str:
    """`evita explain`: what the progress line says while no finer activity runs."""
    return "evita " + args.func.__name__.removeprefix("cmd_").replace("_", " ")


def _stopped(e: BaseException, verbose: bool) -> int:
    from .stopping import cancel_spark_jobs, describe_stop

    cancelled = cancel_spark_jobs()
    err.print(f"[bold red]stopped:[/] {_escape(describe_stop(e, cancelled))}", markup=True, soft_wrap=True)
    if verbose:
        import traceback

        err.print(_escape(traceback.format_exc()), markup=True, soft_wrap=True)
    return 130 if isinstance(e, KeyboardInterrupt) else 143


def _failed(e: Exception, verbose: bool) -> int:
    import traceback

    from evita.runtime import executors
    from evita.runtime.session import worker_failure

    from .stopping import describe_failure

    if worker_failure(e) is not None:  # the executors' Python cannot run Evita: what to set, not the trace
        report(worker_failure(e))
        return 1
    if executors.lost() is not None:  # the watcher cancelled the jobs: that is the cause, not the cancel
        err.print(f"[bold red]error\\[worker-lost]:[/] {_escape(executors.lost())}", markup=True, soft_wrap=True)
        err.print(f"  hint: {_escape(executors.HINT)}", soft_wrap=True)
        if verbose:
            err.print(_escape(traceback.format_exc()), markup=True, soft_wrap=True)
        return 1
    err.print(f"[bold red]error:[/] {_escape(describe_failure(e))}", markup=True, soft_wrap=True)
    _left_behind()
    if verbose:
        err.print(_escape(traceback.format_exc()), markup=True, soft_wrap=True)
    else:
        err.print("  hint: run again with --verbose for the Python and Java trace", soft_wrap=True)
    return 1


def _left_behind(already_said: bool = False) -> None:
    """After a one-line error: what the command stored or wrote before it failed, when
    it did (a failed compile's message says it itself: `already_said`)."""
    from . import outcome

    if outcome.anything() and not already_said:
        err.print(f"  {_escape(outcome.describe())}", soft_wrap=True)


def report(e: EvitaError) -> None:
    for d in e.diagnostics:
        _print_diagnostic(d.render(e._source_of(d)), "red" if d.severity == "error" else "yellow")
    from . import outcome

    n = sum(d.severity == "error" for d in e.diagnostics)
    before = getattr(e, "outcome", None)  # what did not happen ("the program did not run"), if said
    err.print(f"[red]{plural(n, 'error')}; {before + '; ' if before else ''}"
              f"{_escape(outcome.describe())}[/]", markup=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


class _Version(argparse.Action):
    """`--version`, its text read only when asked: the package metadata takes a scan of
    every installed distribution (0.1-0.4 s), which no other command should pay."""

    def __call__(self, parser, namespace, values, option_string=None):
        from evita import _version

        print(f"evita {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evita", description="Evita: a declarative metacompiler for Datalog on Spark.")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="the installed version (the package metadata) and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", help="catalog warehouse directory (default $EVITA_WAREHOUSE or ./evita-warehouse)")
    common.add_argument("--master", help="Spark master (default $EVITA_MASTER or local[*])")
    common.add_argument("--remote", metavar="sc://HOST:PORT",
                        help="a Spark Connect server (default $EVITA_REMOTE, or the one `evita server start` runs "
                             "for this warehouse)")
    common.add_argument("--verbose", action="store_true", help="on a failure, show the Python and Java trace")
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress line on the terminal (it shows only when stderr is a terminal)")
    sub = p.add_subparsers(metavar="COMMAND")

    c = sub.add_parser("load", parents=[common, width_option()], help="parse a program into the catalog and summarize it")
    c.add_argument("program", help="program file (.olg or .dl)")
    c.add_argument("--name", help="program name (default: the file stem)")
    c.set_defaults(func=cmd_load)

    c = sub.add_parser("check", parents=[common, width_option()], help="parse and check a program without storing it")
    c.add_argument("program")
    c.set_defaults(func=cmd_check)

    c = sub.add_parser("catalog", parents=[common], help="show a catalog table, or all tables with row counts")
    c.add_argument("table", nargs="?", help="catalog table (rule, predicate, argument, ...)")
    c.add_argument("--program", help="only rows of this program")
    c.add_argument("--limit", type=int, default=200, help="rows to show (default 200)")
    c.set_defaults(func=cmd_catalog)

    c = sub.add_parser("sql", parents=[common], help="run Spark SQL over the catalog")
    c.add_argument("query", help='e.g. "SELECT name, term_count FROM evita.rule"')
    c.add_argument("--limit", type=int, default=200)
    c.set_defaults(func=cmd_sql)

    c = sub.add_parser("print", parents=[common], help="print a stored program as text")
    c.add_argument("name", help="program name")
    c.set_defaults(func=cmd_print)

    c = sub.add_parser("compile", parents=[common, stage_options()],
                       help="move a program through the stages of the lattice and store every version")
    c.add_argument("program")
    c.set_defaults(func=cmd_compile)

    c = sub.add_parser("explain", parents=[common, stage_options()],
                       help="compile, then show what each stage added, removed and changed")
    c.add_argument("program")
    c.add_argument("--stage", help="only this stage")
    c.add_argument("--dot", metavar="FILE", help="write the graph of the stage's explain view (magic_sets: the "
                   "adorned rule/goal graph) as Graphviz DOT")
    c.set_defaults(func=cmd_explain)

    c = sub.add_parser("stages", parents=[common], help="the stage lattice and where each stage comes from")
    c.add_argument("--stage-path", action="append", default=[], metavar="DIR")
    c.set_defaults(func=cmd_stages)

    c = sub.add_parser("test-stage", parents=[common],
                       help="test a stage: its cases, header example, same answers (the oracle), trigger soundness")
    c.add_argument("target", metavar="DIR|FILE", help="a stage file NAME.dl, or a directory of stage files")
    c.add_argument("--cases", metavar="FILE", help="the case file (default: cases/NAME.dl beside the stage; for the "
                                                   "repository's stages, tests/fixtures/stages/NAME.dl)")
    c.add_argument("--examples", action="append", default=[], metavar="PROGRAM",
                   help="also check the same answers on this program (repeatable; default: the repository's "
                        "examples/*.olg and *.dl, where present)")
    c.add_argument("-k", metavar="TEXT", dest="only_checks", help="run only the checks whose name holds TEXT")
    c.add_argument("--update", action="store_true",
                   help="rewrite the expected blocks of the cases from what the stage does (read them after!)")
    c.set_defaults(func=cmd_test_stage)

    # The runtime's commands; `evita test-suite` (the conformance runner) and `evita
    # simulate` run programs through them, so they are registered here, beside them.
    from evita.runtime import cli_commands, conformance, simulate_cli

    parents = [common, stage_options()]
    cli_commands.add_arguments(sub, parents)
    conformance.add_arguments(sub, parents[:-1])
    simulate_cli.add_arguments(sub, parents)
    return p


def width_option() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    _add_width_option(p)
    return p


def _add_width_option(p) -> None:
    p.add_argument("--number-bits", type=int, choices=(64, 32), default=64, metavar="{64,32}",
                   help="the width of number and unsigned: 64 (the default: Spark's bigint, Soufflé's "
                        "-DSOUFFLE_DOMAIN_64BIT build) or 32 (Soufflé's default build); arithmetic, sums and "
                        "shifts wrap around at it, as Soufflé's do, and an input value beyond it is an error")


def number_bits(args) -> int:
    """The `--number-bits` a command was given (64 when it has no such option)."""
    return getattr(args, "number_bits", None) or 64


def stage_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    _add_width_option(p)
    p.add_argument("--stage-path", action="append", default=[], metavar="DIR",
                   help="also load the .dl stages in DIR (repeatable)")
    p.add_argument("--skip", action="append", default=[], metavar="STAGE", help="leave STAGE out (repeatable)")
    p.add_argument("--only", nargs="+", metavar="STAGE", help="run only these stages")
    p.add_argument("--choose", action="append", default=[], metavar="GROUP=STAGE",
                   help="pick STAGE among the alternatives of GROUP")
    p.add_argument("--egraph", action="store_true",
                   help="write the planner's dataflow into the catalog (tables flow_op, flow_input) so that the "
                        "egraph stage saturates and extracts it (docs/egraph.md); its result is shown, not run")
    p.add_argument("--max-iterations", type=int, default=None, metavar="N",
                   help="stop a recursion that has not reached its fixpoint after N iterations "
                        "(default: no limit for the program; for each stage 1000, or one per rule and atom "
                        "of a larger program)")
    return p


# ---------------------------------------------------------------- commands

def parse_and_check(path: str, name: str | None = None, verbose: bool = False, number_bits: int = 64):
    """Read, parse and check a program file (no Spark); a program that computes nothing
    is reported as a warning: every command then exits 0 (`run` runs nothing), as Soufflé. `verbose` adds notes on
    what is accepted without effect (storage hints). `number_bits`: the width of whole
    numbers (`--number-bits`, bootstrap/numbers.py)."""
    from .checks import check_program, qualifier_notes
    from .parser import parse_file
    from .source import empty_warning

    with doing(f"the reading and checking of {path}"):
        program = check_program(parse_file(path, name, number_bits))
    for note in qualifier_notes(program) if verbose else ():
        _print_diagnostic(note.render(program.text), "cyan")
    from .strata import limitsize_without_effect

    warning = empty_warning(program)
    if warning is not None:
        report_warning(warning)
    for warning in limitsize_without_effect(program):  # shown at the directive, with its line
        _print_diagnostic(warning.render(program.text), "yellow")
    return program


def report_warning(d) -> None:
    _print_diagnostic(d.render(), "yellow")


def _print_diagnostic(text: str, color: str) -> None:
    head, _, rest = text.partition("\n")
    err.print(f"[bold {color}]{_escape(head)}[/]", markup=True, soft_wrap=True)
    if rest:
        err.print(_escape(rest), markup=True, soft_wrap=True)


def session(args, only=None, brief: bool = False):
    """Spark with the catalog attached (`only`: just these `evita` tables, see `store.attach`;
    `brief`: see `spark_session`)."""
    from evita.catalog import store
    from evita.runtime.session import spark_session

    spark = spark_session(master=getattr(args, "master", None), remote=getattr(args, "remote", None), brief=brief)
    with doing("the attaching of the catalog"):
        store.attach(spark, only=only)
    _report_recovered()
    return spark


def _report_recovered() -> None:
    """Say what opening the warehouse finished or dropped: a save a killed process left half done."""
    from evita.catalog import store

    for what in store.RECOVERED:
        err.print(f"[yellow]note:[/] {_escape(what)}", markup=True, soft_wrap=True)
    store.RECOVERED.clear()


def stages_session(args):
    """The session a command that runs stages passes along: the one the command line or
    the environment asks for (`--master`, `--remote`, `EVITA_IN_PROCESS=0`), else Spark
    on demand, which starts (or reaches `evita server`) only if a catalog is too large or
    a stage needs what only Spark has: small programs compile and explain with no JVM."""
    from evita.runtime.here import spark_asked_for
    from evita.runtime.session import SparkOnDemand

    return session(args) if spark_asked_for(args) else SparkOnDemand(lambda: session(args))


def cmd_check(args) -> int:
    from evita.runtime.inputs import check_io_params

    program = parse_and_check(args.program, verbose=getattr(args, "verbose", False), number_bits=number_bits(args))
    problems = check_io_params(program)
    if problems:
        raise EvitaError(problems, source=program.text, source_file=program.path)
    out.print(f"{args.program}: ok ({plural(len(program.rules), 'rule')}, {plural(len(program.facts), 'fact')})")
    return 0


def cmd_load(args) -> int:
    from evita.catalog import store
    from evita.catalog.encode import encode

    started = time.perf_counter()
    program = parse_and_check(args.program, args.name, getattr(args, "verbose", False), number_bits(args))
    rows = encode(program)
    with doing("the writing of the program to the catalog"):
        store.save_program(None, rows)  # the catalog is files: writing them needs no Spark
    _report_recovered()
    t = RichTable(title=f"program {program.name} stored in the catalog ({time.perf_counter() - started:.1f} s)")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, count in rows.counts().items():
        if count:
            t.add_row(f"evita.{name}", str(count))
    out.print(t)
    out.print(f"Inspect it with: evita catalog rule --program {program.name}   |   evita print {program.name}")
    return 0


def cmd_catalog(args) -> int:
    from evita.catalog import schema, store

    if args.program and args.program not in _programs(None):  # read from the store's files: no Spark
        raise UserError(f"no program {args.program!r} in the catalog; loaded: {', '.join(_programs(None)) or 'none'}")
    if args.table is None:  # counts come from the store's files: no Spark to start or ask
        with doing("the reading of the catalog"):
            counts = store.row_counts(store.opened(), args.program)
        _report_recovered()
        t = RichTable(title="catalog tables" + (f" of program {args.program}" if args.program else ""))
        for col in ("table", "rows", "holds"):
            t.add_column(col, justify="right" if col == "rows" else "left")
        for tab in schema.TABLES:
            t.add_row(f"{schema.DATABASE}.{tab.name}", str(counts.get(tab.name, 0)), tab.doc)
        out.print(t)
        out.print(f"Query them in Spark SQL: evita sql \"SELECT * FROM {schema.DATABASE}.rule\"   |   "
                  f"evita catalog TABLE [--program P]")
        return 0
    try:
        decl = schema.table(args.table)
    except KeyError as e:
        raise UserError(f"{e.args[0]}") from None
    with doing("the reading of the catalog"):  # its Parquet files, filtered and ordered here: no Spark
        columns, rows = store.table_rows(store.opened(), decl.name, args.program, args.limit + 1)
    _report_recovered()
    show_rows(columns, rows, args.limit, title=f"{schema.DATABASE}.{decl.name}")
    return 0


def cmd_sql(args) -> int:
    if _sql_by_daemon(args):
        return 0
    spark = session(args, only=catalog_tables_read(args.query), brief=True)
    try:
        df = spark.sql(args.query)
    except Exception as e:  # Spark's AnalysisException/ParseException carry a readable message
        raise UserError(f"Spark SQL rejected the query: {_first_line(e)}\n"
                        "hint: catalog tables are evita.<table>; list them with `evita catalog`") from None
    show(df, args.limit)
    return 0


def _sql_by_daemon(args) -> bool:
    """Answer from the warm server's `evita sql` daemon (runtime/sql_daemon.py) when this
    command would use that server: no Spark client imported, nothing attached here. False:
    there is none (or it cannot answer now), and the command asks Spark itself. With
    --verbose it always does, so Spark's logs and the trace are there to see."""
    from evita.runtime import sql_daemon
    from evita.runtime.session import warehouse_dir

    if getattr(args, "verbose", False) or getattr(args, "master", None) or getattr(args, "remote", None) or \
            any(os.environ.get(v) for v in ("EVITA_REMOTE", "EVITA_MASTER", "PYSPARK_GATEWAY_PORT")):
        return False  # the same choice as server.remote_to_use: this command does not use the server
    with doing("the query, on the warm server"):
        answer = sql_daemon.ask(args.query, args.limit, warehouse_dir())
    if answer is None:
        return False
    for note in answer.get("notes", ()):
        err.print(f"[yellow]note:[/] {_escape(note)}", markup=True, soft_wrap=True)
    if answer.get("error") == "rejected":
        raise UserError(f"Spark SQL rejected the query: {answer['message']}\n"
                        "hint: catalog tables are evita.<table>; list them with `evita catalog`")
    if answer.get("error"):
        raise UserError(f"{answer['message']}\n  hint: run again with --verbose for the Python and Java trace")
    show_rows(answer["columns"], answer["rows"], args.limit)
    return True


def catalog_tables_read(query: str):
    """The `evita` tables a query reads, or None (attach them all) when it may read
    anything else: `evita_history`, a name without a database (a view, a CTE), or text
    sqlglot cannot parse (Spark then says what is wrong).

    >>> sorted(catalog_tables_read("SELECT r.name FROM evita.rule r JOIN evita.atom a ON r.rule = a.rule"))
    ['atom', 'rule']
    >>> catalog_tables_read("WITH x AS (SELECT * FROM evita.rule) SELECT * FROM x") is None
    True
    """
    import sqlglot
    from sqlglot import exp

    try:
        trees = sqlglot.parse(query, read="spark")
    except Exception:  # sqlglot's parse and tokenize errors
        return None
    names = set()
    for tree in trees:
        for t in (tree.find_all(exp.Table) if tree is not None else ()):
            if t.catalog or t.db.lower() != "evita":
                return None
            names.add(t.name.lower())
    return names or None


def cmd_print(args) -> int:
    from evita.catalog import store
    from evita.catalog.printer import print_catalog

    if args.name not in _programs(None):  # read from the store's files: no Spark
        raise UserError(f"no program {args.name!r} in the catalog; loaded: {', '.join(_programs(None)) or 'none'}"
                        f"\nhint: evita load FILE first")
    with doing("the reading of the catalog"):
        rows = store.load_rows(None, args.name)
    _report_recovered()
    sys.stdout.write(print_catalog(rows, args.name))
    return 0


def compile_file(args, spark=None, program=None, phases=None, measured=(), notes=None):
    """Parse, check and compile a program file through the lattice (`program`: already
    parsed and checked), as the command line's flags ask (`StageOptions.from_args`);
    store every version. Returns (program, Compilation, [StageDiff]). `spark`: the
    session to use (default: the one `--master`/`--remote` ask for, else Spark on demand).
    `phases`, `measured`, `notes`: as `compiling.compile_and_store` (notes default: stderr)."""
    from contextlib import nullcontext

    from evita.runtime.here import spark_asked_for
    from evita.runtime.session import SparkOnDemand, not_started

    program = program or parse_and_check(args.program, verbose=getattr(args, "verbose", False),
                                         number_bits=number_bits(args))
    options = StageOptions.from_args(args)
    if spark is None and not spark_asked_for(args):  # the stages run in process on a small catalog
        spark = SparkOnDemand(lambda: session(args))
    if not not_started(spark):  # Spark on demand attaches when it starts
        with phases.phase("attach the catalog") if phases is not None else nullcontext():
            spark = session(args) if spark is None else _attached(spark)
    comp, diffs = compile_and_store(program, spark, options, phases=phases, measured=measured,
                                    notes=notes or print_note, warnings=report_warning)
    return program, comp, diffs


def print_note(note: str) -> None:
    err.print(f"[yellow]note:[/] {_escape(note)}")


def _attached(spark):
    from evita.catalog import store

    with doing("the attaching of the catalog"):
        store.attach(spark)
    return spark


def cmd_compile(args) -> int:
    started = time.perf_counter()
    program, comp, diffs = compile_file(args)
    counts = {d.version: d.counts for d in diffs}
    t = RichTable(title=f"{program.name}: compiled in {time.perf_counter() - started:.1f} s "
                        f"(lattice: {comp.lattice_seconds:.1f} s, {comp.lattice_actions} Spark actions)")
    for col in ("version", "stage", "rules +", "rules -", "rules ~", "seconds", "Spark actions"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for v in comp.versions:
        a, r, c = counts.get(v.number, (0, 0, 0))
        t.add_row(str(v.number), v.stage + (" (skipped)" if v.skipped else ""), str(a), str(r), str(c),
                  f"{v.seconds:.2f}", str(v.actions))
    out.print(t)
    out.print(f"Every version is in Spark SQL: SELECT * FROM evita_history.rule WHERE program = '{program.name}'"
              f"   |   evita explain {args.program}")
    return 0


def cmd_explain(args) -> int:
    spark = stages_session(args)  # shared by the compile and the explain view
    try:
        program, comp, diffs = compile_file(args, spark=spark)
    except CompileFailed as e:  # show what the stages before the failing one did, then why it failed
        out.print("[bold red]this compile failed; what its stages did before the failure:[/]")
        _print_diffs([d for d in e.diffs if args.stage in (None, d.stage)])
        raise
    shown = [d for d in diffs if args.stage in (None, d.stage)]
    if args.stage and not shown:
        raise UserError(f"stage {args.stage} did not run for {program.name}; ran: "
                        f"{', '.join(d.stage for d in diffs) or 'none'}")
    if program.number_bits != 64:  # not in the program's text: the catalog's program.number_bits
        out.print(f"numbers: {program.number_bits} bits (--number-bits {program.number_bits}): arithmetic, sums "
                  f"and shifts wrap around at {program.number_bits} bits")
    _print_diffs(shown, {v.number for v in comp.versions if v.skipped})
    graphs = _stage_graphs(args, program, comp, shown, spark)
    if args.dot:
        if not graphs:
            raise UserError(f"no stage shown has an explain view to draw (magic_sets has one: "
                            f"evita explain {args.program} --stage magic_sets --dot FILE)")
        from .explain import to_dot

        Path(args.dot).write_text("\n\n".join(to_dot(g) for g in graphs) + "\n")
        out.print(f"wrote {args.dot}")
    return 0


def _print_diffs(shown: list, skipped=frozenset(), out=out) -> None:
    """`out`: the console to print on (the API renders the same text into a string)."""
    for d in shown:
        a, r, c = d.counts
        out.rule(f"[bold]v{d.version}  {d.stage}[/]  +{a} -{r} ~{c}")
        if d.version in skipped:
            out.print("  (skipped: its trigger, the stage's stage::applies rules, found nothing to do)")
        elif not (a or r or c or d.declarations):
            out.print("  (no rule changed)")
        for sign, text, old in d.declarations or ():  # before the rules that use them
            if old is not None:
                _print_rule("-", old, "red", out)
            _print_rule("+" if sign != "-" else "-", text, {"+": "green", "-": "red", "~": "yellow"}[sign], out)
        for text in d.removed:
            _print_rule("-", text, "red", out)
        for old, new in d.changed:
            _print_rule("-", old, "red", out)
            _print_rule("+", new, "yellow", out)
        for text in d.added:
            _print_rule("+", text, "green", out)
        for line in d.origins or ():
            out.print(f"  [dim]{line}[/]")


def _stage_graphs(args, program, comp, shown, spark) -> list:
    """The explain views of the shown stages, run over the catalog each stage read (in
    this process when it is small: `spark` on demand does not start); printed as tables
    when one stage is asked for, drawn with --dot."""
    from .explain import explain_view, stage_graph
    from .stage import find_stages

    if not (args.stage or args.dot):
        return []
    stages = find_stages(args.stage_path)
    graphs = []
    for d in shown:
        stage = stages.get(d.stage)
        if stage is None or explain_view(stage) is None:
            continue
        g = stage_graph(spark, stage, comp.versions[d.version - 1].rows, program.name)
        graphs.append(g)
        _print_graph(g)
    return graphs


def _print_graph(g) -> None:
    if g.stage != "magic_sets":
        return _print_plain_graph(g)
    kinds = {i: kind for i, _, kind in g.nodes}
    t = RichTable(title=f"{g.stage}: goals (relations the queries reach) and their binding patterns")
    for col in ("goal", "treatment", "derived by", "called from"):
        t.add_column(col)
    for node_id, label, kind in g.nodes:
        if kind in ("rule", "query"):
            continue
        by = ", ".join(g.label(b) for a, b, _ in g.edges if a == node_id)
        called = ", ".join(f"{g.label(a)} @{lab}" for a, b, lab in g.edges if b == node_id and kinds.get(a) in ("rule", "query"))
        t.add_row(_escape(label), kind, _escape(by), _escape(called))
    out.print(t)


def _print_plain_graph(g) -> None:
    """A stage's explain view as it comes: its rule nodes as lines, the others as a
    table with the edges leaving each (the join-order stages: the plan lattice)."""
    for _, label, kind in g.nodes:
        if kind in ("rule", "kept"):
            out.print(f"  {_escape(label)}")
    rest = [(i, label, kind) for i, label, kind in g.nodes if kind not in ("rule", "kept")]
    if not rest:
        return
    t = RichTable(title=f"{g.stage}: explain view (evita explain --dot FILE draws it)")
    for col in ("node", "kind", "edges out"):
        t.add_column(col)
    for node_id, label, kind in rest:
        t.add_row(_escape(label), kind, _escape(", ".join(f"{lab} -> {g.label(b)}" for a, b, lab in g.edges
                                                          if a == node_id)))
    out.print(t)


def _print_rule(mark: str, text: str, color: str, out=out) -> None:
    for i, line in enumerate(text.splitlines()):
        out.print(f"[{color}]{mark if i == 0 else ' '} {_escape(line)}[/]")


def cmd_stages(args) -> int:
    from .scheduler import Lattice
    from .stage import BOOTSTRAP_STAGES, find_stages

    stages = find_stages(args.stage_path)
    lattice = Lattice(stages)
    for warning in lattice.warnings:
        report_warning(warning)
    before: dict = {}
    for b, a in lattice.orders():
        before.setdefault(a, []).append(b)
    t = RichTable(title=f"stage lattice ({lattice.path})")
    for col in ("stage", "runs after", "from", "rules"):
        t.add_column(col)
    for name in _topological(lattice.names, before):
        st = stages.get(name)
        origin = "bootstrap (Python)" if name in BOOTSTRAP_STAGES else (
            f"{st.origin}: {st.path.name}" if st else "[red]missing: no .dl file[/]")
        t.add_row(name, ", ".join(sorted(before.get(name, []))) or "-", origin,
                  str(len(st.program.rules)) if st else "")
    out.print(t)
    alts = lattice.facts("alternative")
    if alts:
        out.print("alternatives: " + ", ".join(f"{g}: {s}" for g, s in alts))
    return 0


def cmd_test_stage(args) -> int:
    """`evita test-stage DIR|FILE`: every check of `stage_check.StageChecks` on each stage
    named, one line each; exit 1 if any fails."""
    from .stage import find_stages, package_root
    from .stage_check import CheckFailed, CheckSkipped, StageChecks

    target = Path(args.target)
    if not target.exists():
        raise UserError(f"{target}: no such stage file or directory")
    folder = target if target.is_dir() else target.parent
    names = None if target.is_dir() else [target.stem]
    if target.is_file() and target.suffix != ".dl":
        raise UserError(f"{target}: a stage file ends in .dl")
    found = find_stages([folder])
    stages = [found[n] for n in (names or sorted(n for n, f in found.items() if f.path.parent.resolve()
                                                 == folder.resolve()))]
    if not stages:
        raise UserError(f"{folder}: no stage files (NAME.dl) in it")
    if args.cases and len(stages) > 1:
        raise UserError("--cases names the case file of one stage: pass a stage file, not a directory")
    examples = [Path(e) for e in args.examples] or sorted((package_root() / "examples").glob("*.olg")) + sorted(
        (package_root() / "examples").glob("*.dl"))
    spark = stages_session(args)
    failed = passed = skipped = 0
    for stage in stages:
        cases = Path(args.cases) if args.cases else _case_file(stage)
        checks = StageChecks(spark, stage, cases, examples)
        out.print(f"[bold]{stage.name}[/] ({stage.path}; cases: {cases if cases.exists() else 'none'})")
        for name, check in checks.all_checks():
            if args.only_checks and args.only_checks not in name:
                continue
            try:
                if args.update and name.startswith("case: "):
                    checks.check_case(name[len("case: "):], update=True)
                else:
                    check()
            except CheckFailed as e:
                failed += 1
                out.print(f"  [red]FAIL[/] {_escape(name)}")
                out.print(_escape("\n".join("       " + line for line in str(e).splitlines())))
            except CheckSkipped as e:
                skipped += 1
                out.print(f"  [yellow]skip[/] {_escape(name)}: {_escape(str(e))}")
            else:
                passed += 1
                out.print(f"  [green]ok[/]   {_escape(name)}")
    out.print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


def _case_file(stage) -> Path:
    """A stage's case file: cases/NAME.dl beside it, else the repository's fixture."""
    from .stage import package_root

    beside = stage.path.parent / "cases" / f"{stage.name}.dl"
    shipped = package_root() / "tests" / "fixtures" / "stages" / f"{stage.name}.dl"
    return beside if beside.exists() or not shipped.exists() else shipped


def _topological(names: list, before: dict) -> list:
    """Display order only; which stage runs next is decided by the lattice's rules: a
    stage once those it follows have run, the least by name first, and the planner last
    (it waits for every other stage: stage_lattice.dl, rule n10)."""
    done, order = set(), []
    pending = sorted(names)
    while pending:
        ready = [n for n in pending if set(before.get(n, [])) <= done | (set(before.get(n, [])) - set(names))
                 and (n != "planner" or pending == ["planner"])]
        nxt = ready[0] if ready else pending[0]
        order.append(nxt)
        done.add(nxt)
        pending.remove(nxt)
    return order


# ---------------------------------------------------------------- output helpers

def show(df, limit: int, title: str | None = None) -> None:
    show_rows(df.columns, df.limit(limit + 1).collect(), limit, title)


def show_rows(columns: list, rows: list, limit: int, title: str | None = None) -> None:
    """A table of `rows` (up to `limit + 1` of them: one more says there are more)."""
    t = RichTable(title=title, show_lines=False)
    for name in columns:
        t.add_column(name, overflow="fold", max_width=60)
    for r in rows[:limit]:
        t.add_row(*("" if v is None else str(v) for v in r))
    out.print(t)
    if len(rows) > limit:
        out.print(f"(first {plural(limit, 'row')}; use --limit to see more)")


def _programs(spark) -> list:
    from evita.catalog import store

    return list(store.list_programs(spark))


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


if __name__ == "__main__":
    # `python -m evita.bootstrap.cli` runs this file as __main__, a second copy of the
    # module: the commands raise evita.bootstrap.cli's UserError, which this copy's
    # handler would not know. Run the one module, as the `evita` script does.
    from evita.bootstrap.cli import main as evita_main

    sys.exit(evita_main())
