"""The catalog in Spark: database `evita`, one table per declaration in `catalog/schema.py`.

Layout under the warehouse directory (`runtime.session.warehouse_dir()`):

    WAREHOUSE/evita-catalog/TABLE/p-PROGRAM.parquet   one Parquet file per table and program
    WAREHOUSE/evita-catalog/version/f-PROGRAM.parquet the last failed compile of a program, kept apart
    WAREHOUSE/evita-history/TABLE/{p,f}-PROGRAM.parquet every version (of the good / the failed compile)
    WAREHOUSE/evita-catalog/TABLE/shared.parquet      rows of tables shared by all programs
    WAREHOUSE/evita-catalog/_journal, _staging, .lock  commit machinery (Spark never lists them)
    WAREHOUSE/evita.db                                 the database's own directory, kept empty

Each table is an EXTERNAL Parquet table over its folder, with the column names and types of
the schema in schema order. The data lives outside `evita.db` because Spark deletes a
database's directory on DROP DATABASE; dropping the registration never loses the catalog.

Using the catalog from any SparkSession, including your own PySpark session:

    from evita.catalog import store
    store.attach(spark, "/path/to/evita-warehouse")   # registers database `evita` and its tables
    spark.table("evita.rule").show()
    spark.sql("SELECT * FROM evita.predicate WHERE program = 'sp'").show()

`attach` is needed once per Spark application (the default, in-memory metastore forgets
tables when the JVM stops) and is cheap to repeat. After another process saved a program,
call `attach` again or `spark.catalog.refreshTable("evita.rule")` to see the new files.

Writing a program costs no Spark job. Rows arrive in the driver (`CatalogRows`), so each
table's rows for a program are written as one small Parquet file with pyarrow, using the
exact Spark types of the schema; a Spark write would cost one job per table (about 20
jobs, 0.1-0.4 s each) for a few kilobytes. Replacement is atomic per save: all new files
are written to `_staging` first; then a journal naming every file to move or delete is
committed with one atomic rename; then the moves run. A failure before the commit leaves
the previous rows untouched; a crash after it (even `kill -9`) is rolled forward by the next
`attach`/save, which says so (`RECOVERED`). One commit may span the catalog and its history
(`save_compilation`), so the two never disagree. A file lock serializes writers of one
warehouse; a writer that cannot get it within EVITA_LOCK_TIMEOUT seconds (default 120)
stops with `WarehouseBusy` naming the process that holds it.

A compile that fails keeps the versions of the last good compile of the program: its own
versions go to the `f-` files (`status` 'failed' in `evita.version` and in the history),
and the next good compile removes them.

Reading works the same way round: `load_rows` reads the program's rows from the tables'
Parquet files with pyarrow (no job, milliseconds); `load_rows(..., engine="spark")` gets
the identical rows through Spark in one job (the tables filtered on `program`, unioned as
JSON text, collected together), which costs seconds of planning and code generation for
eighteen scans. Both read every Parquet file in a table's folder, so rows that Spark
itself appends (`df.write.insertInto("evita.rule")`) are seen too. A reader of the files
holds the lock shared while it reads (`_reading`): a save's moves, one file per table,
are never seen half done.

Every file goes through pyarrow's filesystems (`catalog/fs.py`), so the warehouse may be a
local path, a file:// URI, or, for a real cluster whose executors must all see it, a shared
filesystem or object store (`--warehouse hdfs://...`, `s3a://...`). The writer lock is a
local file lock: on a warehouse that is not a local (or POSIX-mounted) folder, run one
writer at a time. A commit is atomic where the filesystem renames atomically (local, HDFS).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
import uuid
from contextlib import contextmanager, nullcontext
from urllib.parse import quote

from . import schema
from .fs import Loc, crash_point
from .rows import PER_PROGRAM, CatalogRows, program_column

DATA_DIR = "evita-catalog"
DB = schema.DATABASE
HISTORY_DIR = "evita-history"  # every version of every program, column `version` first
HISTORY_DB = "evita_history"
HISTORY_TABLES = tuple(n for n in PER_PROGRAM if n != "version")
SHARED_FILE = "shared.parquet"
OK, FAILED = "ok", "failed"  # `status` of a version: the good compile, or the last failed attempt
HISTORY_COLUMNS = (("version", schema.INT), ("status", schema.STRING))  # before the table's own
RECOVERED: list = []  # what recovery did, for the command line to tell the user


class WarehouseBusy(Exception):
    """Another process holds the warehouse lock for longer than EVITA_LOCK_TIMEOUT."""
_ARROW = {schema.STRING: "string", schema.INT: "int32", schema.BOOL: "bool", schema.DOUBLE: "float64"}


def catalog_root(warehouse=None) -> Loc:
    from evita.runtime.session import warehouse_dir

    return warehouse_dir(warehouse) / DATA_DIR


def program_file(program_id: str, status: str = OK) -> str:
    """The file holding one program's rows in each table folder (Spark skips names
    starting with `_` or `.`, hence the prefix; `f-` holds a failed compile).

    >>> program_file("sp/v1"), program_file("sp", FAILED)
    ('p-sp%2Fv1.parquet', 'f-sp.parquet')
    """
    return f"{'p' if status == OK else 'f'}-{quote(program_id, safe='')}.parquet"


def qualified(table_name: str) -> str:
    return f"{DB}.`{table_name}`"


# ---------------------------------------------------------------- registration

def _fingerprint(root: Loc) -> str:
    """Where the tables point and which schema they have: attach re-registers on a change."""
    ddl = "|".join(f"{t.name}({t.ddl()})" for t in schema.TABLES) + f"|{HISTORY_DB}{HISTORY_COLUMNS}"
    return f"{root}#{hashlib.sha1(ddl.encode()).hexdigest()[:16]}"


def _registered_fingerprint(spark):
    if not spark.catalog.databaseExists(DB):
        return None
    for row in spark.sql(f"DESCRIBE DATABASE EXTENDED {DB}").collect():
        if row[0] == "Properties" and "evita.fingerprint" in row[1]:
            # "((evita.fingerprint,VALUE))"
            return row[1].split("evita.fingerprint,", 1)[1].split(")", 1)[0]
    return None


def attach(spark, warehouse=None, only=None) -> Loc:
    """Register database `evita` and every catalog table over WAREHOUSE/evita-catalog in this
    Spark application (creating empty tables where none exist). Returns the data folder.

    `only`: the names of the `evita` tables one query reads (`evita sql`); only those are
    registered, and not the history. In a new JVM each registration costs 30-60 ms
    after the first statement, about 1.5 s for all of them."""
    root = prepared(warehouse)
    fp = _fingerprint(root)
    wanted = set(schema.BY_NAME) if only is None else set(only) & set(schema.BY_NAME)
    whole = wanted == set(schema.BY_NAME)
    if _registered_fingerprint(spark) == fp and set(_table_names(spark)) >= wanted:
        _refresh(spark)  # another process may have saved since
        return root
    _drop_tables(spark)
    db_dir = root.parent / f"{DB}.db"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DB} LOCATION '{_sql(db_dir)}'")
    spark.sql(f"ALTER DATABASE {DB} SET DBPROPERTIES ('evita.fingerprint' = '{_sql(fp)}')")
    for t in schema.TABLES:
        if t.name in wanted:
            spark.sql(f"CREATE TABLE {qualified(t.name)} ({t.ddl()}) USING parquet "
                      f"LOCATION '{_sql(root / t.name)}' COMMENT '{_sql(t.doc)}'")
    if whole:
        _attach_history(spark, root.parent / HISTORY_DIR)
    _refresh(spark)  # file listings cached under an earlier registration of these folders
    return root


def stamp(warehouse=None):
    """What changes whenever a commit lands, cheap to take (a stat of each folder a commit
    writes or removes a file in: the journal's, each table's, the history's): a session
    kept attached (runtime/sql_daemon.py) attaches again when it differs. None, never
    equal to an earlier one, for a warehouse that is not a local folder."""
    root = catalog_root(warehouse)
    if not root.local:
        return None
    hist = root.parent / HISTORY_DIR
    folders = [root, root / "_journal", *(root / t.name for t in schema.TABLES),
               hist, hist / "_journal", *(hist / name for name in HISTORY_TABLES)]
    marks = []
    for folder in folders:
        try:
            marks.append(os.stat(folder.path).st_mtime_ns)
        except OSError:
            marks.append(0)
    return tuple(marks)


def prepared(warehouse=None) -> Loc:
    """The warehouse's data folder with a folder per table, and a save a killed process
    left half done finished or dropped: what `attach` needs of the files (no Spark)."""
    root = catalog_root(warehouse)
    for t in schema.TABLES:
        (root / t.name).mkdir()
    recover(root)
    return root


def recover(root) -> None:
    """Finish or drop a save that a killed process left half done (no Spark needed)."""
    root = Loc.of(root)
    with _locked(root):
        _recover(root)
        _recover(root.parent / HISTORY_DIR)  # journals of warehouses written before one commit spanned both


def _attach_history(spark, hist: Loc) -> None:
    """Database evita_history: every catalog version, the table's columns after `version`
    and `status` ('ok': the last good compile; 'failed': the last failed one)."""
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {HISTORY_DB} LOCATION '{_sql(hist.parent / (HISTORY_DB + '.db'))}'")
    for name in HISTORY_TABLES:
        t = schema.BY_NAME[name]
        (hist / name).mkdir()
        spark.sql(f"DROP TABLE IF EXISTS {HISTORY_DB}.`{name}`")
        spark.sql(f"CREATE TABLE {HISTORY_DB}.`{name}` (`version` INT, `status` STRING, {t.ddl()}) USING parquet "
                  f"LOCATION '{_sql(hist / name)}' COMMENT '{_sql(t.doc)} (every version)'")


def save_versions(spark, program_id: str, versions: list) -> None:
    """Replace the stored history of one program: versions = [(number, CatalogRows)]."""
    root = _root_of(spark)
    _commit(root, _history_writes(root, program_id, versions, OK))
    _refresh(spark)


def save_compilation(spark, final: CatalogRows, program_id: str, versions: list, status: str = OK) -> None:
    """Store a compile in one commit. OK: `final` (every per-program table, `version`
    included) and the history `versions` = [(number, CatalogRows)] replace the program's,
    and a failed attempt kept from before goes. FAILED: only `final["version"]` (the
    attempt's version rows) and its history are written, to the `f-` files; the last good
    compile stays as it was."""
    root = _root_of(spark)
    failed = program_file(program_id, FAILED)
    if status == OK:
        writes = [(root / name, program_file(program_id), name, final.only(program_id).get(name, []))
                  for name in PER_PROGRAM]
        writes.append((root / "version", failed, "version", []))
        writes += [(w[0], failed, w[2], []) for w in _history_writes(root, program_id, [], FAILED)]
    else:
        writes = [(root / "version", failed, "version", final.get("version", []))]
    _commit(root, writes + _history_writes(root, program_id, versions, status))
    from evita.bootstrap import outcome

    outcome.stored(program_id, [n for n, _ in versions], failed=status != OK)  # what a later error reports
    _refresh(spark)


def _history_writes(root: Loc, program_id: str, versions: list, status: str) -> list:
    hist = root.parent / HISTORY_DIR
    mine = [(n, cat.only(program_id)) for n, cat in versions]  # once per version, not once per table too
    return [(hist / name, program_file(program_id, status), name,
             [(n, status) + tuple(r) for n, cat in mine for r in cat.get(name, [])])
            for name in HISTORY_TABLES]


def load_versions(spark, program_id: str, status: str = OK) -> dict:
    """version number -> CatalogRows of one program, from evita_history (no Spark job);
    status FAILED: the versions of its last failed compile."""
    return versions_at(_root_of(spark).parent / HISTORY_DIR, program_id, status)


def versions_at(hist, program_id: str, status: str = OK) -> dict:
    """`load_versions` from a history folder (no Spark session needed)."""
    import pyarrow.dataset as ds

    out: dict = {}
    tables = {}
    with _history_reading(Loc.of(hist)):  # one commit spans catalog and history: its lock
        for name in HISTORY_TABLES:
            folder = Loc.of(hist) / name
            if not folder.is_dir():
                continue
            data = folder.dataset(_arrow_schema(name, True))
            same = ds.field("status") == status
            if status == OK:  # files written before failed compiles were kept apart have no status
                same = same | ds.field("status").is_null()
            tables[name] = data.to_table(filter=(ds.field(program_column(name)) == program_id) & same)
    for name, table in tables.items():
        for row in zip(*(table.column(c).to_pylist() for c in table.column_names)):
            out.setdefault(row[0], CatalogRows())[name].append(tuple(row[2:]))
    return {k: v.sorted() for k, v in sorted(out.items())}


def _history_reading(hist: Loc):
    """The reader's lock for a history folder: its catalog's (`_reading`), when the
    history sits beside one, as every warehouse lays them out."""
    root = hist.parent / DATA_DIR
    return _reading(root) if hist.name == HISTORY_DIR and root.is_dir() else nullcontext()


def detach(spark) -> None:
    """Forget the registration in this Spark application; the files stay. The database
    itself goes too unless it holds tables of your own."""
    if not spark.catalog.databaseExists(DB):
        return
    _drop_tables(spark)
    if not _table_names(spark):
        spark.sql(f"DROP DATABASE IF EXISTS {DB}")


def _drop_tables(spark) -> None:
    """Unregister the catalog tables (external: their files stay), none of anyone else's."""
    if spark.catalog.databaseExists(DB):
        for name in sorted(set(_table_names(spark)) & set(schema.BY_NAME)):
            spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")


def _table_names(spark) -> list:
    # SHOW TABLES is a command; spark.catalog.listTables runs Spark jobs to describe tables.
    return [r["tableName"] for r in spark.sql(f"SHOW TABLES IN {DB}").collect() if not r["isTemporary"]]


def _sql(value) -> str:
    return str(value).replace("\\", "\\\\").replace("'", "\\'")


def _root_of(spark) -> Loc:
    """The data folder the session's `evita` tables point at; for a session on demand
    that has not started (`runtime.session.SparkOnDemand`), the warehouse's, as `attach`
    would register it (the files are the catalog: nothing is registered to go stale)."""
    from evita.runtime.session import not_started

    if spark is None or not_started(spark):  # None: the files alone (a command with no session)
        return prepared()
    fp = _registered_fingerprint(spark)
    if fp is None:
        raise RuntimeError("the Evita catalog is not attached to this Spark session; "
                           "call evita.catalog.store.attach(spark) first")
    return Loc.of(fp.rsplit("#", 1)[0])


def _refresh(spark) -> None:
    """Make the session list the tables' files again after they changed.

    `spark.catalog.refreshTable` re-resolves each table (about 30 ms apiece); dropping the
    session's cached relations and file listings at once takes a millisecond."""
    from evita.runtime.session import not_started

    if spark is None or not_started(spark):  # no session, nothing cached
        return
    try:
        jss = spark._jsparkSession
        jss.sessionState().catalog().invalidateAllCachedTables()
        spark._jvm.org.apache.spark.sql.execution.datasources.FileStatusCache.getOrCreate(jss).invalidateAll()
    except Exception:  # not a classic JVM session (Spark Connect): the public, slower way,
        # unless the server keeps no resolved tables to go stale (`evita server` starts it so)
        if spark.conf.get("spark.sql.filesourceTableRelationCacheSize", None) == "0":
            return
        for t in schema.TABLES:
            spark.catalog.refreshTable(qualified(t.name))


# ---------------------------------------------------------------- writing

def save_program(spark, rows: CatalogRows) -> None:
    """Replace, in every per-program table, the rows of each program `rows` holds; other
    programs' rows stay. Costs no Spark job; `spark` None: no session at all (`evita load`),
    the warehouse's files are written as `attach` would register them."""
    root = _root_of(spark)
    _commit(root, program_writes(root, rows))
    from evita.bootstrap import outcome

    for pid in rows.programs():  # what a later error reports
        outcome.stored(pid, parsed=True)
    _refresh(spark)


def program_writes(root, rows: CatalogRows) -> list:
    """The writes of `save_program` (for `_commit`)."""
    root = Loc.of(root)
    return [(root / name, program_file(pid), name, rows.only(pid).get(name, []))
            for pid in rows.programs() for name in PER_PROGRAM]


def save_shared(spark, rows: CatalogRows, tables=("stage", "stage_lattice")) -> None:
    """Replace the whole content of tables shared by all programs (stage, stage_lattice)."""
    root = _root_of(spark)
    for name in tables:
        if program_column(name) is not None:
            raise ValueError(f"{name} is a per-program table; use save_program")
    _commit(root, [(root / name, SHARED_FILE, name, rows.get(name, [])) for name in tables])
    _refresh(spark)


def drop_program(spark, program_id: str) -> None:
    """Remove every row of one program."""
    root = _root_of(spark)
    _commit(root, [(root / name, program_file(program_id, status), name, [])
                   for status in (OK, FAILED) for name in PER_PROGRAM]
            + _history_writes(root, program_id, [], OK) + _history_writes(root, program_id, [], FAILED))
    _refresh(spark)


def _arrow_schema(name: str, versioned: bool = False):
    import pyarrow as pa

    fields = [pa.field(c, _ARROW[t]) for c, t in HISTORY_COLUMNS] if versioned else []
    return pa.schema(fields + [pa.field(c.name, _ARROW[c.type]) for c in schema.BY_NAME[name].columns])


def _arrow_table(name: str, rows: list, versioned: bool = False, digest: str = ""):
    import pyarrow as pa

    sch = _arrow_schema(name, versioned)
    if digest:
        sch = sch.with_metadata({ROWS_DIGEST: digest})
    columns = list(zip(*rows)) if rows else [()] * len(sch)
    arrays = [pa.array(list(col), type=f.type) for col, f in zip(columns, sch)]
    return pa.Table.from_arrays(arrays, schema=sch)


# A file's rows, hashed into its footer: a commit leaves a file that already holds the
# rows it would write alone. `evita plan P` again (a compile read from the compile
# cache) then writes nothing, where it used to rewrite and fsync every table.
ROWS_DIGEST = b"evita.rows"


def _digest(name: str, versioned: bool, rows: list) -> str:
    return hashlib.sha256(repr((name, versioned, rows)).encode()).hexdigest()


def _unchanged(target, name: str, versioned: bool, rows: list) -> bool:
    """Whether `target` already holds exactly `rows` (no file for no rows, in a folder
    that exists: readers list the folder)."""
    if not rows:
        return target.parent.is_dir() and not target.exists()
    return target.parquet_metadata().get(ROWS_DIGEST, b"").decode() == _digest(name, versioned, rows)


def _locked(root: Loc):
    """The warehouse's writer lock, on a local warehouse (see the module's docstring)."""
    root.mkdir()
    return _file_locked(root) if root.local else nullcontext()


def _reading(root: Loc):
    """The lock a reader holds while it reads several files of a local warehouse: shared
    among readers, exclusive of a writer's commit, whose moves (one file per table) a
    reader would otherwise see half done: some tables of the new version and some of the
    old, or a file listed and then deleted before it is opened."""
    return _file_locked(root, shared=True) if root.local else nullcontext()


@contextmanager
def _file_locked(root: Loc, shared: bool = False):
    """The writer lock of a local warehouse (`shared`: a reader's). Waits for another
    writer (a save takes milliseconds), but not forever: a process stopped while holding
    it must not hang every other one."""
    wait = float(os.environ.get("EVITA_LOCK_TIMEOUT", "120"))
    deadline = time.monotonic() + wait
    with open(root / ".lock", "a+") as fh:
        while True:
            try:
                fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    raise WarehouseBusy(f"warehouse busy: process {holder} holds {root / '.lock'}; waited {wait:.0f} s "
                                        f"(set EVITA_LOCK_TIMEOUT to wait longer)") from None
                time.sleep(0.05)
        if not shared:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))  # who holds it, for the busy message of the others
            fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _commit(root, writes: list) -> None:
    """writes: [(folder, file name, table, rows)], history folders' rows leading with
    (version, status); empty rows delete the file. All or nothing, even across folders."""
    root = Loc.of(root)
    token = uuid.uuid4().hex
    staging = root / "_staging" / token
    journal = root / "_journal"
    with _locked(root):
        _recover(root)
        ops = []
        try:
            for i, (folder, fname, name, rows) in enumerate(writes):
                folder = Loc.of(folder)
                versioned = folder.parent.name == HISTORY_DIR
                if _unchanged(folder / fname, name, versioned, rows):
                    continue
                staged = None
                if rows:
                    staged = staging / str(i) / fname
                    staged.parent.mkdir()
                    staged.write_parquet(_arrow_table(name, rows, versioned, _digest(name, versioned, rows)))
                    staged.fsync()  # durable before the commit point names it
                ops.append([str(folder), fname, str(staged) if staged else None])
            if not ops:  # every file already holds its rows
                return
            crash_point("staged")
            journal.mkdir()
            tmp = journal / f".{token}.tmp"
            tmp.write_text(json.dumps({"ops": ops}))
            tmp.fsync()
            tmp.move_to(journal / f"{token}.json")  # the commit point
            journal.sync()
        except BaseException:
            _quietly(staging.rmtree)
            raise
        crash_point("committed")
        _apply(root, journal / f"{token}.json")


