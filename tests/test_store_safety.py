"""The catalog never loses a good state: a save killed at any point (`kill -9`) is
finished or dropped on the next start, concurrent writers do not corrupt the warehouse,
readers never see a save half applied, and a failed compile keeps the last good one
(test_cli.py has that one). Then the same through the real command line: `evita
compile`, `run -D` and `analyze` killed, two runs at once, reads during a compile
(docs/reliability.md, "Crashes and concurrency"; `server start` is in test_zz_connect.py)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from evita.bootstrap.parser import parse_program
from evita.catalog import store
from evita.catalog.encode import encode
from evita.catalog.rows import PER_PROGRAM

from conftest import EXAMPLES

# A child process saving program "crash": version A (2 rules) or B (N rules), forever or once.
CHILD = """
import sys
from pathlib import Path
from evita.bootstrap.parser import parse_program
from evita.catalog import store
from evita.catalog.encode import encode
root, n, times = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for i in range(times):
    k = n if i % 2 == 0 else n + 1
    text = "\\n".join(f"r{j} x{j}(A) :- y(A), z{j}(A, B)." for j in range(k))
    store._commit(root, store.program_writes(root, encode(parse_program(text, "crash.olg"))))
    print(i, flush=True)
"""


def rows_of(n):
    return encode(parse_program("\n".join(f"r{j} x{j}(A) :- y(A), z{j}(A, B)." for j in range(n)), "crash.olg"))


def stored(root):
    return {name: sorted(store._read_files(root / name, name, "crash")) for name in PER_PROGRAM}


def expected(n):
    rows = rows_of(n).sorted()
    return {name: sorted(rows.get(name, [])) for name in PER_PROGRAM}


def child(root, n, times, **env):
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(n), str(times)], stdout=subprocess.PIPE,
                            env={**os.environ, **env}, text=True)


def test_a_save_of_rows_already_stored_writes_only_the_files_that_change(tmp_path):
    """`evita plan P` again (its compile read from the compile cache) stores what the
    catalog holds: no file is rewritten. A save that changes some tables rewrites those."""
    root = tmp_path / "evita-catalog"
    store._commit(root, store.program_writes(root, rows_of(3)))
    files = {p: p.stat().st_mtime_ns for p in root.rglob("*.parquet")}
    time.sleep(0.01)
    store._commit(root, store.program_writes(root, rows_of(3)))
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*.parquet")} == files
    assert not any((root / "_journal").glob("*")) and not any((root / "_staging").glob("*"))

    rows = rows_of(3)
    rows["rule"] = rows_of(4)["rule"]  # one table changes
    store._commit(root, store.program_writes(root, rows))
    assert stored(root)["rule"] == expected(4)["rule"]
    changed = {p for p, t in files.items() if not p.exists() or p.stat().st_mtime_ns != t}
    assert changed == {root / "rule" / store.program_file("crash")}


@pytest.mark.parametrize("point, survives", [("staged", False), ("committed", True), ("applying", True)])
def test_a_save_killed_at_any_point_is_recovered(tmp_path, point, survives):
    root = tmp_path / "evita-catalog"
    store._commit(root, store.program_writes(root, rows_of(2)))
    proc = child(root, 5, 1, EVITA_CRASH_AT=point)
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    store.RECOVERED.clear()
    store.recover(root)
    assert stored(root) == expected(5 if survives else 2)
    assert store.RECOVERED, "recovery says what it did"
    assert not any((root / "_journal").glob("*")) and not any((root / "_staging").glob("*"))


def test_real_kill_9_during_saves_leaves_one_whole_version(tmp_path):
    root = tmp_path / "evita-catalog"
    rng = random.Random(7)
    for _ in range(4):
        proc = child(root, 30, 10_000)
        proc.stdout.readline()  # it has saved once: now kill it while it saves again
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        store.recover(root)
        assert stored(root) in (expected(30), expected(31))


def test_reads_while_saves_run_see_one_whole_version(tmp_path):
    """A reader of several tables (`evita catalog`'s counts, `print`'s rows) holds the
    shared lock, so a save's moves, one file per table, are never seen half done, nor a
    file listed and then deleted before it is read."""
    from evita.catalog.fs import Loc

    root = Loc.of(tmp_path / "evita-catalog")
    counts = {}
    for n in (31, 30):
        store._commit(root, store.program_writes(root, rows_of(n)))
        counts[n] = store.row_counts(root, "crash")
    assert counts[30] != counts[31]
    writer = child(root, 30, 100_000)  # saves 30 rules, 31, 30, ... until killed
    try:
        writer.stdout.readline()
        reads, deadline = 0, time.monotonic() + 4
        while time.monotonic() < deadline:
            assert store.row_counts(root, "crash") in (counts[30], counts[31])
            assert len(store.table_rows(root, "rule", "crash")[1]) in (30, 31)
            reads += 1
    finally:
        writer.kill()
        writer.wait()
    store.recover(root)
    assert reads > 20


def test_concurrent_writers_wait_for_each_other(tmp_path):
    root = tmp_path / "evita-catalog"
    procs = [child(root, 20 + 2 * k, 15) for k in range(3)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    assert stored(root) in [expected(n) for n in (20, 21, 22, 23, 24, 25)]


def test_a_writer_that_cannot_get_the_lock_says_warehouse_busy(tmp_path, monkeypatch):
    import fcntl

    root = tmp_path / "evita-catalog"
    root.mkdir()
    monkeypatch.setenv("EVITA_LOCK_TIMEOUT", "0.3")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"f = open({str(root / '.lock')!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                               "f.write(str(os.getpid())); f.flush(); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(store.WarehouseBusy, match=f"warehouse busy: process {holder.pid} holds"):
            store._commit(root, store.program_writes(root, rows_of(1)))
    finally:
        holder.kill()
        holder.wait()
    assert fcntl  # the lock is an flock: it dies with its holder, so a killed holder frees it
    store._commit(root, store.program_writes(root, rows_of(1)))
    assert stored(root) == expected(1)


@pytest.mark.extended  # two whole compiles in JVMs of their own: the lock tests above hold the protocol
def test_two_concurrent_compiles_on_one_warehouse(tmp_path):
    """Two real `evita compile` processes at once: both succeed and the warehouse holds
    each program whole, its catalog and history in agreement."""
    env = {**os.environ, "EVITA_WAREHOUSE": str(tmp_path / "wh"), "EVITA_SPARK_LOG": str(tmp_path / "spark.log")}
    evita = [sys.executable, "-m", "evita.bootstrap.cli"]
    programs = [EXAMPLES / "tc.dl", EXAMPLES / "shortest_path.olg"]
    procs = [subprocess.Popen(evita + ["compile", str(p), "--only", "delta", "--master", "local[1]"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in programs]
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
    check = subprocess.run(evita + ["sql", "SELECT program, count(*) AS n, max(version) AS last FROM evita.version "
                                    "GROUP BY program ORDER BY program"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stderr
    assert "shortest_path" in check.stdout and "tc" in check.stdout
    root = tmp_path / "wh" / store.DATA_DIR
    for pid in ("tc", "shortest_path"):
        versions = store._read_files(root / "version", "version", pid)
        assert versions and all(v[8] == store.OK for v in versions)
        history = store.versions_at(root.parent / store.HISTORY_DIR, pid)
        assert sorted(history) == sorted(v[1] for v in versions)  # catalog and history agree
        assert stored_final(root, pid) == history[max(history)].only(pid).sorted().compared()


def stored_final(root, pid):
    from evita.catalog.rows import CatalogRows

    rows = CatalogRows()
    for name in PER_PROGRAM:
        if name != "version":
            rows[name] = store._read_files(root / name, name, pid)
    return rows.sorted().compared()


def test_the_store_writes_through_a_filesystem_uri(tmp_path):
    """The warehouse may be a URI (catalog/fs.py; hdfs:// or s3a:// on a cluster): a save
    through file:///... is the save through the plain path, journal and recovery included."""
    from evita.catalog.fs import Loc

    root = tmp_path / "wh" / store.DATA_DIR
    uri = root.as_uri()
    assert Loc.of(uri) == Loc.of(root) and Loc.of(uri).local
    store._commit(uri, store.program_writes(uri, rows_of(3)))
    assert stored(root) == expected(3)  # read back through the plain path
    store._commit(root, store.program_writes(root, rows_of(4)))
    assert {name: sorted(store._read_files(f"{uri}/{name}", name, "crash")) for name in PER_PROGRAM} == expected(4)
    # a committed journal left by a killed save is rolled forward through the URI too
    staged = Loc.of(uri) / "_staging" / "t" / "0" / store.program_file("crash")
    staged.parent.mkdir()
    staged.write_parquet(store._arrow_table("rule", []))
    journal = Loc.of(uri) / "_journal"
    journal.mkdir()
    (journal / "t.json").write_text(__import__("json").dumps({"ops": [[str(root / "rule"), store.program_file("crash"),
                                                                       str(staged)]]}))
    store.RECOVERED.clear()
    store.recover(uri)
    assert store.RECOVERED and not (root / "_journal" / "t.json").exists() and not (root / "_staging").exists()
    assert store._read_files(root / "rule", "rule", "crash") == []
    store.RECOVERED.clear()


# ---------------------------------------------------------------- the real command line, killed and at once
# Each `evita` below is a process of its own, in a process group of its own, on a warehouse
# of the test's; `kill -9` goes to the whole group. A kill lands at an exact point of a
# write through EVITA_CRASH_AT (catalog/fs.py `crash_point`: the store's `staged`,
# `committed`, `applying`; an output or statistics file `half-written`), or at offsets
# in time (the extended tier). After each: the warehouse opens (`evita catalog` exits 0),
# the last good compile is whole, and no output file is half written.

EVITA = [sys.executable, "-m", "evita.bootstrap.cli"]
TC = EXAMPLES / "tc.dl"
TC_PATHS = 48  # examples/tc.dl's answer on examples/tc
# tc with a third rule, stored under the same program name: a compile that would replace tc's
TC_CHANGED = TC.read_text() + "\npath(x, x) :- edge(x, _).\n"


def cli_env(home, **more) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_GATEWAY_PORT", "EVITA_MASTER", "EVITA_REMOTE", "EVITA_CRASH_AT")}
    # the compile cache on (the run's $EVITA_CACHE): a second run of a program on the same
    # inputs reads its compile, as a user's would; the catalog is stored all the same
    env.update(EVITA_WAREHOUSE=str(home / "wh"), EVITA_SPARK_LOG=str(home / "spark.log"), EVITA_COMPILE_CACHE="1")
    return {**env, **more}


def evita(env, *argv, cwd, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(EVITA + [str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def started(env, *argv, cwd) -> subprocess.Popen:
    return subprocess.Popen(EVITA + [str(a) for a in argv], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def killed(proc, after: float | None = None) -> int:
    """kill -9 of the process's group (at once, or `after` seconds unless it ended first);
    the exit code (-9 when the kill landed)."""
    if after is not None:
        try:
            proc.wait(timeout=after)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a crash point killed the leader: its children too
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate(timeout=120)
    return proc.returncode


def snapshot(home, pid: str = "tc") -> tuple:
    """A program's rows in every per-program table and its history, read from the files."""
    root = home / "wh" / store.DATA_DIR
    tables = {name: sorted(store._read_files(root / name, name, pid)) for name in PER_PROGRAM}
    return tables, {n: rows.compared() for n, rows in store.versions_at(root.parent / store.HISTORY_DIR, pid).items()}


def whole(home, pid: str = "tc") -> int:
    """Checks that the program's stored compile is whole (its versions all in the history,
    the final catalog the history's last version); its number of rules."""
    root = home / "wh" / store.DATA_DIR
    versions = [v for v in store._read_files(root / "version", "version", pid) if v[8] == store.OK]
    history = store.versions_at(root.parent / store.HISTORY_DIR, pid)
    assert versions and sorted(history) == sorted(v[1] for v in versions)
    assert stored_final(root, pid) == history[max(history)].only(pid).sorted().compared()
    return len(store._read_files(root / "rule", "rule", pid))


def opens(env, home) -> str:
    """`evita catalog --program tc` exits 0 (it opens the warehouse, finishing or dropping
    a save a kill interrupted, and finds tc among its programs); its listing."""
    mine = evita(env, "catalog", "--program", "tc", cwd=home)
    assert mine.returncode == 0 and "evita.rule" in mine.stdout, mine.stderr
    return mine.stdout


def no_half_written_output(folder) -> list:
    """The -D folder holds whole output files only (a killed writer's `.NAME.PID.tmp`
    may remain, hidden, until the next writer there drops it); their names."""
    names = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    for name in names:
        if not name.startswith("."):
            lines = (folder / name).read_text().splitlines()
            assert len(lines) == TC_PATHS and all(len(line.split("\t")) == 2 for line in lines), name
    return [n for n in names if not n.startswith(".")]


@pytest.fixture(scope="module")
def compiled_tc(tmp_path_factory, warehouse):
    """A warehouse holding a good compile of tc (`evita compile`), and its snapshot and
    listing: each test below kills something on a copy of it. (`warehouse`: the run's
    cache of compiled stages, $EVITA_CACHE, which the processes share.)"""
    home = tmp_path_factory.mktemp("good")
    env = cli_env(home)
    done = evita(env, "compile", TC, "--quiet", cwd=home)
    assert done.returncode == 0, done.stderr
    return home, snapshot(home), opens(env, home)


@pytest.fixture
def copied(compiled_tc, tmp_path):
    import shutil

    good, before, listing = compiled_tc
    shutil.copytree(good / "wh", tmp_path / "wh")
    (tmp_path / "tc.dl").write_text(TC_CHANGED)
    return tmp_path, before, listing


def test_kill_9_inside_the_save_of_a_compile_keeps_the_last_good_one(copied):
    home, before, listing = copied
    env = cli_env(home)
    proc = started(dict(env, EVITA_CRASH_AT="staged"), "compile", home / "tc.dl", "--quiet", cwd=home)
    assert killed(proc, after=300) == -signal.SIGKILL  # it killed itself with its save's files written, uncommitted
    assert opens(env, home) == listing  # the same tables and counts as after the good compile
    assert snapshot(home) == before and whole(home) == 2


def test_kill_9_while_run_writes_its_output_leaves_no_half_written_file(copied):
    home, _, _ = copied
    env = cli_env(home)
    out = home / "out"
    proc = started(dict(env, EVITA_CRASH_AT="half-written"), "run", TC, "-F", EXAMPLES / "tc", "-D", out, "--quiet",
                   cwd=home)
    assert killed(proc, after=300) == -signal.SIGKILL  # half of path.csv written when it died
    assert no_half_written_output(out) == [] and [p.name for p in out.iterdir()] == [f".path.csv.{proc.pid}.tmp"]
    opens(env, home)
    assert whole(home) == 2
    again = evita(env, "run", TC, "-F", EXAMPLES / "tc", "-D", out, "--quiet", cwd=home)
    assert again.returncode == 0, again.stderr
    assert no_half_written_output(out) == ["path.csv"] and len(list(out.iterdir())) == 1  # the leftover dropped


FOLDER_WRITER = """
import sys
from evita.catalog.fs import Loc
target = Loc.of(sys.argv[1])
def write(tmp):
    tmp.mkdir()
    (tmp / "part-0").write_bytes(sys.argv[2].encode())
    (tmp / "part-1").write_bytes(sys.argv[2].encode())
target.parent.drop_stale_temporaries()
target.replace_folder(write)
"""


def test_a_folder_output_killed_while_written_keeps_the_old_folder_whole(tmp_path):
    """Parquet outputs are folders (`Loc.replace_folder`): killed after the new folder is
    written but before it takes the name, the old folder is whole and the next writer
    drops the leftover; run to the end, the new folder replaces the old whole."""
    target = tmp_path / "out" / "path.parquet"

    def write(text, **env):
        return subprocess.run([sys.executable, "-c", FOLDER_WRITER, str(target), text],
                              env={**os.environ, **env}, timeout=120).returncode

    def contents():
        return sorted((p.name, p.read_text()) for p in target.iterdir())

    assert write("old") == 0 and contents() == [("part-0", "old"), ("part-1", "old")]
    assert write("new", EVITA_CRASH_AT="half-written") == -signal.SIGKILL
    assert contents() == [("part-0", "old"), ("part-1", "old")]
    assert len(list(target.parent.iterdir())) == 2  # the killed writer's temporary folder beside it
    assert write("new") == 0 and contents() == [("part-0", "new"), ("part-1", "new")]
    assert [p.name for p in target.parent.iterdir()] == ["path.parquet"]


def test_two_runs_at_once_into_two_folders_on_one_warehouse(copied):
    home, _, _ = copied
    env = cli_env(home)
    runs = [started(env, "run", program, "-F", EXAMPLES / "tc", "-D", home / name, "--quiet", cwd=home)
            for program, name in ((TC, "one"), (home / "tc.dl", "two"))]
    for proc in runs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    assert no_half_written_output(home / "one") == ["path.csv"]
    two = (home / "two" / "path.csv").read_text().splitlines()
    assert len(two) == TC_PATHS + 3  # the changed tc adds path(x, x) for the nodes on no cycle: 1, 8, 9
    assert sorted(set(two) - set((home / "one" / "path.csv").read_text().splitlines())) == ["1\t1", "8\t8", "9\t9"]
    assert whole(home) in (2, 3)  # one of the two compiles, whole


@pytest.mark.extended  # eleven processes; test_reads_while_saves_run_see_one_whole_version holds the protocol
def test_ten_catalog_reads_while_a_compile_writes_see_one_version_or_the_other(copied):
    home, before, listing = copied
    env = cli_env(home, EVITA_COMPILE_CACHE="0")  # a compile that runs its stages: the reads overlap it
    compile_ = started(env, "compile", home / "tc.dl", "--quiet", cwd=home)
    reads = []
    for _ in range(10):  # spread over the compile, which saves at its end
        reads.append(started(env, "catalog", "--program", "tc", cwd=home))
        time.sleep(0.3)
    out, err = compile_.communicate(timeout=600)
    assert compile_.returncode == 0, err
    after = opens(env, home)
    assert after != listing and whole(home) == 3
    for proc in reads:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and not err.strip(), err
        assert out in (listing, after)


@pytest.mark.extended  # more kills of a compile: every point of its save, and at offsets in time
@pytest.mark.parametrize("how", ["committed", "applying", 2.5])
def test_kill_9_anywhere_in_a_compile_leaves_one_whole_compile(copied, how):
    home, before, listing = copied
    env = cli_env(home)
    at_point = isinstance(how, str)
    proc = started(dict(env, EVITA_CRASH_AT=how) if at_point else env, "compile", home / "tc.dl", "--quiet", cwd=home)
    code = killed(proc, after=300 if at_point else how)
    after = opens(env, home)
    rules = whole(home)
    if at_point:  # committed: the next opening finishes the save
        assert code == -signal.SIGKILL and rules == 3 and after != listing
    elif rules == 2:  # killed before its save committed (or at once): the last good compile, unchanged
        assert snapshot(home) == before and after == listing
    else:
        assert rules == 3


@pytest.mark.extended
@pytest.mark.parametrize("after", [2.5, 5.5])
def test_kill_9_of_a_run_at_any_time_leaves_whole_files_or_none(copied, after):
    home, _, _ = copied
    env = cli_env(home)
    out = home / "out"
    killed(started(env, "run", TC, "-F", EXAMPLES / "tc", "-D", out, "--quiet", cwd=home), after=after)
    assert no_half_written_output(out) in ([], ["path.csv"])
    opens(env, home)
    assert whole(home) == 2


@pytest.mark.extended  # `analyze` reads its inputs with Spark: a JVM for each
def test_kill_9_of_analyze_keeps_the_statistics_whole(copied):
    import json

    home, _, _ = copied
    env = cli_env(home)
    stats = home / "wh" / "statistics" / "tc.json"
    done = evita(env, "analyze", TC, "-F", EXAMPLES / "tc", "--master", "local[1]", cwd=home)
    assert done.returncode == 0, done.stderr
    kept = stats.read_bytes()
    more = home / "more"
    more.mkdir()
    (more / "edge.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(500)))  # other statistics
    proc = started(dict(env, EVITA_CRASH_AT="half-written"), "analyze", TC, "-F", more, "--master", "local[1]",
                   cwd=home)
    assert killed(proc, after=600) == -signal.SIGKILL  # half of the new tc.json written when it died
    assert stats.read_bytes() == kept and json.loads(kept)
    opens(env, home)
    done = evita(env, "analyze", TC, "-F", more, "--master", "local[1]", cwd=home)  # reads what is kept, adds to it
    assert done.returncode == 0, done.stderr
    assert [p.name for p in stats.parent.iterdir()] == ["tc.json"]  # the killed writers' temporaries dropped
