"""The SparkSession Evita runs on, with settings tuned for small data.

Spark charges a fixed price per job, so the defaults keep jobs cheap: few shuffle
partitions, no UI, quiet logs. The warehouse directory holds the persisted catalog
(`EVITA_WAREHOUSE`, default `./evita-warehouse`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from .package import imported_from_zip, package_zip

DEFAULT_MASTER = "local[*]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def warehouse_dir(path: str | os.PathLike | None = None):
    """The warehouse (`catalog.fs.Loc`): a local path, a file:// URI, or on a cluster a
    shared filesystem or object store every executor sees (hdfs://..., s3a://...)."""
    from ..catalog.fs import Loc

    return Loc.of(path or os.environ.get("EVITA_WAREHOUSE") or "evita-warehouse")


def spark_session(master: str | None = None, warehouse: str | os.PathLike | None = None,
                  remote: str | None = None, brief: bool = False):
    """Get or create the session. Settings only apply when the JVM starts here.
    `brief`: the process runs a query or two and exits (`evita sql`), so its JVM compiles
    with C1 alone, which starts sooner and is slower only for long work.

    A Spark Connect server is used when one is named (`remote`, `--remote`,
    `$EVITA_REMOTE`) or, with no master asked for, when `evita server start` left one
    running for this warehouse (`runtime/server.py`): no JVM starts in this process.

    Under `spark-submit` (docs/deploy.md) its `--master` and `--conf` settings hold: Evita
    asks for no master unless told one, sets its tuning defaults only where spark-submit
    gave none, and leaves the executors' Python to `spark.pyspark.python`/`PYSPARK_PYTHON`.
    The warehouse is always Evita's (`--warehouse`, `$EVITA_WAREHOUSE`)."""
    from .connect import connect_session
    from .server import remote_to_use

    url, where = remote_to_use(remote, master, warehouse_dir(warehouse))
    if url is not None:
        spark = connect_session(url, where)
        quiet_spark_loggers()
        return spark
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM, then this Python
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", _python())
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    master, where = _master_and_where(master)
    from pyspark import SparkContext

    active = SparkContext._active_spark_context
    if master is not None and (active is None or active.master != master):
        check_master(master, where)  # before the JVM: Spark itself would retry for a minute
    builder = SparkSession.builder.appName("evita")
    if master is not None:
        builder = builder.master(master)
    given = _submitted_settings() if submitted else {}  # (getOrCreate re-applies the rest to a running session)
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": os.environ.get("EVITA_SHUFFLE_PARTITIONS", "4"),
        "spark.default.parallelism": os.environ.get("EVITA_DEFAULT_PARALLELISM", "4"),
        "spark.driver.memory": os.environ.get("EVITA_DRIVER_MEMORY", "4g"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    from . import jvm_archive

    java_options = [
        # our quiet log4j2 config, unless the user's own conf dir has theirs. (Not by putting
        # a conf dir on the classpath: class-data sharing refuses a non-empty directory there.)
        "" if os.environ.get("SPARK_CONF_DIR") else f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}",
        "-XX:TieredStopAtLevel=1" if brief else "",  # JIT to C1 only: a JVM that runs a query or two starts 1-2 s sooner
        jvm_archive.options() if SparkContext._active_spark_context is None else "",  # Spark's classes mapped, not loaded
    ]
    if any(java_options):
        defaults["spark.driver.extraJavaOptions"] = " ".join(o for o in java_options if o)
    builder = builder.config("spark.sql.warehouse.dir", str(warehouse_dir(warehouse)))
    for key, value in defaults.items():
        if key not in given:
            builder = builder.config(key, value)
    from ..bootstrap.activity import doing

    with doing("the Spark start-up"), _signals_deferred(), _jvm_output_to(_spark_log(), stdout_too=brief), \
            _master_watched(master, where):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    quiet_spark_loggers()
    python = worker_python(spark)  # on a cluster: the package shipped; locally: a Python that imports Evita
    if python is not None:  # the session is Evita's: it keeps that Python
        spark.sparkContext.pythonExec = python
    from .executors import watch

    watch(spark_context(spark))  # on a cluster: no executor left means an error, not a wait without end
    return spark


# ---------------------------------------------------------------- Spark's own loggers

# PySpark's Python loggers that write to stderr by themselves: the query-context loggers
# print every AnalysisException as a JSON line with the Java stack trace in it (before
# Evita's one-line error), py4j logs a lost connection. The JVM's own logs go to
# `_spark_log()` (its stderr) with log4j2.properties.
SPARK_PYTHON_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_spark_logs: str = "untouched"  # the command line sets "quiet", or "shown" under --verbose


def spark_logs(shown: bool) -> None:
    """The command line's choice: Spark's own loggers are quiet unless `--verbose`
    (`shown`). Applied when a session starts (`quiet_spark_loggers`); a SparkSession the
    API is handed, in a program of the user's, keeps the user's logging."""
    global _spark_logs
    _spark_logs = "shown" if shown else "quiet"


def quiet_spark_loggers() -> None:
    """Silence PySpark's stderr loggers, when the command line asked (`spark_logs`)."""
    import logging

    if _spark_logs != "quiet":
        return
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark before 4.0 has no such loggers
        PySparkLogger = None
    for name in SPARK_PYTHON_LOGGERS if PySparkLogger is not None else ():
        # made as pyspark makes them (a PySparkLogger: it is called with keywords of its own)
        PySparkLogger.getLogger(name).disabled = True
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


class SparkOnDemand:
    """A SparkSession started the first time something uses it (`start()` makes it).

    A small `evita run` compiles and runs in this process (`runtime/here.py`) and needs
    no JVM; the code on its way (the stages, the catalog store) takes a session all the
    same, for the case where something turns out to need Spark after all: a catalog too
    large for the in-process evaluator, a function only Spark has. Passing this instead
    starts Spark exactly then, and only then."""

    def __init__(self, start):
        self._start = start
        self._spark = None

    @property
    def started(self) -> bool:
        return self._spark is not None

    def session(self):
        if self._spark is None:
            self._spark = self._start()
        return self._spark

    def __getattr__(self, name):
        return getattr(self.session(), name)


def not_started(spark) -> bool:
    """Is `spark` a session on demand that nothing has needed yet?"""
    return isinstance(spark, SparkOnDemand) and not spark.started


def real(spark):
    """The SparkSession itself (started if `spark` is one on demand)."""
    return spark.session() if isinstance(spark, SparkOnDemand) else spark


def is_remote(spark) -> bool:
    """Is `spark` a Spark Connect session (no SparkContext, no JVM in this process)?"""
    return type(real(spark)).__module__.startswith("pyspark.sql.connect")


def spark_context(spark):
    """The session's SparkContext, or None over Spark Connect, which has none: job
    counts, job groups and log levels are then the server's business."""
    return None if spark is None or not_started(spark) or is_remote(spark) else spark.sparkContext


def parallelism(spark) -> int:
    """How many tasks a stage of this session runs at once by default."""
    sc = spark_context(spark)
    if sc is not None:
        return sc.defaultParallelism
    value = spark.conf.get("spark.default.parallelism", None) or spark.conf.get("spark.sql.shuffle.partitions", "4")
    return int(value) if str(value).isdigit() else 4


def _submitted_settings() -> dict:
    """The settings spark-submit gave the JVM it started (its `--conf`, `--master`, the
    properties file), read through the gateway before any SparkContext exists."""
    from pyspark import SparkConf, SparkContext

    try:
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM: no new JVM
        return dict(SparkConf().getAll())
    except Exception:  # not what it looked like: no settings to respect
        return {}


# ---------------------------------------------------------------- the master

MASTER_TIMEOUT = float(os.environ.get("EVITA_MASTER_TIMEOUT", "5"))  # seconds per address


def _master_and_where(master: str | None):
    """The master to ask for and where it was given (for the diagnostic). Under
    `spark-submit` (its JVM hands Python `PYSPARK_GATEWAY_PORT`), no master given means
    spark-submit's own `--master`: None, the builder leaves it alone."""
    from .inputs import COMMAND_LINE

    if master:
        return master, COMMAND_LINE
    if os.environ.get("EVITA_MASTER"):
        from ..bootstrap.syntax import Span

        return os.environ["EVITA_MASTER"], Span("$EVITA_MASTER", 0, 0)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return None, COMMAND_LINE
    return DEFAULT_MASTER, COMMAND_LINE


def master_addresses(master: str) -> list:
    """The (host, port) pairs a master URL names, for the ones Evita can check before the
    JVM starts: `spark://H:P[,H2:P2]` (a standalone master, or several with ZooKeeper
    failover), `k8s://https://H[:P]` (the Kubernetes API server). Others (`local[...]`,
    `yarn`: its address is in the Hadoop configuration) give [].

    >>> master_addresses("spark://10.0.0.5:7077,10.0.0.6:7077")
    [('10.0.0.5', 7077), ('10.0.0.6', 7077)]
    >>> master_addresses("k8s://https://k8s.example.com"), master_addresses("local[*]")
    ([('k8s.example.com', 443)], [])
    """
    from urllib.parse import urlsplit

    if master.startswith("spark://"):
        out = []
        for part in master[len("spark://"):].split(","):
            host, _, port = part.strip().rstrip("/").rpartition(":")
            out.append((host.strip("[]") or part, int(port) if port.isdigit() else -1))
        return out
    if master.startswith("k8s://"):
        rest = master[len("k8s://"):]
        u = urlsplit(rest if "://" in rest else "https://" + rest)
        try:
            port = u.port or (80 if u.scheme == "http" else 443)
        except ValueError:
            port = -1
        return [(u.hostname or "", port)]
    return []


def check_master(master: str, where=None, timeout: float | None = None) -> None:
    """Raise an EvitaError (error[master-unreachable]) unless some address of `master`
    accepts a TCP connection within `timeout` seconds. Spark, asked for a standalone
    master that does not answer, retries its registration for a minute (three tries of
    20 s, fixed in `StandaloneAppClient`) and then leaves a stopped context behind: this
    says what is wrong in a few seconds, before any JVM starts."""
    import socket

    from ..bootstrap.diagnostics import Diagnostic, EvitaError

    if where is None:
        from .inputs import COMMAND_LINE as where
    timeout = MASTER_TIMEOUT if timeout is None else timeout
    addresses = master_addresses(master)
    if not addresses:
        return
    reasons = []
    for host, port in addresses:
        if not host or not (0 < port < 65536):
            reasons.append(f"{host or '?'}: no {'port' if host else 'host'} in the URL (spark://HOST:PORT)")
            continue
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.timeout:
            reasons.append(f"{host}:{port}: no answer within {timeout:g} s")
        except OSError as e:
            reasons.append(f"{host}:{port}: {e.strerror or e}")
    given = "--master" if str(where.file) == "<command line>" else str(where.file)
    if master.startswith("k8s://"):
        hint = (f"is the Kubernetes API server at that address, and reachable from here (kubectl cluster-info)? "
                f"Check the host and port in {given}, and that no firewall or proxy blocks it")
    else:
        hint = (f"is the master running? (on this machine: scripts/local-cluster status, "
                f"or scripts/local-cluster start); check the host and port in {given} (a standalone "
                f"master listens on 7077 unless told otherwise), and that no firewall blocks the port")
    raise EvitaError([Diagnostic("master-unreachable", f"cannot reach the Spark master {master}: "
                                 + "; ".join(reasons), where, master, hint)])


def _reachable(addresses, timeout: float) -> bool:
    import socket

    for address in addresses:
        try:
            with socket.create_connection(address, timeout=timeout):
                return True
        except OSError:
            pass
    return False


@contextlib.contextmanager
def _master_watched(master: str | None, where):
    """While Spark starts against a standalone master that passed `check_master`: should
    the master stop accepting connections (it went down after the check), stop the JVM
    this process started and raise error[master-unreachable], instead of Spark's minute
    of registration retries. Not under spark-submit (its JVM is not ours), nor when a
    JVM runs already."""
    import threading

    from pyspark import SparkContext

    addresses = master_addresses(master) if master and master.startswith("spark://") else []
    if not addresses or "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None:
        yield
        return
    done, fired = threading.Event(), []
    misses = int(os.environ.get("EVITA_MASTER_MISSES", "3"))
    register = float(os.environ.get("EVITA_REGISTER_TIMEOUT", "20"))

    def watch():
        missed, jvm_up = 0, None
        while not done.wait(1.0):
            missed = 0 if _reachable(addresses, 1.0) else missed + 1
            proc = getattr(SparkContext._gateway, "proc", None)
            if proc is not None and jvm_up is None:
                jvm_up = time.monotonic()
            if proc is None or done.is_set():
                continue
            if missed >= misses:
                fired.append("down")
            elif time.monotonic() - jvm_up > register:
                # A master takes an application at once; Spark would retry a silent one for a minute.
                fired.append("silent")
            else:
                continue
            proc.kill()  # spark-submit execs the JVM: this is it; the call in flight then fails
            return

    watcher = threading.Thread(target=watch, name="evita-master-watch", daemon=True)
    watcher.start()
    try:
        yield
    except Exception as e:
        if not fired:
            if "stopped SparkContext" in str(e):  # Spark gave up registering ("All masters are unresponsive")
                from ..bootstrap.diagnostics import Diagnostic, EvitaError

                raise EvitaError([Diagnostic(
                    "master-unreachable", f"the Spark master {master} accepted connections but did not take the "
                    "application: Spark gave up registering with it after a minute (its log: All masters are "
                    "unresponsive)", where, master,
                    "is that port a Spark master's? (not its web UI, 8080 by default: the master's URL is at the "
                    "top of that page); is the master the same Spark version as pyspark here?")]) from None
            raise
    finally:
        done.set()
    if fired:
        from ..bootstrap.diagnostics import Diagnostic, EvitaError

        SparkContext._gateway = SparkContext._jvm = None  # a later session starts a new JVM
        SparkContext._active_spark_context = None
        if fired[0] == "silent":
            raise EvitaError([Diagnostic(
                "master-unreachable", f"{master} accepted connections but did not take the application within "
                f"{register:g} s of the JVM's start (a Spark master takes one at once); Spark was stopped instead "
                f"of retrying for a minute", where, master,
                "is that port a Spark master's? (not its web UI, 8080 by default: the master's URL is at the top "
                "of that page); is the master the same Spark version as pyspark here, and not overloaded?")])
        raise EvitaError([Diagnostic(
            "master-unreachable", f"the Spark master {master} stopped accepting connections while Spark started "
            f"(it answered before the JVM started); Spark was stopped instead of retrying for a minute",
            where, master, "is the master still running? (on this machine: scripts/local-cluster status); "
            "its log says why it stopped")])


# ---------------------------------------------------------------- Evita on the executors

_shipped: set = set()


def is_local(master: str) -> bool:
    """Does this master run the executors inside the driver's JVM (so they see its Python path)?"""
    return master.startswith("local") and not master.startswith("local-cluster")


def ship_package(spark) -> None:
    """Give the executors Evita: unless they run in the driver's JVM (`local[...]`), the
    package's zip goes to every executor (`addPyFile`, once per SparkContext), so tasks that
    run Evita's Python (the in-task evaluator of `runtime/rounds.py`, the simulator's fan-out)
    import it from there and workers need no `pip install evita`. A driver that imports
    Evita from a zip got it from `spark-submit --py-files`, which ships it to the executors
    as well: nothing more is added."""
    if is_remote(spark):
        from .connect import ship_package_remote

        ship_package_remote(spark)
        return
    sc = spark.sparkContext
    if is_local(sc.master) or imported_from_zip() is not None:
        return  # in the driver's JVM, or Evita came as a zip (`--py-files`): the executors have it too
    key = (id(sc), sc.applicationId)
    if key in _shipped:
        return
    sc.addPyFile(str(package_zip()))
    _shipped.add(key)


# ---------------------------------------------------------------- the workers' Python

# What Evita's tasks import in a Python worker (`runtime/rounds.py`'s tasks, the
# simulator's mapInPandas): Evita itself, and what PySpark's Arrow exchange needs.
WORKER_MODULES = ("evita", "pandas", "pyarrow")
_PROBE = ("import importlib.util, json, sys; print(json.dumps({'version': '.'.join(map(str, sys.version_info[:2])), "
          f"'missing': [m for m in {WORKER_MODULES!r} if importlib.util.find_spec(m) is None]}}))")
_worker_python_of: dict = {}  # (id(sc), applicationId) -> the interpreter Evita's tasks run, or None: as set


def probe_python(python: str) -> dict:
    """What the interpreter `python` (a path, or a name looked up on PATH as Spark looks
    it up) is: {"version": "3.11", "missing": [modules of WORKER_MODULES it cannot
    import]}, or {"error": why} when it does not run. Costs one small process (no
    module is imported: `find_spec` only looks)."""
    import json
    import subprocess

    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              cwd=tempfile.gettempdir())
        return json.loads(done.stdout) if done.returncode == 0 else {"error": _last_line(done.stderr)}
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return {"error": str(e)}


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no message)"


