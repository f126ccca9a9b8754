"""Shared fixtures: one SparkSession for the whole run, a fresh warehouse per session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("warehouse")
    os.environ["EVITA_WAREHOUSE"] = str(path)
    return path


@pytest.fixture(scope="session")
def spark(warehouse):
    from evita.runtime.session import spark_session

    session = spark_session(master="local[2]", warehouse=warehouse)
    yield session
    session.stop()
