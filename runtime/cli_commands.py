"""`evita plan`, `evita run` and `evita analyze`: the runtime's commands, registered by
`bootstrap/cli.py`.

    evita plan PROGRAM [--json]
    evita run PROGRAM [-F DIR] [--input REL=PATH ...] [-D DIR] [--output DIR]
                      [--format csv|parquet] [--master M] [--stats] [--max-iterations N]
    evita analyze PROGRAM [--input REL=PATH ...] [-F DIR]
    evita test-suite DIR [--construct NAME] [-v]   (runtime/conformance.py)
    evita simulate PROGRAM [--seeds A-B] [--steps N] [--delay D] (runtime/simulate_cli.py)
    evita package [--output evita.zip] [--launcher FILE]   the zip for spark-submit (docs/deploy.md)

The program is parsed and checked before Spark starts, so a bad program fails fast.
What `run` shows: the `.output` relations if the program has any, else the answers to
its `query` statements, else every derived relation. Small results print as tables.
"""
from __future__ import annotations

import sys
import time
from typing import Optional

from .queries import atom_text, query_frame, query_headers, query_table, shown_relations

from ..bootstrap.diagnostics import plural

PREVIEW_ROWS = 50


def add_arguments(subparsers, parents: list) -> None:
    """The runtime's commands (plan, run, analyze, server, package, ...), each with the
    common options and the stage options (`parents`)."""
    c = subparsers.add_parser("plan", parents=parents, help="compile a program and show its physical dataflow")
    c.add_argument("program", help="program file (.olg or .dl)")
    c.add_argument("--json", action="store_true", help="JSON instead of the text form")
    c.add_argument("--timestep", action="store_true",
                   help="a Dedalus program: the dataflow of one timestep at every node (what evita simulate and "
                        "run --steps evaluate; docs/dedalus.md)")
    c.add_argument("--flow", action="store_true",
                   help="the dataflow as operators (catalog tables flow_op, flow_input; docs/egraph.md), read back "
                        "from the catalog rows, and with --egraph the egraph stage's extraction beside it")
    c.set_defaults(func=cmd_plan)

    c = subparsers.add_parser("run", parents=parents, help="run a program (in this process when small, else on "
                              "Spark)")
    c.add_argument("program", help="program file (.olg or .dl)")
    given = c.add_argument_group("inputs (--input REL=PATH takes the place of REL's file under -F)")
    given.add_argument("-F", "--facts-dir", dest="facts_dir", metavar="DIR",
                       help="Soufflé's -F: each .input relation from DIR/REL.facts (tab-separated), or as its "
                            "filename=, delimiter= and headers= say (default: the current directory, as Soufflé; "
                            "a file missing there is a warning, one missing from a DIR given is an error)")
    given.add_argument("--input", action="append", default=[], metavar="REL=PATH",
                       help="one relation from one file: CSV, TSV (.tsv/.facts) or Parquet; repeatable")
    given.add_argument("--timed-inputs", "--inputs", dest="inputs", metavar="DIR",
                       help="with --steps only: inputs over time, DIR/REL.csv rows STEP,col1,col2,... "
                            "(as evita simulate; --inputs is the older spelling)")
    written = c.add_argument_group("outputs (both may be given)")
    written.add_argument("-D", "--output-dir", dest="souffle_out", metavar="DIR",
                         help="Soufflé's -D: each .output relation to DIR/REL.csv, tab-separated and sorted, or as "
                              "its filename=, delimiter= and headers= say")
    written.add_argument("--output", metavar="DIR",
                         help="every relation the run shows (its .output relations, else its query answers, else "
                              "every derived relation) to DIR/REL.csv, comma-separated, or DIR/REL.parquet: see "
                              "--format")
    written.add_argument("--format", choices=("csv", "parquet"), default="csv", help="the format of --output")
    c.add_argument("--stats", action="store_true", help="print Spark actions per stratum iteration")
    c.add_argument("--lenient", action="store_true",
                   help="skip input rows that do not read (wrong column count or type) and count them, "
                        "instead of stopping with an error")
    c.add_argument("--steps", type=int, metavar="N",
                   help="Dedalus time on Spark: run up to N timesteps as supersteps (messages take one step)")
    c.add_argument("--no-local", action="store_true",
                   help="run every stratum on Spark's SQL path, recursive ones in the distributed loop: "
                        "no fixpoints inside tasks or on the driver (for comparison)")
    c.add_argument("--spark", action="store_true",
                   help="run on Spark even when the program and its inputs are small enough to run in this "
                        "process without starting it (as EVITA_IN_PROCESS=0 does)")
    c.set_defaults(func=cmd_run)

    c = subparsers.add_parser("analyze", parents=parents[:-1],
                              help="measure a program's inputs and keep their statistics for later compiles")
    c.add_argument("program", help="program file (.olg or .dl)")
    c.add_argument("--input", action="append", default=[], metavar="REL=PATH",
                   help="read relation REL from a CSV, TSV (.tsv/.facts) or Parquet file; repeatable")
    c.add_argument("-F", "--facts-dir", dest="facts_dir", metavar="DIR",
                   help="Soufflé's -F: each .input relation from DIR/REL.facts (tab-separated), or as its "
                        "filename=, delimiter= and headers= say (default: the current directory, as Soufflé)")
    c.set_defaults(func=cmd_analyze)

    c = subparsers.add_parser("package", help="write Evita as a zip for spark-submit --py-files (docs/deploy.md)")
    c.add_argument("--output", default="evita.zip", metavar="ZIP", help="the zip to write (default evita.zip)")
    c.add_argument("--launcher", metavar="FILE",
                   help="also write FILE, a Python launcher for spark-submit that runs Evita's command line "
                        "(e.g. evita_main.py)")
    c.set_defaults(func=cmd_package)

    c = subparsers.add_parser("server", help="a warm Spark (a Spark Connect server) that later commands on this "
                              "warehouse use: start | stop | status")
    c.add_argument("action", choices=("start", "stop", "status"))
    c.add_argument("--warehouse", help="catalog warehouse directory (default $EVITA_WAREHOUSE or ./evita-warehouse)")
    c.add_argument("--port", type=int, default=15002, help="the server's port on 127.0.0.1 (default 15002)")
    c.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    c.add_argument("--verbose", action="store_true", help="on a failure, show the Python and Java trace")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line on the terminal")
    c.set_defaults(func=cmd_server)


