"""The Python API: compile a program once, run it on Spark DataFrames, get DataFrames back.

    import evita
    prog = evita.compile("tc.dl", spark=spark)       # a path, or the program's text
    res = prog.run(inputs={"edge": edges_df})        # DataFrames, rows, or file paths
    res["path"]                                      # a DataFrame, the declared column names
    prog.plan, prog.explain(), prog.catalog("rule")  # dataflow, stage diffs, catalog tables

It is what `evita run` does, in pieces a program can hold: `evita run` itself goes through
`compile_checked` and `Program.evaluate` below (`runtime/cli_commands.run_file`). Every
mistake, in the program or in the call, raises `evita.EvitaError` with the diagnostics
the command line prints (`str(e)` renders them, file:line:col first).

The caller's SparkSession is theirs: Evita never stops it, and every call leaves its
settings as it found them (`session.settings_kept`); the steps that need settings of
their own set them for their duration only. Logging goes to the `evita` logger. docs/api.md
shows it at work.
"""
from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.compiling import StageOptions
from ..bootstrap.diagnostics import Diagnostic, EvitaError, plural

log = logging.getLogger("evita")

API = S.Span("<api>", 0, 0)  # where a mistake in a call (not in the program) is reported
PROGRAM_SUFFIXES = (".dl", ".olg", ".datalog")


def compile(program, spark=None, *, name: Optional[str] = None, stage_paths=(), skip=(), only=None,
            choose: Optional[dict] = None, max_iterations: Optional[int] = None, number_bits: int = 64) -> "Program":
    """Parse, check and compile `program` through the stage lattice, as `evita compile`
    does (every version is kept in the catalog). `program`: a path (str or Path) to a
    .dl/.olg file, or the program's text. `name`: the program's name in the catalog
    (default: the file's stem; "program" for text). `spark`: the session to run on
    (default: the active one, else one `evita` starts as the command line does).
    Stage options: `stage_paths` (folders of more .dl stages), `skip`, `only`,
    `choose` ({group: stage}). `number_bits`: the width of number and unsigned, 64 (the
    default) or 32 (Soufflé's default build), as `--number-bits`."""
    from ..bootstrap.checks import check_program
    from ..bootstrap.source import empty_warning
    from .inputs import check_io_params

    if number_bits not in (32, 64):
        raise EvitaError([Diagnostic("bad-option", f"number_bits is {number_bits!r}", API, str(number_bits),
                                     "give number_bits=64 (the default) or number_bits=32")])
    parsed = check_program(_parse(program, name, number_bits))  # before Spark: a bad program fails fast
    problems = check_io_params(parsed)
    warning = empty_warning(parsed)
    if warning is not None:  # `evita run` stops there too: almost surely the wrong file
        problems.append(warning)
    if problems:
        raise EvitaError(problems, source=parsed.text, source_file=parsed.path)
    options = StageOptions(tuple(map(str, _listed(stage_paths))), tuple(_listed(skip)),
                           tuple(_listed(only)) if only is not None else None, dict(choose or {}), max_iterations)
    from .session import workers_with_evita

    session = _session(spark)
    with workers_with_evita(session):
        return _user_errors(lambda: compile_checked(parsed, session, options))


def compile_checked(program: S.Program, spark, options: StageOptions, measured=(), phases=None,
                    notes=None, warnings=None) -> "Program":
    """Compile a parsed and checked program (`evita run` measures its inputs first, for the
    cost-based stages: `measured`); the catalog attached to `spark`. A failing stage
    raises `bootstrap.compiling.CompileFailed` (the command line shows what ran before it).
    `notes`, `warnings`: where the scheduler's notes and warnings go (default: the `evita`
    logger; standard error)."""
    from ..bootstrap.compiling import compile_and_store
    from ..bootstrap.planner import plan
    from ..catalog.decode import decode
    from .session import not_started, settings_kept

    if not not_started(spark):  # Spark on demand attaches the catalog when it starts
        from ..catalog import store

        with phases.phase("attach the catalog") if phases is not None else nullcontext():
            store.attach(spark)
    with settings_kept(spark) if not not_started(spark) else nullcontext():
        said: list = []

        def note(text: str) -> None:
            said.append(text)
            (notes or (lambda t: log.info("%s", t)))(text)

        comp, diffs = compile_and_store(program, spark, options, phases=phases, measured=measured, notes=note,
                                        warnings=warnings or _warned)
        final = decode(comp.final, program.name)
        with phases.phase("plan") if phases is not None else nullcontext():
            dataflow = plan(final)
        return Program(program, spark, options, comp, diffs, final, dataflow, said)


