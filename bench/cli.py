"""Benchmark: `evita run` as a user runs it, from the shell, Spark start-up included.

    .venv/bin/python bench/cli.py                  # all workloads
    .venv/bin/python bench/cli.py --only nat

Each workload is one `evita run ... --stats` in a fresh process, run twice: as a user
runs it (a small run stays in the process, runtime/here.py) and with `--spark` (a fresh
JVM, whatever the size). The wall
time is measured around the process, and the phase table `--stats` prints (parse,
Spark start, compile, plan, inputs, fixpoint, outputs, previews) is read back. The
baseline, measured in the same run and mode: `evita run` on a one-fact program, the
price of starting at all. DuckDB's time for the same query is printed where there is one.

With `--interactive`, instead: the commands a user types while inspecting a program,
each a fresh process timed from the shell (start-up included), without a server (Spark
starts in the process only if the command needs it) and with the warm server of `evita
server start` (Spark Connect; runtime/server.py), in one run. Each is shown against
`evita catalog` (the files' row counts, no Spark) measured in the same run and mode:

  catalog        evita catalog                                   the baseline
  load           evita load examples/shortest_path.olg           (the catalog's files: no Spark)
  catalog rule   evita catalog rule --program shortest_path      (the catalog's files: no Spark)
  catalog bad    evita catalog nosuch                            (rejected before anything starts)
  print          evita print shortest_path                       (the catalog's files: no Spark)
  plan           evita plan examples/shortest_path.olg           (stages in process)
  explain        evita explain ... --stage system_r / magic_sets (stages and explain view in process)
  sql            evita sql "SELECT ... FROM evita.rule"           (Spark: a JVM, or the server)
  run            evita run examples/shortest_path.olg            (in process when small)

Each is run `--repeat` times (default 3) after a first run: the first `plan` compiles
cold; later ones read the compile cache (bootstrap/compile_cache.py), as a user's
repeated commands do. Shown: the first run, and the median of the others, per mode.
`--no-server` leaves the server mode out.

Workloads:
  one-fact  p(1).
  nat       nat(n+1) :- nat(n), n < 2000 joined with a small relation: 2,000 iterations
  tc+sg     -F/-D: TC of a random graph (2,000 nodes, 4,000 edges) and same generation
            on a binary tree of depth 9, one program (the issue's user scenario)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import SG_PROGRAM, SG_SQL, TC_PROGRAM, TC_SQL, binary_tree, duck_recursive, random_graph  # noqa: E402

ONE_FACT = "p(1).\n"

NAT = """
nat(0).
r1 nat(M) :- nat(N), N < 2000, M := N + 1.
every(7). every(11). every(1999).
r2 hit(N, K) :- nat(N), every(K), N % K == 0.
"""

TC_SG = TC_PROGRAM + SG_PROGRAM  # one program: both relations, read with -F, written with -D
# Each workload twice: as a user runs it (a small run stays in the process: runtime/here.py)
# and with --spark (Spark starts, whatever the size); the one-fact baseline of each mode.
MODES = {"default": [], "--spark": ["--spark"]}


def as_a_user(env: dict) -> dict:
    """`env` as a user's shell has it: an installed Evita runs from compiled bytecode, so
    PYTHONDONTWRITEBYTECODE (set in some sandboxes) would charge every command ~0.3 s of
    compiling Evita's modules that no user pays."""
    return {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}


def evita_run(args: list, cwd: Path, env: dict | None = None) -> tuple:
    """Wall seconds of one `evita run` process, and its phase table as {phase: (s, jobs)}.
    `env`: the process's environment (default this one's)."""
    evita = Path(sys.executable).parent / "evita"  # the installed command, as a user runs it
    cmd = [str(evita), "run", *args, "--stats"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                         env={**as_a_user(env or os.environ), "COLUMNS": "200"})
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    phases = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^(\S.*?)\s{2,}(\d+\.\d+)\s+(\d+\.\d+)%\s*(\d*)$", line)
        if m:
            phases[m.group(1).strip()] = (float(m.group(2)), int(m.group(4) or 0))
    return wall, phases


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "shortest_path.olg"
PATH_MAGIC = EXAMPLE.parent / "path_magic.olg"
INTERACTIVE = {
    "catalog": ["catalog"],
    "load": ["load", str(EXAMPLE)],
    "catalog rule": ["catalog", "rule", "--program", "shortest_path"],
    "catalog bad": ["catalog", "nosuch"],
    "print": ["print", "shortest_path"],
    "plan": ["plan", str(EXAMPLE)],
    "explain system_r": ["explain", str(EXAMPLE), "--stage", "system_r"],
    "explain magic": ["explain", str(PATH_MAGIC), "--stage", "magic_sets", "--skip", "localize"],
    "sql": ["sql", "SELECT name, count(*) AS n FROM evita.rule GROUP BY name ORDER BY name"],
    "run": ["run", str(EXAMPLE)],
}
FAILS = {"catalog bad"}  # exits 1: the name is rejected
# (server, no server) seconds; sql: <= 8 s cold (its first run), <= 2 s with the server
TARGETS = {name: (2, 2) for name in INTERACTIVE} | {"sql": (2, 8), "run": (5, 10)}


