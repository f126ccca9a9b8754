"""Stages as data: finding `.dl` stage files and running one over a catalog snapshot.

A stage is an ordinary Evita program with the conventions of `docs/stages.md`: body
`sys::T` atoms read the snapshot, head `sys::T` atoms insert, `delete sys::T{...}`
deletes by pattern. This module turns those conventions into a plain program the
planner understands (inserts go to `insert::T`, deletions to `remove::T`, wildcards in
heads become nulls), runs it on the engine and reads back what the stage derived, in one
Spark action. Nothing here knows what any stage does.
"""
from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from evita.catalog import edit, schema
from evita.catalog.rows import CatalogRows

from . import syntax as S
from .diagnostics import Diagnostic, EvitaError, plural

_log = logging.getLogger("evita")

SYS = "sys::"
INSERT = "insert::"
REMOVE = "remove::"
UPDATE = "update::"
PRIMITIVE = "stage::"
# The stage primitives a head may name (docs/stages.md): their columns and types.
PRIMITIVES = {
    "copy_rule": (("rule", "symbol"), ("to", "symbol"), ("name", "symbol")),
    "copy_term": (("term", "symbol"), ("rule", "symbol"), ("pos", "number")),
    "remove_term": (("term", "symbol"),),
    "remove_column": (("relation", "symbol"), ("pos", "number")),
    "error": (("at", "symbol"), ("code", "symbol"), ("message", "symbol")),
    "applies": (("at", "symbol"),),
}
# `stage::move::T{key..., to_key...}`: the row of catalog table T with that key moves to
# the new key (a `to_` field left out keeps that key column), its other fields carried.
MOVE = PRIMITIVE + "move::"
# A stage with rules for stage::applies runs only when they derive a tuple: its trigger.
APPLIES = PRIMITIVE + "applies"
TRIGGER = "programEvent"
LATTICE_RELATIONS = ("stage", "precedes", "precedes_if_loaded", "alternative", "default")
# `if_left_out("...")`: what a program loses when this stage is left out although its
# trigger finds work (the scheduler's note says it).
LEFT_OUT = "if_left_out"
# `if_applied("...")`: what a user should know when this stage changed the program (its
# answers name new addresses, say): the scheduler's note says it.
APPLIED = "if_applied"
# `ensures("located")`: an invariant the stage establishes, `catalog/located.dl`: checked
# with the catalog's integrity after this stage and every later one.
ENSURES = "ensures"
BOOTSTRAP_STAGES = ("parse", "planner")
# Catalog column types as the runtime's declared types.
_TYPES = {schema.STRING: "symbol", schema.INT: "number", schema.BOOL: "bool", schema.DOUBLE: "float"}


def package_root() -> Path:
    """Where the shipped `stage_lattice.dl` and `stages/` are (repo checkout or site-packages)."""
    import evita.stages

    return Path(evita.stages.__file__).resolve().parent.parent


@dataclass
class StageFile:
    name: str
    path: Path
    program: S.Program  # the stage's rules, lattice facts removed
    lattice_facts: tuple  # stage/precedes/alternative/default facts the file carries
    origin: str  # "built-in" or the --stage-path directory
    trigger: Optional[S.Program] = None  # what stage::applies depends on; None: the stage always runs
    if_left_out: str = ""  # the stage's own words for what is lost without it
    if_applied: str = ""  # the stage's own words for what changed when it rewrote a program
    ensures: tuple = ()  # invariants (catalog/NAME.dl) it establishes, checked from now on


def slice_for(program: S.Program, relation: str) -> Optional[S.Program]:
    """The part of `program` that `relation` depends on: its rules, the rules of the
    relations they read (negated and aggregated ones too), their facts and declarations.
    None when no rule derives `relation`."""
    rules: dict = {}
    for r in program.rules:
        rules.setdefault(r.head.relation, []).append(r)
    if relation not in rules:
        return None
    needed, todo = set(), [relation]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        for r in rules.get(name, ()):  # sys::T in a body reads the snapshot, not the stage's edits
            todo += [lit.relation for lit in r.body if isinstance(lit, S.Atom) and not lit.relation.startswith(SYS)]
    kept = []
    for st in program.statements:
        if isinstance(st, S.Rule):
            keep = st.head.relation in needed
        elif isinstance(st, S.Fact):
            keep = st.atom.relation in needed
        else:
            keep = getattr(st, "relation", None) in needed
        if keep:
            kept.append(st)
    return replace(program, statements=tuple(kept))


def find_stages(stage_paths=()) -> dict:
    """name -> StageFile: the built-in stages, then each --stage-path directory in order
    (a later file of the same name replaces an earlier one)."""
    from .activity import doing

    with doing("the reading of the stages"):  # parsed once per change of a file, then from a cache on disk
        return _found_stages([(package_root() / "stages", "built-in")] + [(Path(d), str(d)) for d in stage_paths])


