"""Compiles remembered: the same catalog through the same stages is the same compile.

A compile is a function of the program's catalog after parsing (statistics included),
the stage files and the lattice, the options (`--skip`, `--only`, `--choose`, the
iteration limit) and Evita's own code; it is deterministic (tests/test_stages.py, tests/test_planner.py).
So `evita plan P` after `evita run P`, or a second `evita run P` on inputs of the same
statistics, reads the compile from disk instead of running the stages again, and the
catalog is then stored as that compile stored it: the same versions, rows and stage
timings (those of the compile that ran them).

Kept under `$EVITA_CACHE` (else `~/.cache/evita`) in `compiles/`, next to the stages'
own caches; `EVITA_COMPILE_CACHE=0` turns it off (the test suite does, so every test
compiles for real). A failed compile is never kept. An entry that cannot be read is a
miss, a cache that cannot be written is no cache: the compile is correct either way.
"""
from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

from .compiled_stages import cache_dir, code_fingerprint, read_pickled, write_atomically


def enabled() -> bool:
    return os.environ.get("EVITA_COMPILE_CACHE", "1") not in ("0", "false", "no", "off")


def key(rows, program_id: str, stages: dict, lattice_path: Path, options: tuple) -> str:
    """What the compile depends on, hashed: the catalog rows (canonically sorted), every
    stage as parsed (so an #include'd file counts) with its trigger, lattice facts and
    notes, the lattice's text, the options and Evita's code."""

    h = hashlib.sha256()
    for part in (code_fingerprint(), program_id, repr(options), Path(lattice_path).read_text()):
        h.update(part.encode() + b"\0")
    for name in sorted(stages):
        h.update(stage_fingerprint(stages[name]).encode() + b"\0")
    _hash_rows(h, rows)
    return h.hexdigest()[:32]


def _hash_rows(h, rows) -> None:
    for table in sorted(rows):
        h.update(f"{table}\0{sorted(map(repr, rows[table]))!r}\0".encode())


def remembered(kind: str, parts: tuple, rows, compute):
    """`compute()`, a deterministic function of `parts` (texts) and the catalog `rows`,
    kept beside the compiles under `kind/` and read back while neither they nor Evita's
    code change (an explain view's graph: `explain.stage_graph`)."""
    if not enabled():
        return compute()
    h = hashlib.sha256(code_fingerprint().encode() + b"\0")
    for part in parts:
        h.update(part.encode() + b"\0")
    _hash_rows(h, rows)
    file = cache_dir().parent / kind / f"{h.hexdigest()[:32]}.pickle"
    value = read_pickled(file)
    if value is None:
        value = compute()
        write_atomically(file, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return value


def stage_fingerprint(stage) -> str:
    """Everything of a stage file a compile reads: its rules, its trigger (which decides
    whether it runs), its lattice facts (which decide when), its notes and invariants."""
    from evita.catalog.printer import format_program

    parts = [stage.name, stage.origin, format_program(stage.program),
             format_program(stage.trigger) if stage.trigger is not None else "",
             "\n".join(sorted(repr((f.atom.relation, tuple(a.value for a in f.atom.args)))
                              for f in stage.lattice_facts)),
             stage.if_left_out, stage.if_applied, repr(stage.ensures)]
    return "\0".join(parts)


def _file(k: str) -> Path:
    return cache_dir().parent / "compiles" / f"{k}.pickle"


def load(k: str):
    """The Compilation kept under key `k`, or None."""
    comp = read_pickled(_file(k))
    if comp is not None:
        comp.cached = True
    return comp


def keep(k: str, comp) -> None:
    write_atomically(_file(k), pickle.dumps(comp, protocol=pickle.HIGHEST_PROTOCOL))
