"""The catalog never loses a good state: a save killed at any point (`kill -9`) is
finished or dropped on the next start, concurrent writers do not corrupt the warehouse,
and a failed compile keeps the last good one (test_cli.py has that one)."""
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


def test_concurrent_writers_wait_for_each_other(tmp_path):
    root = tmp_path / "evita-catalog"
    procs = [child(root, 20 + 2 * k, 40) for k in range(3)]
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