def cmd_server(args) -> int:
    """`evita server`: start, stop or show the warm server of this warehouse."""
    from ..bootstrap.diagnostics import UserError
    from . import server
    from .session import warehouse_dir

    warehouse = warehouse_dir()
    try:
        if args.action == "start":
            started = time.perf_counter()
            state = server.start(warehouse, port=args.port, master=args.master)
            if state["replaced"]:
                print(f"note: ended the server (pid {state['replaced']}) of a start that was interrupted")
            print(f"server running at {state['url']} for {state['warehouse']} ({time.perf_counter() - started:.1f} s; "
                  f"log {state['log']})")
            print("commands on this warehouse now use it; `evita server stop` ends it")
        elif args.action == "stop":
            print("server stopped" if server.stop(warehouse) else f"no server running for {warehouse}")
        else:
            state = server.status(warehouse)
            if state is None or not state["alive"]:
                print(f"no server running for {warehouse}" + (" (a stale state file: evita server stop removes it)"
                                                               if state else ""))
                return 1
            print(f"server at {state['url']} for {state['warehouse']}: "
                  f"{'answering' if state['answers'] else 'NOT answering'}, master {state['master']}, "
                  f"since {state['started']}, pid {state['jvm'] or state['pgid']}, log {state['log']}")
            if state.get("sql"):
                print(f"evita sql is answered by its daemon on 127.0.0.1:{state['sql']['port']} "
                      f"(pid {state['sql']['pid']})")
            if state.get("ready") is False:
                print("its start did not finish (interrupted, or under way): `evita server start` ends it and "
                      "starts anew, `evita server stop` ends it")
    except server.ServerError as e:
        raise UserError(str(e)) from None
    return 0


