"""Fuzzing the front end: random bytes and mutated example programs go through what
`evita check` and `evita load` do before Spark (read, parse, check, IO parameters, catalog
encoding). The only outcomes allowed are success or an EvitaError whose diagnostics are
positioned in the file and render; any other exception is a bug.

CI runs a few hundred derandomized cases per test. Offline, run thousands:

    EVITA_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz.py
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evita.bootstrap.checks import check_program
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_file
from evita.catalog.encode import encode
from evita.runtime.inputs import check_io_params

from conftest import EXAMPLES

OFFLINE = int(os.environ.get("EVITA_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=OFFLINE or 200, derandomize=not OFFLINE, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROGRAMS = [p.read_text() for p in sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))]
# Pieces of Overlog and Soufflé, so that mutations make near-programs, not only noise.
TOKENS = ["(", ")", ",", ".", ":-", ":=", "!", "=", "==", "<", ">", "@", "_", "\"", "'", "{", "}", "[", "]",
          "X", "Y", "_x", "a", "path", "0", "-1", "1.5", "notin ", "delta ", "delete ", "@next", "@async",
          "count<X>", "min<C>", "autoinc<*>", "autoinc()", ".decl ", ".input ", ".output ", ".limitsize ", "(n=3)",
          ": number", ": symbol", "sys::rule",
          "query ", "define(", "keys(0)", "materialize(", "component ", "f_cons(", "/*", "*/", "//", "\n",
          "\t", " ", "\\", "\u00e9", "\u201c", "\x00", "\ufeff", "r1 ", ";", "|", "#"]


def front_end(path):
    """What check/load do before Spark; raises only EvitaError on bad input."""
    program = check_program(parse_file(path))
    problems = check_io_params(program)
    if problems:
        raise EvitaError(problems, source=program.text, source_file=program.path)
    encode(program)


def only_positioned_diagnostics(tmp_path, data: bytes):
    path = tmp_path / "fuzz.olg"
    path.write_bytes(data)
    try:
        front_end(path)
    except EvitaError as e:
        assert e.diagnostics
        for d in e.diagnostics:
            assert d.code and d.message and d.span.file == str(path), d
            assert d.span.line >= 0 and d.span.col >= 0
        assert e.render()


@FUZZ
@given(data=st.binary(max_size=600))
def test_random_bytes(tmp_path, data):
    only_positioned_diagnostics(tmp_path, data)


mutation = st.one_of(
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 40)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5)),
    st.tuples(st.just("text"), st.floats(0, 1), st.text(max_size=6)),
    st.tuples(st.just("duplicate"), st.floats(0, 1), st.integers(1, 200)),
    st.tuples(st.just("byte"), st.floats(0, 1), st.integers(128, 255)),
)


def mutate(text: str, mutations: list) -> bytes:
    data = text.encode("utf-8")
    for kind, where, arg in mutations:
        at = int(where * len(data))
        if kind == "delete":
            data = data[:at] + data[at + arg:]
        elif kind == "insert":
            data = data[:at] + "".join(arg).encode("utf-8") + data[at:]
        elif kind == "text":
            data = data[:at] + arg.encode("utf-8", "surrogatepass") + data[at:]
        elif kind == "duplicate":
            data = data[:at] + data[at:at + arg] + data[at:]
        else:
            data = data[:at] + bytes([arg]) + data[at:]
    return data


@FUZZ
@given(source=st.sampled_from(PROGRAMS), mutations=st.lists(mutation, min_size=1, max_size=4))
def test_mutated_example_programs(tmp_path, source, mutations):
    only_positioned_diagnostics(tmp_path, mutate(source, mutations))


def test_unmutated_examples_pass(tmp_path):
    for text in PROGRAMS:
        (tmp_path / "ok.olg").write_text(text)
        front_end(tmp_path / "ok.olg")
