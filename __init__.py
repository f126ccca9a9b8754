"""Evita: a declarative metacompiler for Datalog on Apache Spark.

The Python API (docs/api.md): `evita.compile(...)` gives a `Program`, whose `run(...)`
takes and gives Spark DataFrames. Loaded on first use, so `import evita` (and `evita
check`, which needs no Spark) stays fast: nothing here imports pyspark.
"""
from __future__ import annotations

__all__ = ["compile", "Program", "Result", "EvitaError"]


def __getattr__(name: str):
    if name == "EvitaError":
        from .bootstrap.diagnostics import EvitaError

        return EvitaError
    if name in ("compile", "Program", "Result"):
        from .runtime import api

        return getattr(api, name)
    raise AttributeError(f"module 'evita' has no attribute {name!r}")