def cmd_package(args) -> int:
    """`evita package`: the zip spark-submit ships (no Spark started)."""
    import zipfile

    from .package import write_launcher, write_package

    zip_path = write_package(args.output)
    with zipfile.ZipFile(zip_path) as z:
        n = len(z.namelist())
    print(f"wrote {zip_path} ({n} files, {zip_path.stat().st_size // 1024} KiB): the evita package for "
          f"spark-submit --py-files")
    launcher = "evita_main.py"
    if args.launcher:
        launcher = str(write_launcher(args.launcher))
        print(f"wrote {launcher}: spark-submit runs it, the arguments after it are evita's")
    print(f"spark-submit --master MASTER --py-files {zip_path} {launcher} run PROGRAM --warehouse hdfs://...|s3a://...")
    return 0


def compiled(args, program=None, phases=None, measured=(), with_catalog=False):
    """The program as the stages left it: parse -> lattice stages -> decoded final catalog
    (and the compile, `with_catalog`). Parsing and checking happen before Spark starts,
    so a bad file fails fast."""
    from ..bootstrap.cli import compile_file
    from ..catalog.decode import decode

    program, comp, _ = compile_file(args, program=program, phases=phases, measured=measured)
    decoded = decode(comp.final, program.name)
    return (decoded, comp) if with_catalog else decoded


def cmd_plan(args) -> int:
    from ..bootstrap.planner import plan

    program, comp = compiled(args, with_catalog=True)
    args.final_rows = comp.final
    if args.timestep:
        from .dedalus import is_dedalus, lower

        if not is_dedalus(program):
            from ..bootstrap.diagnostics import UserError

            raise UserError(f"{args.program}: no @next or @async rule and no component: it has no timesteps")
        program = lower(program).program
    from ..bootstrap.activity import doing

    with doing("the planning"):
        dataflow = plan(program)
    if args.flow:
        print(flow_listing(dataflow, program, getattr(args, "final_rows", None)))
        return 0
    print(dataflow.to_json() if args.json else dataflow.to_text())
    return 0


def flow_listing(dataflow, program, final_rows=None) -> str:
    """`evita plan --flow`: the planner's dataflow written as catalog rows and read back
    (`bootstrap/flow.py`); the operators a program states (`.plan op`) and the egraph
    stage's extraction, when the final catalog holds them."""
    from ..bootstrap.flow import flow_rows, flow_text
    from ..catalog.rows import CatalogRows

    rows = final_rows
    if rows is None or not any(r[0] == program.name for r in rows.get("flow_op", [])):
        rows = CatalogRows()
        for table, dicts in flow_rows(dataflow, program).items():
            for d in dicts:
                rows.add(table, **d)
    out = [f"dataflow {program.name} (planned) {{", flow_text(rows, program.name, "planned"), "}"]
    extracted = flow_text(rows, program.name, "extracted")
    if extracted:
        out += [f"dataflow {program.name} (extracted by the egraph stage; not run) {{", extracted, "}"]
    return "\n".join(out)


def cmd_run(args) -> int:
    from rich.console import Console

    from ..bootstrap.activity import doing
    from .inputs import printsize_relations
    from .io import write_outputs
    from .traffic import traffic_text

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    if args.steps is not None:
        return cmd_run_steps(args, console)
    if args.inputs:
        from ..bootstrap.diagnostics import UserError

        raise UserError("--timed-inputs DIR gives inputs over time: use it with --steps N (or evita simulate); "
                        "-F DIR or --input REL=PATH give the inputs of a run")
    done = run_file(args, previews=True)
    if done is None:  # the program computes nothing: a warning, already shown; as Soufflé, not a failure
        return 0
    program, dataflow, result, inputs, phases = done
    from ..bootstrap.dedalus_checks import is_dedalus

    if is_dedalus(program):
        console.print("note: a Dedalus program run as one timestep (@next rules deferred, @async messages at "
                      "once); --steps N runs it over time, evita simulate with random delays")
    for rel, n in sorted(inputs.skipped.items()):
        console.print(f"skipped {n} row{'s' if n != 1 else ''} of {rel} that did not read (--lenient)")
    shown = shown_relations(dataflow)
    held = dict(result.held)  # what the driver (or this process) has: no job
    frames = {name: None if name in held else result.relations[name] for name in shown}
    columns = {name: list(dataflow.relations[name].columns) for name in shown}
    for q in dataflow.queries:
        key = f"query {atom_text(q)}"
        columns[key] = query_headers(q, dataflow.relations[q.relation].columns)
        if q.relation in held:
            held[key], frames[key] = query_table(held[q.relation], q), None
        else:
            frames[key] = query_frame(result.relations[q.relation], q)
    if args.output:
        with phases.phase("write outputs"), result.tuned():
            for path in write_outputs(result, shown, args.output, args.format):
                console.print(f"wrote {path}")
    # relations are lazy: the rest of the work is here
    with doing("the computation of the results shown"), phases.phase("previews"), result.tuned():
        print_tables(console, frames, held=held, columns=columns, unsigned=unsigned_columns(result.dataflow),
                     records=record_columns(result.dataflow))
        print_sizes(result, printsize_relations(program))
    if args.stats:
        console.print(result.stats_text())
        traffic = traffic_text(result.traffic())
        if traffic:
            console.print("tuples per location (shipped by localized rules; set semantics):\n" + traffic)
        for rel, n in sorted(inputs.skipped.items()):
            console.print(f"input {rel}: {plural(n, 'row')} skipped (--lenient)")
        console.print(phases.text())
    return 0


