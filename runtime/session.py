"""The SparkSession Evita runs on, with settings tuned for small data.

Spark charges a fixed price per job, so the defaults keep jobs cheap: few shuffle
partitions, no UI, quiet logs. The warehouse directory holds the persisted catalog
(`EVITA_WAREHOUSE`, default `./evita-warehouse`).
"""
from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MASTER = "local[*]"
_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def warehouse_dir(path: str | os.PathLike | None = None) -> Path:
    return Path(path or os.environ.get("EVITA_WAREHOUSE") or "evita-warehouse").resolve()


def spark_session(master: str | None = None, warehouse: str | os.PathLike | None = None):
    """Get or create the session. Settings only apply when the JVM starts here."""
    os.environ.setdefault("PYSPARK_PYTHON", _python())
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
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={_LOG_CONFIG}")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _python() -> str:
    import sys

    return sys.executable