def _found_stages(dirs: list) -> dict:
    found: dict = {}
    for folder, origin in dirs:
        if not folder.is_dir():
            raise EvitaError([Diagnostic("stage-path", f"stage directory {folder} does not exist",
                                         S.Span(str(folder), 0, 0), str(folder),
                                         "pass a directory holding .dl stage files to --stage-path")])
        for path in sorted(folder.glob("*.dl")):
            found[path.stem] = stage_file(path, origin)
    return found


_parsed: dict = {}


def checked_file(path: Path) -> S.Program:
    """`check_program(parse_file(path))`, kept for the life of the process while the file
    and every file it #includes stay as they were (same size and modification time): a
    process that compiles many programs (`evita test-suite`, the tests) parses each stage
    and the lattice once, not once a compile. The parsed program is immutable, so sharing
    it is safe."""
    from .checks import check_program
    from .parser import parse_file

    key = str(Path(path).resolve())
    known = _parsed.get(key)
    if known is None or _stamps(known[1]) != known[1]:
        program, read = _parsed_on_disk(Path(path), lambda: check_program(parse_file(path)))
        _parsed[key] = (program, _stamps(read))
    return _parsed[key][0]


def _stamps(files) -> dict:
    """path -> (modification time, size) of each file, None for one that is gone."""
    out = {}
    for f in files:
        try:
            st = os.stat(f)
            out[f] = (st.st_mtime_ns, st.st_size)
        except OSError:
            out[f] = None
    return out


def _parsed_on_disk(path: Path, parse):
    """(`parse()`, the files it read), kept on disk beside the differentiated stages
    (`compiled_stages.cache_dir`) and keyed by the file's text and Evita's code: a command
    parses the stage files only when one of them, or a file one #includes, or Evita,
    changed since the last command (the parse is a second of every `evita compile`
    otherwise). An entry holds the digest of every file the parse read; one that differs
    now is a miss."""
    import hashlib
    import pickle

    from .compiled_stages import cache_dir, code_fingerprint, read_pickled, write_atomically
    from .source import files_read

    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    text = path.read_bytes()
    key = hashlib.sha256(b"\0".join([code_fingerprint().encode(), str(path.resolve()).encode(), text]))
    target = cache_dir().parent / "parsed-stages" / f"{key.hexdigest()[:32]}.pickle"
    kept = read_pickled(target)
    if isinstance(kept, tuple) and len(kept) == 2 and all(_digest_of(f, digest) == d for f, d in kept[1].items()):
        return kept[0], list(kept[1])
    with files_read() as read:
        program = parse()
    digests = {f: digest(data) for f, data in read.items()}
    write_atomically(target, pickle.dumps((program, digests), protocol=pickle.HIGHEST_PROTOCOL))
    return program, list(digests)


def _digest_of(file: str, digest):
    try:
        return digest(Path(file).read_bytes())
    except OSError:
        return None


def stage_file(path: Path, origin: str) -> "StageFile":
    """One stage file, its trigger and lattice facts apart (parsed once: `checked_file`)."""
    program = checked_file(path)
    key = (id(program), str(path), origin)  # the value keeps the program: its id stays its own
    if key not in _stage_files:
        _stage_files[key] = (program, _split_stage(program, Path(path), origin))
    return _stage_files[key][1]


_stage_files: dict = {}


def _split_stage(program: S.Program, path: Path, origin: str) -> "StageFile":
    check_catalog_names(program)
    facts = tuple(f for f in program.facts if f.atom.relation in LATTICE_RELATIONS)
    for f in facts:
        named = f.atom.args[0].value if f.atom.relation == "stage" and f.atom.args else None
        if named is not None and named != path.stem:
            raise EvitaError([Diagnostic(
                "stage-name", f"{path.name} states stage({named!r}), but a stage is named after its file",
                f.span, f'stage("{named}")',
                f'write stage("{path.stem}"), or rename the file to {named}.dl')])
    lost = tuple(f for f in program.facts if f.atom.relation == LEFT_OUT)
    applied = tuple(f for f in program.facts if f.atom.relation == APPLIED)
    ensures = tuple(f for f in program.facts if f.atom.relation == ENSURES)
    trigger = slice_for(program, APPLIES)
    # The trigger is asked before the stage runs; the stage itself need not derive it.
    rest = tuple(s for s in program.statements if s not in facts and s not in lost and s not in ensures
                 and s not in applied
                 and not (isinstance(s, S.Rule) and s.head.relation == APPLIES))
    return StageFile(path.stem, path, replace(program, statements=rest), facts, origin, trigger,
                     " ".join(str(a.value) for f in lost for a in f.atom.args),
                     ensures=tuple(invariant(f) for f in ensures),
                     if_applied=" ".join(str(a.value) for f in applied for a in f.atom.args))


