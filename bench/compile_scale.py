"""`evita compile` at scale: seconds per program size, every stage on, from the shell.

    python bench/compile_scale.py [--sizes 100 200 400 800 1000] [--shapes chain layered]
                                  [--timeout 600] [--keep DIR]

Each program is written to a file and compiled by `evita compile FILE` in a fresh
process, as a user runs it (the compile cache off, `EVITA_COMPILE_CACHE=0`; the stages'
own caches warm: one compile of the smallest program first, not counted). Two shapes:

- chain: n/2 mutually independent recursive relations in a chain, two rules each
  (e_i is e_{i-1} and e_i's closure over it); the rule/goal graph is n/2 deep.
- layered: a program analysis's shape: four input relations, then layers of ten
  relations, each a join of two relations of the layer before, a copy less a relation
  two layers down (negation), and every third a recursive closure; the last layer is
  the output.

`--analysis` also compiles a real program analysis, examples/analysis/points_to.dl (a
Doop-style points-to and call-graph analysis, some 340 rules), the same way, and prints
its time over the 100-rule chain's and layered compiles of the same run (measured for
it when --sizes leaves 100 out). `--analysis-runs 100 300` then times `evita run` of it
on facts of that many classes (bench/points_to_facts.py), in process and with --spark.

Prints per size: rules, wall seconds of the command, its CPU seconds, the compile's own seconds (the
title of its table: stages, lattice, saving), the ratio of the wall time to the
200-rule compile's of the same shape measured in the same run, and the seconds of
each stage (`evita compile`'s table).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = 200  # the ratio's denominator: the 200-rule compile of the same shape


def chain_program(rules: int) -> str:
    """e1..e{k}, k = rules / 2, each e_{i-1} and its closure over e_{i-1}."""
    lines = [".decl e0(x: number, y: number)", ".input e0"]
    k = max(1, rules // 2)
    for i in range(1, k + 1):
        lines += [f".decl e{i}(x: number, y: number)",
                  f"e{i}(X, Y) :- e{i - 1}(X, Y).",
                  f"e{i}(X, Z) :- e{i}(X, Y), e{i - 1}(Y, Z)."]
    lines.append(f".output e{k}")
    return "\n".join(lines) + "\n"


def layered_program(rules: int, width: int = 10) -> str:
    """Layers of `width` relations over four inputs until `rules` rules are written."""
    inputs = ["assign", "load", "store", "call"]
    lines = [f".decl {b}(x: number, y: number)\n.input {b}" for b in inputs]
    layers = [inputs]
    written = 0
    while written < rules:
        layer, prev = len(layers), layers[-1]
        below = layers[-3] if len(layers) >= 3 else inputs
        names = []
        for j in range(width):
            if written >= rules:
                break
            r = f"l{layer}_{j}"
            names.append(r)
            p, q = prev[j % len(prev)], prev[(j * 7 + 3) % len(prev)]
            n = below[(j * 3 + 1) % len(below)]
            lines.append(f".decl {r}(x: number, y: number)")
            body = [f"{r}(X, Z) :- {p}(X, Y), {q}(Y, Z).",
                    f"{r}(X, Y) :- {q}(X, Y), !{n}(X, Y)."]
            if j % 3 == 0:
                body.append(f"{r}(X, Z) :- {r}(X, Y), {p}(Y, Z).")
            body = body[:rules - written]
            lines += body
            written += len(body)
        layers.append(names)
    lines += [f".output {r}" for r in layers[-1]]
    return "\n".join(lines) + "\n"


SHAPES = {"chain": chain_program, "layered": layered_program}
ANALYSIS = REPO / "examples" / "analysis" / "points_to.dl"


def compile_once(path: Path, workdir: Path, timeout: float) -> dict:
    """Run `evita compile PATH`; wall seconds, the compile's own seconds, stage seconds."""
    env = {**os.environ, "EVITA_COMPILE_CACHE": "0", "COLUMNS": "200", "EVITA_WAREHOUSE": str(workdir / "wh")}
    evita = Path(sys.executable).parent / "evita"
    started, cpu_before = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run([str(evita), "compile", "-q", str(path)], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"wall": None, "error": f"not done after {timeout:.0f} s"}
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    if done.returncode != 0:
        return {"wall": wall, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    own = re.search(r"compiled in ([\d.]+) s", done.stdout)
    stages = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 7 and cells[0].isdigit():
            stages[cells[1].replace(" (skipped)", "")] = float(cells[5])
    return {"wall": wall, "cpu": cpu, "own": float(own.group(1)) if own else None, "stages": stages}


def run_once(program: Path, facts: Path, workdir: Path, timeout: float, spark: bool) -> dict:
    """`evita run PROGRAM -F FACTS -D OUT` (every stage on, compile cache off): wall and
    CPU seconds of the command, in process or with --spark."""
    env = {**os.environ, "EVITA_COMPILE_CACHE": "0", "COLUMNS": "200", "EVITA_WAREHOUSE": str(workdir / "wh")}
    evita = Path(sys.executable).parent / "evita"
    argv = [str(evita), "run", "-q", str(program), "-F", str(facts), "-D", str(workdir / "out")] + (["--spark"] if spark else [])
    started, cpu_before = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"wall": None, "error": f"not done after {timeout:.0f} s"}
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu_before
    if done.returncode != 0:
        return {"wall": wall, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    points_to = workdir / "out" / "VarPointsTo.csv"
    rows = sum(1 for _ in points_to.open()) if points_to.exists() else 0
    return {"wall": wall, "cpu": cpu, "VarPointsTo": rows}


def analysis(hundred: dict, work: Path, out: Path, timeout: float, run_sizes: list) -> None:
    """Compile points_to.dl; its time over the 100-rule compiles; then runs of it."""
    print(f"\n=== analysis: {ANALYSIS.relative_to(REPO)}")
    for shape in SHAPES:
        if shape not in hundred:
            path = out / f"{shape}100.dl"
            path.write_text(SHAPES[shape](100))
            hundred[shape] = compile_once(path, work, timeout)
    print(f"load average {os.getloadavg()[0]:.1f}")
    got = compile_once(ANALYSIS, work, timeout)
    if got.get("error"):
        print(f"compile: {got['error']}")
        return
    ratios = "  ".join(f"/{shape}100 {got['wall'] / h['wall']:.2f} ({h['wall']:.1f} s)"
                       for shape, h in hundred.items() if h.get("wall") and not h.get("error"))
    own = f"{got['own']:.1f}" if got.get("own") is not None else "-"
    print(f"compile: wall {got['wall']:.1f} s, cpu {got['cpu']:.1f} s, compile {own} s  {ratios}  "
          f"(load {os.getloadavg()[0]:.1f})")
    print("per stage (s): " + " ".join(f"{s}={v:.2f}" for s, v in got["stages"].items()))
    if not run_sizes:
        return
    sys.path.insert(0, str(REPO / "bench"))
    from points_to_facts import generate

    print(f"{'classes':>7} {'facts':>7} {'where':>6} {'wall s':>8} {'cpu s':>7} {'VarPointsTo':>11}")
    for classes in run_sizes:
        facts = out / f"facts{classes}"
        count = sum(generate(classes, facts).values())
        for spark in (False, True):
            r = run_once(ANALYSIS, facts, work, timeout, spark)
            where = "spark" if spark else "here"
            if r.get("error"):
                print(f"{classes:>7} {count:>7} {where:>6}  {r['error']}", flush=True)
                continue
            print(f"{classes:>7} {count:>7} {where:>6} {r['wall']:>8.1f} {r['cpu']:>7.1f} {r['VarPointsTo']:>11}  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: steadier than wall
    time on a shared machine, where other work takes turns on the cores."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400, 800, 1000],
                    help="program sizes in rules (the 200-rule compile is the ratio's baseline)")
    ap.add_argument("--shapes", nargs="*", choices=sorted(SHAPES), default=["chain", "layered"])
    ap.add_argument("--timeout", type=float, default=600, help="seconds before one compile is given up")
    ap.add_argument("--keep", help="write the programs here (default: a temporary folder)")
    ap.add_argument("--analysis", action="store_true",
                    help="also compile examples/analysis/points_to.dl, timed against the 100-rule compiles")
    ap.add_argument("--analysis-runs", type=int, nargs="*", default=[], metavar="CLASSES",
                    help="with --analysis: time `evita run` of it on generated facts of these many classes")
    args = ap.parse_args()
    sizes = sorted(set(args.sizes) | {BASELINE})
    with tempfile.TemporaryDirectory(prefix="evita-compile-scale-") as tmp:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        work = Path(tmp)
        warm = out / "warm.dl"
        warm.write_text(chain_program(20))
        compile_once(warm, work, args.timeout)  # the stages' caches (parsed, differentiated) and the OS's
        hundred = {}  # shape -> its 100-rule compile, the analysis's yardstick
        for shape in args.shapes:
            print(f"\n=== {shape}")
            print(f"load average {os.getloadavg()[0]:.1f}")
            print(f"{'rules':>6} {'wall s':>8} {'cpu s':>7} {'compile s':>9} {'/200':>6}  per stage (s)")
            base = None
            for n in sizes:
                path = out / f"{shape}{n}.dl"
                path.write_text(SHAPES[shape](n))
                got = compile_once(path, work, args.timeout)
                if got.get("error"):
                    print(f"{n:>6} {'-':>8} {'-':>7} {'-':>9} {'-':>6}  {got['error']}", flush=True)
                    continue
                if n == BASELINE:
                    base = got["wall"]
                if n == 100:
                    hundred[shape] = got
                ratio = f"{got['wall'] / base:.2f}" if base else "-"
                own = f"{got['own']:.1f}" if got.get("own") is not None else "-"
                per = " ".join(f"{s}={v:.2f}" for s, v in got["stages"].items() if v >= 0.05)
                print(f"{n:>6} {got['wall']:>8.1f} {got['cpu']:>7.1f} {own:>9} {ratio:>6}  {per}  "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
        if args.analysis:
            analysis(hundred, work, out, args.timeout, args.analysis_runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
