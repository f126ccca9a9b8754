"""The Python API (runtime/api.py, docs/api.md): compile once, run on DataFrames and on
files, the answers of the reference evaluator (tests/oracle.py; `evita run` goes through
the same compile and engine run, and test_cli checks its answers), errors as
EvitaError, the caller's session left as it was. Two compiles in all: docs/api.md's tc
serves most tests."""
from __future__ import annotations

import argparse
import doctest
import os

import pytest

import evita
import oracle
from conftest import EXAMPLES, REPO

TC = EXAMPLES / "tc.dl"
# An unusual value the test session never uses: a compile or run that set its own and
# forgot to put the user's back would show here.
SHUFFLE = "spark.sql.shuffle.partitions"
UNUSUAL = "13"


def settings(spark) -> dict:
    return {row[0]: row[1] for row in spark.sql("SET").collect()}


@pytest.fixture(scope="module")
def tc(spark):
    """docs/api.md's examples run on this test run's one SparkSession, under a session
    setting of the user's own; its compiled tc then serves the tests below (one compile).
    The settings before and after are kept for the test of them."""
    old = spark.conf.get(SHUFFLE, None)
    spark.conf.set(SHUFFLE, UNUSUAL)
    cwd = os.getcwd()
    os.chdir(REPO)  # the examples name files from the repository root
    try:
        before = settings(spark)
        text = (REPO / "docs" / "api.md").read_text()
        test = doctest.DocTestParser().get_doctest(text, {"spark": spark}, "api.md", str(REPO / "docs" / "api.md"), 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test, clear_globs=False)
        after = settings(spark)
    finally:
        os.chdir(cwd)
        spark.conf.unset(SHUFFLE) if old is None else spark.conf.set(SHUFFLE, old)
    return argparse.Namespace(docs=runner.summarize(verbose=False), prog=test.globs.get("prog"), before=before,
                              after=after)


def oracle_rows(program, inputs: dict) -> dict:
    """The answers of tests/oracle.py, the runtime's independent reference evaluator."""
    from evita.bootstrap.parser import parse_file

    got = oracle.evaluate(parse_file(program), inputs)
    return {rel: sorted(tuples) for rel, tuples in got.items()}


def facts(path) -> list:
    return [tuple(line.split("\t")) for line in path.read_text().splitlines() if line]


def test_docs_api_md_runs(tc):
    failed, attempted = tc.docs
    assert attempted > 5 and failed == 0, "docs/api.md: the failing examples are printed above"


def test_the_users_session_settings_are_left_as_they_were(tc):
    assert tc.before[SHUFFLE] == UNUSUAL
    assert tc.after == tc.before  # compile and several runs, the results read


def test_a_dataframe_in_a_dataframe_out(tc, spark):
    edges = spark.createDataFrame([(1, 2), (2, 3), (3, 1), (3, 4)], ["src", "dst"])
    result = tc.prog.run(inputs={"edge": edges})
    assert result["path"].columns == ["x", "y"]  # the declared names
    assert result.shown == ["path"] and set(result) == {"edge", "path"}
    expected = oracle_rows(TC, {"edge": [(1, 2), (2, 3), (3, 1), (3, 4)]})
    assert result.rows("path") == expected["path"]


def test_files_give_the_answers(tc):
    """tc (recursive) on its facts file, by path and by facts_dir."""
    edges = [tuple(map(int, t)) for t in facts(EXAMPLES / "tc" / "edge.facts")]
    expected = oracle_rows(TC, {"edge": edges})["path"]
    assert len(expected) == 48  # tc.dl's comment
    assert tc.prog.run(inputs={"edge": str(EXAMPLES / "tc" / "edge.facts")}).rows("path") == expected
    assert tc.prog.run(facts_dir=EXAMPLES / "tc").rows("path") == expected