def check_catalog_names(program: S.Program) -> None:
    """Every `sys::T` a stage names is a catalog table: a misspelled one is an error
    that suggests the nearest table, before anything runs."""
    errors = []
    for rule in program.rules:
        for atom in (rule.head, *rule.body):
            if isinstance(atom, S.Atom) and atom.relation.startswith(SYS):
                name = atom.relation[len(SYS):]
                if schema.is_view(name) and atom is rule.head:
                    errors.append(Diagnostic("catalog-view", f"{atom.relation} is a view: the scheduler derives "
                                             "it from the catalog, no stage writes it", atom.span, atom.relation,
                                             f"read it in a body; write the tables it is derived from "
                                             f"(docs/catalog.md, `{name}`)"))
                elif name not in schema.BY_NAME and not schema.is_view(name):
                    errors.append(schema.unknown_table(atom.relation, atom.span))
    if errors:
        raise EvitaError(errors)


def invariant(fact: S.Fact) -> str:
    """The invariant an `ensures("NAME")` fact names; it must be `catalog/NAME.dl`."""
    args = fact.atom.args
    name = str(args[0].value) if len(args) == 1 and isinstance(args[0], S.Const) else ""
    if not name or not (package_root() / "catalog" / f"{name}.dl").is_file():
        raise EvitaError([Diagnostic("unknown-invariant", f"ensures names no invariant catalog/{name or '?'}.dl",
                                     fact.span, str(fact.atom.relation),
                                     'name a file of catalog/, e.g. ensures("located")')])
    return name


# ---------------------------------------------------------------- one stage run

@dataclass
class StageOutput:
    inserts: CatalogRows
    deletes: dict  # table -> list of patterns (tuples with None for "any")
    updates: dict = field(default_factory=dict)  # table -> [(row, named fields)]
    copies: list = field(default_factory=list)  # stage::copy_rule tuples
    term_copies: list = field(default_factory=list)  # stage::copy_term tuples
    actions: int = 0
    seconds: float = 0.0
    stats: list = field(default_factory=list)
    next: Optional[set] = None  # the lattice's next/1 tuples, when asked in the same action
    split: tuple = ()  # (seconds building the programs on the driver, seconds of the action)
    term_removals: list = field(default_factory=list)  # stage::remove_term tuples
    column_removals: list = field(default_factory=list)  # stage::remove_column tuples
    moves: dict = field(default_factory=dict)  # table -> stage::move::T tuples
    stage: Optional["StageFile"] = None  # who derived them: where a primitive it misused is reported


class StageFailure(Exception):
    """A stage failed; the catalog stays at the previous version."""

    def __init__(self, stage: str, reason: str, rule: Optional[str] = None, detail: str = ""):
        self.stage, self.reason, self.rule, self.detail = stage, reason, rule, detail
        self.versions: list = []
        where = f" (rule {rule})" if rule else ""
        super().__init__(f"stage {stage} failed{where}: {reason}" + (f"\n{detail}" if detail else ""))


def stage_program(program: S.Program, program_id: str, tables_read: set) -> S.Program:
    """The stage as a plain program: inserts, updates and deletes renamed, catalog
    relations and primitives declared, the trigger fact added."""
    return with_trigger(catalog_form(program, tables_read), program_id)


def with_trigger(program: S.Program, program_id: str) -> S.Program:
    trigger = S.Fact(S.Atom(TRIGGER, (S.Const(program_id, S.STRING),)))
    return replace(program, statements=program.statements + (trigger,))


def catalog_form(program: S.Program, tables_read: set) -> S.Program:
    """`stage_program` without the trigger fact (the same for every program compiled)."""
    statements: list = []
    for st in program.statements:
        if isinstance(st, S.Rule) and st.head.relation.startswith(SYS):
            statements.append(_catalog_head(st))
        elif isinstance(st, S.Rule) and st.head.relation.startswith(MOVE):
            statements.append(_move_head(st))
        else:
            if isinstance(st, S.Rule) and st.head.relation.startswith(PRIMITIVE):
                _check_primitive(st)
            statements.append(st)
    decls = [S.Declaration(TRIGGER, (S.Column("program", "symbol"),))]
    for name, cols in PRIMITIVES.items():
        decls.append(S.Declaration(PRIMITIVE + name, tuple(S.Column(c, t) for c, t in cols)))
    for table in sorted(_tables_moved(statements)):
        types = {c.name: _TYPES[c.type] for c in schema.table(table).columns}
        decls.append(S.Declaration(MOVE + table, tuple(S.Column(c, types[c.removeprefix("to_")])
                                                       for c in edit.move_columns(table))))
    for table in sorted(_tables_written(statements) | tables_read):
        cols = tuple(S.Column(c.name, _TYPES[c.type]) for c in schema.table(table).columns)
        for prefix in (SYS, INSERT, REMOVE):
            decls.append(S.Declaration(prefix + table, cols))
        decls.append(S.Declaration(UPDATE + table, cols + (S.Column("fields", "symbol"),)))
    return replace(program, statements=tuple(decls) + tuple(statements))