def cmd_run_steps(args, console) -> int:
    """`evita run PROGRAM --steps N`: Dedalus time as Spark supersteps (`supersteps.py`)."""
    from ..bootstrap.diagnostics import UserError
    from .session import spark_session
    from .simulate import compile_timed
    from .simulate_cli import report, timed_inputs
    from .supersteps import run_steps

    if args.steps < 1:
        raise UserError(f"--steps {args.steps}: give at least 1 timestep")
    if args.input or args.facts_dir:
        raise UserError("with --steps, inputs arrive over time: give them with --timed-inputs DIR "
                        "(rows STEP,col1,...)")
    spark = spark_session(master=getattr(args, "master", None), remote=getattr(args, "remote", None))
    timed = compile_timed(args.program, spark, skip=args.skip, stage_paths=args.stage_path, only=args.only,
                          choose=args.choose)
    inputs = timed_inputs(args.inputs, timed) if args.inputs else None
    run = run_steps(timed, spark, args.steps, inputs)
    report(console, run, [0])
    if args.stats:
        for s in run.supersteps:
            console.print(f"superstep {s.step}: {s.seconds:.2f} s, {s.actions} Spark actions, "
                          f"{plural(s.changed, 'tuple')} changed, {plural(s.sent, 'message')}")
    quiet = run.quiesced[0]
    console.print(f"{len(run.supersteps)} supersteps in {run.seconds:.1f} s, "
                  f"{sum(s.actions for s in run.supersteps)} Spark actions; "
                  + (f"quiesced at step {quiet}" if quiet is not None else
                     f"[yellow]did not quiesce within {plural(args.steps, 'step')}[/]: messages were still in flight or the "
                     "state still changed; raise --steps"))
    if args.output:
        from .simulate_cli import write_trace

        for path in write_trace(run, args.output, args.format):
            console.print(f"wrote {path}")
    return 0


