"""A small `evita run` in this process, without Spark (runtime/here.py).

Each program runs twice through the real command line, in this process and with
`--spark`, and both must write and print the same answers. A run that needs Spark for
part of its work (a function only Spark has) must go there and say so under --stats.
A subprocess shows that such a run starts no JVM at all.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evita.bootstrap.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(capsys, *argv) -> tuple:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def answers(directory: Path, printed: str) -> dict:
    files = {f.name: sorted(f.read_text().splitlines()) for f in sorted(directory.glob("*.csv"))}
    return {**files, "printed": sorted(line for line in printed.splitlines() if line.startswith("│"))}


PROGRAMS = {
    "tc": [str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc")],
    "same_generation": [str(EXAMPLES / "same_generation.dl"), "-F", str(EXAMPLES / "same_generation")],
    "negation": [str(EXAMPLES / "negation.dl"), "-F", str(EXAMPLES / "negation")],
    "shortest_path": [str(EXAMPLES / "shortest_path.olg")],  # lists, located relations, a query
    "path_magic": [str(EXAMPLES / "path_magic.olg")],  # a bound query: magic sets
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_in_process_and_spark_give_the_same_answers(spark, capsys, tmp_path, name):
    here_dir, spark_dir = tmp_path / "here", tmp_path / "spark"
    code, here_out, _ = run(capsys, "run", *PROGRAMS[name], "-D", str(here_dir), "--output", str(here_dir / "o"),
                            "--stats")
    assert code == 0
    assert "start Spark (JVM)" not in here_out and " here " in here_out  # every stratum ran in this process
    code, spark_out, _ = run(capsys, "run", *PROGRAMS[name], "-D", str(spark_dir), "--output", str(spark_dir / "o"),
                             "--spark")
    assert code == 0
    here, there = answers(here_dir, here_out), answers(spark_dir, spark_out)
    assert here == there
    assert answers(here_dir / "o", "") == answers(spark_dir / "o", "")
    if name == "shortest_path":  # the traffic table, measured over the pandas tables
        assert "node1     5         8       15" in here_out


def test_a_function_only_spark_has_sends_the_run_to_spark(spark, capsys, tmp_path):
    program = tmp_path / "prefix.dl"
    program.write_text('.decl word(w: symbol)\nword("evita"). word("spark").\n'
                       '.decl prefix(w: symbol)\n.output prefix\nprefix(substr(w, 0, 2)) :- word(w).\n')
    code, out, err = run(capsys, "run", str(program), "-D", str(tmp_path / "out"), "--stats")
    assert code == 0, err
    assert "runs on Spark, not in this process" in err and "substr(w, 0, 2)" in err
    assert sorted((tmp_path / "out" / "prefix.csv").read_text().split()) == ["ev", "sp"]


def test_a_run_in_process_reports_no_fixpoint_as_spark_does(spark, capsys, tmp_path):
    program = tmp_path / "grow.dl"
    program.write_text(".decl n(x: number)\n.output n\nn(0).\nn(x + 1) :- n(x).\n")
    here = run(capsys, "run", str(program), "--max-iterations", "30")
    there = run(capsys, "run", str(program), "--max-iterations", "30", "--spark")
    assert here[0] == there[0] == 1
    assert "no-fixpoint" in here[2] and here[2] == there[2]


def test_a_small_run_starts_no_jvm(tmp_path):
    """From the shell: no `start Spark` phase, every job count 0, and the answers."""
    env = dict(os.environ, EVITA_WAREHOUSE=str(tmp_path / "wh"), COLUMNS="200")
    env.pop("EVITA_MASTER", None)
    cmd = [sys.executable, "-c", "import sys; from evita.bootstrap.cli import main; sys.exit(main())",
           "run", str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc"), "-D", str(tmp_path / "out"), "--stats"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "start Spark" not in done.stdout and "attach the catalog" not in done.stdout
    phases = [line for line in done.stdout.splitlines() if "%" in line]
    assert phases and all(line.split()[-1] == "0" for line in phases if line.split()[-1].isdigit())
    assert len((tmp_path / "out" / "path.csv").read_text().splitlines()) == 48
