"""A real program analysis through Evita: examples/analysis/points_to.dl, a Doop-style
points-to and call-graph analysis of some 340 rules (issue 35, "compile at scale").

The hand-written facts (examples/analysis/points_to_facts/, a dozen classes) have answers
worked out by hand in their README. The same rows must come from every path: in this
process, on Spark, in the oracle (runtime/oracle.py, the reference evaluator), and with
the optimizing stages left out (`--only delta`). Each path runs once for the module.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from evita.bootstrap import syntax as S
from evita.bootstrap.cli import main
from evita.bootstrap.types import TypeSystem

import oracle

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "examples" / "analysis" / "points_to.dl"
FACTS = REPO / "examples" / "analysis" / "points_to_facts"
MAIN = "<Main: void main(java.lang.String[])>"
CHECK = "<Main: void check(java.lang.Object)>"


def through_cli(*argv) -> str:
    """What `evita ARGV` prints, run in this process; it must succeed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert code == 0, err.getvalue()
    return out.getvalue()


def written(directory: Path) -> dict:
    """relation -> sorted rows (tuples of text) of the .csv files a run wrote with -D."""
    return {f.stem: sorted(tuple(line.split("\t")) for line in f.read_text().splitlines())
            for f in sorted(directory.glob("*.csv"))}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """{path: rows}: one `evita run` per path, through the command line in this process
    (every stage on; only delta, the optimizing stages left out)."""
    return {path: run_rows(tmp_path_factory.mktemp(path), *extra)
            for path, extra in (("here", []), ("unoptimized", ["--only", "delta"]))}


def run_rows(folder: Path, *extra) -> dict:
    through_cli("run", PROGRAM, "-F", FACTS, "-D", folder, "-q", *extra)
    return written(folder)


def test_the_analysis_compiles_through_every_stage(spark, monkeypatch):
    from conftest import lattice_order

    monkeypatch.setenv("COLUMNS", "200")  # the table whole, one line a stage
    said = through_cli("compile", PROGRAM)
    assert "points_to: compiled in" in said
    for stage in lattice_order()[1:]:
        assert f" {stage} " in said, stage  # every stage of the lattice had its turn
    # what the stages did is in the table: magic sets and delta rewrote rules
    rows = {cells[2].strip(): cells for cells in (line.split("│") for line in said.splitlines()) if len(cells) > 7}
    assert int(rows["delta"][3]) > 50


def test_the_analysis_prints_and_parses_back_to_the_same_catalog():
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file
    from souffle_support import round_trips

    assert round_trips(check_program(parse_file(PROGRAM)))


def test_hand_derived_answers(runs):
    got = runs["here"]
    assert got["SanityError"] == []
    assert len(got["Reachable"]) == 16
    assert {m for (m,) in got["UnreachableMethod"]} == {
        "<Triangle: double area()>", "<java.lang.Object: void finalize()>",
        "<java.lang.Thread: void <init>()>", "<java.lang.Thread: void run()>"}
    assert ("<Worker: void run()>",) in got["Reachable"] and ("<Registry: void finalize()>",) in got["Reachable"]
    assert len(got["CallGraphEdge"]) == 13
    assert [row for row in got["CallGraphEdge"] if row[0] in ("Main.main/6", "Main.main/25")] == [
        ("Main.main/25", "<Circle: double area()>"), ("Main.main/25", "<Square: double area()>"),
        ("Main.main/6", "<Shape: java.lang.String name()>"), ("Main.main/6", "<Square: java.lang.String name()>")]
    assert got["PolymorphicCallSite"] == [("Main.main/25",), ("Main.main/6",)]
    assert got["MayFailCast"] == [("Main.main/8", "Circle", "Main.main/new Square/2")]
    assert got["MayFailArrayStore"] == [("Main.main/22", "shape"), ("Main.main/22", "square")]
    assert [t for (t,) in got["UninitializedClass"]] == ["Triangle"]
    assert len(got["InitializedClass"]) == 14
    assert got["ThrowPointsTo"] == [(CHECK, "Main.check/new MyException/0"),
                                    (CHECK, "Main.check/new java.lang.RuntimeException/2"),
                                    (MAIN, "Main.check/new MyException/0"),
                                    ("<Worker: void run()>", "Worker.run/new MyException/0")]
    assert got["UncaughtException"] == [(MAIN, "MyException")]
    points_to = {}
    for heap, var in got["VarPointsTo"]:
        points_to.setdefault(var, set()).add(heap)
    assert points_to["Main.main/o"] == {"Main.main/new Circle/0", "Main.main/new Square/2", "shape", "square"}
    assert points_to["Main.main/sh"] == {"Main.main/new Circle/0", "Main.main/new Square/2"}
    assert points_to["Main.main/d"] == points_to["Main.main/y"] == {"Registry.<clinit>/new Registry/0"}
    assert points_to["Main.main/ex"] == {"Main.check/new MyException/0"}
    assert points_to["Main.main/ex2"] == {"Main.check/new java.lang.RuntimeException/2"}
    assert points_to["Main.main/a2"] == {"<<main method array>>"}
    assert got["LargestPointsToSet"] == [("Main.main/o", "4")]
    stats = dict(got["Stats"])
    assert (stats["reachable methods"], stats["call graph edges"], stats["polymorphic call sites"]) == ("16", "13", "2")
    assert stats["side-effect-free methods"] == "10" and stats["sanity errors"] == "0"


def test_optimized_and_unoptimized_give_the_same_rows(runs):
    assert runs["here"]["VarPointsTo"]  # not vacuous
    assert runs["unoptimized"] == runs["here"]


@pytest.mark.extended
def test_spark_gives_the_rows_of_the_run_in_process(runs, tmp_path):
    """With --spark: some 20 strata, most of them once each on Spark's SQL path, and the
    outputs written and previewed there: about 1,300 Spark jobs (minutes; 16 min at a
    load average of 10-19), so in the extended run (docs/performance.md, issue 35)."""
    assert run_rows(tmp_path, "--spark") == runs["here"]


def test_the_oracle_gives_the_same_rows(runs):
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file

    program = check_program(parse_file(PROGRAM))
    got = oracle.evaluate(program, facts_of(program))
    outputs = {d.relation for d in program.of(S.IODirective) if d.direction == "output"}
    assert outputs == set(runs["here"])
    for relation in sorted(outputs):
        assert sorted(tuple(as_text(v) for v in row) for row in got.get(relation, ())) == runs["here"][relation], relation


def facts_of(program) -> dict:
    """relation -> rows of its .facts file, each field read as its declared column's kind."""
    types = TypeSystem.of(program)
    declared = {d.relation: d for d in program.of(S.Declaration)}
    inputs = {d.relation for d in program.of(S.IODirective) if d.direction == "input"}
    out = {}
    for relation in inputs:
        kinds = [types.primitive(c.type) for c in declared[relation].columns]
        lines = (FACTS / f"{relation}.facts").read_text().splitlines()
        out[relation] = [tuple(int(v) if k == "number" else v for k, v in zip(kinds, line.split("\t")))
                         for line in lines]
    return out


def as_text(value) -> str:
    """A value as `-D` writes it: a float as C's %.17g (docs/language.md, `float`)."""
    return f"{value:.17g}" if isinstance(value, float) else str(value)
