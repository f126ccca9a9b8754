"""Evita over Spark Connect: `evita server start`, then commands that use it.

The real CLI starts a Spark Connect server from the pyspark package for a warehouse of
its own (`runtime/server.py`). A separate driver process (this run has its own local
SparkSession, one per run) then runs, with no JVM of its own:

- transitive closure (the fixpoint inside tasks: `mapInArrow` on the server), finding
  the server through the warehouse's state file, as a user's command would;
- same generation with `--no-local` (the distributed loop), with `--remote sc://...`;
- the shortest-path example (Overlog: keys, aggregates, lists);
- the Python API on a Connect session the caller made, with a DataFrame as input,
  and `evita simulate --fanout 2` (`mapInPandas` on the server);

and the answers must be the ones local mode gives. The server is stopped even when the
test fails, and nothing of it may be left running.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from evita.bootstrap.cli import main
from evita.runtime import server
from evita.runtime.cluster import free_port

from conftest import EXAMPLES, SPARK_PROGRAMS, answers, local_answers

pytestmark = pytest.mark.cluster  # run apart, after the suite (pyproject.toml, .ci/run)

PROGRAMS = SPARK_PROGRAMS

DRIVER = r"""
import json, sys
from evita.bootstrap.cli import main

runs, url, report = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
codes = {}
for name, argv in runs.items():
    print(f"=== {name}", flush=True)
    codes[name] = main(argv)
    print(flush=True)

import evita
from pyspark import SparkContext
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(url).getOrCreate()
edges = spark.createDataFrame([(1, 2), (2, 3), (3, 4)], "a long, b long")
result = evita.compile(sys.argv[4], spark=spark).run(inputs={"edge": edges})
api = sorted(tuple(r) for r in result["path"].collect())
with open(report, "w") as f:
    json.dump({"codes": codes, "api": api, "jvm": SparkContext._active_spark_context is not None,
               "remote": type(spark).__module__}, f)