def test_text_with_negation_and_counting(spark):
    """negation.dl compiled from its text, run on DataFrames read from its facts files.
    Magic sets left out: a stage option passed through, and the run a third as long."""
    source = (EXAMPLES / "negation.dl").read_text()
    prog = evita.compile(source, spark=spark, name="negation_api", skip="magic_sets")
    assert "magic_sets" not in {d.stage for d in prog.diffs} and "delta" in {d.stage for d in prog.diffs}
    read = lambda rel: spark.read.csv(str(EXAMPLES / "negation" / f"{rel}.facts"), sep="\t")  # noqa: E731
    result = prog.run(inputs={"node": read("node"), "edge": read("edge")})
    expected = oracle_rows(EXAMPLES / "negation.dl", {rel: facts(EXAMPLES / "negation" / f"{rel}.facts")
                                                      for rel in ("node", "edge")})
    assert set(result.shown) == {"unreachable", "sink", "source", "shortcutMissing", "outdeg", "isolatedOrSink"}
    got = result.engine.tuples(result.shown)  # one Spark action for all of them
    assert {rel: sorted(got[rel]) for rel in result.shown} == {rel: expected.get(rel, []) for rel in result.shown}
    assert sorted(got["sink"]) == [("d",), ("f",)] and ("c", 2) in got["outdeg"]  # negation.dl's comment


def test_a_bad_program_raises_evita_error_at_its_position(spark):
    with pytest.raises(evita.EvitaError) as caught:
        evita.compile("edge(1, 2).\npath(X, Z) :- edge(X, Y).\n", spark=spark, name="unsafe")
    e = caught.value
    assert e.first.code == "unsafe-rule" and (e.first.span.line, e.first.span.col) == (2, 9)
    assert str(e).startswith("<string>:2:9: error[unsafe-rule]")  # as the command line prints it
    assert "path(X, Z) :- edge(X, Y)." in str(e)


def test_number_bits_32_from_python(spark):
    """`number_bits=32` is `--number-bits 32`: the sum wraps as Soufflé's default build's,
    and the width is the catalog's program.number_bits."""
    prog = evita.compile(".decl a(x: number)\na(2147483647). a(1).\n.decl r(s: number)\n.output r\n"
                         "r(s) :- s = sum x : { a(x) }.\n", spark=spark, name="width_api", number_bits=32)
    assert prog.run().rows("r") == [(-2147483648,)]
    assert [r["number_bits"] for r in prog.catalog("program").collect()] == [32]
    with pytest.raises(evita.EvitaError, match="give number_bits=64"):
        evita.compile("a(1).", spark=spark, number_bits=16)


def test_bad_calls_raise_evita_error(tc, spark):
    with pytest.raises(evita.EvitaError, match="no program file"):
        evita.compile("no/such/file.dl", spark=spark)
    with pytest.raises(evita.EvitaError, match="inputs\\['edge'\\] has 1 column"):
        tc.prog.run(inputs={"edge": spark.range(2)})
    with pytest.raises(evita.EvitaError, match="column a is string, but edge.x is declared number"):
        tc.prog.run(inputs={"edge": spark.createDataFrame([("1", 2)], ["a", "b"])})
    with pytest.raises(evita.EvitaError, match="does not use"):
        tc.prog.run(inputs={"edges": []})
    with pytest.raises(evita.EvitaError, match="input-missing|no file"):
        tc.prog.run(inputs={"edge": "no/such.csv"})
    with pytest.raises(evita.EvitaError, match="nothing happens over time"):
        tc.prog.run(steps=3)
    with pytest.raises(evita.EvitaError, match="no catalog table"):
        tc.prog.catalog("rules")
    with pytest.raises(evita.EvitaError, match="did not run"):
        tc.prog.explain("no_such_stage")


def test_catalog_plan_and_explain(tc):
    rules = tc.prog.catalog("rule").collect()
    assert rules and {r["program"] for r in rules} == {"tc"} and {r["head_relation"] for r in rules} == {"path"}
    assert "path" in tc.prog.plan.to_text()
    text = tc.prog.explain()
    assert "delta" in text and "v1" in text
    assert "rule2" in tc.prog.explain("delta") and "const_prop" not in tc.prog.explain("delta")