def _catalog_head(rule: S.Rule) -> S.Rule:
    """`sys::T` in a head: a deletion pattern, an update of the named fields of the row
    with the named key, or an insertion (fields left out are null)."""
    table = schema.table(rule.head.relation)
    args = rule.head.args
    named = [c for c, a in zip(table.column_names, args) if not isinstance(a, S.Wildcard)]
    nulls = tuple(S.Const(None, S.NULL) if isinstance(a, S.Wildcard) else a for a in args)
    if rule.delete:
        head = replace(rule.head, relation=REMOVE + table.name, args=nulls, named=False)
    elif rule.head.named and len(named) < len(args) and set(table.key) <= set(named):
        head = replace(rule.head, relation=UPDATE + table.name, named=False,
                       args=nulls + (S.Const(",".join(named), S.STRING),))
    else:
        head = replace(rule.head, relation=INSERT + table.name, args=nulls, named=False)
    return replace(rule, head=head, delete=False)


def _move_head(rule: S.Rule) -> S.Rule:
    """`stage::move::T{...}` in a head: checked, its key fields left out as nulls (kept)."""
    _check_primitive(rule)
    nulls = tuple(S.Const(None, S.NULL) if isinstance(a, S.Wildcard) else a for a in rule.head.args)
    return replace(rule, head=replace(rule.head, args=nulls, named=False))


def _check_primitive(rule: S.Rule) -> None:
    """A head naming a stage primitive names one that exists, with its columns; a move
    names a catalog table and the whole key of the row it moves."""
    relation = rule.head.relation
    if relation.startswith(MOVE):
        table = relation[len(MOVE):]
        if table not in schema.BY_NAME:
            d = schema.unknown_table(SYS + table, rule.head.span)
            raise EvitaError([Diagnostic("stage-primitive", f"{relation}: {d.message}", rule.head.span, relation,
                                         d.hint.replace("sys::", MOVE))])
        cols = edit.move_columns(table)
        key = schema.table(table).key
        if len(cols) == rule.head.arity and not any(isinstance(a, S.Wildcard) for a in rule.head.args[:len(key)]):
            return
        raise EvitaError([Diagnostic("stage-primitive", f"{relation} names the row it moves by its whole key "
                                     f"({', '.join(key)}) and the new key in to_ fields", rule.head.span, relation,
                                     f"write {relation}{{{', '.join(f'{k}: ...' for k in key)}, "
                                     f"{', '.join(f'to_{k}: ...' for k in key)}}} (a to_ field left out "
                                     "keeps that key column)")])
    name = relation[len(PRIMITIVE):]
    cols = PRIMITIVES.get(name)
    if cols is None or len(cols) != rule.head.arity:
        known = ", ".join(f"{PRIMITIVE}{n}({', '.join(c for c, _ in cs)})" for n, cs in PRIMITIVES.items())
        raise EvitaError([Diagnostic("stage-primitive", f"{relation}/{rule.head.arity} is not a stage "
                                     "primitive", rule.head.span, relation,
                                     f"the primitives: {known}, {MOVE}TABLE{{key..., to_key...}}")])


def _tables_moved(statements) -> set:
    return {st.head.relation[len(MOVE):] for st in statements
            if isinstance(st, S.Rule) and st.head.relation.startswith(MOVE)}


def _tables_written(statements) -> set:
    out = set()
    for st in statements:
        if isinstance(st, S.Rule):
            for prefix in (INSERT, REMOVE, UPDATE):
                if st.head.relation.startswith(prefix):
                    out.add(st.head.relation[len(prefix):])
    return out


def tables_read(program: S.Program) -> set:
    return {lit.relation[len(SYS):] for r in program.rules for lit in r.body
            if isinstance(lit, S.Atom) and lit.relation.startswith(SYS)}


def snapshots(rows: CatalogRows, tables) -> dict:
    """`sys::T` -> the snapshot of T, for the engine (`SqlInput`: no Spark call yet)."""
    from evita.runtime import engine

    return {SYS + t: engine.SqlInput(snapshot_query(table_rows(rows, t), t), len(schema.table(t).columns))
            for t in sorted(tables)}


def table_rows(rows: CatalogRows, table: str) -> list:
    """The rows a stage reads as `sys::TABLE`: the stored table's, or a view's computed
    from `rows` (`catalog/views.py`), so a view always follows the version read."""
    from evita.catalog import views

    return views.view_rows(table, rows) if schema.is_view(table) else rows.get(table, [])


