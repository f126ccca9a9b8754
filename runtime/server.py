"""A warm Spark for the command line: `evita server start|stop|status`.

Every command otherwise starts a JVM of its own, and the start-up is most of the time
of `evita catalog` or `evita sql`. The server is a Spark Connect server (the pyspark
package's `sbin/start-connect-server.sh`, `SPARK_HOME` pointed at the package) with the
catalog warehouse attached; while it runs, commands on the same warehouse find it
through `WAREHOUSE/evita-server.json` and connect to it instead of starting Spark
(`remote_to_use`). `--master` or `$EVITA_MASTER` on a command bypasses it.

The server runs in a process group of its own (the launcher scripts, the JVM and the
Python workers it starts); `stop` ends that group. Its log is `WAREHOUSE/evita-server/
server.log`. `start` returns once the server has answered a first query and attached
the catalog, so the first command is as quick as the later ones.
"""
from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import sql_daemon

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"
STATE_FILE = "evita-server.json"


class ServerError(Exception):
    """The server did not start or stop as asked; the message says why."""


def _files(warehouse) -> tuple:
    from ..catalog.fs import Loc

    loc = Loc.of(warehouse)
    if not loc.local:
        raise ServerError(f"the warehouse {loc} is not a local folder: a server for a shared warehouse is "
                          f"started with Spark's own sbin/start-connect-server.sh, and commands use it with "
                          f"--remote sc://HOST:15002 (docs/deploy.md)")
    root = Path(str(loc))
    return root / STATE_FILE, root / "evita-server"


def _read(state: Path) -> dict | None:
    try:
        return json.loads(state.read_text())
    except (OSError, ValueError):
        return None


def _group_alive(pgid: int) -> bool:
    """Does any process of group `pgid` still run a thread? A JVM ending (SIGTERM runs
    its shutdown hooks, then exit tears down a hundred threads) shows its main thread
    as a zombie while other threads still hold its sockets, the server's port among
    them: a process counts as ended only when every thread has."""
    return any(_runs(pid) for pid in _members(pgid))


