"""Inspection without a JVM: `load`, `catalog TABLE`, `catalog` with a bad name, `print`,
`plan` and `explain --stage S` read and write the catalog's files in the process, and
print what the Spark path printed.

No JVM: the commands run in one subprocess whose JAVA_HOME points nowhere, so a Spark
start there fails loudly (PySpark's JAVA_GATEWAY_EXITED, exit code 1). The same output:
each table and each explain view is compared with what Spark reads or evaluates in
this test run's session.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLES

SHORTEST_PATH = EXAMPLES / "shortest_path.olg"
PATH_MAGIC = EXAMPLES / "path_magic.olg"
VOTING = EXAMPLES / "protocols" / "voting.olg"

# name -> the command line; the explain views of every stage that has one on the default lattice
COMMANDS = {
    "load": ["load", str(SHORTEST_PATH)],
    "catalog rule --program": ["catalog", "rule", "--program", "shortest_path"],
    "catalog predicate": ["catalog", "predicate", "--limit", "5"],
    "catalog with a bad name": ["catalog", "nosuch"],
    "catalog counts": ["catalog"],
    "print": ["print", "shortest_path"],
    "plan": ["plan", str(SHORTEST_PATH)],
    "explain --stage system_r": ["explain", str(SHORTEST_PATH), "--stage", "system_r"],
    "explain --stage magic_sets --dot": ["explain", str(PATH_MAGIC), "--stage", "magic_sets", "--skip", "localize",
                                         "--dot", "{tmp}/magic.dot"],
    "explain --stage localize": ["explain", str(SHORTEST_PATH), "--stage", "localize"],
    "explain --stage decouple": ["explain", str(VOTING), "--stage", "decouple"],
}

# Each command through the real CLI (`main`), one after another in one process: stdout,
# stderr and the exit code of each, and whether a SparkContext exists at the end.
SCRIPT = """
import contextlib, io, json, sys
from evita.bootstrap.cli import main
results = {}
for name, argv in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv + ["-q"])
    results[name] = {"code": code, "out": out.getvalue(), "err": err.getvalue()}
