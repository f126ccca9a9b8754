"""A Spark standalone cluster on this machine, from what pip installed (`scripts/local-cluster`).

    scripts/local-cluster start [--port 7077] [--workers 2] [--cores 1] [--memory 2g]
    scripts/local-cluster status
    scripts/local-cluster stop

One master and N workers on 127.0.0.1, each a JVM started with the launcher inside the
`pyspark` package (`pyspark/bin/spark-class org.apache.spark.deploy.master.Master ...`),
`SPARK_HOME` pointed at that package: no Spark download, nothing to set by hand. Each
worker offers a bounded share of the machine (one core and 2 GiB by default; the daemons
themselves get 512 MiB each). Then

    evita run PROGRAM --master spark://127.0.0.1:7077      (or EVITA_MASTER=spark://...)

The state directory ($EVITA_CLUSTER_DIR, default /tmp/evita-cluster) keeps `cluster.json`
(the pids, ports and master URL), one log per daemon and the workers' scratch space.
`stop` ends exactly the processes `start` started: each daemon runs in a process group of
its own, which also holds the executors and Python workers it launched. `start` returns
once the master's JSON endpoint (`http://127.0.0.1:WEBUI/json/`) lists every worker ALIVE,
and stops what it started if that takes longer than the timeout.

The daemons run without PYTHONPATH: executors get Evita from the zip the driver ships
(`runtime/session.py`), never from the environment they inherit.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HOST = "127.0.0.1"


class ClusterError(Exception):
    """The cluster did not start (or is not in the state asked for); the message says why."""


@dataclass
class Daemon:
    role: str  # "master" or "worker-N"
    pid: int
    log: str


@dataclass
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    webui: str  # http://127.0.0.1:PORT
    state_dir: str
    daemons: list = field(default_factory=list)

    def save(self) -> None:
        Path(self.state_dir, "cluster.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, state_dir) -> "Cluster | None":
        f = Path(state_dir, "cluster.json")
        if not f.exists():
            return None
        d = json.loads(f.read_text())
        d["daemons"] = [Daemon(**x) for x in d["daemons"]]
        return cls(**d)


def state_dir(path=None) -> Path:
    return Path(path or os.environ.get("EVITA_CLUSTER_DIR") or "/tmp/evita-cluster").resolve()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _env(home: Path, conf: Path, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_CONF_DIR", "SPARK_HOME")}
    env.update(
        SPARK_HOME=str(home),
        SPARK_CONF_DIR=str(conf),  # empty: Spark's own defaults, daemons log at INFO into their log files
        SPARK_LOCAL_IP=HOST,
        SPARK_WORKER_DIR=str(work),
        SPARK_DAEMON_MEMORY=os.environ.get("EVITA_CLUSTER_DAEMON_MEMORY", "512m"),
        PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON") or sys.executable,
        SPARK_NO_DAEMONIZE="1",
    )
    return env


def _spawn(home: Path, args: list, log: Path, env: dict) -> int:
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=log.parent, start_new_session=True)
    return proc.pid  # spark-class execs java: this pid is the JVM, and the leader of its process group


def start(port: int = 7077, workers: int = 2, cores: int = 1, memory: str = "2g", webui_port: int | None = None,
          directory=None, timeout: float = 90.0) -> Cluster:
    """Start a master and `workers` workers; return once all are ALIVE at the master."""
    d = state_dir(directory)
    running = status(d)
    if running is not None and running["alive"]:
        raise ClusterError(f"a cluster started from {d} is running already ({running['master']}); "
                           f"stop it first: scripts/local-cluster stop")
    if running is not None:  # leftovers of a cluster that died: make sure nothing of it remains
        stop(d)
    if not port_free(port):
        raise ClusterError(f"port {port} on {HOST} is in use (another Spark master?): choose another with --port")
    home = spark_home()
    if not (home / "bin" / "spark-class").exists():
        raise ClusterError(f"{home}/bin/spark-class not found: is pyspark installed with its launcher scripts?")
    for sub in ("conf", "work", "logs"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    env = _env(home, d / "conf", d / "work")
    webui_port = webui_port or free_port()
    cluster = Cluster(f"spark://{HOST}:{port}", f"http://{HOST}:{webui_port}", str(d))
    try:
        log = d / "logs" / "master.log"
        pid = _spawn(home, [MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(webui_port)],
                     log, env)
        cluster.daemons.append(Daemon("master", pid, str(log)))
        cluster.save()
        for i in range(1, workers + 1):
            log = d / "logs" / f"worker-{i}.log"
            pid = _spawn(home, [WORKER_CLASS, cluster.master, "--host", HOST, "--cores", str(cores),
                                "--memory", memory, "--webui-port", str(free_port()),
                                "--work-dir", str(d / "work" / f"worker-{i}")], log, env)
            cluster.daemons.append(Daemon(f"worker-{i}", pid, str(log)))
            cluster.save()
        _wait_alive(cluster, workers, timeout)
    except BaseException:
        stop(d)
        raise
    return cluster


def master_state(cluster: Cluster, timeout: float = 2.0) -> dict | None:
    """The master's own view (its web UI's JSON), or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"{cluster.webui}/json/", timeout=timeout) as r:
            return json.loads(r.read().decode())
    except (OSError, ValueError):
        return None