def _members(pgid: int) -> list:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def _runs(pid: int) -> bool:
    """Some thread of `pid` is not a zombie (a zombie leader with live threads runs)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            if (task / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                return True
        except (OSError, IndexError):
            continue
    return False


def _server_jvm(pgid: int) -> int | None:
    """The pid of the Connect server's JVM in process group `pgid`, if it runs."""
    for pid in _members(pgid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if SERVER_CLASS.encode() in argv and b"java" in argv.split(b"\0")[0] and _runs(pid):
            return pid
    return None


def _answers(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def running(warehouse) -> dict | None:
    """The server started for this warehouse, if it runs and answers: its state (url,
    pid, port, log) plus `file`, the state file. A stale state file is ignored."""
    try:
        state_file, _ = _files(warehouse)
    except ServerError:
        return None
    state = _read(state_file)
    if not state or not _group_alive(state["pgid"]) or not _answers(state["port"]):
        return None
    return dict(state, file=str(state_file))


def remote_to_use(remote: str | None, master: str | None, warehouse):
    """The Connect URL a command uses and where it was given: `--remote`, else
    $EVITA_REMOTE, else the server started for this warehouse (unless a master is
    asked for); (None, None): start Spark here."""
    from ..bootstrap.syntax import Span
    from .connect import normalized
    from .inputs import COMMAND_LINE

    if remote:
        return normalized(remote), COMMAND_LINE
    if master:
        return None, None
    if os.environ.get("EVITA_REMOTE"):
        return normalized(os.environ["EVITA_REMOTE"]), Span("$EVITA_REMOTE", 0, 0)
    if os.environ.get("EVITA_MASTER") or "PYSPARK_GATEWAY_PORT" in os.environ:
        return None, None
    server = running(warehouse)
    if server is not None:
        return server["url"], Span(server["file"], 0, 0)
    return None, None


def start(warehouse, port: int = 15002, master: str = "local[*]", driver_memory: str | None = None,
          timeout: float = 120.0) -> dict:
    """Start the server for `warehouse`; return its state once it took a first query."""
    from ..catalog.fs import Loc
    from .cluster import spark_home

    state_file, folder = _files(warehouse)
    replaced = _end_interrupted_start(warehouse, state_file)
    current = running(warehouse)
    if current is not None:
        raise ServerError(f"a server for {Loc.of(warehouse)} runs already at {current['url']} "
                          f"(pid {current['pgid']}); stop it first: evita server stop")
    if _answers(port):
        raise ServerError(f"port {port} on {HOST} is in use (another server?): choose another with --port")
    home = spark_home()
    script = home / "sbin" / "start-connect-server.sh"
    if not script.exists():
        raise ServerError(f"{script} not found: this pyspark ({home}) has no Spark Connect server; "
                          f"it needs pyspark 3.5 or later, installed from PyPI")
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "server.log"
    env = dict(os.environ)
    env.pop("EVITA_REMOTE", None)
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP=HOST, SPARK_LOG_DIR=str(folder), SPARK_PID_DIR=str(folder),
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON") or sys.executable,
               SPARK_CONF_DIR=str(Path(__file__).with_name("log4j2.properties").parent))
    settings = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": HOST,
        "spark.driver.host": HOST,
        "spark.ui.enabled": "false",
        # no cache of resolved catalog tables: other processes write the warehouse, and a
        # client would otherwise refresh each table on every attach and save
        "spark.sql.filesourceTableRelationCacheSize": "0",
        "spark.sql.warehouse.dir": str(Loc.of(warehouse)),
        "spark.sql.shuffle.partitions": os.environ.get("EVITA_SHUFFLE_PARTITIONS", "4"),
        "spark.default.parallelism": os.environ.get("EVITA_DEFAULT_PARALLELISM", "4"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    args = ["bash", str(script), "--wait", "--master", master,
            "--driver-memory", driver_memory or os.environ.get("EVITA_DRIVER_MEMORY", "4g")]
    for key, value in settings.items():
        args += ["--conf", f"{key}={value}"]
    # the `evita sql` daemon (runtime/sql_daemon.py) starts beside the server's launcher, in
    # its process group: whatever ends the server's group (stop, an interrupted start) ends it
    token = secrets.token_hex(16)
    ready = folder / sql_daemon.READY_FILE
    ready.unlink(missing_ok=True)
    daemon = [sys.executable, "-m", "evita.runtime.sql_daemon", str(Loc.of(warehouse)), str(port), str(folder)]
    launch = ["bash", "-c", f"{shlex.join(daemon)} & exec {shlex.join(args)}"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(launch, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env, **{sql_daemon.TOKEN_ENV: token}), cwd=folder, start_new_session=True)
    state = dict(url=f"sc://{HOST}:{port}", port=port, pgid=proc.pid, master=master, log=str(log),
                 warehouse=str(Loc.of(warehouse)), started=time.strftime("%Y-%m-%d %H:%M:%S"), ready=False)
    _write_state(state_file, state)
    try:
        _wait_answering(proc, port, log, timeout)
        answering = _sql_daemon_ready(ready, proc, timeout)
        if answering is None:  # the server works without it: `evita sql` then asks Spark directly
            _warm_up(state["url"], warehouse)
        else:
            state["sql"] = dict(answering, token=token)
    except BaseException:
        stop(warehouse)
        raise
    state["ready"] = True  # the start finished: a later start leaves this server alone
    _write_state(state_file, state)
    return dict(state, file=str(state_file), replaced=replaced)


def _write_state(state_file: Path, state: dict) -> None:
    """Whole or not at all (a temporary file renamed into place): a start killed while
    writing it must not leave a torn file that hides its server from `stop`."""
    from ..catalog.fs import Loc

    mask = os.umask(0o077)  # it holds the `evita sql` daemon's token: for this user's eyes only
    try:
        Loc.of(state_file).write_atomically(json.dumps(state, indent=2).encode())
    finally:
        os.umask(mask)


def _end_interrupted_start(warehouse, state_file: Path) -> int | None:
    """A start killed before it finished (`kill -9` of `evita server start`) leaves its
    server starting on in its own process group, the state file naming it with `ready`
    false, never warmed up; left alone it would take the port from this start, or be
    reported as running. End it (it is this warehouse's, by the state file) and say
    which it was: its pid. (A state file without `ready` is an older Evita's: ready.)"""
    left = _read(state_file)
    if left is None or left.get("ready", True) or not _group_alive(left.get("pgid", -1)):
        return None
    stop(warehouse)
    return left["pgid"]


def _wait_answering(proc, port: int, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not _answers(port):
        if proc.poll() is not None:
            raise ServerError(f"the server exited during start-up (code {proc.returncode}); its log, {log}, "
                              f"ends:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise ServerError(f"the server did not open port {port} within {timeout:.0f} s; its log, {log}, "
                              f"ends:\n{_tail(log)}")
        time.sleep(0.25)


def _sql_daemon_ready(ready: Path, proc, timeout: float) -> dict | None:
    """The `evita sql` daemon's port and pid once it has warmed up (it attaches the catalog
    and runs a first query, as `_warm_up` would), or None if it could not start (its
    reason is in the server's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        said = _read(ready)
        if said is not None:
            return said if "port" in said else None
        time.sleep(0.1)
    return None


def _warm_up(url: str, warehouse) -> None:
    """Attach the catalog and run a first query through a client, as a command would:
    the server's first query pays for class loading and code generation, not the user's."""
    from ..catalog import store
    from .connect import connect_session
    from .inputs import COMMAND_LINE

    spark = connect_session(url, COMMAND_LINE)
    try:
        store.attach(spark, warehouse)
        spark.sql(f"SELECT count(*) FROM {store.qualified('program')}").collect()
    finally:
        spark.stop()  # this client's session only: the server goes on


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(warehouse, timeout: float = 20.0) -> bool:
    """End the server's process group; True if something ran."""
    state_file, _ = _files(warehouse)
    state = _read(state_file)
    if state is None:
        return False
    pgid = state["pgid"]
    was = _group_alive(pgid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + timeout
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _group_alive(pgid):
            break
    _wait_closed(state.get("port"), timeout)
    state_file.unlink(missing_ok=True)
    return was


def _wait_closed(port, timeout: float) -> None:
    """The port of an ended server closes with its last thread; a start on the same port
    right after `stop` must not find it answering."""
    deadline = time.monotonic() + timeout
    while port and _answers(port) and time.monotonic() < deadline:
        time.sleep(0.2)


def status(warehouse) -> dict | None:
    """The state file's contents with `alive` and `answers`, or None if none was left."""
    state_file, _ = _files(warehouse)
    state = _read(state_file)
    if state is None:
        return None
    return dict(state, file=str(state_file), alive=_group_alive(state["pgid"]), answers=_answers(state["port"]),
                jvm=_server_jvm(state["pgid"]))
