"""Beyond one machine (docs/deploy.md), what can be tested without a cluster:

- an unreachable master is a positioned error in a second, before any JVM starts: through
  the real command line in a subprocess, and in-process, where the test run's one
  SparkSession must be left exactly as it was;
- `evita package` writes the zip spark-submit ships, and its launcher runs Evita's
  command line from that zip alone.

None of these start Spark.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import evita
from evita.bootstrap.cli import main
from evita.runtime.session import check_master

from conftest import EXAMPLES

TC = [str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc")]


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "PYSPARK_GATEWAY_PORT")}
    # the evita this test imports (a checkout, a worktree or what pip installed), first on the path
    env["PYTHONPATH"] = os.pathsep.join([str(Path(evita.__file__).resolve().parent.parent),
                                         env.get("PYTHONPATH", "")])
    env.update(EVITA_WAREHOUSE=str(tmp_path / "wh"), **extra)
    return env


def test_unreachable_master_through_the_command_line(tmp_path):
    url = f"spark://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "run", *TC, "--master", url],
                       cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    seconds = time.monotonic() - started
    assert p.returncode == 1, p.stderr
    assert seconds < 30
    assert p.stderr.startswith(f"<command line>: error[master-unreachable]: cannot reach the Spark master {url}")
    assert "Connection refused" in p.stderr
    assert "scripts/local-cluster status" in p.stderr and "firewall" in p.stderr and "--master" in p.stderr
    assert "Traceback" not in p.stderr and "java" not in p.stderr.lower()
    assert not (tmp_path / "wh").exists()  # nothing was written, no warehouse made


def test_unreachable_master_from_the_environment_in_process(tmp_path, monkeypatch, capsys):
    """In-process: the check fails before a session is asked for, so the test run's own
    (local) session, if any, is untouched; the diagnostic names $EVITA_MASTER."""
    from pyspark import SparkContext

    before = SparkContext._active_spark_context
    url = f"spark://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("EVITA_MASTER", url)
    assert main(["run", *TC]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"$EVITA_MASTER: error[master-unreachable]: cannot reach the Spark master {url}")
    assert "check the host and port in $EVITA_MASTER" in err
    assert SparkContext._active_spark_context is before


def test_a_master_url_without_a_port():
    with pytest.raises(evita.EvitaError) as e:
        check_master("spark://127.0.0.1")
    assert e.value.first.code == "master-unreachable" and "no port in the URL" in e.value.first.message


def test_one_reachable_address_of_several_is_enough():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:{closed_port()},127.0.0.1:{port}")  # no error
    check_master("local[2]")  # nothing to check
    check_master("yarn")


def test_package_and_its_launcher(tmp_path):
    """`evita package` writes the zip (evita/ at its top, with the grammar, the stages and
    the lattice) and the launcher; the launcher runs the command line from the zip alone
    (unpacked, since Evita reads those files as files)."""
    out = tmp_path / "dist"
    p = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "package", "--output", str(out / "evita.zip"),
                        "--launcher", str(out / "evita_main.py")],
                       cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "spark-submit --master MASTER --py-files" in p.stdout
    names = set(zipfile.ZipFile(out / "evita.zip").namelist())
    assert {"evita/__init__.py", "evita/bootstrap/grammar.lark", "evita/stage_lattice.dl",
            "evita/stages/partition.dl", "evita/runtime/rounds.py"} <= names
    # the launcher with only the zip on the path, as spark-submit --py-files gives it
    env = _env(tmp_path, PYTHONPATH=str(out / "evita.zip"))
    p = subprocess.run([sys.executable, str(out / "evita_main.py"), "check", str(EXAMPLES / "tc.dl")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"{EXAMPLES / 'tc.dl'}: ok")


def test_a_warehouse_uri_is_kept_as_given(monkeypatch, tmp_path):
    """`--warehouse s3a://...` (or hdfs://, file://) reaches catalog/fs.py as given; a
    local path is made absolute. `check` starts no Spark."""
    monkeypatch.setenv("EVITA_WAREHOUSE", "unchanged")  # restored after the test
    assert main(["check", str(EXAMPLES / "tc.dl"), "--warehouse", "s3a://bucket/evita"]) == 0
    assert os.environ["EVITA_WAREHOUSE"] == "s3a://bucket/evita"
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(EXAMPLES / "tc.dl"), "--warehouse", "wh"]) == 0
    assert os.environ["EVITA_WAREHOUSE"] == str(tmp_path.resolve() / "wh")


# ---------------------------------------------------------------- Spark Connect, without a server

def test_unreachable_connect_server_in_process(tmp_path, monkeypatch, capsys):
    """`--remote` to a port where nothing listens: a positioned error before any session
    is asked for (the run's own local session is untouched)."""
    from pyspark import SparkContext

    before = SparkContext._active_spark_context
    url = f"sc://127.0.0.1:{closed_port()}"
    monkeypatch.chdir(tmp_path)
    assert main(["sql", "SELECT 1", "--remote", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"<command line>: error[remote-unreachable]: cannot reach the Spark Connect server {url}")
    assert "evita server status" in err and "Traceback" not in err
    assert SparkContext._active_spark_context is before


def test_a_port_that_is_not_a_connect_server(tmp_path, monkeypatch, capsys):
    """A listener that never speaks gRPC (here: accepts and says nothing) is named as such
    within the timeout, instead of the Connect client's minutes of retries."""
    from evita.runtime import connect

    monkeypatch.setattr(connect, "TIMEOUT", 1.0)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setenv("EVITA_REMOTE", f"127.0.0.1:{port}")
        started = time.monotonic()
        assert main(["sql", "SELECT 1"]) == 1
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith(f"$EVITA_REMOTE: error[remote-unreachable]: 127.0.0.1:{port} accepts connections but "
                          "does not answer as a Spark Connect server")


def test_which_spark_a_command_uses(tmp_path, monkeypatch):
    """--remote, then --master, then $EVITA_REMOTE, then $EVITA_MASTER, then the
    warehouse's server (none runs here: Spark starts in the process)."""
    from evita.runtime.server import remote_to_use

    for var in ("EVITA_REMOTE", "EVITA_MASTER", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(var, raising=False)
    wh = tmp_path / "wh"
    assert remote_to_use("h:1", "local[2]", wh)[0] == "sc://h:1"
    assert remote_to_use(None, "local[2]", wh) == (None, None)
    monkeypatch.setenv("EVITA_REMOTE", "sc://r:2")
    assert str(remote_to_use(None, None, wh)[1].file) == "$EVITA_REMOTE"
    assert remote_to_use(None, "local[2]", wh) == (None, None)
    monkeypatch.delenv("EVITA_REMOTE")
    monkeypatch.setenv("EVITA_MASTER", "local[1]")
    assert remote_to_use(None, None, wh) == (None, None)
    monkeypatch.delenv("EVITA_MASTER")
    assert remote_to_use(None, None, wh) == (None, None)  # no server for this warehouse
    (wh).mkdir()
    (wh / "evita-server.json").write_text('{"url": "sc://127.0.0.1:1", "port": 1, "pgid": 999999999}')
    assert remote_to_use(None, None, wh) == (None, None)  # a stale state file is ignored


def test_server_status_and_stop_without_a_server(tmp_path):
    env = _env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "server", "status"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stdout.startswith("no server running for ")
    p = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", "server", "stop"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("no server running for ")