def worker_python(spark) -> str | None:
    """The Python that Evita's tasks must run in for this session's workers to import
    Evita, or None when the session's own (`sc.pythonExec`) does. Decided once per
    SparkContext.

    In local mode the workers run on this machine, with the interpreter PySpark took at
    the session's start (`$PYSPARK_PYTHON`, else `python3` on PATH: in a script run with
    a virtualenv's python, not activated, that is another Python without Evita). It is
    asked, cheaply (`probe_python`); one that cannot import Evita, pandas or pyarrow, or
    is another version, is replaced by this process's own, which can, and the `evita`
    logger says so. One with all but Evita gets Evita's package zip (`addPyFile`).
    On a cluster the executors get the zip (`ship_package`); what their Python lacks
    shows when a task fails, and `worker_failure` turns that into one EvitaError."""
    import logging

    sc = spark_context(spark)
    if sc is None:  # Spark Connect: the server's workers get the package (`ship_package`)
        ship_package(spark)
        return None
    key = (id(sc), sc.applicationId)
    if key in _worker_python_of:
        return _worker_python_of[key]
    chosen = None
    if not is_local(sc.master):
        ship_package(spark)
    elif sc.pythonExec != sys.executable and imported_from_zip() is None:
        found = probe_python(sc.pythonExec)
        driver = "%d.%d" % sys.version_info[:2]
        if found.get("version") == driver and found.get("missing") == ["evita"]:
            sc.addPyFile(str(package_zip()))  # the right Python, without Evita: ship it as to a cluster
        elif found.get("version") != driver or found.get("missing"):
            chosen = sys.executable
            if "evita" in probe_python(chosen).get("missing", ()):  # Evita imported from a path of this process only
                sc.addPyFile(str(package_zip()))
            why = (found["error"] if "error" in found else f"Python {found['version']}" +
                   (f" without {', '.join(found['missing'])}" if found.get("missing") else ""))
            logging.getLogger("evita").warning(
                "this Spark session's Python workers run %s (%s), which cannot run Evita's tasks; in local mode they "
                "run on this machine, so Evita's tasks use this Python instead: %s (set PYSPARK_PYTHON before the "
                "session starts to choose)", sc.pythonExec, why, chosen)
    _worker_python_of[key] = chosen
    return chosen


