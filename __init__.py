"""Evita: a declarative metacompiler for Datalog on Apache Spark.

The Python API (docs/api.md): `evita.compile(...)` gives a `Program`, whose `run(...)`
takes and gives Spark DataFrames. Loaded on first use, so `import evita` (and `evita
check`, which needs no Spark) stays fast: nothing here imports pyspark.
"""
from __future__ import annotations

__all__ = ["compile", "Program", "Result", "EvitaError", "__version__"]


def _version() -> str:
    """The installed package's version (its metadata, from pyproject.toml at install);
    from a checkout that is not installed, pyproject.toml's own, marked `+checkout`."""
    from importlib import metadata

    try:
        return metadata.version("evita")
    except metadata.PackageNotFoundError:
        import re
        from pathlib import Path

        try:
            text = (Path(__file__).resolve().parent / "pyproject.toml").read_text()
        except OSError:
            return "unknown"
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
        return f"{m.group(1)}+checkout" if m else "unknown"


def __getattr__(name: str):
    if name == "__version__":
        return _version()
    if name == "EvitaError":
        from .bootstrap.diagnostics import EvitaError

        return EvitaError
    if name in ("compile", "Program", "Result"):
        from .runtime import api

        return getattr(api, name)
    raise AttributeError(f"module 'evita' has no attribute {name!r}")
