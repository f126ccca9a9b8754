"""Evita on a real Spark standalone cluster: the loopback one of `scripts/local-cluster`.

A master and two workers (one core, 2 GiB each) start from the pyspark package
(`runtime/cluster.py`, the module the script runs), on a free port, without PYTHONPATH in
their environment: the executors must get Evita from the zip the driver ships. A separate
driver process (the test run's own SparkSession is local, and there is one per run) runs
the real CLI, `evita run ... --master spark://127.0.0.1:PORT` (and `$EVITA_MASTER`), on

- transitive closure (decomposable: the fixpoint runs inside the tasks),
- same generation with `--no-local` (the distributed loop: one Spark job per iteration),
- the shortest-path example (Overlog: keys, aggregates, lists),

with the warehouse given as a file:// URI; the answers must be the ones local mode gives.
The cluster is stopped even when the test fails (the fixture's `finally`).

Named `test_zz_*` so it runs last (pytest takes files in alphabetical order): it starts
four JVMs on a machine the rest of the suite already loads, and a failure to start a
cluster must not hold up the quicker tests.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import evita
from evita.runtime import cluster as local_cluster

from conftest import SPARK_PROGRAMS, answers, local_answers

pytestmark = pytest.mark.cluster  # run apart: `pytest -m cluster` (pyproject.toml, .ci/run)

PROGRAMS = SPARK_PROGRAMS

# The separate driver: the CLI's own entry point, once per program (one JVM start for the
# three), then a look at where the executors' Python found the `evita` package.
DRIVER = r"""
import json, sys
from evita.bootstrap.cli import main

runs, report = json.loads(sys.argv[1]), sys.argv[2]
codes = {}
for name, argv in runs.items():
    print(f"=== {name}", flush=True)
    codes[name] = main(argv)
    print(flush=True)

from pyspark.sql import SparkSession

sc = SparkSession.getActiveSession().sparkContext

def where(_):
    import os, sys, evita
    yield evita.__file__, os.environ.get("PYTHONPATH", ""), sys.executable

origin = sc.parallelize(range(2), 2).mapPartitions(where).collect()
with open(report, "w") as f:
    json.dump({"codes": codes, "master": sc.master, "origin": origin}, f)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("cluster")
    started = None
    try:
        started = local_cluster.start(port=local_cluster.free_port(), directory=state, timeout=150)
        yield started
    finally:
        local_cluster.stop(state)
        if started is not None:  # nothing of it is left: no daemon, executor or Python worker
            assert not [x.role for x in started.daemons if local_cluster._group_alive(x.pid)]


def test_programs_on_the_loopback_cluster(cluster, spark, tmp_path, capsys):
    started = time.perf_counter()
    status = local_cluster.status(cluster.state_dir)
    assert status["workers_alive"] == 2 and all(d["running"] for d in status["daemons"])

    out = {name: tmp_path / "cluster" / name for name in PROGRAMS}
    # TC (the first run, which starts the session) finds the master in $EVITA_MASTER, the others in --master
    runs = {name: ["run", *args, "--output", str(out[name])] + (["--master", cluster.master] if name != "tc" else [])
            for name, args in PROGRAMS.items()}
    env = dict(os.environ, EVITA_MASTER=cluster.master, EVITA_WAREHOUSE=(tmp_path / "warehouse").as_uri(),
               EVITA_SPARK_LOG=str(tmp_path / "driver-spark.log"),
               # this test runs the local answers beside the cluster's driver on 2 cores: the
               # driver's JVM may take longer than the default 20 s to be taken by the master
               EVITA_REGISTER_TIMEOUT="60")
    report = tmp_path / "report.json"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(runs), str(report)], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # meanwhile, the same programs in local mode, in this process's session
        local = local_answers(tmp_path, capsys)
        output, _ = driver.communicate(timeout=420)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0 and report.exists(), output[-4000:]
    result = json.loads(report.read_text())
    assert result["master"] == cluster.master
    assert result["codes"] == {name: 0 for name in PROGRAMS}, output[-4000:]

    sections = {part.split("\n", 1)[0].strip(): part for part in output.split("=== ")[1:]}
    for name in PROGRAMS:
        assert answers(out[name], sections[name]) == local[name], name
    assert len(local["tc"]["path.csv"]) == 48 and len(local["sg"]["sg.csv"]) == 10
    assert len(local["sp"]["printed"]) == 4  # shortestPath("node1", Y, P, C)
    assert " local " in sections["tc"], sections["tc"][-2000:]  # TC's fixpoint ran inside the tasks
    assert " sql " in sections["sg"] and " local " not in sections["sg"], sections["sg"][-2000:]

    # the executors ran the driver's Python (PYSPARK_PYTHON: the venv's) and imported evita
    # from the shipped zip, not from anything in their environment
    for path, pythonpath, python in result["origin"]:
        assert python == (os.environ.get("PYSPARK_PYTHON") or sys.executable)
        assert ".zip/evita/__init__.py" in path, path
        assert str(Path(evita.__file__).parent.parent) not in pythonpath.split(os.pathsep), pythonpath
    print(output)  # the driver's (with -s): each run's phases and Spark jobs
    print(f"cluster run: {time.perf_counter() - started:.1f} s after the cluster started")