def _warned(d) -> None:
    """A scheduler's warning (a lattice fact naming no stage, ...): on standard error."""
    import sys

    print(d.render(), file=sys.stderr)


class Program:
    """A compiled program: `plan` (the physical dataflow), `explain()`, `catalog(table)`,
    `text` (the program as the stages left it), and `run(...)`."""

    def __init__(self, source: S.Program, spark, options: StageOptions, compilation, diffs: list,
                 final: S.Program, dataflow, notes: list):
        self.source = source  # as parsed and checked
        self.spark = spark
        self.options = options
        self.compilation = compilation  # bootstrap.scheduler.Compilation: every version's rows
        self.diffs = diffs  # bootstrap.explain.StageDiff per version
        self.final = final  # as the stages left it
        self.plan = dataflow  # runtime.dataflow.Dataflow: print(prog.plan.to_text())
        self.notes = notes  # the scheduler's notes

    @property
    def name(self) -> str:
        return self.source.name

    def __repr__(self) -> str:
        return f"<evita.Program {self.name}: {len(self.final.rules)} rules, {len(self.diffs)} versions>"

    @property
    def text(self) -> str:
        """The program after the stages, as text (`evita print`)."""
        from ..catalog.printer import print_catalog

        return print_catalog(self.compilation.final, self.name)

    def explain(self, stage: Optional[str] = None) -> str:
        """What each stage added, removed and changed, as `evita explain` prints it (no
        colours); `stage`: that stage only."""
        from rich.console import Console

        from ..bootstrap.cli import _print_diffs

        shown = [d for d in self.diffs if stage in (None, d.stage)]
        if stage is not None and not shown:
            raise EvitaError([Diagnostic("unknown-stage", f"stage {stage} did not run for {self.name}", API, stage,
                                         "ran: " + (", ".join(d.stage for d in self.diffs) or "none"))])
        buffer = io.StringIO()
        console = Console(file=buffer, width=100, no_color=True, highlight=False, force_terminal=False)
        _print_diffs(shown, {v.number for v in self.compilation.versions if v.skipped}, console)
        return buffer.getvalue().rstrip("\n")

    def catalog(self, table: str, history: bool = False):
        """A catalog table's rows of this program as a DataFrame (`evita catalog TABLE`);
        `history`: every version's (`evita_history`, a leading `version` column), for
        the tables that keep a history."""
        from ..catalog import schema, store

        try:
            decl = schema.table(table)
        except KeyError as e:
            raise EvitaError([Diagnostic("unknown-table", e.args[0], API, table, "the tables: evita catalog")]) from None
        database = schema.DATABASE
        if history:
            if decl.name not in store.HISTORY_TABLES:
                raise EvitaError([Diagnostic("unknown-table", f"evita_history has no table {decl.name}", API, table,
                                             "kept: " + ", ".join(store.HISTORY_TABLES))])
            database = store.HISTORY_DB
        df = self.spark.table(f"{database}.`{decl.name}`")
        from pyspark.sql import functions as F

        if "program" in decl.column_names:
            df = df.where(F.col("program") == self.name)
        elif decl.name == "program":  # the table of programs: this program's row is keyed by id
            df = df.where(F.col("id") == self.name)
        return df.orderBy(*(["version"] if history else []), *decl.order)

    def run(self, inputs: Optional[dict] = None, *, facts_dir=None, lenient: bool = False,
            max_iterations: Optional[int] = None, local: bool = True, steps: Optional[int] = None):
        """Run on Spark; returns a `Result` (relation -> DataFrame).

        `inputs`: relation -> a Spark DataFrame (columns by position, cast to the
        declared types), a list of tuples, or a file path (CSV, TSV/.facts, Parquet, as
        `--input REL=PATH`). `facts_dir`: Soufflé's -F, DIR/REL.facts per `.input`.
        `lenient`: file rows that do not read are skipped and counted (`Result.skipped`).
        `local=False`: every stratum on Spark's SQL path (`--no-local`).

        A Dedalus program (@next, @async) runs as one timestep, as `evita run` does;
        `steps=N` runs it over N timesteps as Spark supersteps (`evita run --steps N`)
        and returns the run's trace (`runtime.supersteps.StepsRun`); its `inputs` are
        then relation -> [(step, tuple), ...]."""
        from .session import workers_with_evita

        with workers_with_evita(self.spark):  # the session's Python workers import Evita (docs/api.md)
            if steps is not None:
                return _user_errors(lambda: self._run_steps(steps, inputs, facts_dir))
            return _user_errors(lambda: self._run(inputs, facts_dir, lenient, max_iterations, local))

    def _run(self, inputs, facts_dir, lenient, max_iterations, local):
        from ..bootstrap.dedalus_checks import is_dedalus
        from ..bootstrap.strata import one_timestep
        from .session import settings_kept

        if one_timestep(self.source):  # a Dedalus program whose messages must arrive later (Paxos)
            raise EvitaError(one_timestep(self.source), self.source.text, self.source.path)
        if is_dedalus(self.source):
            log.info("%s: a Dedalus program run as one timestep (@next rules deferred, @async messages at once); "
                     "run(steps=N) runs it over time", self.name)
        with settings_kept(self.spark):
            frames = self.read_inputs(inputs or {}, facts_dir, lenient)
            result = self.evaluate(frames, max_iterations=max_iterations, local=local)
        return Result(result, self.plan, frames.skipped)

    def read_inputs(self, inputs: dict, facts_dir=None, lenient: bool = False):
        """relation -> DataFrame (columns c0, c1, ... as the engine reads them) for the
        given inputs: files read and checked as `evita run` reads them, DataFrames and
        rows conformed to the declarations. Mistakes raise one EvitaError."""
        from ..bootstrap.planner import plan
        from .inputs import resolve_inputs
        from .io import Inputs, gather_inputs

        if not isinstance(inputs, Mapping):
            raise EvitaError([Diagnostic("bad-inputs", f"inputs must map relation names to DataFrames, rows or "
                                         f"paths, not {type(inputs).__name__}", API, "",
                                         'for example inputs={"edge": edges_df}')])
        declared = plan(self.source)  # the program's relations before the stages (they may drop some)
        problems, paths, given = [], {}, {}
        for rel, value in inputs.items():
            if rel not in declared.relations:
                problems.append(Diagnostic("unknown-relation", f"inputs names {rel}, which the program does not use",
                                           API, str(rel), "known: " + ", ".join(sorted(declared.relations))))
            elif isinstance(value, (str, Path)):
                paths[rel] = str(value)
            else:
                given[rel] = value
        if problems:
            raise EvitaError(problems, self.source.text, self.source.path)
        files = resolve_inputs(self.source, [f"{rel}={path}" for rel, path in paths.items()],
                               str(facts_dir) if facts_dir is not None else None)
        frames = gather_inputs(self.spark, declared, files=files, lenient=lenient) if files else Inputs()
        skipped = dict(getattr(frames, "skipped", {}))
        frames = Inputs(frames)
        for rel, value in given.items():
            frames[rel] = _conformed(self.spark, rel, value, declared.relations[rel])
        frames.skipped = skipped
        return frames

    def evaluate(self, inputs: dict, *, max_iterations: Optional[int] = None, local: bool = True,
                 known_rows: Optional[dict] = None):
        """The engine run of the planned dataflow over `inputs` (relation -> DataFrame,
        columns c0, c1, ...; relations the stages removed are left out): the
        `runtime.engine.Result`. `evita run` comes here too. `known_rows`: relation ->
        rows of the inputs measured already."""
        from .engine import DEFAULT_MAX_ITERATIONS, run

        wanted = {rel: df for rel, df in inputs.items() if rel in self.plan.relations}
        return run(self.plan, self.spark, wanted, max_iterations=max_iterations or DEFAULT_MAX_ITERATIONS, local=local,
                   known_rows=known_rows)

    def _run_steps(self, steps, inputs, facts_dir):
        """Dedalus time as Spark supersteps, on the program the stages compiled."""
        from ..bootstrap.dedalus_checks import is_dedalus
        from .dedalus import lower
        from .session import settings_kept
        from .supersteps import run_steps

        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise EvitaError([Diagnostic("bad-steps", f"steps={steps!r}: give a whole number of timesteps, at "
                                         "least 1", API, str(steps))])
        if not is_dedalus(self.source):
            raise EvitaError([Diagnostic("not-dedalus", f"{self.name} has no @next or @async rule and no "
                                         "component: nothing happens over time", API, "steps",
                                         "leave steps out: run() evaluates it to its fixpoint")])
        if facts_dir is not None:
            raise EvitaError([Diagnostic("bad-inputs", "with steps, inputs arrive over time: facts_dir does not "
                                         "apply", API, "facts_dir", "inputs={REL: [(step, tuple), ...]}")])
        timed = lower(self.final)
        timed_inputs = {}
        for rel, rows in (inputs or {}).items():
            if rel not in timed.arity:
                raise EvitaError([Diagnostic("unknown-relation", f"inputs names {rel}, which the program does not "
                                             "use", API, str(rel), "known: " + ", ".join(sorted(timed.arity)))])
            timed_inputs[rel] = [(int(step), tuple(t)) for step, t in rows]
        with settings_kept(self.spark):
            return run_steps(timed, self.spark, steps, timed_inputs or None)


