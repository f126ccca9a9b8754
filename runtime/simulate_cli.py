"""`evita simulate`: a Dedalus program on the deterministic simulator (`simulate.py`).

    evita simulate PROGRAM [--seed S | --seeds A-B] [--steps N] [--delay uniform:1-5]
                   [--drop P] [--crash NODE@STEP] [--timed-inputs DIR] [--trace DIR]
                   [--trace-format csv|parquet] [--fanout K]

It prints the per-node counts table (messages out and in, new derivations, busy
timesteps; summed over the seeds), the answers of the program's queries and outputs
(one seed), or how many seeds ended with each distinct answer (several), and whether
every run quiesced within the horizon.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..bootstrap.diagnostics import plural


def add_arguments(subparsers, parents) -> None:
    c = subparsers.add_parser("simulate", parents=parents,
                              help="run a Dedalus program on the deterministic discrete-event simulator")
    c.add_argument("program", help="program file (.olg or .dl)")
    c.add_argument("--seed", type=int, default=0, help="the network's seed (default 0)")
    c.add_argument("--seeds", metavar="A-B", help="run every seed from A to B (all together)")
    c.add_argument("--steps", type=int, default=100, help="the horizon: at most N timesteps (default 100)")
    c.add_argument("--delay", default="uniform:1-3",
                   help="message delays: uniform:LO-HI, geometric:P or fixed:D (default uniform:1-3)")
    c.add_argument("--drop", type=float, default=0.0, help="drop each message with probability P (default 0)")
    c.add_argument("--crash", action="append", default=[], metavar="NODE@STEP",
                   help="NODE stops at STEP: it neither steps nor receives (repeatable)")
    c.add_argument("--timed-inputs", "--inputs", dest="inputs", metavar="DIR",
                   help="inputs over time: DIR/REL.csv (or .facts, tab-separated) rows STEP,col1,col2,... "
                        "(--inputs is the older spelling)")
    c.add_argument("--trace", metavar="DIR", help="write the trace and the counts to DIR")
    c.add_argument("--trace-format", choices=("csv", "parquet"), default="csv")
    c.add_argument("--fanout", type=int, default=1, metavar="K",
                   help="split the seeds over K Spark tasks (default 1: this process)")
    c.set_defaults(func=cmd_simulate)


def seed_range(args) -> list:
    from ..bootstrap.diagnostics import UserError

    if not args.seeds:
        return [args.seed]
    lo, sep, hi = args.seeds.partition("-")
    try:
        seeds = list(range(int(lo), int(hi if sep else lo) + 1))
    except ValueError:
        seeds = []
    if not seeds:
        raise UserError(f"--seeds {args.seeds}: write A-B with A <= B, e.g. --seeds 1-1000")
    return seeds


def crashes(items: list) -> dict:
    from ..bootstrap.diagnostics import UserError

    out = {}
    for item in items:
        node, sep, step = item.rpartition("@")
        if not sep or not step.isdigit():
            raise UserError(f"--crash {item}: write NODE@STEP, e.g. --crash p2@10")
        out[node] = int(step)
    return out


def timed_inputs(directory: str, timed) -> dict:
    """DIR/REL.csv or DIR/REL.facts: one row per tuple, its first field the timestep."""
    import csv

    from ..bootstrap.diagnostics import UserError
    from ..bootstrap.diagnostics import Diagnostic, EvitaError, Span

    root = Path(directory)
    if not root.is_dir():
        raise UserError(f"--timed-inputs {directory}: no such directory")
    out: dict = {}
    for path in sorted(root.iterdir()):
        if path.suffix not in (".csv", ".facts", ".tsv"):
            continue
        rel = path.stem
        if rel not in timed.arity:
            raise UserError(f"{path}: the program has no relation {rel}")
        with open(path, newline="") as f:
            for line, row in enumerate(csv.reader(f, delimiter="," if path.suffix == ".csv" else "\t"), 1):
                if not row:
                    continue
                want = timed.arity[rel] + 1
                if len(row) != want or not row[0].strip().isdigit():
                    why = (f"{len(row)} fields where {want} were expected (the step, then {timed.arity[rel]})"
                           if len(row) != want else f"the step {row[0]!r} is not a whole number >= 0")
                    raise EvitaError([Diagnostic("bad-input-row", f"{path.name}: {why}",
                                                 Span(str(path), line, 1), ",".join(row),
                                                 "write STEP,col1,col2,... with one row per tuple")])
                out.setdefault(rel, []).append((int(row[0]), tuple(_value(v) for v in row[1:])))
    return out


def _value(text: str):
    s = text.strip()
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def cmd_simulate(args) -> int:
    import time

    from rich.console import Console

    from ..bootstrap.activity import doing
    from .simulate import Simulation, compile_timed

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    seeds = seed_range(args)
    started = time.perf_counter()
    timed = compile_timed(args.program, None, skip=args.skip, stage_paths=args.stage_path, only=args.only,
                          choose=args.choose)
    inputs = timed_inputs(args.inputs, timed) if args.inputs else None
    sim = Simulation(timed, seeds, args.delay, args.drop, inputs, crashes(args.crash))
    if args.fanout > 1:
        from .session import spark_session
        from .simulate_spark import fan_out

        spark = spark_session(master=getattr(args, "master", None), remote=getattr(args, "remote", None))
        with doing(f"the simulation of {len(seeds)} seed{'s' if len(seeds) != 1 else ''} in {args.fanout} tasks"):
            run = fan_out(sim, args.steps, args.fanout, spark)
    else:
        with doing(f"the simulation of {len(seeds)} seed{'s' if len(seeds) != 1 else ''}"):
            run = sim.run(args.steps)
    report(console, run, seeds)
    if args.trace:
        for path in write_trace(run, args.trace, args.trace_format):
            console.print(f"wrote {path}")
    console.print(f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}, {run.node_steps:,} node-timesteps in "
                  f"{run.seconds:.2f} s ({run.node_steps / max(run.seconds, 1e-9):,.0f} per second); "
                  f"{time.perf_counter() - started:.1f} s in all")
    if run.late:
        shown = ", ".join(map(str, run.late[:10])) + (" ..." if len(run.late) > 10 else "")
        console.print(f"[yellow]warning:[/] {len(run.late)} of {len(seeds)} runs did not quiesce within "
                      f"{plural(args.steps, 'step')} (seeds {shown}): messages were still in flight or the state still "
                      f"changed; raise --steps, or look for a rule that re-derives or re-sends every timestep")
    return 0


def report(console, run, seeds: list) -> None:
    from rich.table import Table

    from .order import row_key

    t = run.timed
    counts = run.counts.groupby("node", sort=False)[["sent", "received", "derived", "busy_steps"]].sum()
    title = "per node" + (f" (summed over {len(seeds)} seeds)" if len(seeds) > 1 else "")
    table = Table(title=title)
    for c in ("node", "component", "messages out", "messages in", "new derivations", "busy timesteps"):
        table.add_column(c, justify="left" if c in ("node", "component") else "right")
    owner = {a: c for c, addrs in t.components.items() for a in addrs}
    for node, row in counts.iterrows():
        table.add_row(str(node), owner.get(node, ""), *[f"{int(v):,}" for v in row])
    console.print(table)
    quiet = [q for q in run.quiesced.values() if q is not None]
    if quiet:
        console.print(f"quiesced: {len(quiet)} of {len(seeds)} runs, at step {min(quiet)}"
                      + (f" to {max(quiet)}" if max(quiet) != min(quiet) else ""))
    external = run.trace[run.trace["kind"] == "external"]
    for rel in list(t.shown) + sorted(set(external["relation"]) - set(t.shown)):
        if rel in t.shown:
            final = run.final(rel)
            rows = [tuple(r) for r in final.itertuples(index=False, name=None)]
        else:
            rows = [(r.seed, r.peer, r.node) + tuple(r.tuple) for r in external[external["relation"] == rel].itertuples()]
        if len(seeds) == 1:
            table = Table(title=f"{rel}" + (" (messages that left the system)" if rel not in t.shown else "")
                          + f" ({plural(len(rows), 'row')})")
            headers, keep = _headers(t, rel, "node" if rel in t.shown else "to")
            if rel not in t.shown:
                headers, keep = ["from"] + headers, [0] + [k + 1 for k in keep]
            for c in headers:
                table.add_column(c)
            for r in sorted((tuple(r[1:][k] for k in keep) for r in rows), key=row_key)[:50]:  # by type: order.py
                table.add_row(*[str(x) for x in r])
            console.print(table)
        else:
            outcomes: dict = {}
            for r in rows:
                outcomes.setdefault(r[0], set()).add(r[1:] if rel in t.shown else (r[1],) + r[3:])
            kinds: dict = {}
            for s in seeds:
                key = frozenset(outcomes.get(s, ()))
                kinds[key] = kinds.get(key, 0) + 1
            console.print(f"{rel}: {len(kinds)} distinct final answer{'s' if len(kinds) != 1 else ''} over "
                          f"{len(seeds)} seeds" + ("" if len(kinds) == 1 else
                                                   " (" + ", ".join(f"{plural(n, 'seed')}: {plural(len(k), 'tuple')}"
                                                                    for k, n in sorted(kinds.items(),
                                                                                       key=lambda x: -x[1])[:5]) + ")"))


def _headers(t, rel: str, where: str) -> tuple:
    """(the headings of a relation's rows as shown, which of the row's values to show):
    the row is (node, c0, c1, ...); the columns are headed by their declared names (c0,
    c1, ... when it has none). A located relation's `@` column is the node itself: it
    is shown once, headed `where` (node, or to for a message) unless declared."""
    from ..bootstrap import syntax as S

    decl = next((d for d in t.program.of(S.Declaration) if d.relation == rel), None)
    names = [c.name for c in decl.columns][:t.arity[rel]] if decl else [f"c{i}" for i in range(t.arity[rel])]
    at = t.location.get(rel)
    if at is None:
        return [where] + names, list(range(t.arity[rel] + 1))
    if names[at] == f"c{at}":  # not named by a declaration
        names[at] = where
    return names, [k + 1 for k in range(t.arity[rel])]


def write_trace(run, directory: str, fmt: str) -> list:
    """DIR/trace.csv|parquet (tuples as JSON text, so runs compare as text) and DIR/counts."""
    import json

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    trace = run.trace.copy()
    trace["tuple"] = trace["tuple"].map(lambda v: json.dumps(list(v), default=str))
    trace["peer"] = trace["peer"].map(lambda v: "" if v is None else str(v))
    out = []
    for name, df in (("trace", trace), ("counts", run.counts)):
        path = root / f"{name}.{fmt}"
        if fmt == "csv":
            df.to_csv(path, index=False)
        else:
            df.to_parquet(path, index=False)
        out.append(path)
    return out