def run_file(args, spark=None, previews: bool = False):
    """What `evita run` does up to its outputs: parse and check, read and measure the
    inputs, compile through the stages, plan, run, write the `-D` files (Soufflé's
    `.output` directives). `spark`: a session already running (the batch runner's),
    else the one `--master` asks for. `previews`: the shown relations will be read
    again (persist those Spark computes). Returns (program, dataflow, result, inputs,
    phases), or None when the program computes nothing (reported as a warning)."""
    from ..bootstrap.activity import doing
    from ..bootstrap.cli import number_bits, parse_and_check, print_note, report_warning
    from ..bootstrap.diagnostics import EvitaError
    from ..bootstrap.planner import plan
    from ..bootstrap.source import empty_warning
    from ..bootstrap.compiling import StageOptions
    from .api import compile_checked
    from .here import NotHere, why_not_here
    from .inputs import facts_dir_of, not_given, output_files, resolve_inputs
    from .io import Inputs, gather_inputs, write_text_outputs
    from .phases import Phases
    from .engine import run_settings
    from .session import settings_for_a_while, spark_session
    from .statistics import measure

    phases = Phases()
    with phases.phase("parse and check"):
        program = parse_and_check(args.program, verbose=getattr(args, "verbose", False),
                                  number_bits=number_bits(args))
    if empty_warning(program) is not None:  # already shown: there is nothing to run
        return None
    from ..bootstrap.strata import one_timestep

    if one_timestep(program):  # a Dedalus program whose messages must arrive later (Paxos)
        e = EvitaError(one_timestep(program), program.text, args.program)
        e.outcome = "the program did not run"
        raise e
    facts_dir, asked = facts_dir_of(args)  # -F, else the current directory (Soufflé's -F .)
    files = resolve_inputs(program, args.input, facts_dir, missing_ok=not asked)  # missing files: before Spark
    if args.souffle_out:
        from ..bootstrap import outcome

        outcome.expect_outputs(args.souffle_out)  # an error then says which files were written
    for warning in not_given(program, files, None if asked else facts_dir):
        report_warning(warning)
    if spark is None and why_not_here(args) is None:
        try:
            return _run_here(args, program, files, phases)
        except NotHere as e:  # nothing was shown or written: the run starts over on Spark
            if args.stats or getattr(args, "verbose", False):
                print_note(f"runs on Spark, not in this process: {e}")
    with phases.phase("start Spark (JVM)"):
        phases.spark = spark if spark is not None else spark_session(master=getattr(args, "master", None),
                                                                     remote=getattr(args, "remote", None))
    spark = phases.spark
    # The inputs are read and measured before the stages run: the cost-based stages
    # order joins by their statistics. Their schemas are the program's declarations.
    planned = plan(program)
    try:
        with doing("the reading of the inputs"), phases.phase("read inputs"):
            inputs = gather_inputs(spark, planned, files=files, lenient=args.lenient)
    except EvitaError as e:
        e.outcome = "the program did not run"
        raise
    # tiny inputs are measured as the run will read them: one job, not one per exchange
    with doing("the measuring of the inputs"), phases.phase("measure inputs"), \
            settings_for_a_while(spark, run_settings(planned, dict(inputs))):
        measured = measure(dict(inputs))
    # The API's compile and engine run (runtime/api.py); the catalog attached to the session started above.
    prog = compile_checked(program, spark, StageOptions.from_args(args), measured, phases, notes=print_note,
                           warnings=report_warning)
    dataflow = prog.plan
    skipped = inputs.skipped
    inputs = Inputs({rel: df for rel, df in inputs.items() if rel in dataflow.relations})  # the stages may drop some
    inputs.skipped = skipped
    with phases.phase("fixpoint"):
        result = prog.evaluate(inputs, max_iterations=args.max_iterations, local=not args.no_local,
                               known_rows={rel: int(n) for rel, col, metric, n in measured if metric == "cardinality"})
    if previews and (args.souffle_out or args.output):  # written, then previewed: compute each relation once
        with result.tuned():  # a cached relation's plan is fixed here, with the settings now in force
            for name in sorted(set(shown_relations(dataflow)) | (set(dataflow.outputs) if args.souffle_out else set())):
                if name not in result.held:  # the driver's tables cost nothing to read again
                    result.relations[name].persist()
    if args.souffle_out:  # each .output directive: its filename, delimiter and headers
        with phases.phase("write outputs"), result.tuned():
            columns = {name: list(s.columns) for name, s in dataflow.relations.items()}
            write_text_outputs(result, output_files(program, args.souffle_out, dataflow.outputs), columns)
    return program, dataflow, result, inputs, phases


