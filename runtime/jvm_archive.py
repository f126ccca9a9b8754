"""Spark's classes, archived once: a JVM that maps them starts and runs its first queries sooner.

A Spark driver spends most of a cold command loading and verifying classes: the JVM, then
Spark SQL's parser, analyzer, optimizer and code generator at the first query. Java's
class-data sharing (CDS, JDK 13+) keeps the classes one JVM loaded in an archive file
that later JVMs map instead of loading again. Measured on this 2-core machine, loaded by
other work, alternating runs: start-up 75/66 s -> 42/44 s and the first two queries
57/45 s -> 26/23 s (docs/performance.md has quiet numbers).

How the archive comes to be, so that no user command waits for it and no JVM maps a
half-written file (a truncated archive crashes the JVM with SIGBUS):
- a session started without one asks for it (`options`): a detached process (`train`)
  starts a small Spark session with `-XX:ArchiveClassesAtExit`, runs the work a command
  runs (SQL over Parquet, a DataFrame from Python rows, a join, an aggregate), stops,
  waits for its JVM to exit (the JVM writes the archive as it exits), checks that a JVM
  maps the file, and only then renames it into place;
- one trainer at a time per archive (an exclusive lock file; a stale lock, older than
  `STALE_SECONDS`, is taken over); a trainer whose JVM wrote no usable archive (an old
  JDK, a non-empty directory on the classpath, which CDS refuses) leaves a `.failed`
  mark, and that installation runs without one;
- the archive is keyed by the JVM (its `libjvm.so`) and Spark's jars, the two things the
  JVM checks it against, so a Java or PySpark upgrade trains a new one.

Kept in `$XDG_CACHE_HOME/evita/jvm` (else `~/.cache/evita/jvm`), apart from
`$EVITA_CACHE`: it depends on the installation, not on any program. `EVITA_JVM_ARCHIVE=0`
turns it off.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

STALE_SECONDS = 900  # a trainer takes a minute on a loaded machine; one holding the lock longer died


def enabled() -> bool:
    return os.environ.get("EVITA_JVM_ARCHIVE", "1") not in ("0", "false", "no", "off")


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "evita" / "jvm"


def _java_home() -> Optional[Path]:
    """The JDK pyspark's launcher runs: $JAVA_HOME, else the `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return Path(home)
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def key() -> Optional[str]:
    """What the archive is valid for: the JVM library, Spark's jars (their folder, and
    the name and size of each) and what else goes on the driver's classpath (a JVM maps the archive's classes
    only when its classpath starts as the trainer's did); None when the JVM or the jars
    cannot be found (no archive then)."""
    home = _java_home()
    jvm = home / "lib" / "server" / "libjvm.so" if home else None
    try:
        import pyspark

        jars = Path(pyspark.__file__).parent / "jars"
        listing = sorted((p.name, p.stat().st_size) for p in jars.glob("*.jar"))
        st = jvm.stat() if jvm else None
    except (ImportError, OSError):
        return None
    if st is None or not listing:
        return None
    classpath = [os.environ.get(v, "") for v in ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_DIST_CLASSPATH")]
    h = hashlib.sha256(repr((str(jvm), st.st_size, st.st_mtime_ns, str(jars.resolve()), listing,
                             classpath)).encode())
    return h.hexdigest()[:20]


def archive(k: str) -> Path:
    return folder() / f"spark-{k}.jsa"


def options() -> str:
    """The driver JVM's option that maps the archive, or "" when there is none yet (one
    is then trained in the background for the next command)."""
    if not enabled():
        return ""
    k = key()
    if k is None:
        return ""
    if archive(k).is_file():  # an archive the JVM finds stale it ignores, and says so: not on the terminal
        return f"-XX:SharedArchiveFile={archive(k)} -Xlog:cds*=off"
    _start_training(k)
    return ""


def _start_training(k: str) -> None:
    lock = folder() / f"spark-{k}.training"
    if (folder() / f"spark-{k}.failed").exists():  # this installation cannot have one (its log says why)
        return
    try:
        folder().mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_SECONDS:
            lock.unlink(missing_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:  # another trainer runs, or the cache cannot be written: no archive, no harm
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    env = {**os.environ, "EVITA_JVM_ARCHIVE": "0"}  # the trainer's own session asks for nothing
    with open(folder() / f"spark-{k}.log", "wb") as log:
        detached([sys.executable, "-m", "evita.runtime.jvm_archive", k], log, env)


def detached(argv: list[str], log, env: dict) -> None:
    """Start argv in its own session and return at once. A shell starts it in the background
    and exits, so it is nobody's child here: a long-lived caller (the API, a notebook, a test
    run) neither keeps a zombie nor, reaping it later, has a minute of a JVM's CPU charged to it."""
    with open(os.devnull, "rb") as nothing:
        shell = subprocess.Popen(["/bin/sh", "-c", '"$@" &', "sh", *argv], stdin=nothing, stdout=log, stderr=log,
                                 env=env, start_new_session=True, cwd=folder())
        shell.wait()


def train(k: str) -> int:
    """Start a session that dumps its classes at exit, run a command's work, stop, wait
    for the JVM, check the file and rename it into place. Exit 0 when the archive is there."""
    lock = folder() / f"spark-{k}.training"
    partial = folder() / f"spark-{k}.{os.getpid()}.partial"
    try:
        try:
            _run_session(partial)
        except Exception:
            import traceback

            traceback.print_exc()  # into the log beside the archive
        if _maps(partial):
            partial.replace(archive(k))
            return 0
        # the JVM could not write one (a non-empty directory on the classpath, an old JDK):
        # said once, in the log beside it, and not tried again for this installation
        (folder() / f"spark-{k}.failed").write_text("see the log beside this file\n")
        return 1
    finally:
        partial.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)


def _run_session(dump: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("evita-jvm-archive")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.warehouse.dir", str(folder() / "warehouse"))
             .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={dump}")
             .getOrCreate())
    parquet = folder() / "train.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), parquet)
    rows = spark.createDataFrame([(1, "x"), (2, "y")], "a BIGINT, b STRING")
    rows.createOrReplaceTempView("given")
    spark.read.parquet(str(parquet)).createOrReplaceTempView("stored")
    spark.sql("SELECT s.a, count(*) AS n, max(g.b) FROM stored s JOIN given g ON s.a = g.a "
              "WHERE s.b <> 'q' GROUP BY s.a ORDER BY s.a").collect()
    spark.sql("SELECT a FROM stored UNION SELECT a + 1 FROM given EXCEPT SELECT 7").toPandas()
    gateway = SparkContext._gateway
    spark.stop()
    gateway.shutdown()
    gateway.proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive as it goes
    gateway.proc.wait(timeout=STALE_SECONDS)
    parquet.unlink(missing_ok=True)


def _maps(file: Path) -> bool:
    """Whether a JVM starts with `file` mapped (a truncated archive crashes it). Its
    classes are checked against the classpath at each start, so -Xshare:on, which would
    also fail on this check's bare classpath, is not what is asked."""
    home = _java_home()
    if not file.is_file() or home is None:
        return False
    crash_report = file.with_name(file.name + ".hs_err")  # where a crashing JVM writes, not the cwd
    got = subprocess.run([str(home / "bin" / "java"), f"-XX:SharedArchiveFile={file}", f"-XX:ErrorFile={crash_report}",
                          "-version"], capture_output=True, timeout=120)
    crash_report.unlink(missing_ok=True)
    return got.returncode == 0


if __name__ == "__main__":
    sys.exit(train(sys.argv[1]))