from pyspark import SparkContext
results["jvm"] = SparkContext._active_spark_context is not None
print(json.dumps(results))
"""


def _stored(spark, capsys):
    """shortest_path loaded and compiled into this run's warehouse (the test session's)."""
    from evita.bootstrap.cli import main
    from evita.catalog import store

    assert main(["compile", str(SHORTEST_PATH), "-q"]) == 0
    capsys.readouterr()
    store.attach(spark)


def test_catalog_tables_read_from_files_as_spark_reads_them(spark, capsys):
    """Every catalog table read from the files as `evita catalog TABLE` reads it (and
    one of a program, as with --program): Spark's `ORDER BY` of the table's order gives
    the same rows in the same order (ties, which Spark leaves in any order, compared as
    sets)."""
    from evita.catalog import schema, store

    _stored(spark, capsys)
    root = store.opened()
    for decl in schema.TABLES:
        for program in (None, "shortest_path") if decl.name == "argument" else (None,):
            where = f" WHERE program = 'shortest_path'" if program and "program" in decl.column_names else ""
            order = ", ".join(f"`{c}`" for c in decl.order)
            theirs = [tuple(r) for r in spark.sql(f"SELECT * FROM evita.`{decl.name}`{where} ORDER BY {order}").collect()]
            columns, ours = store.table_rows(root, decl.name, program)
            assert columns == spark.table(f"evita.`{decl.name}`").columns
            keys = [columns.index(c) for c in decl.order]
            assert [tuple(r[i] for i in keys) for r in ours] == [tuple(r[i] for i in keys) for r in theirs], decl.name
            assert sorted(map(repr, ours)) == sorted(map(repr, theirs)), decl.name
            assert len(store.table_rows(root, decl.name, program, limit=3)[1]) == min(3, len(ours))


def test_catalog_table_prints_what_the_spark_path_printed(spark, capsys):
    """The text of `evita catalog rule --program P`: the rows from the files through the
    printer the Spark path used (`show`, the DataFrame's rows)."""
    from evita.bootstrap.cli import main, show

    _stored(spark, capsys)
    show(spark.sql("SELECT * FROM evita.rule WHERE program = 'shortest_path' ORDER BY program, pos"), 200,
         title="evita.rule")
    before = capsys.readouterr().out
    assert main(["catalog", "rule", "--program", "shortest_path", "-q"]) == 0
    assert capsys.readouterr().out == before


@pytest.mark.parametrize("program, stage, options", [
    pytest.param(SHORTEST_PATH, "system_r", {}, marks=pytest.mark.extended),
    (PATH_MAGIC, "magic_sets", {"skip": ["localize"]}),
    # the other explain views: the same code path, a minute on Spark's engine (the suite
    # compares magic sets' view, the one with the most rules)
    pytest.param(SHORTEST_PATH, "localize", {}, marks=pytest.mark.extended),
    pytest.param(VOTING, "decouple", {}, marks=pytest.mark.extended),
], ids=["system_r", "magic_sets", "localize", "decouple"])
def test_explain_views_in_process_are_spark_s(spark, program, stage, options):
    """A stage's explain view evaluated in this process (what `explain --stage` now
    does) derives the graph the engine derives on Spark."""
    from evita.bootstrap.cli import parse_and_check
    from evita.bootstrap.explain import stage_graph
    from evita.bootstrap.scheduler import compile_program
    from evita.bootstrap.stage import find_stages
    from evita.catalog.encode import encode
    from evita.runtime.session import SparkOnDemand

    program = parse_and_check(str(program))
    comp = compile_program(SparkOnDemand(lambda: spark), encode(program), program.name, **options)
    [version] = [v for v in comp.versions if v.stage == stage]
    read = comp.versions[version.number - 1].rows
    here = stage_graph(SparkOnDemand(lambda: pytest.fail("the explain view started Spark")), find_stages()[stage],
                       read, program.name, evaluator="in-process")
    on_spark = stage_graph(spark, find_stages()[stage], read, program.name, evaluator="engine")
    assert here.nodes and here == on_spark


# What can take seconds in these commands: each runs inside a named activity, which the
# progress line shows (runtime/progress.py) and a failure names.
SLOW = {
    "parse_file": "bootstrap/parser.py", "_found_stages": "bootstrap/stage.py", "evaluate": "bootstrap/stage.py",
    "run_stage": "bootstrap/stage.py", "plan": "bootstrap/planner.py", "_commit": "catalog/store.py",
    "table_rows": "catalog/store.py", "load_rows": "catalog/store.py", "spark_session": "runtime/session.py",
}


@pytest.mark.parametrize("argv", [
    ["load", str(SHORTEST_PATH)],
    ["catalog", "rule", "--program", "shortest_path"],
    ["print", "shortest_path"],
    ["plan", str(SHORTEST_PATH)],
    ["explain", str(SHORTEST_PATH), "--stage", "system_r"],
], ids=lambda argv: " ".join(argv[:1] + argv[2:]))
def test_every_slow_phase_has_a_label(warehouse, capsys, argv):
    """Each call of a function that can take time (parsing, the stages, planning, the
    catalog's reads and writes, a Spark start) happens inside an activity."""
    from evita.bootstrap import activity
    from evita.bootstrap.cli import main

    unlabeled = []

    def watch(frame, event, arg):
        code = frame.f_code
        where = SLOW.get(code.co_name)
        if event == "call" and where and code.co_filename.endswith(where) and not activity.current():
            unlabeled.append(f"{code.co_name} ({code.co_filename})")

    sys.setprofile(watch)
    try:
        code = main(argv + ["-q"])
    finally:
        sys.setprofile(None)
    assert code == 0, capsys.readouterr().err
    assert not unlabeled


# Last: the in-process tests above leave the stages' compiled forms in $EVITA_CACHE, which
# the subprocess then reads instead of making them again.
@pytest.fixture(scope="module")
def without_jvm(tmp_path_factory, warehouse):
    tmp = tmp_path_factory.mktemp("nojvm")
    env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "EVITA_REMOTE", "PYSPARK_GATEWAY_PORT")}
    env.update(EVITA_WAREHOUSE=str(tmp / "wh"), JAVA_HOME=str(tmp / "no-java-here"), COLUMNS="200")
    commands = {name: [a.replace("{tmp}", str(tmp)) for a in argv] for name, argv in COMMANDS.items()}
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(commands)], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    results["tmp"] = tmp
    return results


def test_a_jvm_start_fails_loudly_there(tmp_path):
    """The signal the tests below rely on: with that JAVA_HOME, a command that starts
    Spark fails with PySpark's gateway error."""
    env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "EVITA_REMOTE", "PYSPARK_GATEWAY_PORT")}
    env.update(EVITA_WAREHOUSE=str(tmp_path / "wh"), JAVA_HOME=str(tmp_path / "no-java-here"))
    done = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "sql", "SELECT 1", "-q"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "JAVA_GATEWAY_EXITED" in done.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_starts_no_jvm(without_jvm, name):
    got = without_jvm[name]
    assert "JAVA_GATEWAY" not in got["err"] and "Spark" not in got["err"], got["err"]
    if name == "catalog with a bad name":
        assert got["code"] == 1 and "no catalog table" in got["err"]
    else:
        assert got["code"] == 0, got["err"]
    assert not without_jvm["jvm"]


def test_what_the_commands_print_without_a_jvm(without_jvm):
    assert "evita.rule" in without_jvm["load"]["out"] and "evita.argument" in without_jvm["load"]["out"]
    assert "r2 path(@X, Z, P, C)" in without_jvm["print"]["out"]
    assert "(first 5 rows; use --limit to see more)" in without_jvm["catalog predicate"]["out"]
    assert "explain view" in without_jvm["explain --stage system_r"]["out"]
    assert "chosen" in without_jvm["explain --stage system_r"]["out"]  # the plan lattice, with its rows
    magic = without_jvm["explain --stage magic_sets --dot"]["out"]
    assert "path^bfff" in magic and "rewritten" in magic
    assert '"path_magic:r2" -> "path" [label="2: bfff"];' in (without_jvm["tmp"] / "magic.dot").read_text()
