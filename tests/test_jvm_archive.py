"""Spark's classes archived once (runtime/jvm_archive.py): a session maps an archive that
is there, asks for one in the background when there is none, never twice at once, and
never again where the JVM could not write one. The training itself, a real JVM writing
and a second one mapping the archive, is in the extended tier (a minute of CPU)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from evita.runtime import jvm_archive


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("EVITA_JVM_ARCHIVE", "1")
    return tmp_path / "evita" / "jvm"


def test_an_archive_that_is_there_is_mapped(cache):
    k = jvm_archive.key()
    assert k, "this machine has a JDK and pyspark's jars"
    cache.mkdir(parents=True)
    jvm_archive.archive(k).write_bytes(b"")
    assert jvm_archive.options() == f"-XX:SharedArchiveFile={jvm_archive.archive(k)} -Xlog:cds*=off"


def test_no_archive_asks_for_one_once_and_not_where_it_failed(cache, monkeypatch):
    started = []
    monkeypatch.setattr(jvm_archive, "detached", lambda argv, log, env: started.append(argv))
    k = jvm_archive.key()
    assert jvm_archive.options() == "" and len(started) == 1
    assert started[0][-2:] == ["evita.runtime.jvm_archive", k]
    assert jvm_archive.options() == "" and len(started) == 1, "a trainer runs: no second one"
    (cache / f"spark-{k}.training").unlink()
    (cache / f"spark-{k}.failed").write_text("")
    assert jvm_archive.options() == "" and len(started) == 1, "this installation cannot have one"
    monkeypatch.setenv("EVITA_JVM_ARCHIVE", "0")
    (cache / f"spark-{k}.failed").unlink()
    assert jvm_archive.options() == "" and len(started) == 1


def test_a_stale_lock_is_taken_over(cache, monkeypatch):
    started = []
    monkeypatch.setattr(jvm_archive, "detached", lambda argv, log, env: started.append(argv))
    k = jvm_archive.key()
    cache.mkdir(parents=True)
    lock = cache / f"spark-{k}.training"
    lock.write_text("1")
    old = lock.stat().st_mtime - jvm_archive.STALE_SECONDS - 1
    os.utime(lock, (old, old))
    assert jvm_archive.options() == "" and len(started) == 1


def test_the_trainer_is_nobodys_child_here(cache, tmp_path):
    """A caller that later reaps a child of its own must not be charged the trainer's CPU,
    nor keep it as a zombie: the trainer's parent is not this process."""
    cache.mkdir(parents=True)
    said = tmp_path / "parent"
    with open(tmp_path / "log", "wb") as log:
        jvm_archive.detached([sys.executable, "-c", f"import os; open({str(said)!r}, 'w').write(str(os.getppid()))"],
                             log, dict(os.environ))
    for _ in range(200):
        if said.exists() and said.read_text():
            break
        time.sleep(0.05)
    assert said.read_text() and int(said.read_text()) != os.getpid()


@pytest.mark.extended
def test_the_trainer_writes_an_archive_a_jvm_maps(cache):
    k = jvm_archive.key()
    cache.mkdir(parents=True)
    (cache / f"spark-{k}.training").write_text(str(os.getpid()))
    env = {**os.environ, "EVITA_JVM_ARCHIVE": "0"}
    done = subprocess.run([sys.executable, "-m", "evita.runtime.jvm_archive", k], env=env, cwd=cache,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert jvm_archive.archive(k).stat().st_size > 10_000_000
    assert jvm_archive._maps(jvm_archive.archive(k))
    assert not (cache / f"spark-{k}.training").exists() and not list(cache.glob("*.partial"))
    # a JVM given a truncated archive dies of SIGBUS: the trainer's check would not put it in place
    truncated = cache / "truncated.partial"
    truncated.write_bytes(jvm_archive.archive(k).read_bytes()[:50_000_000])
    assert not jvm_archive._maps(truncated)
