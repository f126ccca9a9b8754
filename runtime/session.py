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
import warnings
from pathlib import Path

DEFAULT_MASTER = "local[*]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def warehouse_dir(path: str | os.PathLike | None = None):
    """The warehouse (`catalog.fs.Loc`): a local path, a file:// URI, or on a cluster a
    shared filesystem or object store every executor sees (hdfs://..., s3a://...)."""
    from ..catalog.fs import Loc

    return Loc.of(path or os.environ.get("EVITA_WAREHOUSE") or "evita-warehouse")


def spark_session(master: str | None = None, warehouse: str | os.PathLike | None = None):
    """Get or create the session. Settings only apply when the JVM starts here."""
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    # Spark puts its conf dir on the driver's classpath, where log4j2 finds our quiet config.
    os.environ.setdefault("SPARK_CONF_DIR", str(_LOG_CONFIG.parent))
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    master = master or os.environ.get("EVITA_MASTER") or DEFAULT_MASTER
    builder = (
        SparkSession.builder.appName("evita")
        .master(master)
        .config("spark.sql.warehouse.dir", str(warehouse_dir(warehouse)))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("EVITA_SHUFFLE_PARTITIONS", "4"))
        .config("spark.default.parallelism", "4")
        .config("spark.driver.memory", os.environ.get("EVITA_DRIVER_MEMORY", "4g"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    from ..bootstrap.activity import doing

    with doing("the Spark start-up"), _signals_deferred(), _jvm_stderr_to(_spark_log()):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship_package(spark)
    return spark


# ---------------------------------------------------------------- Evita on the executors

_PACKAGE_FILES = (".py", ".dl", ".lark", ".properties")
_PACKAGE_DIRS = ("bootstrap", "catalog", "runtime", "stages")  # pyproject's packages, under the root
_zip: Path | None = None
_shipped: set = set()


def is_local(master: str) -> bool:
    """Does this master run the executors inside the driver's JVM (so they see its Python path)?"""
    return master.startswith("local") and not master.startswith("local-cluster")


def package_zip() -> Path:
    """A zip of the `evita` package this process runs (what pip installed, or a checkout),
    built once per process, named by its content hash (EVITA_PYFILES_DIR, default the temp dir)."""
    global _zip
    if _zip is not None and _zip.exists():
        return _zip
    import hashlib
    import io
    import zipfile

    root = Path(__file__).resolve().parent.parent
    files = sorted(p for p in root.glob("*") if p.is_file() and p.suffix in _PACKAGE_FILES)
    for d in _PACKAGE_DIRS:
        files += sorted(p for p in (root / d).rglob("*") if p.is_file() and p.suffix in _PACKAGE_FILES
                        and "__pycache__" not in p.parts)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in files:  # fixed timestamps: the same sources give the same bytes, hence the same name
            info = zipfile.ZipInfo(f"evita/{p.relative_to(root).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, p.read_bytes())
    data = buf.getvalue()
    out_dir = Path(os.environ.get("EVITA_PYFILES_DIR") or tempfile.gettempdir()) / "evita-pyfiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"evita-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    _zip = target
    return target


def ship_package(spark) -> None:
    """Give the executors Evita: unless they run in the driver's JVM (`local[...]`), the
    package's zip goes to every executor (`addPyFile`, once per SparkContext), so tasks that
    run Evita's Python (the in-task evaluator of `runtime/local.py`, the simulator's fan-out)
    import it from there and workers need no `pip install evita`."""
    sc = spark.sparkContext
    if is_local(sc.master):
        return
    key = (id(sc), sc.applicationId)
    if key in _shipped:
        return
    sc.addPyFile(str(package_zip()))
    _shipped.add(key)


def _spark_log() -> Path:
    return Path(os.environ.get("EVITA_SPARK_LOG") or Path(tempfile.gettempdir()) / "evita-spark.log")


@contextlib.contextmanager
def _jvm_stderr_to(log: Path):
    """The JVM inherits file descriptor 2 when it starts: point it at a log file so
    Spark's start-up chatter stays out of the user's terminal (errors still reach Python
    as exceptions). A session that already runs is simply returned."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


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