class Result(Mapping):
    """What a run computed: relation -> Spark DataFrame with the relation's declared
    column names (lazy: Spark computes it when it is read). `shown`: the relations
    `evita run` prints (`.output`, else every derived one); `queries`: the answers to the
    program's `query` statements; `skipped`: rows `lenient` left out, per relation;
    `engine`: the engine's own `Result` (statistics: `engine.stats_text()`)."""

    def __init__(self, engine_result, dataflow, skipped: dict):
        self.engine = engine_result
        self.dataflow = dataflow
        self.skipped = dict(skipped)

    def __getitem__(self, relation: str):
        try:
            return self.engine.relations[relation]
        except KeyError:
            raise KeyError(f"no relation {relation!r} in the result; it has: {', '.join(self)}") from None

    def __iter__(self):
        return iter(self.engine.relations)

    def __len__(self) -> int:
        return len(self.engine.relations)

    def __repr__(self) -> str:
        return f"<evita.Result: {', '.join(self)}>"

    @property
    def shown(self) -> list:
        from .queries import shown_relations

        return shown_relations(self.dataflow)

    @property
    def queries(self) -> dict:
        """`query` text -> DataFrame of its answers, columns named after its variables."""
        from .queries import atom_text, query_frame

        return {atom_text(q): query_frame(self.engine.relations[q.relation], q) for q in self.dataflow.queries}

    def rows(self, relation: str) -> list:
        """The relation's tuples, sorted (one Spark action)."""
        return self.engine.rows(relation)