def _apply(root: Loc, journal_file: Loc) -> None:
    """Carry out a committed journal; safe to repeat after a crash half way."""
    ops = json.loads(journal_file.read_text())["ops"]
    folders = {}
    for folder, fname, staged in ops:
        target = root / folder / fname  # an absolute folder or URI; a table name in older journals
        target.parent.mkdir()
        folders[target.parent.uri] = target.parent
        if staged is None:
            target.unlink()
        elif Loc.of(staged).exists():
            Loc.of(staged).move_to(target)
            crash_point("applying")
    for folder in folders.values():  # the moves durable before the journal that redoes them goes
        folder.sync()
    journal_file.unlink()
    _quietly((root / "_staging" / journal_file.stem).rmtree)


def _quietly(action) -> None:
    try:
        action()
    except OSError:
        pass


def _recover(root: Loc) -> None:
    """Roll committed journals forward and drop uncommitted staging (caller holds the lock)."""
    journal, staging = root / "_journal", root / "_staging"
    entries = journal.children()
    for f, _ in sorted((e for e in entries if e[0].name.endswith(".json") and not e[0].name.startswith(".")),
                       key=lambda e: e[1]):
        _apply(root, f)
        RECOVERED.append(f"{root}: finished a save that was interrupted after it committed")
    uncommitted = [f for f, _ in entries if f.name.startswith(".") and f.name.endswith(".tmp")]
    if uncommitted or staging.children():
        RECOVERED.append(f"{root}: dropped a save that was interrupted before it committed; "
                         "the catalog is as it was before that save")
    for f in uncommitted:
        f.unlink()
    _quietly(staging.rmtree)