def _run_here(args, program, files: dict, phases):
    """`run_file` in this process (runtime/here.py): the inputs read here, the stages
    with Spark on demand, every stratum in the columnar backend. Raises NotHere before
    it writes anything when part of it needs Spark."""
    from ..bootstrap.activity import doing
    from ..bootstrap.cli import print_note, report_warning, session
    from ..bootstrap.diagnostics import EvitaError
    from ..bootstrap.planner import plan
    from ..bootstrap.compiling import StageOptions
    from .api import compile_checked
    from .here import NotHere, run_here, why_not_flow
    from .inputs import output_files
    from .inputs_here import NotHere as ReadElsewhere, read_inputs_here
    from .io import Inputs, input_pairs, write_text_outputs
    from .session import SparkOnDemand
    from .statistics import measure_tables

    phases.spark = SparkOnDemand(lambda: session(args))  # started only if something needs it
    planned = plan(program)
    why = why_not_flow(planned)  # what the stages cannot make runnable here: ask before reading
    if why:
        raise NotHere(why)
    try:
        with doing("the reading of the inputs"), phases.phase("read inputs"):
            tables, skipped = read_inputs_here(input_pairs(planned, files), args.lenient)
    except ReadElsewhere as e:
        raise NotHere(str(e)) from None
    except EvitaError as e:
        e.outcome = "the program did not run"
        raise
    with phases.phase("measure inputs"):
        measured = measure_tables(tables)
    prog = compile_checked(program, phases.spark, StageOptions.from_args(args), measured, phases, notes=print_note,
                           warnings=report_warning)
    dataflow = prog.plan
    with phases.phase("fixpoint"):
        result = run_here(dataflow, {rel: t for rel, t in tables.items() if rel in dataflow.relations},
                          max_iterations=args.max_iterations)
    result.spark = phases.spark
    inputs = Inputs(tables)
    inputs.skipped = skipped
    if args.souffle_out:  # each .output directive: its filename, delimiter and headers
        with phases.phase("write outputs"), result.tuned():
            columns = {name: list(s.columns) for name, s in dataflow.relations.items()}
            write_text_outputs(result, output_files(program, args.souffle_out, dataflow.outputs), columns)
    return program, dataflow, result, inputs, phases


def cmd_analyze(args) -> int:
    """Like SQL's ANALYZE TABLE: the statistics of the inputs, stored in the warehouse
    (`statistics/PROGRAM.json`) for later `evita compile`, `plan`, `explain` and `run`
    (which measures what it reads itself, and uses these for the rest)."""
    from rich.console import Console
    from rich.table import Table

    from ..bootstrap.activity import doing
    from ..bootstrap.cli import number_bits, parse_and_check, report_warning
    from ..bootstrap.planner import plan
    from .inputs import facts_dir_of, not_given, resolve_inputs
    from .io import gather_inputs
    from .session import spark_session
    from .statistics import DISTINCT_RSD, measure, store

    program = parse_and_check(args.program, verbose=getattr(args, "verbose", False), number_bits=number_bits(args))
    facts_dir, asked = facts_dir_of(args)
    files = resolve_inputs(program, args.input, facts_dir, missing_ok=not asked)
    for warning in not_given(program, files, None if asked else facts_dir):
        report_warning(warning)
    if not files:
        print(f"{args.program}: no inputs to measure: give -F DIR or --input REL=PATH", file=sys.stderr)
        return 1
    spark = spark_session(master=getattr(args, "master", None), remote=getattr(args, "remote", None))
    with doing("the reading of the inputs"):
        inputs = gather_inputs(spark, plan(program), files=files)
    with doing("the measuring of the inputs"):
        measured = measure(dict(inputs))
    path = store(program.name, measured, getattr(args, "warehouse", None))
    t = Table(title=f"{program.name}: statistics of {len(inputs)} input relation{'s' if len(inputs) != 1 else ''}")
    for col in ("relation", "column", "rows", "distinct", "min", "max", "nulls"):
        t.add_column(col, justify="left" if col in ("relation", "column") else "right")
    by = {(rel, col, metric): v for rel, col, metric, v in measured}
    for rel in sorted(inputs):
        t.add_row(rel, "", _num(by.get((rel, None, "cardinality"))), "", "", "", "")
        for c in range(len(inputs[rel].columns)):
            t.add_row("", str(c), "", *[_num(by.get((rel, c, m))) for m in ("distinct", "min", "max", "nulls")])
    Console(highlight=False, width=None if sys.stdout.isatty() else 200).print(t)
    print(f"distinct counts are estimates (HyperLogLog++, relative standard deviation {DISTINCT_RSD:.0%}); "
          f"kept in {path} for later compiles of {program.name}")
    return 0


def print_sizes(result, relations: list) -> None:
    """Soufflé's `.printsize R`: a line `R<TAB>size` per relation after the run."""
    held = result.held
    for name in relations:
        size = len(held[name]) if name in held else \
            result.relations[name].count() if name in result.relations else 0
        print(f"{name}\t{size}")


def _num(v) -> str:
    if v is None:
        return ""
    return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"


def unsigned_columns(dataflow) -> dict:
    """relation -> (positions of its unsigned columns, the program's width of numbers)."""
    return {name: ({i for i, t in enumerate(s.types) if t == "unsigned"}, dataflow.number_bits)
            for name, s in dataflow.relations.items() if "unsigned" in (s.types or ())}