def snapshot_query(rows: list, table: str):
    """The snapshot of one catalog table as a query with columns c0, c1, ... (no Spark
    call). The rows travel as one JSON text parsed by Spark (`from_json`), in the
    statement itself: a DataFrame made from Python tuples would be read back through
    a Python worker by every task that scans it (~0.3 s a table here)."""
    from sqlglot import exp

    from evita.runtime.sql import array_literal, fn

    return exp.select(fn("inline", array_literal(rows, column_types(table))))


def column_types(table: str) -> tuple:
    """Spark type names of a catalog table's columns."""
    return tuple(f.dataType.simpleString() for f in schema.spark_struct(table).fields)


# Catalog programs read a few hundred rows: every Spark job, stage and code generation
# costs more than the data, so the engine keeps them in one partition (`one_partition`,
# one Spark stage per action) and these settings keep Spark from adding work back:
# no adaptive re-planning (a job per exchange), no broadcasts (a job each), no code
# generation, whole-stage or per expression (compiling costs more than interpreting a
# few hundred rows). Spark lets single-partition inputs meet a join's distribution only
# when it estimates them below maxSinglePartitionBytes, so unknown sizes count as one
# byte and the limit is lifted. Three optimizer rules would undo the one-partition
# plans: two move anti joins below a coalesce, one turns the left joins written for
# inner joins back into inner joins (`sql.rule_select`).
CATALOG_SIZED = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1",
                 "spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.codegen.wholeStage": "false",
                 "spark.sql.maxSinglePartitionBytes": str(2 ** 63 - 1), "spark.sql.defaultSizeInBytes": "1",
                 "spark.sql.codegen.factoryMode": "NO_CODEGEN", "spark.sql.analyzer.maxIterations": "10000",
                 "spark.sql.optimizer.excludedRules": ",".join(
                     "org.apache.spark.sql.catalyst.optimizer." + r
                     for r in ("PushDownLeftSemiAntiJoin", "PushLeftSemiLeftAntiThroughJoin", "EliminateOuterJoin"))}


def catalog_sized(spark):
    from ..runtime.session import settings_for_a_while

    return settings_for_a_while(spark, CATALOG_SIZED)


@dataclass
class Evaluation:
    tuples: dict  # relation -> set of tuples
    actions: int
    seconds: float
    stats: list


def evaluate(spark, program: S.Program, rows: CatalogRows, program_id: str, wanted, *,
             origin: str, max_iterations: int = 1000, evaluator: str = "auto") -> Evaluation:
    """Run a catalog program (a stage, the lattice, the integrity checks) over `rows`
    and read back the `wanted` relations (names, or prefixes ending in '::') in one action.
    `evaluator`: see `run_stage`."""
    started = time.perf_counter()
    here = in_process_first(program, rows, wanted, origin, program_id=program_id, max_iterations=max_iterations,
                            evaluator=evaluator)
    if here is not None:
        return here
    from evita.runtime import engine

    with catalog_sized(spark):
        scope = engine.SqlScope(spark)
        result, names = launch(spark, scope, program, snapshots(rows, tables_read(program)), program_id, wanted,
                               origin=origin, max_iterations=max_iterations)
        derived = scope.collect([(n, result.table(n)) for n in names], one_partition=True)
        result.release()
    return Evaluation(_complete(derived, wanted), result.actions + 1, time.perf_counter() - started, result.stats)


# A catalog program is first tried in this process (`in_process_first`, the columnar
# backend's hash joins, semi-naive) while the catalog it reads fits in memory with room
# for what it derives: a Spark job costs seconds where pandas takes milliseconds, and
# the catalog of a program of thousands of rules holds about a hundred thousand rows.
# The estimate: each value read held `BYTES_PER_VALUE` bytes, the relations derived
# `GROWTH` times the catalog read; the budget a quarter of the machine's memory.
BYTES_PER_VALUE = 64
GROWTH = 20


def _memory_budget() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):  # no sysconf: 4 GiB, a quarter of a small machine
        return 1 << 32


IN_PROCESS_BYTES = _memory_budget()

# Past that budget (or when the columnar backend cannot run a program: a function it
# lacks) a catalog program runs on Spark, on the engine's SQL loop, whose joins are
# Spark's hash joins. (A third backend, one Spark statement over arrays of rows, ran
# catalog programs of at most 5,000 rows there until the in-process evaluator took every
# program of that size: compiling every example through every stage sent none to Spark.
# It was removed, with its copy of rule evaluation.)


def catalog_read(program: S.Program, rows: CatalogRows) -> tuple:
    """(rows, values) of the catalog tables `program` reads."""
    read = {t: table_rows(rows, t) for t in tables_read(program)}
    return (sum(len(r) for r in read.values()),
            sum(len(r) * len(schema.table(t).columns) for t, r in read.items()))


def fits_in_process(program: S.Program, rows: CatalogRows) -> bool:
    return catalog_read(program, rows)[1] * BYTES_PER_VALUE * GROWTH <= IN_PROCESS_BYTES