# ---------------------------------------------------------------- reading

def load_rows(spark, program_id: str, engine: str = "arrow") -> CatalogRows:
    """Every row of one program (per-program tables only), canonically sorted.

    engine "arrow" reads the tables' Parquet files in the driver: no Spark job, a few
    milliseconds. engine "spark" asks Spark for the same rows in one job (seconds, mostly
    planning and compiling 18 scans); both see every file of a table, whoever wrote it."""
    if engine == "spark":
        return load_all(spark, [program_id], PER_PROGRAM)
    root = _root_of(spark) if spark is not None else opened()
    rows = CatalogRows()
    with _reading(root):  # every table of one version, never a save half applied
        for name in PER_PROGRAM:
            rows[name] = _read_files(root / name, name, program_id)
    return rows.sorted()


def list_programs(spark, engine: str = "arrow") -> list:
    """Ids of the stored programs, sorted (engine as in `load_rows`)."""
    if engine == "spark":
        return sorted(r[0] for r in spark.table(qualified("program")).select("id").collect())
    root = _root_of(spark) if spark is not None else opened()
    with _reading(root):
        return sorted(r[0] for r in _read_files(root / "program", "program"))


def opened(warehouse=None) -> Loc:
    """The data folder of the warehouse, for reading it without Spark (`spark=None` in
    `load_rows`, `list_programs`, `row_counts`): a half-done save is finished or dropped
    first, as `attach` does."""
    root = catalog_root(warehouse)
    for t in schema.TABLES:
        (root / t.name).mkdir()
    recover(root)
    return root


