"""The Soufflé conformance corpus (tests/souffle/, issue 12), run by `evita test-suite`'s
runner (runtime/conformance.py) in this test run's SparkSession: every case as `evita run
prog.dl -F facts -D out` runs it, its outputs compared with expected/ as sorted lines.
Cases listed in tests/souffle/KNOWN_FAILURES must fail; any other case must pass."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from evita.bootstrap.cli import main
from evita.runtime import conformance as C

CORPUS = Path(__file__).resolve().parent / "souffle"


@pytest.mark.extended  # ~160 programs (90 s): the test_souffle_* files test each construct in the suite
def test_the_corpus_passes_but_for_its_known_failures(spark):
    started = time.perf_counter()
    outcomes = C.run_suite(spark, CORPUS)
    seconds = time.perf_counter() - started
    assert len(outcomes) >= 150
    assert len({o.case.construct for o in outcomes}) >= 20
    bad = C.failed(outcomes)
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    print(f"{len(outcomes)} cases in {seconds:.1f} s; slowest: "
          + ", ".join(f"{o.case.id} {o.seconds:.1f} s" for o in slowest))
    print(C.markdown_table(outcomes))
    assert not bad, "\n".join(f"{o.status} {o.case.id}: {o.problem}" for o in bad)


def _case(root: Path, case: str, prog: str, expected: dict, facts: dict = ()) -> None:
    d = root / case
    (d / "expected").mkdir(parents=True)
    (d / "prog.dl").write_text(prog)
    for name, text in dict(facts).items():
        (d / "facts").mkdir(exist_ok=True)
        (d / "facts" / name).write_text(text)
    for name, text in expected.items():
        (d / "expected" / name).write_text(text)


PROG = ".decl e(x: number, y: number)\n.input e\n.decl r(x: number)\n.output r\nr(y) :- e(_, y).\n"


def test_the_runner_tells_pass_fail_known_failure_and_unexpected_pass(spark, tmp_path):
    _case(tmp_path, "io/good", PROG, {"r.csv": "3\n2\n"}, {"e.facts": "1\t2\n2\t3\n"})  # sorted lines compare
    _case(tmp_path, "io/wrong", PROG, {"r.csv": "2\n"}, {"e.facts": "1\t2\n2\t3\n"})
    _case(tmp_path, "io/known", PROG, {"r.csv": "9\n"}, {"e.facts": "1\t2\n"})
    _case(tmp_path, "io/honest", PROG, {"r.csv": "2\n"}, {"e.facts": "1\t2\n"})
    _case(tmp_path, "types/rejected", ".decl a(x: Colour)\n.output a\na(1).\n", {"error.txt": "Colour\n"})
    _case(tmp_path, "types/ran", ".decl a(x: number)\n.output a\na(1).\n", {"error.txt": "Colour\n"})
    _case(tmp_path, "types/extra_file", ".decl a(x: number)\n.output a\n.output a(filename=\"b.csv\")\na(1).\n",
          {"a.csv": "1\n"})
    (tmp_path / "KNOWN_FAILURES").write_text("# why each fails\nio/known  expects 9\nio/honest  listed, but passes\n")
    got = {o.case.id: (o.status, o.problem) for o in C.run_suite(spark, tmp_path)}
    assert {k: s for k, (s, _) in got.items()} == {
        "io/good": C.PASS, "io/wrong": C.FAIL, "io/known": C.XFAIL, "io/honest": C.XPASS,
        "types/rejected": C.PASS, "types/ran": C.FAIL, "types/extra_file": C.FAIL}
    assert got["io/wrong"][1] == "r.csv: missing []; unexpected ['3']"
    assert got["types/ran"][1].startswith("ran, but a diagnostic was expected")
    assert got["types/extra_file"][1] == "b.csv: written, but not in expected/"
    assert "take it off the list" in got["io/honest"][1]


def test_a_known_failure_that_names_no_case_or_gives_no_reason_is_an_error(spark, tmp_path):
    _case(tmp_path, "io/good", PROG, {"r.csv": "2\n"}, {"e.facts": "1\t2\n"})
    (tmp_path / "KNOWN_FAILURES").write_text("io/gone  it was deleted\n")
    assert main(["test-suite", str(tmp_path)]) == 1
    (tmp_path / "KNOWN_FAILURES").write_text("io/good\n")
    assert main(["test-suite", str(tmp_path)]) == 1


def test_the_command_prints_the_table_and_exits_by_the_outcome(spark, tmp_path, capsys):
    _case(tmp_path, "io/good", PROG, {"r.csv": "2\n"}, {"e.facts": "1\t2\n"})
    _case(tmp_path, "types/wrong", PROG, {"r.csv": "5\n"}, {"e.facts": "1\t2\n"})
    assert main(["test-suite", str(tmp_path), "--construct", "io", "-v"]) == 0
    out = capsys.readouterr().out
    assert "pass  io/good" in out and "types" not in out and "1 passed" in out
    assert main(["test-suite", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  types/wrong" in out and "1 failed" in out


def test_an_options_file_gives_a_construct_or_a_case_its_run_options(spark, tmp_path):
    """`options` in a construct's folder holds for its cases, a case's own come after:
    the overflow cases run at 32 bits as Soufflé's default build does."""
    wrap = ".decl r(x: number)\n.output r\nr(2147483647 + 1).\n"
    _case(tmp_path, "overflow/wraps", wrap, {"r.csv": "-2147483648\n"})
    _case(tmp_path, "overflow/own", wrap, {"r.csv": "2147483648\n"})
    _case(tmp_path, "io/bad_options", wrap, {"r.csv": "2147483648\n"})
    (tmp_path / "overflow" / "options").write_text("--number-bits 32  # Soufflé's default build\n")
    (tmp_path / "overflow" / "own" / "options").write_text("--number-bits 64\n")
    (tmp_path / "io" / "bad_options" / "options").write_text("--number-bits 16\n")
    got = {o.case.id: (o.status, o.problem) for o in C.run_suite(spark, tmp_path)}
    assert got["overflow/wraps"] == (C.PASS, "") and got["overflow/own"] == (C.PASS, "")
    assert got["io/bad_options"][0] == C.FAIL and "--number-bits 16" in got["io/bad_options"][1]