def record_columns(dataflow) -> dict:
    """relation -> positions of its record columns (held as canonical JSON text)."""
    return {name: {i for i, t in enumerate(s.records) if t} for name, s in dataflow.relations.items() if s.records}


def print_tables(console, frames: dict, limit: int = PREVIEW_ROWS, held: Optional[dict] = None,
                 columns: Optional[dict] = None, unsigned: Optional[dict] = None,
                 records: Optional[dict] = None) -> None:
    """Each relation's first rows in column order: from the driver's own table when the
    run left one there (`held`: name -> pandas table, as `Result.held`; its frame may be
    None), the others with one Spark action for all of them. `columns`: name -> the
    column names shown (default the frame's). `unsigned`: as `unsigned_columns`, shown
    as Soufflé writes them (a bit pattern with the sign bit set is a large value);
    `records`: as `record_columns`, shown in Soufflé's text form (`[1, a, [2, nil]]`)."""
    import json
    from functools import reduce

    from rich.table import Table
    from rich.text import Text

    from ..bootstrap.records import souffle_text
    from .order import row_key

    if not frames:
        return
    names = list(frames)
    rows: dict = {n: [] for n in names}
    parts = []
    for i, name in enumerate(names):
        if (columns or {}).get(name) == [] and frames[name] is not None:  # a proposition: true or false
            rows[name] = [[]] if not frames[name].isEmpty() else []
            continue
        first = _first_rows(held[name], limit + 1) if held and name in held else None
        if first is None and frames[name] is None:  # no Spark frame to order them: the first held
            first = [[list(v) if isinstance(v, tuple) else v for v in row]
                     for row in held[name].head(limit + 1).astype(object).values.tolist()]
        if first is not None:
            rows[name] = first
            continue
        from pyspark.sql import functions as F

        df = frames[name]
        plain = df.toDF(*[f"c{j}" for j in range(len(df.columns))])
        # Spark's top-k on the columns themselves; only the rows kept become JSON text.
        first = plain.orderBy(*plain.columns).limit(limit + 1)
        parts.append(first.select(F.lit(i).alias("r"),
                                  F.to_json(F.array(F.struct("*")), {"ignoreNullFields": "false"}).alias("t")))
    if parts:
        for r in reduce(lambda a, b: a.union(b), parts).collect():
            rows[names[r["r"]]].append(list(json.loads(r["t"])[0].values()))
    for name in names:
        got = rows[name]
        table = Table(title=Text(f"{name}" + (f" (first {plural(limit, 'row')})" if len(got) > limit
                                              else f" ({plural(len(got), 'row')})")),
                      min_width=len(name) + 12)
        names_of = (columns or {}).get(name)  # [] for a nullary relation: it has no columns
        for c in names_of if names_of is not None else frames[name].columns:
            table.add_column(c)
        if not table.columns:  # a proposition: one row "()" when it holds
            table.add_column("()")
            got = [["()"] for _ in got]
        positions, bits = (unsigned or {}).get(name, ((), 64))
        held_records = (records or {}).get(name, ())
        for r in sorted(got[:limit], key=row_key):  # by the columns' types: 2 before 10
            table.add_row(*[Text(souffle_text(v) if j in held_records else _cell(_as_unsigned(v, bits) if j in positions
                                                                                  else v)) for j, v in enumerate(r)])
        console.print(table)


def _as_unsigned(v, bits: int):
    return v + (1 << bits) if isinstance(v, int) and not isinstance(v, bool) and v < 0 else v


def _first_rows(table, n: int) -> Optional[list]:
    """The first `n` rows of a pandas table in column order (Spark's: nulls first), as
    plain Python values; None when its columns do not sort (Spark then orders them)."""
    try:
        first = table.sort_values(list(table.columns), kind="stable", na_position="first").head(n) \
            if len(table.columns) else table.head(n)
        return [[list(v) if isinstance(v, tuple) else v for v in row]
                for row in first.astype(object).values.tolist()]
    except (TypeError, ValueError):
        return None


def _cell(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_cell(x) for x in v) + "]"
    if isinstance(v, str):
        return v
    return str(v)