def row_counts(root: Loc, program_id: str | None = None) -> dict:
    """table -> rows (of one program: tables without a program column count 0), from
    the Parquet files' footers: what `SELECT count(*)` over each table says, no Spark."""
    import pyarrow.dataset as ds

    counts = {}
    with _reading(Loc.of(root)):  # the counts of one version, never of a save half applied
        for t in schema.TABLES:
            col = program_column(t.name)
            if program_id is not None and col is None:
                counts[t.name] = 0
                continue
            where = ds.field(col) == program_id if program_id is not None else None
            counts[t.name] = (root / t.name).dataset(_arrow_schema(t.name)).count_rows(filter=where)
    return counts


def table_rows(root: Loc, name: str, program_id: str | None = None, limit: int | None = None) -> tuple:
    """(column names, rows) of one catalog table as `evita catalog TABLE [--program P]`
    shows them, from the Parquet files (no Spark): what `SELECT * FROM evita.TABLE [WHERE
    program = P] ORDER BY <the table's order>` gives, nulls first as Spark orders, ties
    broken by the other columns so the listing is the same every time; at most `limit`
    rows. A table without a `program` column ignores `program_id`, as that query did."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    decl = schema.table(name)
    if schema.is_view(name):
        return list(decl.column_names), _view_rows(root, decl, program_id, limit)
    where = ds.field("program") == program_id if program_id is not None and "program" in decl.column_names else None
    with _reading(Loc.of(root)):  # a file listed is not deleted before it is read
        table = (Loc.of(root) / decl.name).dataset(_arrow_schema(decl.name)).to_table(filter=where)
    keys = list(decl.order) + [c for c in decl.column_names if c not in decl.order]
    try:  # pyarrow >= 20 places nulls per key; the option for all keys is deprecated there
        order = pc.sort_indices(table, sort_keys=[(c, "ascending", "at_start") for c in keys])
    except (TypeError, ValueError):  # an older pyarrow: keys are pairs
        order = pc.sort_indices(table, sort_keys=[(c, "ascending") for c in keys], null_placement="at_start")
    if limit is not None:
        order = order[:limit]
    table = table.take(order)
    return list(decl.column_names), list(zip(*(table.column(c).to_pylist() for c in decl.column_names)))


def _view_rows(root: Loc, decl, program_id, limit) -> list:
    """A view's rows (`catalog/views.py`) computed from the stored tables it derives from,
    in the view's order."""
    from .views import SOURCES, view_rows

    rows = CatalogRows()
    with _reading(Loc.of(root)):
        for t in SOURCES[decl.name]:
            rows[t] = _read_files(Loc.of(root) / t, t, program_id)
    idx = [decl.column_names.index(c) for c in decl.order]
    out = sorted(view_rows(decl.name, rows), key=lambda r: tuple(r[i] for i in idx) + tuple(r))
    return out[:limit] if limit is not None else out