def in_process_first(program: S.Program, rows: CatalogRows, wanted, origin: str, *, program_id: str,
                     max_iterations: int = 1000, evaluator: str = "auto") -> Optional["Evaluation"]:
    """The program evaluated in this process (`evaluate_in_process`) when `evaluator` is
    "in-process", or "auto" and the catalog it reads fits in memory (IN_PROCESS_BYTES): no
    Spark job. None when it is not tried, or when the columnar backend cannot run it
    (`columnar.Unsupported`: a function it lacks, a text only Spark writes, ...) and
    the evaluator is "auto": the caller runs it on Spark. With "in-process", that is a
    StageFailure."""
    from evita.runtime.columnar import Unsupported

    if evaluator not in ("auto", "in-process"):
        return None
    if evaluator == "auto" and not fits_in_process(program, rows):
        return None
    try:
        return evaluate_in_process(program, rows, program_id, wanted, origin=origin, max_iterations=max_iterations)
    except Unsupported as e:
        if evaluator == "in-process":
            raise StageFailure(origin, f"the columnar backend cannot run it: {e}") from None
        _log.debug("%s runs on Spark: %s", origin, e)
        return None


def evaluate_in_process(program: S.Program, rows: CatalogRows, program_id: str, wanted, *,
                        origin: str, max_iterations: int = 1000) -> Evaluation:
    """A small catalog program evaluated in this process by the columnar backend
    (`runtime/columnar.run_dataflow`): no Spark job. For the questions the scheduler
    asks between stages, a stage's trigger and the lattice's next stage, where a job
    would cost more than the answer. Catalog columns may hold nulls: the backend joins
    and compares them as SQL does (`columnar.evaluate_rule`). Raises
    `columnar.Unsupported` when the program needs Spark's SQL semantics (a function the
    backend lacks, arithmetic on a null); the caller then asks Spark."""
    from evita.runtime import columnar

    from .planner import plan

    started = time.perf_counter()
    read = {t: table_rows(rows, t) for t in sorted(tables_read(program))}
    key = (program, program_id, tuple(wanted), max_iterations, tuple(tuple(r) for r in read.values()))
    try:
        hash(key)
    except TypeError:  # a row holding a list
        key = None
    if key is not None and key in _answered:  # the same program over the same rows: the same answer
        _answered.move_to_end(key)
        return Evaluation({n: set(ts) for n, ts in _answered[key].items()}, 0, time.perf_counter() - started, [])
    planned = _planned.get((id(program), program_id))
    if planned is not None:
        flow = planned[1]
    else:
        try:
            flow = plan(with_trigger(_eca_form_here(program, origin), program_id))
        except EvitaError as e:
            raise StageFailure(origin, e.first.message, _rule_at(program, e.first.span), e.render()) from None
        _planned[(id(program), program_id)] = (program, flow)  # the program is kept: its id stays its own
        while len(_planned) > PLANS_KEPT:
            _planned.pop(next(iter(_planned)))
    inputs = {SYS + t: _pandas_snapshot(r, t) for t, r in read.items()}
    try:
        tables = columnar.run_dataflow(flow, inputs, max_iterations=max_iterations)
    except columnar.NoFixpoint:
        raise columnar.Unsupported("no fixpoint within the limit: Spark reports it") from None
    except (ValueError, TypeError) as e:  # Spark's SQL semantics decide
        raise columnar.Unsupported(str(e)) from None
    kept = set(_wanted(flow, wanted))
    derived = _complete({n: set(zip(*(_values(t[c]) for c in t.columns))) if len(t.columns) else set()
                         for n, t in tables.items() if n in kept}, wanted)
    if key is not None:
        _answered[key] = {n: frozenset(ts) for n, ts in derived.items()}
    while len(_answered) > ANSWERS_KEPT:
        _answered.popitem(last=False)
    return Evaluation(derived, 0, time.perf_counter() - started, [])


def _eca_form_here(program: S.Program, origin: str) -> S.Program:
    """A catalog program in catalog form with its rules in ECA form (semi-naive: a round
    joins only what the last round derived), the delta stage run in this process
    (`compiled_stages.semi_naive`, cached on disk like the Spark paths' form). Naive
    evaluation re-derives a recursive relation in full every round: over a program of
    n relations in a chain, its rule graph n deep, that is quadratic in n. As written
    when the delta stage cannot run here (its own program, while it differentiates)."""
    from .compiled_stages import semi_naive

    written = catalog_form(program, tables_read(program))
    try:
        return semi_naive(None, written, origin)
    except StageFailure as e:
        _log.debug("%s is planned as written: %s", origin, e)
        return written


def _values(column) -> list:
    """A column's values as Python values; pandas' missing value (NaN in a column it
    made float for a null) is SQL's null, None, as Spark hands it back."""
    return [None if isinstance(v, float) and v != v else v for v in column.tolist()]


