"""Fuzzing the front end: random bytes and mutated example programs go through what
`evita check` and `evita load` do before Spark (read, parse, check, IO parameters, catalog
encoding). The only outcomes allowed are success or an EvitaError whose diagnostics are
positioned in the file and render; any other exception is a bug.

CI runs a few hundred derandomized cases per test. Offline, run thousands:

    EVITA_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz.py
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("drop_token"), st.floats(0, 1), st.integers(1, 3)),
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
        elif kind == "flip":  # one byte xor-ed: a letter becomes another, or a byte that is not UTF-8
            data = data[:at] + bytes([data[at] ^ arg]) + data[at + 1:] if at < len(data) else data
        elif kind == "truncate":
            data = data[:at]
        elif kind == "drop_token":  # `arg` whitespace-separated tokens from the one at `at` on
            start = data.rfind(b" ", 0, at) + 1
            end = start
            for _ in range(arg):
                space = data.find(b" ", end + 1)
                end = len(data) if space < 0 else space
            data = data[:start] + data[end:]
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


# ---------------------------------------------------------------- through the command line
# Malformed programs and facts files through `evita`'s own `main`, in one process (each
# case as a user's command, output captured), and a few as real processes. Allowed:
# exit 0, or exit 1 with an error line in the house style; never a traceback, never Java,
# never the catch-all of an unexpected exception ("run again with --verbose").
# CI's suite runs a sample; `pytest -m extended` runs 1,000 of each (docs/reliability.md).

SWEEP_SEED = 36
SWEEP_SAMPLE = int(os.environ.get("EVITA_SWEEP_SAMPLE", "25"))  # of each kind, in the suite
SWEEP_FULL = 1000  # of each kind, in the extended tier
SWEEP_PROCESSES = 6  # of them also as real subprocesses (13 s each here: CI's time budget)
# A program reading one relation of each Soufflé column type, and rows it reads.
FACTS_PROGRAM = """.decl e(n: number, s: symbol, u: unsigned, f: float)
.input e
.decl o(n: number, s: symbol, u: unsigned, f: float)
.output o
o(n, s, u, f) :- e(n, s, u, f), n > -1000000.
"""
GOOD_ROWS = [f"{i}\tname{i}\t{abs(i) * 7}\t{i / 4}" for i in range(-3, 17)]
BAD_VALUES = ["12x", "", " 3", "--3", "0x1F", "1e999", "9223372036854775808", "-1", "1.2.3", "nan", "inf", "true",
              "\u00e9", "\"quoted\"", "\\", "3\r", "9" * 400]
ONE_STAGE = ["--only", "delta"]  # a file that reads runs after a compile of one stage: the reading is under test
HOUSE_STYLE = re.compile(r"^(?:\S[^\n]*: )?(?:error|warning)(?:\[[a-z0-9-]+\])?: ", re.M)
NOT_FOR_USERS = ("Traceback", "at org.apache", "java.lang.", "py4j", "run again with --verbose")


def malformed_programs(n: int, seed: int = SWEEP_SEED) -> list:
    """`n` mutations of the example programs (the kinds of `mutation` above), derandomized."""
    rng = random.Random(seed)
    kinds = ["delete", "insert", "text", "duplicate", "byte", "flip", "truncate", "drop_token"]
    out = []
    for _ in range(n):
        mutations = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(kinds)
            arg = {"delete": lambda: rng.randint(1, 40), "insert": lambda: rng.choices(TOKENS, k=rng.randint(1, 5)),
                   "text": lambda: "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(128, 0x2FFF)]))
                                           for _ in range(rng.randint(0, 6))),
                   "duplicate": lambda: rng.randint(1, 200), "byte": lambda: rng.randint(128, 255),
                   "flip": lambda: rng.randint(1, 255), "truncate": lambda: 0,
                   "drop_token": lambda: rng.randint(1, 3)}[kind]()
            mutations.append((kind, rng.random(), arg))
        out.append(mutate(rng.choice(PROGRAMS), mutations))
    return out


def malformed_facts(n: int, seed: int = SWEEP_SEED) -> list:
    """`n` facts files for FACTS_PROGRAM's `e`: good rows with one to three faults each
    (wrong column counts, bad numbers, bad UTF-8, huge fields, empty lines, mixed
    delimiters, stray bytes), derandomized."""
    rng = random.Random(seed)

    def fault(rows: list) -> list:
        at = rng.randrange(len(rows) + 1)
        line = rows[at] if at < len(rows) else rng.choice(GOOD_ROWS).encode()
        fields = line.split(b"\t")
        kind = rng.randrange(12)
        if kind == 0:  # a column too few or too many
            fields = fields[:-1] if rng.random() < 0.5 else fields + [b"7"]
        elif kind in (1, 2):  # a bad value in a typed column
            fields[rng.choice([0, 2, 3][:len(fields) - 1] or [0])] = rng.choice(BAD_VALUES).encode()
        elif kind == 3:  # bytes that are not UTF-8
            fields[rng.randrange(len(fields))] += rng.choice([b"\xff", b"\xe2\x82", b"\xc3", b"\xed\xa0\x80"])
        elif kind == 4:  # a huge field: a symbol (it reads) or a number (it does not)
            fields[rng.randrange(min(2, len(fields)))] = rng.choice([b"x", b"9"]) * rng.randint(10_000, 300_000)
        elif kind == 5:  # empty or blank lines
            rows.insert(at, rng.choice([b"", b" ", b"\t", b"\t\t\t"]))
            return rows
        elif kind == 6:  # a comma or a semicolon where a tab belongs
            return rows[:at] + [rng.choice([b",", b";", b" "]).join(fields)] + rows[at + 1:]
        elif kind == 7:  # a NUL, a BOM, a lone carriage return
            fields[rng.randrange(len(fields))] += rng.choice([b"\x00", b"\xef\xbb\xbf", b"\r", b"\x1b[31m"])
        elif kind == 8:  # the file cut mid-line
            return rows[:at] + [b"\t".join(fields)[:rng.randrange(1, len(line) + 1)]]
        elif kind == 9:  # random bytes for a line
            return rows[:at] + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))] + rows[at + 1:]
        elif kind == 10:  # a row quoted as CSV would quote it
            fields = [b'"' + f + b'"' for f in fields]
        else:  # every field of a line empty
            fields = [b""] * len(fields)
        return rows[:at] + [b"\t".join(fields)] + rows[at + 1:]

    out = []
    for _ in range(n):
        rows = [r.encode() for r in GOOD_ROWS]
        for _ in range(rng.randint(1, 3)):
            rows = fault(rows)
        out.append(b"\n".join(rows) + rng.choice([b"\n", b"", b"\r\n"]))
    return out


def _through_main(argv: list) -> tuple:
    """(exit code, stdout + stderr) of one command through `evita`'s main, in this process."""
    from evita.bootstrap.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse
            code = e.code
    return code, out.getvalue() + err.getvalue()