def _read_files(folder, name: str, program_id=None) -> list:
    import pyarrow.dataset as ds

    data = Loc.of(folder).dataset(_arrow_schema(name))  # skipping what Spark ignores too
    col = program_column(name)
    where = ds.field(col) == program_id if program_id is not None and col else None
    table = data.to_table(filter=where)
    return list(zip(*(table.column(c).to_pylist() for c in table.column_names))) if table.num_rows else []


def load_all(spark, program_ids=None, tables=None) -> CatalogRows:
    """Rows of the given programs (all when None) through Spark, in one job: each table,
    filtered on its program column, as JSON text; the union collected at once. Tables
    shared by all programs come whole."""
    from pyspark.sql import functions as F

    names = list(tables or [t.name for t in schema.TABLES])
    frames = []
    for name in names:
        t, col = schema.BY_NAME[name], program_column(name)
        df = spark.table(qualified(name))
        if col is not None and program_ids is not None:
            df = df.where(F.col(col).isin(list(program_ids)))
        frames.append(df.select(F.lit(name).alias("t"), F.to_json(F.struct(*t.column_names)).alias("j")))
    union = frames[0]
    for f in frames[1:]:
        union = union.unionAll(f)
    rows = CatalogRows()
    for r in union.collect():
        values = json.loads(r["j"])
        rows[r["t"]].append(tuple(values.get(c) for c in schema.BY_NAME[r["t"]].column_names))
    return rows.sorted()