"""


def _evita(*args, env):
    return subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    warehouse = tmp_path_factory.mktemp("connect") / "warehouse"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "EVITA_REMOTE")}
    env["EVITA_WAREHOUSE"] = str(warehouse)
    try:
        started = _evita("server", "start", "--port", str(port), "--master", "local[2]", env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        yield warehouse, port, env
    finally:
        state = server.status(warehouse)
        stopped = _evita("server", "stop", env=env)
        if state is not None:  # nothing of it is left: launcher, JVM, Python workers
            assert not server._group_alive(state["pgid"]), stopped.stdout + stopped.stderr


def test_programs_over_spark_connect(connect_server, spark, tmp_path, capsys):
    warehouse, port, env = connect_server
    status = _evita("server", "status", env=env)
    assert status.returncode == 0 and "answering" in status.stdout, status.stdout + status.stderr

    url = f"sc://127.0.0.1:{port}"
    out = {name: tmp_path / "connect" / name for name in PROGRAMS}
    # tc finds the server in the warehouse; sg and sp are told it
    runs = {name: ["run", *args, "--output", str(out[name])] + (["--remote", url] if name != "tc" else [])
            for name, args in PROGRAMS.items()}
    runs["sim"] = ["simulate", str(EXAMPLES / "protocols" / "voting.olg"), "--seeds", "1-4", "--fanout", "2"]
    report = tmp_path / "report.json"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(runs), url, str(report),
                               str(EXAMPLES / "tc.dl")], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        local = local_answers(tmp_path, capsys)
        capsys.readouterr()
        assert main(runs["sim"][:-2] + ["--master", "local[2]"]) == 0
        local_sim = capsys.readouterr().out
        output, _ = driver.communicate(timeout=420)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0 and report.exists(), output[-4000:]
    result = json.loads(report.read_text())
    assert result["codes"] == {name: 0 for name in runs}, output[-4000:]
    assert not result["jvm"] and result["remote"].startswith("pyspark.sql.connect"), result

    sections = {part.split("\n", 1)[0].strip(): part for part in output.split("=== ")[1:]}
    for name in PROGRAMS:
        assert answers(out[name], sections[name]) == local[name], name
    assert len(local["tc"]["path.csv"]) == 48 and len(local["sg"]["sg.csv"]) == 10
    assert " local " in sections["tc"] and " sql " in sections["sg"], output[-4000:]
    finals = [line for line in local_sim.splitlines() if "distinct final answer" in line]
    assert finals and all(line in sections["sim"] for line in finals), sections["sim"]
    assert result["api"] == [[1, 2], [1, 3], [1, 4], [2, 3], [2, 4], [3, 4]]
    # the catalog the server wrote is the warehouse's, readable by a local session too
    assert (warehouse / "evita-catalog").is_dir()
    print(output)


def test_sql_by_the_warm_daemon_is_never_stale(connect_server):
    """`evita sql` with the server is answered by its daemon (runtime/sql_daemon.py): the
    command imports no Spark client. A compile between two queries is seen by the second,
    and so is one killed half way, which the daemon's attach (again, as the catalog's stamp
    moved) finishes; concurrent queries are each answered whole; a bad query is the same
    one-line error as without it; a daemon gone (its port stale) leaves the command to
    ask Spark itself, with the same answer and nothing said."""
    warehouse, port, env = connect_server
    query = "SELECT id FROM evita.program ORDER BY id"

    def sql(*args):  # the real CLI, its imports listed (-X importtime) to see which path answered
        run = subprocess.run([sys.executable, "-X", "importtime", "-m", "evita.bootstrap.cli", "sql", *args],
                             env=env, capture_output=True, text=True, timeout=300)
        return run.returncode, run.stdout, run.stderr.count("pyspark"), \
            "\n".join(line for line in run.stderr.splitlines() if not line.startswith("import time:"))

    assert _evita("compile", str(EXAMPLES / "tc.dl"), env=env).returncode == 0
    code, out, pyspark, said = sql(query)
    assert code == 0 and " tc " in out and pyspark == 0, out + said
    assert _evita("compile", str(EXAMPLES / "same_generation.dl"), env=env).returncode == 0
    code, both, pyspark, said = sql(query)
    assert code == 0 and " tc " in both and " same_generation " in both and pyspark == 0, both + said

    from evita.runtime import sql_daemon

    answers = [None] * 4  # at once: the daemon takes them one at a time, each whole
    threads = [threading.Thread(target=lambda i=i: answers.__setitem__(i, sql_daemon.ask(query, 200, warehouse)))
               for i in range(len(answers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # (the module's server is shared: an earlier test may have compiled other programs)
    assert all(a is not None and a == answers[0] for a in answers), answers
    assert {"same_generation", "tc"} <= {row[0] for row in answers[0]["rows"]}, answers

    # a compile killed after its commit point, before it moved its files into place: the
    # daemon's next attach (the stamp moved) finishes it, as a command of its own would
    crashed = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "compile", str(EXAMPLES / "sssp.dl")],
                             env={**env, "EVITA_CRASH_AT": "committed"}, capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -9, crashed.stdout + crashed.stderr
    code, three, pyspark, said = sql(query)
    assert code == 0 and " sssp " in three and " tc " in three and pyspark == 0 and "note:" in said, three + said

    code, out, pyspark, said = sql("SELECT nosuch FROM evita.rule")
    assert code == 1 and pyspark == 0 and said.startswith("error: Spark SQL rejected the query: ") \
        and "Traceback" not in said and len(said.splitlines()) == 2, said

    state_file = warehouse / server.STATE_FILE
    kept = state_file.read_text()
    state = json.loads(kept)
    state["sql"]["port"] = free_port()  # nothing listens there: a daemon gone
    state_file.write_text(json.dumps(state))
    try:
        code, stale_out, pyspark, said = sql(query)
    finally:
        state_file.write_text(kept)
    assert code == 0 and stale_out == three and pyspark > 0 and said.strip() == "", stale_out + said


def test_kill_9_of_server_start_leaves_nothing_that_blocks_the_next(tmp_path):
    """`evita server start` killed (its process group, kill -9) once its server is
    launched, and again once the server answers (while it warms up): each time `status`
    answers at once with a clear line, the state file is whole, and the next `start`
    ends the interrupted start's server and starts its own (exit 0); `stop` then leaves
    nothing running."""
    import signal
    import time

    warehouse = tmp_path / "warehouse"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "EVITA_REMOTE", "PYSPARK_GATEWAY_PORT")}
    env["EVITA_WAREHOUSE"] = str(warehouse)
    state_file = warehouse / server.STATE_FILE
    start = ["server", "start", "--port", str(port), "--master", "local[1]"]
    groups = []
    try:
        for moment in ("launched", "answering"):
            proc = subprocess.Popen([sys.executable, "-m", "evita.bootstrap.cli", *start], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline and not (
                    state_file.exists() and (moment == "launched" or server._answers(port))):
                time.sleep(0.1)
            assert proc.poll() is None, proc.communicate()  # still starting: the kill lands inside the start
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            left = json.loads(state_file.read_text())  # whole
            assert left["ready"] is False
            groups.append(left["pgid"])
            began = time.monotonic()
            status = _evita("server", "status", env=env)
            assert time.monotonic() - began < 60 and status.returncode in (0, 1), status.stderr
            assert status.stdout.startswith(("server at", "no server running")) and "Traceback" not in status.stderr
            again = _evita(*start, env=env)
            assert again.returncode == 0, again.stdout + again.stderr
            assert f"ended the server (pid {left['pgid']})" in again.stdout
            assert not server._group_alive(left["pgid"])
            groups.append(json.loads(state_file.read_text())["pgid"])
            assert _evita("server", "status", env=env).returncode == 0
            stopped = _evita("server", "stop", env=env)
            assert stopped.returncode == 0 and not state_file.exists(), stopped.stdout + stopped.stderr
    finally:
        _evita("server", "stop", env=env)
        for pgid in groups:
            if server._group_alive(pgid):
                os.killpg(pgid, signal.SIGKILL)
    assert not any(server._group_alive(pgid) for pgid in groups)
