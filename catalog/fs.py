"""Where the catalog store's files live: a local path or a URI, through pyarrow's filesystems.

    Loc.of("/tmp/wh"), Loc.of("file:///tmp/wh")     the local filesystem (both the same Loc)
    Loc.of("hdfs://namenode:8020/evita")             HDFS (pyarrow needs libhdfs, i.e. a Hadoop install)
    Loc.of("s3a://bucket/evita")                     S3 (Spark's s3a:// is pyarrow's s3://)

A `Loc` is told to Spark as `uri` (table locations) and used by the store through the few
operations it needs: make a folder, list one, write and read a small file or a Parquet
file, move a file into place, delete. On the local filesystem and HDFS a move is an atomic
rename, which the store's commit relies on; on an object store it is a copy, so a crash
half way through a save may need the next save to finish it (the journal does that).

>>> a, b = Loc.of("/tmp/wh"), Loc.of("file:///tmp/wh")
>>> a == b, str(a / "evita-catalog" / "rule"), (a / "x").parent == a, a.local
(True, '/tmp/wh/evita-catalog/rule', True, True)
>>> str(Loc.of("s3a://bucket/evita") / "rule"), Loc.of("s3a://bucket/evita").local
('s3a://bucket/evita/rule', False)
"""
from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse


@dataclass(frozen=True)
class Loc:
    uri: str  # an absolute local path, or scheme://authority/path

    @staticmethod
    def of(where) -> "Loc":
        if isinstance(where, Loc):
            return where
        s = os.fspath(where)
        if "://" not in s:
            return Loc(str(Path(s).resolve()))
        u = urlparse(s)
        if u.scheme == "file":
            return Loc(str(Path(u.path).resolve()))
        return Loc(s.rstrip("/"))

    @property
    def local(self) -> bool:
        return "://" not in self.uri

    def __str__(self) -> str:
        return self.uri

    def __fspath__(self) -> str:  # local Locs pass for paths where a path is expected
        if not self.local:
            raise TypeError(f"{self.uri} is not a local path")
        return self.uri

    def __truediv__(self, name) -> "Loc":
        name = str(name)
        if name.startswith("/") or "://" in name:
            return Loc.of(name)
        return Loc(f"{self.uri.rstrip('/')}/{name}")

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def stem(self) -> str:
        return self.name.split(".", 1)[0] if not self.name.startswith(".") else self.name

    @property
    def parent(self) -> "Loc":
        head = self.uri.rstrip("/").rsplit("/", 1)[0]
        return Loc(head or "/")

    # the filesystem and the path on it
    @property
    def fs(self):
        return _filesystem(*self._split()[:2])

    @property
    def path(self) -> str:
        return self._split()[2]

    def _split(self):
        if self.local:
            return "", "", self.uri
        u = urlparse(self.uri)
        scheme = "s3" if u.scheme in ("s3a", "s3n") else u.scheme
        path = u.path if scheme == "hdfs" else f"{u.netloc}{u.path}"  # s3: bucket/key; hdfs: /path
        return scheme, u.netloc, path

    # operations
    def _info(self):
        return self.fs.get_file_info(self.path)

    def exists(self) -> bool:
        from pyarrow.fs import FileType

        return self._info().type != FileType.NotFound

    def is_dir(self) -> bool:
        from pyarrow.fs import FileType

        return self._info().type == FileType.Directory

    def mkdir(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def children(self) -> list:
        """(Loc, modification time in seconds) of each entry; none when the folder is missing."""
        from pyarrow.fs import FileSelector

        infos = self.fs.get_file_info(FileSelector(self.path, allow_not_found=True))
        return [(self / i.base_name, i.mtime.timestamp() if i.mtime else 0.0) for i in infos]

    def unlink(self) -> None:
        if self.exists():
            self.fs.delete_file(self.path)

    def rmtree(self) -> None:
        if self.is_dir():
            self.fs.delete_dir(self.path)

    def read_text(self) -> str:
        with self.fs.open_input_stream(self.path) as f:
            return f.read().decode()

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def write_bytes(self, data: bytes) -> None:
        with self.fs.open_output_stream(self.path) as f:
            f.write(data)

    def write_atomically(self, data: bytes, crash: str = "half-written") -> None:
        """Write the file whole or not at all: through a temporary name in the same folder
        (`.NAME.PID.tmp`), renamed onto this name. A reader, or a process killed half way,
        never sees part of it; a killed writer's temporary file is dropped by the next
        writer into the folder (`drop_stale_temporaries`). On an object store a write is
        already whole (one PUT) and a rename would be a copy: written directly there. HDFS
        renames onto no existing file: there the old file is deleted just before."""
        if self.uri.startswith(("s3a://", "s3n://", "s3://", "gs://", "abfs://", "abfss://")):
            self.write_bytes(data)
            return
        tmp = self.temporary()
        try:
            if self.local:  # synced before the rename: a power loss leaves the old file or the new one
                with open(tmp.path, "wb") as f:
                    f.write(data[:len(data) // 2])
                    f.flush()
                    crash_point(crash)  # tests: a kill -9 with half the file written
                    f.write(data[len(data) // 2:])
                    f.flush()
                    os.fsync(f.fileno())
            else:
                with self.fs.open_output_stream(tmp.path) as f:
                    f.write(data[:len(data) // 2])
                    f.flush()
                    crash_point(crash)
                    f.write(data[len(data) // 2:])
            if not self.local and self.exists():  # HDFS renames onto no file: the old one goes first
                self.unlink()
            tmp.move_to(self)
            self.parent.sync()
        except BaseException:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise

    def temporary(self) -> "Loc":
        """The name this file or folder is written under before it is renamed into place:
        `.NAME.PID.tmp` beside it (`drop_stale_temporaries` knows it)."""
        return self.parent / f".{self.name}.{os.getpid()}.tmp"

    def replace_folder(self, write, crash: str = "half-written") -> None:
        """Write a folder (Spark's Parquet output: many part files) whole or not at all:
        `write(loc)` fills a temporary folder beside this one, which then takes this
        name; the folder it replaces is moved aside first and deleted after. A process
        killed at any point leaves the old folder or the new one (or, between the two
        renames, none) and a temporary the next writer drops, never a half-written one."""
        tmp, aside = self.temporary(), self.parent / f".{self.name}.{os.getpid()}.old.tmp"
        try:
            write(tmp)
            crash_point(crash)
            if self.exists():
                self.move_to(aside)
            tmp.move_to(self)
            self.parent.sync()
        except BaseException:
            for t in (tmp, aside if self.exists() else None):
                if t is not None and t.exists():
                    t.rmtree() if t.is_dir() else t.unlink()
            raise
        if aside.exists():
            aside.rmtree() if aside.is_dir() else aside.unlink()

    def fsync(self) -> None:
        """Make this local file's bytes durable (a no-op elsewhere)."""
        if not self.local:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def sync(self) -> None:
        """Make this local folder's renames durable (a no-op elsewhere, and where the
        system cannot sync a folder)."""
        if not self.local:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def drop_stale_temporaries(self) -> list:
        """Remove the temporary files and folders (`.NAME.PID.tmp`, `write_atomically`,
        `replace_folder`) that processes killed while writing left in this local folder;
        those of live processes stay. Returns the removed names."""
        if not self.local:
            return []  # a process id means nothing across hosts
        dropped = []
        for child, _ in self.children():
            m = _TEMPORARY.fullmatch(child.name)
            if m and not _alive(int(m.group(1))):
                try:
                    child.rmtree() if child.is_dir() else child.unlink()
                    dropped.append(child.name)
                except OSError:
                    pass
        return dropped

    def move_to(self, target: "Loc") -> None:
        """Rename onto `target` (replacing it): atomic where the filesystem renames."""
        self.fs.move(self.path, target.path)

    def write_parquet(self, table) -> None:
        import pyarrow.parquet as pq

        pq.write_table(table, self.path, filesystem=self.fs)

    def parquet_metadata(self) -> dict:
        """The key-value metadata of a Parquet file's schema (its footer alone is read);
        empty when there is no file or it cannot be read."""
        import pyarrow.parquet as pq

        try:
            with self.fs.open_input_file(self.path) as fh:
                return dict(pq.read_schema(fh).metadata or {})
        except (OSError, ValueError):  # ArrowInvalid is a ValueError: not Parquet, or half written
            return {}

    def dataset(self, schema):
        """Every Parquet file in the folder, skipping names that start with `.` or `_`, as Spark does."""
        import pyarrow.dataset as ds

        return ds.dataset(self.path, schema=schema, format="parquet", filesystem=self.fs,
                          ignore_prefixes=[".", "_"])


_TEMPORARY = re.compile(r"\..+\.(\d+)(\.old)?\.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def crash_point(name: str) -> None:
    """Tests simulate `kill -9` at a named point of a write: EVITA_CRASH_AT=NAME (the
    store's `staged`, `committed`, `applying`; an output file's `half-written`; a cache's `half-written-cache`)."""
    if os.environ.get("EVITA_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


@lru_cache(maxsize=None)
def _filesystem(scheme: str, netloc: str):
    from pyarrow import fs

    if not scheme:
        return fs.LocalFileSystem()
    return fs.FileSystem.from_uri(f"{scheme}://{netloc}/")[0]


def joined(directory, name: str) -> str:
    """DIR/NAME as the user would write it: a local path stays as given (relative or
    not), a URI keeps its `//` (which `pathlib` would fold into one).

    >>> joined("facts", "edge.facts"), joined("s3a://bucket/in/", "edge.facts")
    ('facts/edge.facts', 's3a://bucket/in/edge.facts')
    """
    directory = os.fspath(directory)
    if "://" in directory:
        return f"{directory.rstrip('/')}/{name}"
    return str(Path(directory) / name)
