"""The stage scheduler: a loop that asks the lattice for the next stage and runs it.

The decision is Datalog (`stage_lattice.dl`): this module only states what it knows as
facts (completed, disabled, chosen), reads back `next`, runs that stage, checks the
catalog's integrity (`catalog/integrity.dl`, Datalog too) and keeps every version.
A failing stage leaves the catalog at the version before it.

Spark charges per action, so the lattice's question "what next, once this stage has
completed?" is evaluated by the stage's own action: its answer depends on which stages
completed, not on what they derived. Where no stage's action is there to carry it (the
first question, and after a skipped stage), it is asked in this process on the columnar
backend, as is a stage's trigger (`stage::applies`): a stage with nothing to do costs
no Spark job.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Optional

from evita.catalog import schema
from evita.catalog.rows import CatalogRows

from . import compile_cache
from . import syntax as S
from evita.runtime import progress

from .activity import doing
from .diagnostics import Diagnostic, EvitaError
from .stage import (
    APPLIES, BOOTSTRAP_STAGES, StageFailure, StageFile, apply, evaluate, evaluate_in_process, find_stages,
    tables_read,
    package_root,
)

_log = logging.getLogger("evita")


@dataclass
class Version:
    number: int
    stage: str
    rows: CatalogRows
    seconds: float = 0.0
    actions: int = 0
    next_stage: Optional[str] = None  # the lattice's answer once this stage completed, if asked with it
    timing: dict = field(default_factory=dict)  # stage: (driver s, action s); integrity: s
    skipped: bool = False  # the stage's trigger found nothing to do: it did not run
    ensured: tuple = ()  # invariants (catalog/NAME.dl) this and every later version must keep


@dataclass
class Compilation:
    program: str
    versions: list
    lattice_actions: int = 0
    lattice_seconds: float = 0.0
    stats: list = field(default_factory=list)  # (stage, seconds, actions)
    warnings: list = field(default_factory=list)  # Diagnostics about the stages and lattice (an unknown stage named)
    lattice: Optional[CatalogRows] = None  # the stage and stage_lattice tables this compile used
    notes: list = field(default_factory=list)  # stages left out although their trigger finds work
    cached: bool = False  # read from the compile cache (bootstrap/compile_cache.py), not run now

    @property
    def final(self) -> CatalogRows:
        return self.versions[-1].rows

    @property
    def stages_run(self) -> list:
        return [v.stage for v in self.versions]


class Lattice:
    """stage_lattice.dl plus the lattice facts stage files carry."""

    def __init__(self, stages: dict):
        from .stage import checked_file

        self.path = package_root() / "stage_lattice.dl"
        self.base = checked_file(self.path)
        self.stages = stages
        extra = tuple(f for s in sorted(stages.values(), key=lambda s: s.name) for f in s.lattice_facts)
        self.program = replace(self.base, statements=self.base.statements + extra)
        unnamed = [f for name, f in sorted(stages.items()) if name not in self.names]
        if unnamed:
            raise EvitaError([Diagnostic(
                "stage-unnamed", f"{f.path.name} holds no stage/1 fact, so no compile would run it",
                S.Span(str(f.path), 1, 1), f.path.name,
                f'add stage("{f.name}"). and precedes/2 facts that place it (docs/stages.md, "Ordering")')
                for f in unnamed])
        self.warnings = self.unknown_names()
        self.check_acyclic()

    def check_acyclic(self) -> None:
        """A cycle in the order would leave its stages waiting for each other, never run:
        an error naming the ordering facts that close it."""
        after: dict = {}
        for b, a in self.orders():
            after.setdefault(b, set()).add(a)
        for start in sorted(after):
            path = self._cycle_from(start, after)
            if path:
                facts = [f for f in self.program.facts if f.atom.relation in ("precedes", "precedes_if_loaded")
                         and tuple(a.value for a in f.atom.args) in set(zip(path, path[1:]))]
                at = facts[0].span if facts else S.Span(str(self.path), 1, 1)
                raise EvitaError([Diagnostic(
                    "stage-cycle", f"the stage order has a cycle: {' -> '.join(path)}; none of these stages "
                    "would run", at, " -> ".join(path),
                    "remove one of the facts: " + "; ".join(f"{f.span.file}:{f.span.line}" for f in facts))])

    @staticmethod
    def _cycle_from(start: str, after: dict) -> list:
        stack, on_path = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(after.get(node, ())):
                if nxt == start:
                    return path + [start]
                if nxt not in on_path:
                    on_path.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return []

    def unknown_names(self) -> list:
        """A warning for each ordering fact that names a stage not loaded: the lattice
        lets it order nothing (stage_lattice.dl, n7), so a typo never blocks what follows."""
        import difflib

        known = set(self.names)
        out = []
        for f in self.program.facts:
            positions = {"precedes": (0, 1), "alternative": (1,), "default": (1,)}.get(f.atom.relation, ())
            for i in positions:
                name = f.atom.args[i].value if i < len(f.atom.args) else None
                if isinstance(name, str) and name not in known:
                    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
                    hint = (f"did you mean {near[0]!r}? " if near else "") + (
                        "if the order should hold only when that stage is loaded, write precedes_if_loaded"
                        if f.atom.relation == "precedes" else "name a loaded stage (`evita stages`)")
                    out.append(Diagnostic("unknown-stage", f"{f.atom.relation} names stage {name!r}, which is "
                                          "not loaded: the fact orders nothing", f.span, name, hint,
                                          severity="warning"))
        return out

    def orders(self) -> list:
        """(before, after): the orders that hold between loaded stages."""
        known = set(self.names)
        pairs = set(self.facts("precedes")) | {p for p in self.facts("precedes_if_loaded") if set(p) <= known}
        return sorted(p for p in pairs if set(p) <= known)

    def facts(self, relation: str) -> list:
        return [tuple(a.value for a in f.atom.args) for f in self.program.facts if f.atom.relation == relation]

    @property
    def names(self) -> list:
        return [s for (s,) in self.facts("stage")]

    def rows(self) -> CatalogRows:
        """The `stage` and `stage_lattice` catalog tables: every stage known, where it comes
        from, and the precedences (stage_lattice.dl and the stage files' own facts)."""
        out = CatalogRows()
        for name in sorted(self.names):
            f = self.stages.get(name)
            out.add("stage", name=name, kind="bootstrap" if name in BOOTSTRAP_STAGES else "datalog",
                    path=str(f.path) if f else None)
        for before, after in self.orders():
            out.add("stage_lattice", before=before, after=after)
        return out

    def next(self, spark, program_id: str, completed, disabled, chosen: dict, evaluator: str = "auto") -> Optional[str]:
        """The next stage. Asked between stages, where no stage's action carries it: in
        this process when the columnar backend can (no Spark job), else on Spark."""
        question = self.question(completed, disabled, chosen)
        out = None
        if evaluator == "auto":
            out = in_process_or_none(question, CatalogRows(), program_id, ["next"], "stage_lattice")
        if out is None:
            out = evaluate(spark, question, CatalogRows(), program_id, ["next"], origin="stage_lattice",
                           evaluator=evaluator)
        self.actions = out.actions
        return self.answer(out.tuples["next"])

    @staticmethod
    def answer(tuples) -> Optional[str]:
        rows = sorted(tuples)
        return rows[0][0] if rows and rows[0][0] is not None else None

    def question(self, completed, disabled, chosen: dict) -> S.Program:
        """The lattice program with what is known about one compile as facts."""
        facts = [("completed", s) for s in completed] + [("disabled", s) for s in disabled]
        facts += [("chosen", g, s) for g, s in sorted(chosen.items())]
        extra = tuple(S.Fact(S.Atom(rel, tuple(S.Const(v, S.STRING) for v in vals))) for rel, *vals in facts)
        # Relations that may have no facts this time still need their arity.
        decls = tuple(S.Declaration(n, tuple(S.Column(f"c{i}", "symbol") for i in range(k)))
                      for n, k in (("completed", 1), ("disabled", 1), ("chosen", 2), ("alternative", 2),
                                   ("default", 2), ("precedes_if_loaded", 2)))
        return replace(self.program, statements=decls + self.program.statements + extra)


# The iteration limit of a stage's recursion, a net for a stage that never reaches its
# fixpoint (one deriving ever new ids). A stage's walks over the program (magic_sets
# from the outputs down the rules, a closure over the relation graph) take a round per
# step: on a chain of 2,500 relations, 2,500 rounds. So the limit grows with the program:
# a round per rule and atom past the 1,000 every program gets.
STAGE_ITERATIONS = 1000


def stage_iterations(rows: CatalogRows) -> int:
    return max(STAGE_ITERATIONS, len(rows.get("rule", [])) + len(rows.get("predicate", [])))


def compile_program(spark, rows: CatalogRows, program_id: str, *, stage_paths=(), skip=(), only=None,
                    choose: Optional[dict] = None, max_iterations: Optional[int] = None, evaluator: str = "auto",
                    triggers: bool = True, dataflow: bool = False) -> Compilation:
    """Move one program through the stages the lattice orders. `rows` is its catalog
    after parsing (version 0). `evaluator`: how catalog programs run (`stage.run_stage`).
    `triggers`: skip a stage whose trigger finds nothing to do (False runs every stage,
    for tests that check a skip changes nothing). `dataflow`: before a stage that reads
    the physical dataflow (`sys::flow_op`: the egraph stage), write the planner's dataflow
    of the catalog as it then is into it (`with_planned_dataflow`); without it such a
    stage sees only the operators a program states (`.plan op`), so it is opt-in."""
    max_iterations = max_iterations or stage_iterations(rows)
    stages = find_stages(stage_paths)
    with doing("the reading of the stage lattice"):
        lattice = Lattice(stages)
    known = set(lattice.names)
    for name in list(skip) + list(only or []) + list((choose or {}).values()):
        if name not in known:
            raise EvitaError([Diagnostic("unknown-stage", f"no stage named {name}", S.Span("<command line>", 0, 0),
                                         name, f"known stages: {', '.join(sorted(known))} (see `evita stages`)")])
    disabled = set(skip)
    if only is not None:
        disabled |= known - set(only) - set(BOOTSTRAP_STAGES)
    cache_key = None
    if compile_cache.enabled():
        options = (sorted(skip), sorted(only) if only is not None else None, sorted((choose or {}).items()),
                   max_iterations, evaluator, triggers) + ((True,) if dataflow else ())
        with doing("the reading of the compile cache"):
            cache_key = compile_cache.key(rows, program_id, stages, lattice.path, tuple(map(repr, options)))
            cached = compile_cache.load(cache_key)
        if cached is not None:
            progress.note("compile read from the cache (the same catalog, stages and options as a compile before)")
            cached.warnings = lattice.warnings
            return cached
    comp = Compilation(program_id, [Version(0, "parse", rows)], lattice=lattice.rows(), warnings=lattice.warnings)
    completed = ["parse"]
    t = time.perf_counter()
    with doing("the stage lattice"):
        name = lattice.next(spark, program_id, completed, sorted(disabled), choose or {}, evaluator)
    comp.lattice_seconds += time.perf_counter() - t
    comp.lattice_actions += lattice.actions
    while name is not None and name != "planner":
        if name in completed:
            raise StageFailure(name, "the lattice chose a stage that already ran (a cycle in precedes/2?)")
        stage = stages.get(name)
        if stage is None:
            raise StageFailure(name, f"stage_lattice.dl names stage {name}, but no stages/{name}.dl exists",
                               detail="add the file, or pass its directory with --stage-path")
        if dataflow and "flow_op" in tables_read(stage.program):
            comp.versions[-1] = with_planned_dataflow(comp.versions[-1], program_id)
        asked = time.perf_counter()
        if triggers and not applies(stage, comp.versions[-1], program_id, evaluator, max_iterations):
            comp.versions.append(skipped_version(comp.versions[-1], program_id, name, time.perf_counter() - asked))
            progress.skipped(name)
            completed.append(name)
            t = time.perf_counter()
            with doing("the stage lattice"):
                name = lattice.next(spark, program_id, completed, sorted(disabled), choose or {}, evaluator)
            comp.lattice_seconds += time.perf_counter() - t
            comp.lattice_actions += lattice.actions
            continue
        question = lattice.question(completed + [name], sorted(disabled), choose or {})
        try:
            with progress.stage(name):
                comp.versions.append(run_one(spark, stage, comp.versions[-1], program_id, max_iterations,
                                             question, evaluator))
        except StageFailure as e:
            e.versions = comp.versions  # the catalog stays at the last good version
            raise
        completed.append(name)
        name = comp.versions[-1].next_stage
    comp.notes = left_out_with_work(stages, disabled, comp.versions[-1], program_id, evaluator)
    comp.notes += [f"stage {v.stage} rewrote this program: {stages[v.stage].if_applied}"
                   for before, v in zip(comp.versions, comp.versions[1:])
                   if v.stage in stages and stages[v.stage].if_applied and not v.skipped and _changed(before.rows, v.rows)]
    if cache_key is not None:
        compile_cache.keep(cache_key, comp)
    return comp


def with_planned_dataflow(version: Version, program_id: str) -> Version:
    """`version` with the planner's dataflow of its catalog as rows of flow_op and
    flow_input (`bootstrap/flow.py`), unless it holds operators already (a program's own
    `.plan op` statements, or an earlier stage's). A catalog the planner refuses gets
    none: the planner says why at the end of the compile."""
    from evita.catalog.decode import decode

    from .flow import flow_rows
    from .planner import plan

    if any(r[0] == program_id for r in version.rows.get("flow_op", [])):
        return version
    try:
        program = decode(version.rows, program_id)
        rows = flow_rows(plan(program), program)
    except EvitaError:
        return version
    out = CatalogRows({t: list(v) for t, v in version.rows.items()})
    for table, dicts in rows.items():
        for d in dicts:
            out.add(table, **d)
    return replace(version, rows=out)


def _changed(before: CatalogRows, after: CatalogRows) -> bool:
    return any(set(before.get(t, ())) != set(after.get(t, ())) for t in set(before) | set(after))


def left_out_with_work(stages: dict, disabled, final: Version, program_id: str, evaluator: str) -> list:
    """A note per stage left out (--skip, --only) whose trigger finds work in the final
    catalog: the program then runs without that rewrite, and the user is told so (a
    rule reading two locations runs centralized when localize is left out)."""
    notes = []
    for name in sorted(disabled):
        stage = stages.get(name)
        if stage is None or stage.trigger is None or evaluator != "auto":
            continue
        with doing(f"stage {name}: its trigger"):
            out = in_process_or_none(stage.trigger, final.rows, program_id, [APPLIES], name)
        if out is not None and out.tuples[APPLIES]:
            rules = {r["id"] for r in final.rows.dicts("rule")}
            found = sorted(str(t[0]) for t in out.tuples[APPLIES])
            # name the rules the trigger found; other work (a relation to place) only if none
            found = [f for f in found if f.split("#")[0] in rules] or found
            at = ", ".join(sorted({_user_rule(final.rows, f) for f in found})[:5])
            notes.append(f"stage {name} was left out, but it applies here ({at}): those rules run as written"
                         + (f"; {stage.if_left_out}" if stage.if_left_out else ""))
    return notes


def applies(stage: StageFile, before: Version, program_id: str, evaluator: str,
            max_iterations: int = STAGE_ITERATIONS) -> bool:
    """Whether the stage has work in this catalog: its trigger (`stage::applies` rules)
    derives a tuple. Asked in this process (`stage.evaluate_in_process`), so a stage
    with nothing to do costs no Spark job; when the trigger needs Spark, the stage runs
    and finds out itself."""
    if stage.trigger is None or evaluator != "auto":
        return True
    with doing(f"stage {stage.name}: its trigger"):
        out = in_process_or_none(stage.trigger, before.rows, program_id, [APPLIES], stage.name, max_iterations)
    return out is None or bool(out.tuples[APPLIES])


def in_process_or_none(program: S.Program, rows: CatalogRows, program_id: str, wanted, origin: str,
                       max_iterations: int = STAGE_ITERATIONS):
    from evita.runtime.columnar import Unsupported

    from .stage import fits_in_process

    if not fits_in_process(program, rows):
        return None
    try:
        return evaluate_in_process(program, rows, program_id, wanted, origin=origin, max_iterations=max_iterations)
    except Unsupported as e:
        _log.debug("%s is asked on Spark: %s", origin, e)
        return None


def skipped_version(before: Version, program_id: str, stage: str, seconds: float) -> Version:
    """The catalog a skipped stage hands on: the one it was given."""
    rows = mark_stage(CatalogRows({t: list(rs) for t, rs in before.rows.items()}), program_id, stage)
    return Version(before.number + 1, stage, rows, seconds, 0, None, {"trigger": seconds}, skipped=True,
                   ensured=before.ensured)


def _user_rule(rows: CatalogRows, at: str) -> str:
    """The label of the user's rule a catalog id belongs to (a rule's or its term's),
    through the copies stages made (`rule.origin`); else the id without its program."""
    rule = next((r for r in rows.dicts("rule") if r["id"] == at.split("#")[0]), None)
    return ((rule.get("origin") or rule["id"]) if rule else at).split(":", 1)[-1]


def run_one(spark, stage: StageFile, before: Version, program_id: str, max_iterations: int,
            question: Optional[S.Program] = None, evaluator: str = "auto") -> Version:
    """Run a stage and check the catalog it leaves; if given the lattice's `question`
    (`Lattice.question`), ask it in the stage's Spark action (`Version.next_stage`)."""
    from .stage import run_stage

    started = time.perf_counter()
    out = run_stage(spark, stage, before.rows, program_id, max_iterations=max_iterations, lattice=question,
                    evaluator=evaluator)
    edited = apply(before.rows, out)
    changed = _contents(edited) != _contents(before.rows)
    rows = mark_stage(edited, program_id, stage.name)
    checking = time.perf_counter()
    # A stage that changed nothing hands on the catalog it was given: checking it again
    # would cost a Spark job and could not find anything new.
    ensured = before.ensured + tuple(i for i in stage.ensures if i not in before.ensured)
    violations = check_integrity(spark, rows, program_id, evaluator, ensured) if changed else []
    integrity_actions = check_integrity.actions if changed else 0
    if violations:
        shown = "\n".join(f"  {check}: {what}" for check, what in violations[:20])
        raise StageFailure(stage.name, f"the catalog it produced breaks {len(violations)} integrity check(s)",
                           detail=shown)
    done = time.perf_counter()
    following = Lattice.answer(out.next) if question is not None else None
    return Version(before.number + 1, stage.name, rows, done - started, out.actions + integrity_actions,
                   following, {"stage": out.split, "integrity": done - checking}, ensured=ensured)


def _contents(rows: CatalogRows) -> dict:
    return {name: frozenset(table) for name, table in rows.items() if table}


def mark_stage(rows: CatalogRows, program_id: str, stage: str) -> CatalogRows:
    cols = schema.table("program").column_names
    i_id, i_stage = cols.index("id"), cols.index("stage")
    rows["program"] = [r[:i_stage] + (stage,) + r[i_stage + 1:] if r[i_id] == program_id else r
                       for r in rows.get("program", [])]
    return rows


def integrity_program(ensured: tuple = ()) -> S.Program:
    """`catalog/integrity.dl` with the ownership checks the schema declares and the
    invariants stages ensured so far (`catalog/NAME.dl`), parsed once per combination."""
    from .checks import check_program
    from .parser import parse_file, parse_program

    cache = integrity_program.__dict__.setdefault("programs", {})
    if ensured not in cache:
        written = parse_file(package_root() / "catalog" / "integrity.dl")
        owners = parse_program(schema.ownership_checks(), "<catalog/schema.py ownership>")
        extra = [st for name in ensured for st in parse_file(package_root() / "catalog" / f"{name}.dl").statements]
        cache[ensured] = check_program(replace(written, statements=written.statements + owners.statements
                                               + tuple(extra)))
    return cache[ensured]


def check_integrity(spark, rows: CatalogRows, program_id: str, evaluator: str = "auto", ensured: tuple = ()) -> list:
    """(check, offending id) for every violated invariant of `catalog/integrity.dl` and
    of the invariants `ensured`."""
    out = evaluate(spark, integrity_program(ensured), rows, program_id, ["violation"], origin="integrity",
                   evaluator=evaluator)
    check_integrity.actions = out.actions
    return sorted(out.tuples["violation"])
