"""`evita sql` answered by the warm server without a Spark client in the command.

With no server, `evita sql` starts a JVM; with `evita server start`'s Spark Connect
server it still pays, in every command, for importing pyspark's Connect client (pandas,
pyarrow, grpc: about 1.3 s) and for attaching the catalog (round trips). The server
therefore also starts this daemon, in its process group (so `evita server stop` ends it
with the server): one Connect client session, kept warm with the catalog attached, that
answers queries on 127.0.0.1 at a port of its choosing. `evita server start` records the
port and a random token in WAREHOUSE/evita-server.json; a request without the token is
refused.

The command's side (`ask`) is the standard library only. One request per connection,
one JSON line each way:

    -> {"token": ..., "query": "SELECT ...", "limit": 200}
    <- {"columns": [...], "types": [...], "rows": [[...], ...], "notes": [...]}
    <- {"error": "rejected" | "failed", "message": "..."}   the query's own fault
    <- {"error": "unavailable", "message": "..."}           the daemon's: ask Spark directly

A value that is not a JSON number, string, boolean or null is sent as the text the
command would print for it (`str`), so the table is the one the direct path shows.

Answers are never stale: before each query the daemon compares the catalog's stamp
(`store.stamp`, a stat of each folder a commit changes) with the one of its last attach
and attaches again when they differ. Queries run one at a time (one session, a lock).
If the daemon is down, its port taken by something else, or its session lost, `ask`
returns None and `evita sql` goes the direct way, silently.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

READY_FILE = "sql-daemon.json"  # in WAREHOUSE/evita-server/: the daemon's port, or why it did not start
TOKEN_ENV = "EVITA_SQL_TOKEN"
# Queries of the shapes users ask (a scan of Parquet, a filter, a join, an aggregate, an
# order), a few times: a young server's first queries pay for loading and JIT-compiling
# Spark's analyzer, optimizer, code generator and Parquet reader (seconds on a loaded
# machine), which `evita server start`, not the user's first `evita sql`, should pay. Over
# a small file of its own and `range`: the catalog of a new warehouse is empty, and Spark
# answers a query over empty tables without running anything.
WARM_UP = ("SELECT count(*) FROM {program}",
           "SELECT w.name, count(*) AS n FROM parquet.`{file}` w JOIN (SELECT id % 5 AS k FROM range(50)) r "
           "ON w.k = r.k WHERE w.name LIKE '%1%' GROUP BY w.name ORDER BY n DESC, w.name")
# At load 13: 17.8 s for the first round, 3.1 s, 2.5 s for the next ones, ~2 s after that.
WARM_UP_ROUNDS = 2
CONNECT_TIMEOUT = 0.5  # seconds: a local daemon that does not accept at once is not there


# ---------------------------------------------------------------- the command's side

def ask(query: str, limit: int, warehouse) -> dict | None:
    """The daemon's answer to `query` for this warehouse's server, or None: no daemon
    (no server, an older server, a stale port), or it cannot answer now."""
    from .server import ServerError, _files

    try:
        state_file, _ = _files(warehouse)
        state = json.loads(state_file.read_text())
        port, token = state["sql"]["port"], state["sql"]["token"]
    except (ServerError, OSError, ValueError, KeyError, TypeError):
        return None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT) as conn:
            conn.settimeout(None)  # the query takes what it takes; Ctrl-C still ends the wait
            conn.sendall(json.dumps({"token": token, "query": query, "limit": limit}).encode() + b"\n")
            answer = json.loads(_read_line(conn))
    except (OSError, ValueError):
        return None
    if not isinstance(answer, dict) or answer.get("error") == "unavailable":
        return None
    return answer


def _read_line(conn) -> bytes:
    chunks = []
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)


# ---------------------------------------------------------------- the daemon

class Daemon:
    """One warm Connect session on the server at `url`, attached to `warehouse`."""

    def __init__(self, url: str, warehouse):
        self.url, self.warehouse = url, warehouse
        self.lock = threading.Lock()
        self.spark, self.stamp = None, None

    def start(self, folder) -> None:
        """Connect, attach, and warm the server up (WARM_UP, over a file written in `folder`)."""
        from pathlib import Path

        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..catalog import store
        from .connect import connect_session
        from .inputs import COMMAND_LINE
        from .session import quiet_spark_loggers, spark_logs

        spark_logs(shown=False)
        self.spark = connect_session(self.url, COMMAND_LINE)
        quiet_spark_loggers()
        self._attach()
        file = Path(folder) / "warm-up.parquet"
        pq.write_table(pa.table({"name": [f"r{i}" for i in range(20)], "k": [i % 5 for i in range(20)]}), file)
        for round_ in range(1, WARM_UP_ROUNDS + 1):
            began = time.perf_counter()
            for query in WARM_UP:
                self.spark.sql(query.format(program=store.qualified("program"),
                                            file=str(file).replace("`", "``"))).collect()
            _log(f"warm-up round {round_} took {time.perf_counter() - began:.2f} s")

    def _attach(self) -> list:
        from ..catalog import store

        stamp = store.stamp(self.warehouse)
        store.attach(self.spark, self.warehouse)
        self.stamp = stamp  # taken before: a commit during the attach is seen by the next query
        notes = list(store.RECOVERED)
        store.RECOVERED.clear()
        return notes

    def answer(self, request: dict) -> dict:
        from ..catalog import store
        from .server import _answers

        with self.lock:  # one session: one query at a time
            try:
                if not _answers(_port_of(self.url)):  # the server is gone: the client would retry for minutes
                    return {"error": "unavailable", "message": "the Spark Connect server does not answer"}
                began = time.perf_counter()
                notes = self._attach() if store.stamp(self.warehouse) != self.stamp else []
                attached = time.perf_counter()
            except Exception as e:  # noqa: BLE001 - the direct path will say it better
                _log(f"attach failed: {type(e).__name__}: {e}")
                self.stamp = None
                return {"error": "unavailable", "message": str(e)}
            answer = self._query(request["query"], int(request.get("limit", 200)))
            _log(f"answered in {time.perf_counter() - began:.2f} s (attach {attached - began:.2f} s): "
                 f"{answer.get('error') or len(answer['rows'])}")
            return dict(answer, notes=notes)

    def _query(self, query: str, limit: int) -> dict:
        from ..bootstrap.stopping import _first_line, describe_failure

        try:
            df = self.spark.sql(query)
            schema = df.schema
        except Exception as e:  # Spark's AnalysisException/ParseException carry a readable message
            return {"error": "rejected", "message": _first_line(str(e))}
        try:
            rows = df.limit(limit + 1).collect()
        except Exception as e:  # noqa: BLE001 - said in one line, as the command says it
            return {"error": "failed", "message": describe_failure(e)}
        return {"columns": schema.names, "types": [f.dataType.simpleString() for f in schema.fields],
                "rows": [[_plain(v) for v in row] for row in rows]}


def _plain(value):
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _port_of(url: str) -> int:
    from .connect import address

    return address(url)[1]


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} evita sql daemon: {message}", file=sys.stderr, flush=True)


def serve(warehouse: str, connect_port: int, folder: str, timeout: float = 120.0) -> int:
    """The daemon's life: listen, wait for the server, warm up, say where it listens
    (READY_FILE), then answer until the process group is ended."""
    from pathlib import Path

    from ..catalog.fs import Loc
    from .server import HOST, _answers

    token = os.environ.pop(TOKEN_ENV, "")
    ready = Loc.of(Path(folder) / READY_FILE)
    listener = socket.create_server((HOST, 0))
    daemon = Daemon(f"sc://{HOST}:{connect_port}", warehouse)
    try:
        if not token:
            raise RuntimeError(f"no {TOKEN_ENV} given")
        deadline = time.monotonic() + timeout
        while not _answers(connect_port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not open port {connect_port} within {timeout:.0f} s")
            time.sleep(0.25)
        daemon.start(folder)
    except BaseException as e:
        _log(f"not started: {type(e).__name__}: {e}")
        ready.write_atomically(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        return 1
    ready.write_atomically(json.dumps({"port": listener.getsockname()[1], "pid": os.getpid()}).encode())
    _log(f"answering on {HOST}:{listener.getsockname()[1]}")
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_handle, args=(daemon, conn, token), daemon=True).start()


def _handle(daemon: Daemon, conn, token: str) -> None:
    import hmac

    with conn:
        try:
            conn.settimeout(10)  # a request is one short line
            request = json.loads(_read_line(conn))
            if not hmac.compare_digest(str(request.get("token", "")), token):
                answer = {"error": "unavailable", "message": "wrong token"}
            else:
                conn.settimeout(None)
                answer = daemon.answer(request)
            conn.sendall(json.dumps(answer).encode() + b"\n")
        except Exception as e:  # noqa: BLE001 - a bad request or a client gone: the daemon goes on
            _log(f"request failed: {type(e).__name__}: {e}")


if __name__ == "__main__":  # started by `evita server start` (runtime/server.py)
    sys.exit(serve(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
