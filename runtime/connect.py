"""Evita as a Spark Connect client: no JVM in this process, the server runs the jobs.

    evita run PROGRAM --remote sc://127.0.0.1:15002     (or EVITA_REMOTE=sc://...)

Which server, in this order: `--remote`; else, unless `--master` asks for a master of its
own, `$EVITA_REMOTE`; else, unless `$EVITA_MASTER` does, the server `evita server start`
left running for this warehouse (`runtime/server.py`). Otherwise Evita starts Spark in
this process as before (`session.spark_session`).

Connect has no SparkContext and no RDDs: Evita's path uses only the DataFrame API and SQL
(`mapInArrow`/`mapInPandas` for the evaluators that run inside tasks), and asks
`session.spark_context` before it counts jobs. Its Python runs on the server's workers,
so the package goes there as a session artifact (`addArtifacts(..., pyfile=True)`): the
server needs no `pip install evita`. The warehouse's path is read by the server: it must
be the same folder there (same machine, or a shared filesystem or object store).
"""
from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

DEFAULT_PORT = 15002
TIMEOUT = float(os.environ.get("EVITA_REMOTE_TIMEOUT", "5"))  # seconds to wait for the port to answer
_shipped: set = set()

# Per-session settings Evita's plans are tuned for (the server's static settings, such
# as its master and memory, are its own: `evita server start` sets them).
SESSION_SETTINGS = {
    "spark.sql.shuffle.partitions": os.environ.get("EVITA_SHUFFLE_PARTITIONS", "4"),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def normalized(url: str) -> str:
    """`sc://host:port[/;params]`; a bare `host:port` gets the scheme.

    >>> normalized("127.0.0.1:15002"), normalized("sc://h")
    ('sc://127.0.0.1:15002', 'sc://h')
    """
    url = url.strip()
    return url if "://" in url else f"sc://{url}"


def address(url: str):
    """(host, port) of a Connect URL, port 15002 unless given; None if it is not one.

    >>> address("sc://10.0.0.5:443/;token=x"), address("sc://h"), address("spark://h:7077")
    (('10.0.0.5', 443), ('h', 15002), None)
    """
    u = urlsplit(normalized(url))
    if u.scheme != "sc" or not u.hostname:
        return None
    try:
        return u.hostname, u.port or DEFAULT_PORT
    except ValueError:
        return None


def check_remote(url: str, where) -> None:
    """error[remote-unreachable] unless the server's port accepts a connection: the
    Connect client would otherwise retry for minutes before it says anything."""
    from ..bootstrap.diagnostics import Diagnostic, EvitaError

    given = "--remote" if str(where.file) == "<command line>" else str(where.file)
    hostport = address(url)
    if hostport is None:
        raise EvitaError([Diagnostic("remote-unreachable", f"{url} is not a Spark Connect URL", where, url,
                                     f"write sc://HOST:PORT in {given} (the port is 15002 unless the server "
                                     f"says otherwise)")])
    try:
        with socket.create_connection(hostport, timeout=TIMEOUT):
            pass
    except OSError as e:
        why = f"no answer within {TIMEOUT:g} s" if isinstance(e, socket.timeout) else (e.strerror or str(e))
        raise EvitaError([Diagnostic(
            "remote-unreachable", f"cannot reach the Spark Connect server {url}: {hostport[0]}:{hostport[1]}: "
            f"{why}", where, url, f"is the server running? (on this machine: evita server status, or evita server "
            f"start); check the host and port in {given}, and that no firewall blocks the port")]) from None
    if not _speaks_grpc(url, hostport):
        raise EvitaError([Diagnostic(
            "remote-unreachable", f"{hostport[0]}:{hostport[1]} accepts connections but does not answer as a "
            f"Spark Connect server (no gRPC handshake within {TIMEOUT:g} s)", where, url,
            f"is that port a Spark Connect server's? (evita server status); check the port in {given}")])


def _speaks_grpc(url: str, hostport) -> bool:
    """Does the port complete an HTTP/2 (gRPC) handshake? The Connect client would retry
    a port that does not for minutes. Channels with TLS or a token are left to the client."""
    params = url.split(";", 1)[1] if ";" in url else ""
    if "use_ssl=true" in params or "token=" in params:
        return True
    import grpc

    channel = grpc.insecure_channel(f"{hostport[0]}:{hostport[1]}")
    try:
        grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def connect_session(url: str, where):
    """A Spark Connect session on `url`, with Evita's session settings and package."""
    from ..bootstrap.activity import doing
    from ..bootstrap.diagnostics import Diagnostic, EvitaError

    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as e:
        raise EvitaError([Diagnostic(
            "connect-client", f"Spark Connect needs its client libraries, which are not installed: {e}", where,
            url, "pip install 'evita[connect]' (grpcio, grpcio-status, googleapis-common-protos, zstandard)")]) \
            from None
    check_remote(url, where)
    from pyspark.sql import SparkSession

    with doing(f"connecting to the Spark Connect server {url}"):
        spark = SparkSession.builder.remote(url).getOrCreate()
        try:
            for key, value in SESSION_SETTINGS.items():
                spark.conf.set(key, value)
        except Exception as e:
            from ..bootstrap.stopping import _first_line

            raise EvitaError([Diagnostic(
                "remote-unreachable", f"the Spark Connect server {url} accepted the connection but did not "
                f"answer as one: {_first_line(str(e))}", where, url,
                "is that port a Spark Connect server's? (evita server status); is it the same Spark version "
                "as pyspark here?")]) from None
    ship_package_remote(spark)
    return spark


def ship_package_remote(spark) -> None:
    """Give the server's Python workers Evita for this session (once per session)."""
    from .package import imported_from_zip, package_zip

    key = getattr(spark, "session_id", None) or id(spark)
    if key in _shipped:
        return
    zip_path = imported_from_zip() or package_zip()
    spark.addArtifacts(str(zip_path), pyfile=True)
    _shipped.add(key)