def test_a_port_that_is_not_a_master(tmp_path):
    """A listener that accepts connections and never answers (a wrong port, another
    service): error[master-unreachable] within 30 s, not Spark's minute of retries."""
    import socket
    import threading

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(50)
        port = listening.getsockname()[1]
        held = []
        threading.Thread(target=lambda: [held.append(listening.accept()) for _ in range(50)], daemon=True).start()
        env = dict(os.environ, EVITA_WAREHOUSE=str(tmp_path / "warehouse"), EVITA_SPARK_LOG=str(tmp_path / "spark.log"))
        env.pop("EVITA_MASTER", None)
        started = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "run", *PROGRAMS["sp"], "--master",
                            f"spark://127.0.0.1:{port}"], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
        seconds = time.monotonic() - started
    assert p.returncode == 1 and seconds < 30, (seconds, p.stderr)
    assert "error[master-unreachable]" in p.stderr and "did not take the application" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "java." not in p.stderr


LONG = """.decl nat(n: number)
nat(0).
nat(n + 1) :- nat(n), n < 100000.
.output nat
"""


def test_workers_that_die_mid_run(cluster, tmp_path):
    """Last in this module: it kills the cluster's workers. A run whose every executor
    is gone gets error[worker-lost] within the grace period, instead of waiting for
    resources without end; no Java trace, nothing written."""
    program = tmp_path / "long.dl"
    program.write_text(LONG)
    env = dict(os.environ, EVITA_EXECUTOR_GRACE="8", EVITA_WAREHOUSE=str(tmp_path / "warehouse"),
               EVITA_SPARK_LOG=str(tmp_path / "driver-spark.log"),
               EVITA_REGISTER_TIMEOUT="60")  # as in the first test: a loaded machine's master can be slow to take it
    env.pop("EVITA_MASTER", None)
    earlier = set(Path(cluster.state_dir).glob("work/worker-*/app-*"))  # the first test's applications
    driver = subprocess.Popen([sys.executable, "-m", "evita.bootstrap.cli", "run", str(program), "--no-local",
                               "--master", cluster.master, "-D", str(tmp_path / "out")], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # wait for the application's executors to register with the driver (their logs
        # say so): on a loaded machine an executor's JVM can take longer than the compile to
        # start, and workers killed before any registered give the other error ("no
        # executor joined"), rightly
        deadline, registered = time.monotonic() + 150, 0
        while time.monotonic() < deadline and driver.poll() is None and registered < 2:
            logs = [log for app in set(Path(cluster.state_dir).glob("work/worker-*/app-*")) - earlier
                    for log in app.glob("*/stderr")]
            registered = sum("Successfully registered with driver" in log.read_text(errors="replace") for log in logs)
            time.sleep(0.5)
        assert registered == 2, (registered, driver.poll())
        time.sleep(5)  # into the fixpoint (100,000 iterations: it does not end by itself)
        assert driver.poll() is None, driver.communicate()
        killed = time.monotonic()
        for d in cluster.daemons:
            if d.role.startswith("worker"):
                local_cluster._signal_group(d.pid, 9)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 1, err
    assert time.monotonic() - killed < 60
    assert "error[worker-lost]: the Spark application lost every executor while a job ran" in err, err
    assert "scripts/local-cluster status" in err and "Traceback" not in err and "java." not in err, err
    assert not (tmp_path / "out").exists()
