"""Catalog programs in event-condition-action form, and the bootstrap that makes them.

Every program goes through `stages/delta.dl` before it is planned: user programs as a
stage of their compile, and the catalog programs (the stages, the lattice's question,
the integrity checks) here, before the scheduler runs them. That is P2's chicken and
egg: the delta stage must itself be planned to run. While it differentiates a program,
catalog programs are planned as written, and a rule reading its own recursive stratum
is then evaluated in full every iteration (naive evaluation, slower but the same
result, `planner.py`). Its output is cached by the text of the program's rules and
declarations, and of Evita's own code and stages: in memory, and on disk
under `$EVITA_CACHE` (else `~/.cache/evita`), so each stage is differentiated once per
change of either file. Facts are not part of the key (the lattice's question changes
its facts every time, never its rules): they are added back after.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

from . import syntax as S

_memory: dict = {}
_running = []  # non-empty while the delta stage differentiates: plan as written


def cache_dir() -> Path:
    return Path(os.environ.get("EVITA_CACHE") or Path.home() / ".cache" / "evita") / "compiled-stages"


def semi_naive(spark, program: S.Program, origin: str) -> S.Program:
    """`program` with its rules in ECA form, as the delta stage writes them. `spark`
    None: the delta stage runs in this process (StageFailure where it cannot)."""
    if _running:
        return program
    from evita.catalog import schema
    from evita.catalog.printer import format_program

    delta = _delta_stage()
    shape = [S.Rule, S.Declaration, S.Materialize]
    rules = replace(program, statements=tuple(s for s in program.statements if isinstance(s, tuple(shape))))
    key = hashlib.sha256("\0".join([
        code_fingerprint(), format_program(rules), program.path, program.dialect,
        repr([(t.name, t.column_names) for t in schema.TABLES + schema.VIEWS])]).encode()).hexdigest()[:32]
    if key not in _memory:
        _memory[key] = _load(key) or _store(key, _differentiate(spark, delta, rules, origin))
    from evita.catalog.decode import decode
    from evita.catalog.rows import CatalogRows

    compiled = decode(CatalogRows({t: [tuple(r) for r in rs] for t, rs in _memory[key].items()}), program.name)
    rest = tuple(s for s in program.statements if not isinstance(s, tuple(shape)))
    return replace(program, statements=compiled.statements + rest)


def code_fingerprint() -> str:
    """The Evita code and stages that produced a cached entry: any change invalidates it."""
    if "code" not in _memory:
        from .stage import package_root

        root = package_root()
        files = sorted(p for d in ("bootstrap", "catalog", "runtime", "stages") for p in (root / d).rglob("*")
                       if p.suffix in (".py", ".dl", ".lark"))
        _memory["code"] = hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()
    return _memory["code"]


def _delta_stage():
    if "delta.dl" not in _memory:
        from .checks import check_program
        from .parser import parse_file
        from .stage import StageFile, package_root

        path = package_root() / "stages" / "delta.dl"
        _memory["delta.dl"] = StageFile("delta", path, check_program(parse_file(path)), (), "built-in")
    return _memory["delta.dl"]


def _differentiate(spark, delta, rules: S.Program, origin: str) -> dict:
    from evita.catalog.encode import encode

    from .stage import StageFailure, apply, run_stage

    from .activity import doing

    rows = encode(rules)
    _running.append(origin)
    try:  # once per change of Evita's code or stages: the result is cached on disk
        with doing(f"the delta stage on {origin} (once, then cached)"):
            # spark None: asked for the in-process evaluator, which has no Spark to fall
            # back on; a StageFailure then (the caller plans the program as written)
            out = run_stage(spark, delta, rows, rules.name, evaluator="auto" if spark is not None else "in-process")
    except StageFailure as e:
        raise StageFailure(origin, f"the delta stage failed on it: {e.reason}", e.rule, e.detail) from None
    finally:
        _running.pop()
    return {t: [list(r) for r in rs] for t, rs in apply(rows, out).items() if rs}


def _load(key: str):
    try:
        return json.loads((cache_dir() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def _store(key: str, rows: dict) -> dict:
    write_atomically(cache_dir() / f"{key}.json", json.dumps(rows).encode())
    return rows


def write_atomically(target: Path, data: bytes) -> None:
    """Whole or not at all (`Loc.write_atomically`), so two processes never read half a
    file. A cache that cannot be written (a read-only home) is no cache: the caller
    computes again next time, still correct."""
    from ..catalog.fs import Loc

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        Loc.of(target).write_atomically(data, crash="half-written-cache")
    except OSError:
        pass


def read_pickled(target: Path):
    """What `write_atomically(target, pickle.dumps(x))` kept, or None (missing, or written
    by another version of Python's classes: a miss)."""
    import pickle

    try:
        return pickle.loads(target.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError):
        return None