def test_pandas_and_arrow_inputs_and_a_plain_refusal(tc):
    import pandas as pd
    import pyarrow as pa

    want = [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert tc.prog.run(inputs={"edge": pd.DataFrame({"a": [1, 2], "b": [2, 1]})}).rows("path") == want
    assert tc.prog.run(inputs={"edge": pa.table({"a": [1, 2], "b": [2, 1]})}).rows("path") == want
    with pytest.raises(evita.EvitaError, match=r"inputs\['edge'\] is a dict, which Evita does not read: give a "
                                               "Spark DataFrame, a pandas DataFrame, a pyarrow Table"):
        tc.prog.run(inputs={"edge": {1: 2}})
    with pytest.raises(evita.EvitaError, match="column a is string, but edge.x is declared number"):
        tc.prog.run(inputs={"edge": pd.DataFrame({"a": ["1"], "b": [2]})})


def test_a_worker_python_that_cannot_run_evita_is_one_error():
    """Spark's own errors for a worker Python of another version, or without a module,
    become one EvitaError saying what to set (runtime/session.worker_failure)."""
    from pyspark.errors import PySparkRuntimeError

    from evita.runtime.session import worker_failure

    mismatch = PySparkRuntimeError(errorClass="PYTHON_VERSION_MISMATCH",
                                   messageParameters={"worker_version": "3.12", "driver_version": "3.11"})
    error = worker_failure(mismatch)
    assert error.first.code == "worker-python" and "run Python 3.12; this driver runs 3.11" in error.first.message
    assert "spark.pyspark.python" in error.first.hint and "PYSPARK_PYTHON" in error.first.hint
    missing = worker_failure(RuntimeError("An exception was thrown from the Python worker:\nTraceback ...\n"
                                          "ModuleNotFoundError: No module named 'evita'\n SQLSTATE: 38000"))
    assert "cannot import evita" in missing.first.message and "--py-files" in missing.first.hint
    assert worker_failure(RuntimeError("ModuleNotFoundError: No module named 'mine'")) is None  # the user's own


OWN_SESSION = """
import evita
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
prog = evita.compile({program!r}, spark=spark)
res = prog.run(inputs={{"edge": spark.createDataFrame([(1, 2), (2, 3), (3, 1)], ["a", "b"])}})
print(sorted(res.rows("path")))
print(spark.sparkContext.pythonExec)
"""


def _python_without_evita():
    """A Python on this machine that cannot import evita (a system or pyenv one)."""
    import glob
    import sys

    from evita.runtime.session import probe_python

    for python in ["/usr/bin/python3", *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))]:
        if os.path.exists(python) and os.path.realpath(python) != os.path.realpath(sys.executable) \
                and "evita" in probe_python(python).get("missing", ()):
            return python
    return None


@pytest.mark.extended  # a process with a JVM of its own (about a minute under the suite's load); CI runs it
def test_the_users_own_session_runs_with_a_python3_on_path_without_evita(tmp_path):
    """Issue 36: a script run with the venv's python, not activated, builds its own
    session; PySpark's workers then run `python3` from PATH, which has no evita. The run
    must give the rows, with no trace (it used to end in ModuleNotFoundError in the
    workers). One subprocess: it starts its own JVM."""
    import subprocess
    import sys

    other = _python_without_evita()
    if other is None:
        pytest.skip("no Python without evita on this machine")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(other)
    script = tmp_path / "mine.py"
    script.write_text(OWN_SESSION.format(program=str(TC)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV", "SPARK_CONF"))}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", EVITA_WAREHOUSE=str(tmp_path / "warehouse"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows, python = done.stdout.strip().splitlines()[-2:]
    assert rows == str([(x, y) for x in (1, 2, 3) for y in (1, 2, 3)])
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
    assert "Evita's tasks use this Python instead" in done.stderr  # said once, on the `evita` logger
    assert python == "python3"  # the session's own setting is back after the calls
