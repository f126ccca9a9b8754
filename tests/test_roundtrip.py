"""parse -> encode -> (Spark store -> load) -> print -> parse -> encode gives the same catalog.

For every example program and for generated ones. The generated loop runs without Spark
(~200 programs); a handful more go through the Spark tables.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from evita.bootstrap.parser import parse_file, parse_program
from evita.catalog import store
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program, print_catalog
from evita.catalog.rows import diff

from conftest import EXAMPLES
from strategies import programs

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))


def assert_same_catalog(a, b, text: str) -> None:
    d = diff(a, b)
    assert not d, f"catalogs differ after printing:\n{d}\n--- printed text:\n{text}"


def reprinted(program, rows):
    """Print the rows' program, parse the text again, encode it."""
    text = print_catalog(rows, program.name)
    again = parse_program(text, f"{program.name}.printed", program.name)
    return encode(again), text


def test_there_are_examples():
    assert len(EXAMPLE_FILES) >= 5


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_round_trip(path):
    program = parse_file(path)
    rows = encode(program)
    assert decode(rows, program.name) == program
    rows2, text = reprinted(program, rows)
    assert_same_catalog(rows, rows2, text)
    assert format_program(parse_program(text, "again", program.name)) == text  # canonical


@settings(max_examples=int(os.environ.get("EVITA_ROUNDTRIP_EXAMPLES", "50")), deadline=None)
@given(programs())
def test_generated_round_trip(program):
    rows = encode(program)
    assert decode(rows, program.name) == program
    rows2, text = reprinted(program, rows)
    assert_same_catalog(rows, rows2, text)


@pytest.fixture(scope="module")
def catalog(spark):
    store.attach(spark)
    return spark


def test_examples_round_trip_through_spark(catalog):
    spark = catalog
    originals = {}
    for path in EXAMPLE_FILES:
        program = parse_file(path)
        originals[program.name] = (program, encode(program))
        store.save_program(spark, originals[program.name][1])
    through_spark = store.load_all(spark, list(originals), store.PER_PROGRAM)  # one Spark job
    for name, (program, rows) in originals.items():
        loaded = store.load_rows(spark, name)
        assert loaded == rows.sorted(), diff(rows, loaded, compared=False)
        assert through_spark.only(name) == loaded
        rows2, text = reprinted(program, loaded)
        assert_same_catalog(rows, rows2, text)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_statements=6))
def test_generated_round_trip_through_spark(catalog, program):
    program = type(program)(f"hyp_{program.name}", program.statements, program.path, program.dialect)
    rows = encode(program)
    store.save_program(catalog, rows)
    loaded = store.load_rows(catalog, program.name, engine="spark")
    assert loaded == rows.sorted(), diff(rows, loaded, compared=False)
    rows2, text = reprinted(program, loaded)
    assert_same_catalog(rows, rows2, text)