# Answers of `evaluate_in_process`, the least recently asked dropped first. Most are the
# lattice's: its question depends only on which stages ran, and every compile asks it;
# a process that compiles a program many times (`evita test-suite`, the tests, the
# Python API) asks each stage's trigger of the same catalog again. An answer holds
# references to the catalog rows it was asked of: 4096 of them stay small.
ANSWERS_KEPT = 4096
PLANS_KEPT = 256
_answered: "OrderedDict" = OrderedDict()
_planned: dict = {}  # (id(program), program id) -> (program, its dataflow): a stage's trigger is planned once


_DTYPES = {schema.STRING: "object", schema.INT: "int64", schema.BOOL: "bool", schema.DOUBLE: "float64"}


def _pandas_snapshot(rows: list, table: str):
    """A catalog table as columns c0, c1, ...; a column holding nulls keeps Python
    values (object), so no null becomes a number."""
    import pandas as pd

    columns = schema.table(table).columns
    values = list(zip(*rows)) if rows else [()] * len(columns)
    return pd.DataFrame({f"c{i}": pd.Series(list(vals), dtype="object" if None in vals else _DTYPES[col.type])
                         for i, (col, vals) in enumerate(zip(columns, values))})


def _complete(derived: dict, wanted) -> dict:
    for w in wanted:
        if not w.endswith("::"):
            derived.setdefault(w, set())
    return derived


def _wanted(dataflow, wanted) -> list:
    return [n for n in dataflow.relations if any(n == w or (w.endswith("::") and n.startswith(w)) for w in wanted)]


def _plan(spark, program: S.Program, program_id: str, origin: str):
    """A catalog program's dataflow: in catalog form, its rules in ECA form (the delta
    stage, cached: `compiled_stages.py`), the trigger added."""
    from .compiled_stages import semi_naive
    from .planner import plan

    try:
        body = semi_naive(spark, catalog_form(program, tables_read(program)), origin)
        return plan(with_trigger(body, program_id))
    except EvitaError as e:
        raise StageFailure(origin, e.first.message, _rule_at(program, e.first.span), e.render()) from None


def launch(spark, scope, program: S.Program, inputs: dict, program_id: str, wanted, *, origin: str,
           max_iterations: int = 1000):
    """Plan a catalog program and build its relations over `inputs` (`sys::T` ->
    DataFrame or `engine.SqlInput`) in `scope`, without an action unless it recurses.
    Returns the engine's result and the names of the `wanted` relations."""
    from evita.runtime import engine

    dataflow = _plan(spark, program, program_id, origin)
    try:
        result = engine.run(dataflow, spark, inputs, max_iterations=max_iterations, local=False,
                            one_partition=True, scope=scope)
    except EvitaError as e:
        raise StageFailure(origin, e.first.message, _rule_at(program, e.first.span), e.render()) from None
    return result, _wanted(dataflow, wanted)


def run_stage(spark, stage: StageFile, rows: CatalogRows, program_id: str, *, max_iterations: int = 1000,
              lattice: Optional[S.Program] = None, evaluator: str = "auto") -> StageOutput:
    """Run one stage over `rows` (the program's current catalog) and return its
    insertions and deletion patterns. Raises StageFailure.

    `lattice`: the lattice program asking which stage comes after this one
    (`scheduler.Lattice.question`), evaluated by the same Spark action; its `next`
    tuples come back in `StageOutput.next`. Its answer depends on which stages ran, not
    on what they derived, so it need not wait for the stage.

    `evaluator`: "in-process" evaluates the programs in this process (the columnar
    backend; a StageFailure if it cannot), "engine" on the engine's SQL loop on Spark,
    "auto" (the default) in process when the catalog fits in memory and the backend
    can run the program, else on the engine."""
    started = time.perf_counter()
    jobs = [(stage.program, rows, [INSERT, REMOVE, UPDATE, PRIMITIVE], stage.name)]
    if lattice is not None:
        jobs.append((lattice, CatalogRows(), ["next"], "stage_lattice"))
    here = [in_process_first(*job, program_id=program_id, max_iterations=max_iterations, evaluator=evaluator)
            for job in jobs[:1]]
    if here[0] is not None and lattice is not None:
        here.append(in_process_first(*jobs[1], program_id=program_id, max_iterations=max_iterations,
                                     evaluator=evaluator))
    if here[-1] is not None:
        got, stats, split, actions = dict(here[0].tuples), [], (0.0, 0.0), 0
        if lattice is not None:
            got["next"] = here[1].tuples.get("next", set())
    else:
        got, actions, stats, split = _run_stage_on_engine(spark, jobs, program_id, max_iterations)
    done = time.perf_counter()
    raise_stage_errors(stage, rows, program_id, got.get(PRIMITIVE + "error", ()))
    inserts, deletes, updates = CatalogRows(), {}, {}
    for name, tuples in got.items():
        if name.startswith(INSERT):
            inserts[name[len(INSERT):]] = sorted(tuples, key=_key)
        elif name.startswith(REMOVE):
            deletes[name[len(REMOVE):]] = sorted(tuples, key=_key)
        elif name.startswith(UPDATE):
            updates[name[len(UPDATE):]] = [(t[:-1], t[-1].split(",")) for t in sorted(tuples, key=_key)]
    copies = sorted(got.get(PRIMITIVE + "copy_rule", ()), key=_key)
    term_copies = sorted(got.get(PRIMITIVE + "copy_term", ()), key=_key)
    moves = {name[len(MOVE):]: sorted(tuples, key=_key) for name, tuples in got.items()
             if name.startswith(MOVE) and tuples}
    return StageOutput(inserts, deletes, updates, copies, term_copies, actions, done - started, stats,
                       got.get("next"), split, term_removals=sorted(got.get(PRIMITIVE + "remove_term", ()), key=_key),
                       column_removals=sorted(got.get(PRIMITIVE + "remove_column", ()), key=_key),
                       moves=moves, stage=stage)