@contextlib.contextmanager
def workers_with_evita(spark):
    """Within the block, the Python functions Evita hands Spark run where Evita imports
    (`worker_python`). PySpark reads `sc.pythonExec` when it wraps a function (the plan
    of a DataFrame keeps it), so the session's own setting is back after the block: a
    session the user handed to the API stays theirs."""
    if spark is None or not_started(spark):
        yield
        return
    python = worker_python(spark)
    sc = spark_context(spark)
    if python is None or sc is None or sc.pythonExec == python:
        yield
        return
    before, sc.pythonExec = sc.pythonExec, python
    try:
        yield
    finally:
        sc.pythonExec = before


def worker_failure(e: BaseException):
    """An EvitaError that says what to set, when `e` is Spark reporting that a Python
    worker could not run Evita's tasks (another Python version than the driver's, or a
    module it cannot import); else None."""
    import re

    from ..bootstrap.diagnostics import Diagnostic, EvitaError
    from .inputs import COMMAND_LINE

    text = str(e)
    driver = "%d.%d" % sys.version_info[:2]
    versions = re.search(r"Python in worker has different version:?\s*(\S+)\s+than that in driver:?\s*(\S+)", text)
    module = re.search(r"ModuleNotFoundError: No module named '([^']+)'", text)
    if versions:
        worker = versions.group(1).rstrip(",")
        message = f"Spark's Python workers run Python {worker}; this driver runs {versions.group(2).rstrip(',')}"
        hint = (f"give the workers a Python {driver} with pandas and pyarrow: set PYSPARK_PYTHON to its path "
                f"(as the workers see it) before the session starts, or spark-submit --conf "
                f"spark.pyspark.python=PATH")
    elif module and module.group(1).split(".")[0] in WORKER_MODULES:
        name = module.group(1).split(".")[0]
        message = f"Spark's Python workers cannot import {name}"
        hint = ("ship Evita to the executors: spark-submit --py-files evita.zip (made by `evita package`), "
                "or pip install evita on every worker" if name == "evita" else
                f"pip install pandas pyarrow into the workers' Python, or set PYSPARK_PYTHON before the session "
                f"starts (spark-submit: --conf spark.pyspark.python=PATH) to a Python {driver} that has them")
    else:
        return None
    return EvitaError([Diagnostic("worker-python", message, COMMAND_LINE, "", hint)])