PYTHON = sys.executable  # whose evita is timed: `--python` (another checkout's venv, for a before/after)


def timed(argv: list, cwd: Path, env: dict, fails: bool = False) -> float:
    cmd = [PYTHON, "-m", "evita.bootstrap.cli", *argv, "-q"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if (out.returncode != 0) != fails:
        raise SystemExit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return seconds


def interactive(repeat: int, modes=("no server", "server"), only=None) -> int:
    import statistics

    results = {}
    order = ["plan", "explain system_r", "explain magic", "run", "load", "catalog", "catalog rule", "catalog bad",
             "print", "sql"]  # plan first: its first compile is cold
    order = [name for name in order if not only or name in only or name in ("catalog", "load")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for mode in modes:
            env = {k: v for k, v in as_a_user(os.environ).items() if k not in ("EVITA_MASTER", "EVITA_REMOTE")}
            env.update(EVITA_WAREHOUSE=str(root / mode.replace(" ", "-") / "warehouse"),
                       EVITA_CACHE=str(root / mode.replace(" ", "-") / "cache"), EVITA_COMPILE_CACHE="1")
            if mode == "server":
                start = timed(["server", "start"], root, env)
                print(f"evita server start: {start:.1f} s", flush=True)
            try:
                for name in order:
                    times = [timed(INTERACTIVE[name], root, env, name in FAILS) for _ in range(repeat + 1)]
                    results[(name, mode)] = times
                    print(f"  {name:<17} {mode:<10} " + "  ".join(f"{t:.2f}" for t in times), flush=True)
            finally:
                if mode == "server":
                    timed(["server", "stop"], root, env)
    print(f"\n{'command':<17}" + "".join(f"  {mode + ': first':>17} {'median':>7} {'x catalog':>9}" for mode in modes)
          + "   target (server / no server)")
    for name in order:
        cells = ""
        for mode in modes:
            times, base = results[(name, mode)], statistics.median(results[("catalog", mode)][1:])
            cells += f"  {times[0]:>17.2f} {statistics.median(times[1:]):>7.2f} {statistics.median(times[1:]) / base:>8.1f}x"
        print(f"{name:<17}{cells}   <= {TARGETS[name][0]} s / <= {TARGETS[name][1]} s")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("nat", "tc+sg"), action="append")
    ap.add_argument("--interactive", action="store_true",
                    help="the inspection commands (load, catalog, print, plan, explain, sql, run): without and with "
                         "a server, against evita catalog")
    ap.add_argument("--repeat", type=int, default=3, help="with --interactive: runs after the first")
    ap.add_argument("--no-server", action="store_true", help="with --interactive: without a server only")
    ap.add_argument("--command", action="append", choices=list(INTERACTIVE),
                    help="with --interactive: only these (and catalog, the baseline, and load, which gives the "
                         "queries a program)")
    ap.add_argument("--python", help="with --interactive: time the evita of this Python (another checkout's venv: "
                                     "before and after in one run); default this one")
    args = ap.parse_args(argv)
    if args.interactive:
        global PYTHON
        PYTHON = args.python or sys.executable
        return interactive(args.repeat, ("no server",) if args.no_server else ("no server", "server"), args.command)
    work = args.only or ["nat", "tc+sg"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "one.dl").write_text(ONE_FACT)
        (root / "nat.dl").write_text(NAT)
        (root / "tcsg.dl").write_text(TC_SG)
        facts = root / "facts"
        facts.mkdir()
        edges = random_graph(2000, 4000, seed=7)
        parents = binary_tree(9)
        (facts / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in edges))
        (facts / "parent.facts").write_text("".join(f"{a}\t{b}\n" for a, b in parents))

        duck = None
        if "tc+sg" in work:
            t_tc, _ = duck_recursive(TC_SQL, {"edge": (edges, ["x", "y"])})
            t_sg, _ = duck_recursive(SG_SQL, {"parent": (parents, ["c", "p"])})
            duck = t_tc + t_sg
        for mode, extra in MODES.items():
            base, base_phases = evita_run(["one.dl", *extra], root)
            rows.append(("one-fact", mode, base, base_phases, None, base))
            if "nat" in work:
                wall, phases = evita_run(["nat.dl", "--max-iterations", "5000", *extra], root)
                rows.append(("nat", mode, wall, phases, None, base))
            if "tc+sg" in work:
                wall, phases = evita_run(["tcsg.dl", "-F", "facts", "-D", "out", *extra], root)
                rows.append(("tc+sg", mode, wall, phases, duck, base))

    names = list(dict.fromkeys(p for *_, phases, _, _ in rows for p in phases if p != "total"))
    print("\nworkload  mode          wall s   vs one-fact  duckdb s  " + "  ".join(f"{n[:18]:>18}" for n in names))
    for name, mode, wall, phases, duck, base in rows:
        cells = "  ".join(f"{phases[n][0]:>9.2f}s {phases[n][1]:>3}j " if n in phases else f"{'':>18}"
                          for n in names)
        print(f"{name:<9} {mode:<11} {wall:>7.2f}  {wall / base:>10.2f}x  {'' if duck is None else f'{duck:8.2f}':>8}  "
              f"{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