def alive_workers(state: dict | None) -> int:
    if not state:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def _wait_alive(cluster: Cluster, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        dead = [x for x in cluster.daemons if not _running(x.pid)]
        if dead:  # a second look: spark-class exec-ing the JVM can read as neither, for an instant
            time.sleep(1.0)
            dead = [x for x in dead if not _running(x.pid)]
        if dead:
            raise ClusterError(f"{dead[0].role} (pid {dead[0].pid}) exited during start-up; "
                               f"its log, {dead[0].log}, ends:\n{_tail(dead[0].log)}")
        state = master_state(cluster)
        if state is not None and state.get("url") not in (None, cluster.master):
            raise ClusterError(f"the master came up at {state.get('url')}, not {cluster.master} (was the port taken?)")
        if alive_workers(state) >= workers:
            return
        if time.monotonic() > deadline:
            seen = "does not answer" if state is None else f"lists {alive_workers(state)} of {workers} workers alive"
            raise ClusterError(f"the master at {cluster.master} (web UI {cluster.webui}) {seen} after "
                               f"{timeout:.0f} s; the logs are in {Path(cluster.state_dir) / 'logs'}. "
                               f"master.log ends:\n{_tail(cluster.daemons[0].log)}")
        time.sleep(0.5)


def _tail(log: str, lines: int = 15) -> str:
    try:
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _running(pid: int) -> bool:
    """Is `pid` a live Spark daemon (not a zombie, not a reused pid)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return False
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"org.apache.spark.deploy" in cmd or b"spark-class" in cmd


def status(directory=None) -> dict | None:
    """What runs: None when no cluster was started from this state directory."""
    cluster = Cluster.load(state_dir(directory))
    if cluster is None:
        return None
    state = master_state(cluster) if _running(cluster.daemons[0].pid) else None
    daemons = [dict(role=x.role, pid=x.pid, running=_running(x.pid), log=x.log) for x in cluster.daemons]
    return dict(master=cluster.master, webui=cluster.webui, state_dir=cluster.state_dir, daemons=daemons,
                alive=any(x["running"] for x in daemons), workers_alive=alive_workers(state),
                applications=[a.get("name") for a in (state or {}).get("activeapps", [])])


def stop(directory=None, timeout: float = 15.0) -> list:
    """End every process `start` started from this state directory (their process groups:
    the daemons with their executors). Returns the roles that were still running."""
    d = state_dir(directory)
    cluster = Cluster.load(d)
    if cluster is None:
        return []
    stopped = []
    for x in reversed(cluster.daemons):  # workers first, then the master
        if _running(x.pid):
            stopped.append(x.role)
        _signal_group(x.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_group_alive(x.pid) for x in cluster.daemons) and time.monotonic() < deadline:
        time.sleep(0.2)
    for x in cluster.daemons:
        _signal_group(x.pid, signal.SIGKILL)
    Path(d, "cluster.json").unlink(missing_ok=True)
    return stopped


def _signal_group(pid: int, sig) -> None:
    """Signal the process group `pid` leads (start_new_session made it one), only if it is ours."""
    try:
        if os.getpgid(pid) == pid and _running(pid):
            os.killpg(pid, sig)
        elif _group_alive(pid):  # the daemon is gone, but executors it launched are left
            os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """Any live process in the group `pgid` (the daemon or what it launched)?"""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            return True
    return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="local-cluster", description="A Spark standalone cluster on 127.0.0.1, "
                                "from the pyspark package (state in $EVITA_CLUSTER_DIR or /tmp/evita-cluster)")
    p.add_argument("command", choices=("start", "stop", "status"))
    p.add_argument("--dir", help="state directory (pids, logs)")
    p.add_argument("--port", type=int, default=7077, help="master port (default 7077)")
    p.add_argument("--webui-port", type=int, help="master web UI port (default: a free one)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    p.add_argument("--memory", default="2g", help="memory each worker offers (default 2g)")
    p.add_argument("--timeout", type=float, default=90, help="seconds to wait for the workers (default 90)")
    args = p.parse_args(argv)
    try:
        if args.command == "start":
            c = start(args.port, args.workers, args.cores, args.memory, args.webui_port, args.dir, args.timeout)
            print(f"master {c.master} (web UI {c.webui}), {args.workers} workers alive "
                  f"({args.cores} core, {args.memory} each); logs in {c.state_dir}/logs")
            print(f"run with: evita run PROGRAM --master {c.master}   (or export EVITA_MASTER={c.master})")
        elif args.command == "stop":
            roles = stop(args.dir)
            print(f"stopped {', '.join(roles)}" if roles else "no cluster running")
        else:
            s = status(args.dir)
            if s is None or not s["alive"]:
                print("no cluster running" + (f" (stale state in {s['state_dir']}: run stop)" if s else ""))
                return 1
            print(f"master {s['master']} (web UI {s['webui']}): {s['workers_alive']} workers alive")
            for x in s["daemons"]:
                print(f"  {x['role']:<9} pid {x['pid']:<7} {'running' if x['running'] else 'NOT running'}  {x['log']}")
            if s["applications"]:
                print(f"  applications: {', '.join(s['applications'])}")
    except ClusterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