def _spark_log() -> Path:
    return Path(os.environ.get("EVITA_SPARK_LOG") or Path(tempfile.gettempdir()) / "evita-spark.log")


@contextlib.contextmanager
def _jvm_output_to(log: Path, stdout_too: bool = False):
    """The JVM inherits file descriptor 2 when it starts: point it at a log file so
    Spark's start-up chatter stays out of the user's terminal (errors still reach Python
    as exceptions). A session that already runs is simply returned.

    `stdout_too` (a brief command, `evita sql`): descriptor 1 as well. The JVM outlives
    this process by its shutdown (0.5-1 s), and whoever reads this command's output
    through a pipe (`| less`, a script) waits for every holder of the pipe to close it;
    nothing of Spark's JVM belongs in the answer."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        yield
        return
    fds = (1, 2) if stdout_too else (2,)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in fds}
    try:
        with open(log, "ab") as target:
            for fd in fds:
                os.dup2(target.fileno(), fd)
            try:
                yield
            finally:
                for fd in fds:
                    os.dup2(saved[fd], fd)
    finally:
        for fd in fds:
            os.close(saved[fd])


@contextlib.contextmanager
def _signals_deferred():
    """Ctrl-C (or SIGTERM) while the JVM starts would leave it running with no Python to
    stop it (py4j's server thread keeps it alive). Hold the signal until Spark is up,
    then raise it: the stop is then clean, and the JVM ends with this process."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list = []
    handlers = {sig: signal.signal(sig, lambda signum, frame: got.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if got:
        handler = handlers[got[0]]
        if callable(handler):
            handler(got[0], None)  # Python's own (KeyboardInterrupt) or evita's (Stopped)
        raise KeyboardInterrupt


def _python() -> str:
    return sys.executable


@contextlib.contextmanager
def settings_for_a_while(spark, conf: dict):
    """Spark settings for the block, the session's own again after it (unset where it had none)."""
    saved = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


@contextlib.contextmanager
def settings_kept(spark):
    """The session's settings after the block are the ones it had before: a SparkSession
    the user handed to the API is theirs. The steps that need settings of their own
    (the engine's tuning, the catalog stages' one-partition plans) set and restore them
    already; this catches whatever one of them, or a later one, leaves behind."""
    before = _explicit_settings(spark)
    try:
        yield
    finally:
        after = _explicit_settings(spark)
        for key, value in before.items():
            if after.get(key) != value and spark.conf.isModifiable(key):
                spark.conf.set(key, value)
        for key in after.keys() - before.keys():
            if spark.conf.isModifiable(key):
                spark.conf.unset(key)


def _explicit_settings(spark) -> dict:
    """The settings given explicitly (Spark SQL's SET: a command, no Spark job)."""
    return {row[0]: row[1] for row in spark.sql("SET").collect()}
