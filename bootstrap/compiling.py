"""A checked program through the stage lattice, every version kept in the catalog: the
step between parsing and planning that `evita compile`, `evita run` and the Python API
share. The command line turns its flags into `StageOptions` (`StageOptions.from_args`)
and the API its keyword arguments; neither goes through the other.

    parse + check  ->  compile_and_store(program, spark, options)  ->  plan
                        encode -> statistics -> scheduler (stages) -> save every version

A failing stage raises `CompileFailed` with what the stages before it did; the catalog
keeps its last good compile and the failed attempt apart (status 'failed').
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import syntax as S
from .activity import doing
from .diagnostics import UserError

# The version row's note for a stage whose trigger found nothing to do.
SKIPPED = "skipped: its trigger (stage::applies) found nothing to do, so it did not run"


@dataclass(frozen=True)
class StageOptions:
    """Which stages a compile runs and what it keeps: `evita compile`'s --stage-path,
    --skip, --only, --choose, --max-iterations."""
    stage_paths: tuple = ()
    skip: tuple = ()
    only: Optional[tuple] = None
    choose: dict = field(default_factory=dict)  # group -> stage
    max_iterations: Optional[int] = None  # fixpoint iteration limit per stage (None: grows with the program)
    store: bool = True  # keep the compile in the catalog (`evita test-suite` does not)
    dataflow: bool = False  # write the planner's dataflow for the stages that read it (`wants_dataflow`)
    warehouse: Optional[str] = None  # where `evita analyze` keeps the statistics merged in

    @classmethod
    def from_args(cls, args) -> "StageOptions":
        """The options a command line gave (flags it does not have take their defaults)."""
        choose = {}
        for item in getattr(args, "choose", None) or ():
            group, sep, stage = item.partition("=")
            if not sep:
                raise UserError(f"--choose {item}: write GROUP=STAGE, e.g. --choose join_order=cascades")
            choose[group] = stage
        only = getattr(args, "only", None)
        return cls(tuple(getattr(args, "stage_path", None) or ()), tuple(getattr(args, "skip", None) or ()),
                   tuple(only) if only is not None else None, choose, getattr(args, "max_iterations", None),
                   getattr(args, "store", True), wants_dataflow(args), getattr(args, "warehouse", None))


def wants_dataflow(args) -> bool:
    """Whether the compile writes the planner's dataflow into the catalog for the stages
    that read it (`scheduler.with_planned_dataflow`): `--egraph`, or `evita explain
    --stage S` of such a stage (the egraph stage, or a variant of it in --stage-path)."""
    from .stage import find_stages, tables_read

    if getattr(args, "egraph", False):
        return True
    asked = getattr(args, "stage", None)
    stage = find_stages(getattr(args, "stage_path", None) or []).get(asked) if asked else None
    return stage is not None and "flow_op" in tables_read(stage.program)


class CompileFailed(UserError):
    """A stage failed; `diffs` are what the stages before it did (explain shows them)."""

    def __init__(self, message: str, diffs: list):
        super().__init__(message)
        self.diffs = diffs


def compile_and_store(program: S.Program, spark, options: StageOptions, *, phases=None, measured=(),
                      notes=None, warnings=None) -> tuple:
    """(Compilation, [StageDiff]) of a parsed and checked program. `spark`: a session
    with the catalog attached, or Spark on demand (`runtime.session.SparkOnDemand`:
    small catalogs compile with no JVM). `phases`: a `runtime.phases.Phases` timing the
    stages and the saving. `measured`: statistics of its inputs measured now
    (`runtime.statistics.measure`), merged with those `evita analyze` stored, for the
    relations the program states none for itself (`.plan statistics`). `notes` and
    `warnings`: where the scheduler's notes and warnings go, one call each."""
    from contextlib import nullcontext

    from ..catalog.encode import encode
    from .explain import diff_versions
    from .scheduler import Version, compile_program
    from .stage import StageFailure

    def phase(name):
        return phases.phase(name) if phases is not None else nullcontext()

    rows = encode(program)
    _add_statistics(rows, program.name, measured, options.warehouse)
    try:
        with phase("compile: stages"):
            comp = compile_program(spark, rows, program.name, stage_paths=list(options.stage_paths),
                                   skip=list(options.skip), only=list(options.only) if options.only is not None
                                   else None, choose=dict(options.choose), max_iterations=options.max_iterations,
                                   dataflow=options.dataflow)
    except StageFailure as e:
        versions = e.versions or [Version(0, "parse", rows)]
        diffs = diff_versions([(v.number, v.stage, v.rows) for v in versions], program.name)
        if not options.store:  # the conformance runner's cases are not kept
            raise CompileFailed(str(e), diffs) from None
        store_compilation(spark, program.name, versions, diffs, failure=e)
        raise CompileFailed(f"{e}\n{kept_after_failure(spark, program.name)}", diffs) from None
    with phase("compile: save the catalog"), doing("the saving of the compile in the catalog"):
        diffs = diff_versions([(v.number, v.stage, v.rows) for v in comp.versions], program.name)
        if options.store:
            from ..catalog import store

            store_compilation(spark, program.name, comp.versions, diffs)
            store.save_shared(spark, comp.lattice)  # evita.stage, evita.stage_lattice: what this compile ran by
    for warning in comp.warnings:
        if warnings is not None:
            warnings(warning)
    for note in comp.notes:
        if notes is not None:
            notes(note)
    return comp, diffs


def _add_statistics(rows, program_id: str, measured, warehouse) -> None:
    from ..runtime import statistics

    stated = {r[1] for r in rows["statistic"]}
    rows["statistic"] += [r for r in statistics.catalog_rows(program_id, statistics.merged(program_id, list(measured),
                                                                                          warehouse))
                          if r[1] not in stated]


def kept_after_failure(spark, program_id: str) -> str:
    """What the catalog holds after a failed compile: the last good one, untouched."""
    from ..catalog import store

    good = [r for r in store.load_rows(spark, program_id).dicts("version") if r["status"] in (store.OK, None)]
    last = max(good, key=lambda r: r["version"]) if good else None
    kept = (f"The catalog of {program_id} stays at its last good compile (version {last['version']}, "
            f"{last['stage']})" if last else f"{program_id} has no good compile in the catalog")
    quoted = program_id.replace("\\", "\\\\").replace("'", "\\'")
    return (f"{kept}; this attempt is kept apart: SELECT * FROM evita.version WHERE program = "
            f"'{quoted}' AND status = 'failed'")


def store_compilation(spark, program_id: str, versions: list, diffs: list, failure=None) -> None:
    """One commit: a good compile replaces the program's catalog and history; a failed
    one (`failure`, the StageFailure) is stored apart from them with status 'failed'."""
    from ..catalog import store
    from ..catalog.rows import CatalogRows

    counts = {d.version: d.counts for d in diffs}
    status = store.FAILED if failure else store.OK
    version_rows = [(program_id, v.number, v.stage, *counts.get(v.number, (0, 0, 0)), round(v.seconds, 3),
                     v.actions, status, SKIPPED if getattr(v, "skipped", False) else None) for v in versions]
    if failure:
        version_rows.append((program_id, versions[-1].number + 1, failure.stage, 0, 0, 0, None, None, status,
                             failure.reason))
    final = versions[-1].rows if not failure else CatalogRows()
    final["version"] = version_rows
    store.save_compilation(spark, final, program_id, [(v.number, v.rows) for v in versions], status)