def _as_a_user_sees_it(code, said: str, case) -> None:
    assert code in (0, 1), (case, code, said[-2000:])
    assert max(map(len, said.splitlines()), default=0) <= 400, (case, said[:3000])  # a huge field is not echoed
    for bad in NOT_FOR_USERS:
        assert bad not in said, (case, said[-3000:])
    if code == 1:
        assert HOUSE_STYLE.search(said), (case, said[-2000:])


def sweep(folder, programs: list, facts: list, processes: int = 0) -> dict:
    """Each malformed program through `evita load` (parse, check, store), each facts file
    through `evita run FACTS_PROGRAM -F DIR -D OUT`; `processes` of them again (half
    programs, half facts files) as real `evita` processes. Returns counts and seconds."""
    folder = Path(folder)
    program = folder / "typed.dl"
    program.write_text(FACTS_PROGRAM)
    counts = {"programs": 0, "programs rejected": 0, "facts files": 0, "facts rejected": 0, "processes": 0}
    started = time.perf_counter()
    for i, data in enumerate(programs):
        path = folder / f"m{i % 10}.olg"  # ten names: load stores ten programs, replaced
        path.write_bytes(data)
        code, said = _through_main(["load", path])
        _as_a_user_sees_it(code, said, ("program", i, data[:3000]))
        counts["programs"] += 1
        counts["programs rejected"] += code == 1
    counts["program seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    facts_dir = folder / "facts"
    facts_dir.mkdir(exist_ok=True)
    for i, data in enumerate(facts):
        (facts_dir / "e.facts").write_bytes(data)
        code, said = _through_main(["run", program, "-F", facts_dir, "-D", folder / "out", "--quiet", *ONE_STAGE])
        _as_a_user_sees_it(code, said, ("facts", i, data[:3000]))
        counts["facts files"] += 1
        counts["facts rejected"] += code == 1
    counts["facts seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    cases = ([("load", d, None) for d in programs[:processes - processes // 2]]
             + [("run", None, d) for d in facts[:processes // 2]])
    for i, (command, text, rows) in enumerate(cases):
        if command == "load":
            (folder / "p.olg").write_bytes(text)
            argv = ["load", folder / "p.olg"]
        else:
            (facts_dir / "e.facts").write_bytes(rows)
            argv = ["run", program, "-F", facts_dir, "-D", folder / "out", "--quiet", *ONE_STAGE]
        done = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", *map(str, argv)], env=env, cwd=folder,
                              capture_output=True, text=True, timeout=300)
        _as_a_user_sees_it(done.returncode, done.stdout + done.stderr, ("process", command, i))
        counts["processes"] += 1
    counts["process seconds"] = round(time.perf_counter() - started, 1)
    return counts


@pytest.fixture
def sweep_env(tmp_path, monkeypatch, warehouse):
    """A warehouse of the test's own; the run's cache of compiled stages (`warehouse`)."""
    monkeypatch.setenv("EVITA_WAREHOUSE", str(tmp_path / "wh"))
    return tmp_path


def test_malformed_programs_and_facts_through_the_command_line(sweep_env):
    counts = sweep(sweep_env, malformed_programs(SWEEP_SAMPLE), malformed_facts(SWEEP_SAMPLE), processes=1)
    print(counts)
    assert counts["programs rejected"] and counts["facts rejected"]  # the generators do make bad input


@pytest.mark.extended
def test_a_thousand_malformed_programs_and_facts_files_through_the_command_line(sweep_env):
    counts = sweep(sweep_env, malformed_programs(SWEEP_FULL), malformed_facts(SWEEP_FULL), processes=SWEEP_PROCESSES)
    print(counts)
    assert counts["programs"] == counts["facts files"] == SWEEP_FULL and counts["processes"] == SWEEP_PROCESSES