def raise_stage_errors(stage: StageFile, rows: CatalogRows, program_id: str, errors) -> None:
    """`stage::error(At, Code, Message)` tuples -> a StageFailure whose diagnostics sit at
    the source position of the catalog row `At` names (a rule, term, fact or relation)."""
    if not errors:
        return
    program = next(iter(rows.dicts("program")), {}) if rows.get("program") else {}
    where = {}
    for table in ("rule", "predicate", "selection", "assignment", "fact", "relation", "query"):
        for r in rows.dicts(table):
            where[r["id"]] = (r.get("line") or 0, r.get("col") or 0, r.get("name") or r["id"])
    path = program.get("path") or f"<{program_id}>"
    diags = []
    for at, code, message in sorted(errors, key=_key):
        line, col, _ = where.get(at, (0, 0, at))
        diags.append(Diagnostic(code or f"stage-{stage.name}", message, S.Span(path, line, col), "",
                                f"reported by stage {stage.name} ({stage.path})"))
    err = EvitaError(diags, source=program.get("text"))
    raise StageFailure(stage.name, err.first.message, detail=err.render())


def _run_stage_on_engine(spark, jobs: list, program_id: str, max_iterations: int):
    """`run_stage` on the engine: the stage's relations and the lattice's as common
    table expressions of one scope, collected by one action after the stage's own."""
    from evita.runtime import engine

    started = time.perf_counter()
    with catalog_sized(spark):
        scope = engine.SqlScope(spark)
        items, runs = [], []
        for program, rows, wanted, origin in jobs:
            inputs = snapshots(rows, tables_read(program)) if rows else {}
            result, names = launch(spark, scope, program, inputs, program_id, wanted, origin=origin,
                                   max_iterations=max_iterations)
            items += [(n, result.table(n)) for n in names]
            runs.append(result)
        built = time.perf_counter()
        got = scope.collect(items, one_partition=True)
        for r in runs:
            r.release()
    done = time.perf_counter()
    return got, sum(r.actions for r in runs) + 1, runs[0].stats, (built - started, done - built)


def _key(row: tuple):
    return tuple((v is None, str(v)) for v in row)


def _rule_at(program: S.Program, span: S.Span) -> Optional[str]:
    for r in program.rules:
        if r.span.file == span.file and r.span.line <= span.line <= max(r.span.end_line, r.span.line):
            return r.name
    return None


# ---------------------------------------------------------------- applying a stage's output

def apply(rows: CatalogRows, out: StageOutput) -> CatalogRows:
    """The stage's edits applied to `rows` (`catalog/edit.py`: deletions cascade along
    ownership, then copies, insertions, updates)."""
    try:
        return edit.apply(rows, edit.Edits(out.inserts, out.deletes, out.updates, out.copies, out.term_copies,
                                           out.term_removals, out.column_removals, out.moves))
    except edit.EditError as e:
        raise misused_primitive(out.stage, e) from None


def misused_primitive(stage: Optional[StageFile], e) -> StageFailure:
    """A primitive the catalog could not apply (`edit.EditError`), reported at the rule(s)
    of the stage file deriving it."""
    name = stage.name if stage else "stage"
    relation = PRIMITIVE + e.primitive
    rules = [r for r in (stage.program.rules if stage else ()) if r.head.relation == relation]
    span = rules[0].head.span if rules else S.Span(str(stage.path) if stage else "<stage>", 0, 0)
    labels = ", ".join(r.name for r in rules)
    hint = f"derived by rule {labels} of stage {name}" if labels else f"reported by stage {name}"
    # The rule's own file gives the source line (a stage's include, say): read back by span.
    err = EvitaError([Diagnostic("stage-primitive", e.message, span, relation, hint)], source=None, source_file="")
    return StageFailure(name, e.message, rules[0].name if rules else None, err.render())