def _parse(program, name: Optional[str], number_bits: int = 64):
    """A path (str or Path) to a program file, or the program's text."""
    from ..bootstrap.parser import parse_file, parse_program

    if isinstance(program, Path) or (isinstance(program, str) and _looks_like_path(program)):
        path = Path(program)
        if not path.is_file():
            raise EvitaError([Diagnostic("no-file", f"no program file {path}", API, str(program),
                                         "give a path to a .dl or .olg file, or the program's text")])
        return parse_file(path, name, number_bits)
    if not isinstance(program, str):
        raise EvitaError([Diagnostic("bad-program", f"a program is a path or its text, not "
                                     f"{type(program).__name__}", API, "")])
    return parse_program(program, "<string>", name or "program", number_bits=number_bits)


def _looks_like_path(text: str) -> bool:
    """One line naming an existing file or ending in a program suffix (a program's text
    has a `.` or `:-` and, as a rule, more than one line)."""
    if "\n" in text or len(text) > 4096:
        return False
    return text.strip().endswith(PROGRAM_SUFFIXES) or Path(text).is_file()


def _conformed(spark, rel: str, value, storage):
    """A DataFrame or rows for relation `rel` as the engine reads it: columns c0, c1, ...
    by position, cast to the declared types (columns of type `any` keep theirs)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from .io import DECLARED, facts_frame

    if isinstance(value, (list, tuple)):
        bad = [r for r in value if not isinstance(r, (list, tuple)) or len(r) != storage.arity]
        if bad:
            raise EvitaError([Diagnostic("input-arity", f"inputs[{rel!r}]: row {bad[0]!r} is not a tuple of "
                                         f"{plural(storage.arity, 'value')}", API, rel, f"{rel} has columns "
                                         + ", ".join(storage.columns))])
        return facts_frame(spark, [tuple(r) for r in value], storage)
    value = _spark_frame(spark, rel, value)
    if len(value.columns) != storage.arity:
        raise EvitaError([Diagnostic("input-arity", f"inputs[{rel!r}] has {plural(len(value.columns), 'column')} "
                                     f"({', '.join(value.columns)}); {rel} has {storage.arity} "
                                     f"({', '.join(storage.columns)})", API, rel,
                                     "columns are matched by position: select the ones the relation declares")])
    columns, problems = [], []
    for i, (field, declared, column) in enumerate(zip(value.schema.fields, storage.types, storage.columns)):
        col = F.col(f"`{field.name}`")
        target = DECLARED.get(declared)
        if target:
            if not _casts_safely(field.dataType, target):
                problems.append(Diagnostic("input-type", f"inputs[{rel!r}]: column {field.name} is "
                                           f"{field.dataType.simpleString()}, but {rel}.{column} is declared "
                                           f"{declared}", API, field.name,
                                           f"cast it first, e.g. df.withColumn({field.name!r}, "
                                           f"df[{field.name!r}].cast({target!r}))"))
            col = col.cast(target)
        columns.append(col.alias(f"c{i}"))
    if problems:  # found from the schema alone: no Spark job, no cast failing halfway through a run
        raise EvitaError(problems)
    return value.select(*columns)


def _spark_frame(spark, rel: str, value):
    """A Spark DataFrame of `value`: one already, a pandas DataFrame or a pyarrow Table
    (made one with the types they carry, no Python worker), else an EvitaError naming
    what was given and what is read."""
    from pyspark.sql import DataFrame

    if isinstance(value, DataFrame):
        return value
    module = type(value).__module__.split(".")[0]
    kind = type(value).__qualname__ if module == "builtins" else f"{module}.{type(value).__qualname__}"  # pandas.DataFrame
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover (a dependency of Evita)
        pa = None
    if kind == "pandas.DataFrame" and pa is not None:
        value = pa.Table.from_pandas(value, preserve_index=False)  # keeps its column types, empty or not
    if pa is not None and isinstance(value, (pa.Table, pa.RecordBatch)):
        table = value if isinstance(value, pa.Table) else pa.Table.from_batches([value])
        try:
            return spark.createDataFrame(table)
        except Exception as e:  # a type Spark has no counterpart for
            from ..bootstrap.stopping import _first_line

            raise EvitaError([Diagnostic("bad-inputs", f"inputs[{rel!r}]: Spark cannot read this {kind}: "
                                         f"{_first_line(str(e))}", API, rel,
                                         "give columns of numbers, strings or booleans")]) from None
    raise EvitaError([Diagnostic("bad-inputs", f"inputs[{rel!r}] is a {kind}, which Evita does not read: give a "
                                 "Spark DataFrame, a pandas DataFrame, a pyarrow Table, a list of tuples or a file "
                                 "path", API, rel)])


def _casts_safely(source, target: str) -> bool:
    """Whether every value of Spark type `source` becomes a value of `target` (a
    declared type's Spark name) without loss or failure: whole numbers stay whole, any
    number may become a double, anything plain may become a symbol."""
    from pyspark.sql import types as T

    if target == "bigint":
        return isinstance(source, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))
    if target == "double":
        return isinstance(source, T.NumericType)
    if target == "boolean":
        return isinstance(source, T.BooleanType)
    return not isinstance(source, (T.ArrayType, T.MapType, T.StructType, T.BinaryType))


def _session(spark):
    """The caller's session; else the active one; else one started as the CLI starts it.
    Its workers get Evita when a call needs them to (`session.workers_with_evita`)."""
    from .session import spark_session

    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is None:
        return spark_session()
    return spark


def _user_errors(call):
    """Mistakes the command line reports as one line (`bootstrap.cli.UserError`, a stage
    that failed) become EvitaErrors too: the API raises one kind of error."""
    from ..bootstrap.compiling import CompileFailed
    from ..bootstrap.diagnostics import UserError
    from .session import worker_failure

    try:
        return call()
    except EvitaError:
        raise
    except CompileFailed as e:
        error = EvitaError([Diagnostic("stage-failed", str(e), API, "",
                                       "what the stages before it did: the error's `diffs` (evita explain prints them)")])
        error.diffs = e.diffs
        raise error from None
    except UserError as e:
        raise EvitaError([Diagnostic("bad-call", str(e), API, "")]) from None
    except Exception as e:  # Spark's workers could not run Evita's tasks: say what to set, not the trace
        problem = worker_failure(e)
        if problem is None:
            raise
        raise problem from None


def _listed(value) -> list:
    """One name or path, or several."""
    if value is None:
        return []
    return [value] if isinstance(value, (str, Path)) else list(value)
