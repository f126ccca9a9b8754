"""Magic sets (issue 5): derived tuples and run time with and without the magic-sets stage.

    /work/venv/bin/python bench/magic.py --repeat 3             # ~30 min on the shared 2-core machine
    /work/venv/bin/python bench/magic.py --quick                # smoke run, small graphs
    /work/venv/bin/python bench/magic.py --sizes 1000 --shapes tree --programs reach

Programs (the link facts are input data, not program text, so each variant is compiled
once per benchmark run and reused for every graph):
  path   the rules of seed 002 Fig 4.1 as in examples/path_magic.olg: every cycle-free
         path with its node list (f_cons) and cost; query path("node1", Y, P, C);
  reach  the same two rules without the list and the cost: reach(X, Y); query
         reach("node1", Y). The cheap variant, for graphs where `path` cannot run.

Graphs: Fig 4.2 (the example's links: a clique node1..node4 with links both ways, and a
chain node10 -> ... -> node5 -> node4), and, attached to the same clique, a directed
chain of N nodes (node(N+4) -> ... -> node5 -> node4) or a complete binary tree of N
nodes (edges child -> parent, its root t1 -> node4), for N in --sizes.

Each program is compiled twice: as written (parse + plan), and through the magic-sets
stage on Spark (parse + encode + stage + apply + decode + plan). Each compiled program
then runs on each graph; measured per run: the tuples of every derived relation (magic
and sup relations included; link is input), the query's answers, and wall time of the
run, which is `engine.run` plus the one Spark action that counts every derived relation
and the answers (non-recursive strata are lazy, so the count is part of the work).

Before running, the number of tuples the program without the stage derives, and the
answers, are counted in Python from the graph (simple paths resp. reachable pairs, by
dynamic programming over the acyclic part). A run is skipped when that count exceeds
--max-tuples, or when it needs more than --max-rounds iterations of the driver's SQL loop
(the `path` stratum has keys, so it never runs as a local fixpoint); the table then shows
the predicted count, marked `(predicted, not run)`. Every run's answers, and every
measured count without the stage, must equal the prediction: the benchmark fails loudly
otherwise. A run that crashes is shown as CRASH in the table, the error is listed at the
end, and the exit status is 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "path_magic.olg"
CLIQUE = ("node1", "node2", "node3", "node4")
ROOT = "node1"  # the query's constant
ATTACH = "node4"  # where chains and trees enter the clique

REACH_PROGRAM = """
// Fig 4.1 without the path list and the cost: which nodes node1 reaches.
materialize(link, infinity, infinity, keys(1, 2)).
materialize(reach, infinity, infinity, keys(1, 2)).

r1 reach(@X, Y) :- link(@X, Y, C).
r2 reach(@X, Z) :- link(@X, Y, C), reach(@Y, Z).

query reach("node1", Y).
"""


# ---------------------------------------------------------------- programs

def programs() -> dict:
    """name -> (program without link facts, Fig 4.2's links from the example file)."""
    from evita.bootstrap import syntax as S
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file, parse_program

    example = check_program(parse_file(EXAMPLE))
    links = [tuple(a.value for a in f.atom.args) for f in example.facts if f.atom.relation == "link"]
    rest = tuple(s for s in example.statements if not (isinstance(s, S.Fact) and s.atom.relation == "link"))
    path = replace(example, statements=rest)
    reach = check_program(parse_program(REACH_PROGRAM, "reach_magic.olg"))
    return {"path": (path, links), "reach": (reach, links)}


@dataclass
class Compiled:
    name: str
    magic: bool
    dataflow: object
    seconds: float
    actions: int = 0  # Spark actions of the stage


def compile_plain(program) -> Compiled:
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.planner import plan

    t = time.perf_counter()
    dataflow = plan(check_program(program))
    return Compiled(program.name, False, dataflow, time.perf_counter() - t)


def compile_magic(spark, program) -> Compiled:
    """The magic-sets stage alone on Spark, then the planner."""
    from evita.bootstrap import stage as stg
    from evita.bootstrap.planner import plan
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode

    t = time.perf_counter()
    rows = encode(program)
    out = stg.run_stage(spark, stg.find_stages()["magic_sets"], rows, program.name)
    rewritten = decode(stg.apply(rows, out), program.name)
    dataflow = plan(rewritten)
    if not any(r.startswith("magic_") for r in dataflow.relations):
        raise SystemExit(f"the magic-sets stage left {program.name} unchanged: nothing to compare")
    return Compiled(program.name, True, dataflow, time.perf_counter() - t, out.actions)


# ---------------------------------------------------------------- graphs

@dataclass
class Graph:
    name: str
    nodes: int
    links: list  # (from, to, cost)
    parent: dict = field(default_factory=dict)  # attached node -> its one successor


def fig42(links: list) -> Graph:
    nodes = {n for l in links for n in l[:2]}
    return Graph("Fig 4.2", len(nodes), list(links), _parents(links))


def clique_links() -> list:
    return [(a, b, 1) for a in CLIQUE for b in CLIQUE if a != b]


def chain(n: int) -> Graph:
    """node(n+4) -> ... -> node5 -> node4: Fig 4.2's chain, n nodes long."""
    links = clique_links() + [(f"node{i + 1}", f"node{i}", 1) for i in range(4, n + 4)]
    return Graph(f"chain {n:,}", n + len(CLIQUE), links, _parents(links))


def tree(n: int) -> Graph:
    """A complete binary tree t1..tn, child -> parent, the root t1 -> node4."""
    links = clique_links() + [("t1", ATTACH, 1)] + [(f"t{i}", f"t{i // 2}", 1) for i in range(2, n + 1)]
    return Graph(f"tree {n:,}", n + len(CLIQUE), links, _parents(links))


def _parents(links: list) -> dict:
    return {a: b for a, b, _ in links if a not in CLIQUE}


@dataclass
class Prediction:
    tuples: int  # derived by the program without the stage
    answers: int
    rounds: int  # iterations of a semi-naive loop: the longest path, in links


def predict(program: str, g: Graph) -> Prediction:
    """Count, outside Spark, what the program without magic sets derives on `g`: the
    clique by brute force, each attached node v (one successor p, on no cycle) from p:
    paths(v) = 1 + paths(p) (the link, then v before each of p's paths: none holds v);
    reach(v) = reach(p) plus p itself when p is not on a cycle."""
    succ: dict = {}
    for a, b, _ in g.links:
        succ.setdefault(a, []).append(b)
    assert all(len(succ[v]) == 1 for v in g.parent), "attached nodes have one successor"
    core = {v for v in succ if v not in g.parent}

    def simple_paths(start):  # (count, longest) of cycle-free paths out of `start`
        count, longest, stack = 0, 0, [(start, (start,))]
        while stack:
            v, seen = stack.pop()
            for w in succ.get(v, ()):
                if w not in seen:
                    count, longest = count + 1, max(longest, len(seen))
                    stack.append((w, seen + (w,)))
        return count, longest

    def reachable(start):
        seen, todo = set(), [start]
        while todo:
            for w in succ.get(todo.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    todo.append(w)
        return seen

    paths, longest, reach = {}, {}, {}
    for v in core:
        paths[v], longest[v] = simple_paths(v)
        reach[v] = len(reachable(v))
    on_cycle = {v for v in core if v in reachable(v)}
    for v in _by_depth(g.parent):
        p = g.parent[v]
        paths[v], longest[v] = 1 + paths[p], 1 + longest[p]
        reach[v] = reach[p] + (0 if p in on_cycle else 1)
    table = paths if program == "path" else reach
    return Prediction(sum(table.values()), table[ROOT], max(longest.values()) + 1)


def _by_depth(parent: dict) -> list:
    """Attached nodes, each after its successor."""
    depth: dict = {}
    for v in parent:
        trail = []
        while v in parent and v not in depth:
            trail.append(v)
            v = parent[v]
        d = depth.get(v, 0)
        for u in reversed(trail):
            d += 1
            depth[u] = d
    return sorted(parent, key=depth.__getitem__)


# ---------------------------------------------------------------- runs

@dataclass
class Run:
    tuples: dict  # derived relation -> tuples
    answers: int
    seconds: list

    @property
    def total(self) -> int:
        return sum(self.tuples.values())


def measure(spark, c: Compiled, link_df, repeat: int) -> Run:
    """`repeat` runs of one compiled program on one graph; the same counts every time."""
    from functools import reduce

    from pyspark.sql import functions as F

    from evita.runtime.queries import query_frame
    from evita.runtime.engine import run

    derived = [n for n, s in c.dataflow.relations.items() if s.kind == "derived"]
    (query,) = c.dataflow.queries
    seen, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        result = run(c.dataflow, spark, {"link": link_df}, max_iterations=100_000)
        frames = [result.relations[n] for n in derived] + [query_frame(result.relations[query.relation], query)]
        counts = reduce(lambda a, b: a.union(b), [
            df.agg(F.count(F.lit(1)).alias("n")).select(F.lit(i).alias("i"), "n") for i, df in enumerate(frames)])
        got = dict(tuple(r) for r in counts.collect())
        times.append(time.perf_counter() - t)
        if hasattr(result, "release"):  # drop the run's caches (engines that track them)
            result.release()
        counted = ({n: got[i] for i, n in enumerate(derived)}, got[len(derived)])
        if seen is not None and counted != seen:
            raise SystemExit(f"{c.name}: two runs on the same graph derived different tuples: {seen} vs {counted}")
        seen = counted
    return Run(seen[0], seen[1], times)


def sql_loop_rounds(c: Compiled, pred: Prediction) -> int:
    """Iterations the driver would run: 0 when every recursive stratum is a local fixpoint."""
    loops = [st for st in c.dataflow.strata
             if st.recursive and not (st.strategy == "local" and st.rounds is not None)]
    return pred.rounds if loops else 0


def link_frame(spark, g: Graph):
    df = spark.createDataFrame(g.links, "c0 string, c1 string, c2 long").cache()
    df.count()  # inputs in memory before any clock starts
    return df


# ---------------------------------------------------------------- report

def fmt_int(n) -> str:
    return f"{n:,}"


def ratio(a, b) -> str:
    if not b:
        return "-"
    return f"{a / b:,.0f}x" if a / b >= 100 else f"{a / b:.1f}x"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="attached nodes, comma-separated")
    ap.add_argument("--shapes", default="chain,tree", help="chain, tree or both")
    ap.add_argument("--programs", default="path,reach", help="path, reach or both")
    ap.add_argument("--repeat", type=int, default=1, help="runs per graph and variant (median time)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--quick", action="store_true", help="small graphs (30 and 100 nodes), for a smoke run")
    ap.add_argument("--max-tuples", type=float, default=5e6,
                    help="skip a run without the stage predicted to derive more tuples")
    ap.add_argument("--max-rounds", type=int, default=200,
                    help="skip a run needing more iterations of the driver's SQL loop")
    args = ap.parse_args()
    sizes = [30, 100] if args.quick else [int(s) for s in args.sizes.split(",") if s]
    shapes = [s for s in args.shapes.split(",") if s]
    wanted = [p for p in args.programs.split(",") if p]
    for s in shapes:
        if s not in ("chain", "tree"):
            ap.error(f"unknown shape {s}")
    progs = programs()
    for p in wanted:
        if p not in progs:
            ap.error(f"unknown program {p}")
    graphs = [fig42(progs["path"][1])] + [{"chain": chain, "tree": tree}[s](n) for s in shapes for n in sizes]

    from evita.runtime.session import spark_session

    spark = spark_session(master=args.master, warehouse="/tmp/evita-bench-warehouse")

    # Compile once per variant; the stage's Spark jobs also warm up the JVM.
    compiled = {}
    for p in wanted:
        compiled[p, False] = compile_plain(progs[p][0])
        print(f"compiling {p} through magic_sets on Spark ...", flush=True)
        compiled[p, True] = compile_magic(spark, progs[p][0])
    print("\n| program | compile without (parse + plan) | compile with (+ magic_sets stage on Spark) | stage actions |")
    print("| --- | --- | --- | --- |")
    for p in wanted:
        a, b = compiled[p, False], compiled[p, True]
        print(f"| {p} | {a.seconds:.2f} s | {b.seconds:.1f} s | {b.actions} |")

    # Warm-up, not counted: Python workers, the local fixpoint's imports, SQL code paths.
    small = link_frame(spark, graphs[0])
    for c in compiled.values():
        attempt(lambda: measure(spark, c, small, 1))
    small.unpersist()

    header = ("| program | graph | nodes | links | answers | derived without | derived with (of which magic + sup) "
              "| tuples without / with | run without | run with | time without / with |")
    print("\n" + header)
    print("|" + " --- |" * (header.count("|") - 1), flush=True)
    crashes = []
    for g in graphs:
        link_df = link_frame(spark, g)
        for p in wanted:
            pred = predict(p, g)
            plain, magic = compiled[p, False], compiled[p, True]
            with_ = attempt(lambda: measure(spark, magic, link_df, args.repeat))
            rounds = sql_loop_rounds(plain, pred)
            if pred.tuples > args.max_tuples or rounds > args.max_rounds:
                why = (f"{pred.tuples:.1e} tuples > --max-tuples" if pred.tuples > args.max_tuples
                       else f"{rounds:,} SQL-loop iterations > --max-rounds")
                without = Skipped(pred.tuples, why)
            else:
                without = attempt(lambda: measure(spark, plain, link_df, args.repeat))
            for label, r in (("with", with_), ("without", without)):
                if isinstance(r, Crash):
                    crashes.append(f"{p} {label} magic sets on {g.name}: {r.error}")
                elif isinstance(r, Run):
                    check(f"{p} {label} magic sets on {g.name}", "answers", r.answers, pred.answers)
            if isinstance(without, Run):
                check(f"{p} without magic sets on {g.name}", "derived tuples", without.total, pred.tuples)
            print(row(p, g, pred, without, with_), flush=True)
            if isinstance(with_, Run):
                print(f"    with magic sets, per relation: {with_.tuples}", file=sys.stderr, flush=True)
        link_df.unpersist()
    print(f"\ntimes: median of {args.repeat} run(s); a run is engine.run + one Spark action counting every "
          "derived relation and the answers; links are cached input, not counted")
    if crashes:
        print("\nCRASHED (engine or stage; not worked around):\n  " + "\n  ".join(crashes))
        return 1
    return 0


@dataclass
class Skipped:
    predicted: int
    why: str


@dataclass
class Crash:
    error: str


def attempt(fn):
    """The run, or the crash that stopped it: recorded in the table, reported at the end,
    and the benchmark's exit status is 1. Wrong answers are not caught (SystemExit)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 -- any engine failure is a result to report
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return Crash(f"{type(e).__name__}: {first[:240]}")


def row(p: str, g: Graph, pred: Prediction, without, with_) -> str:
    cells = [p, g.name, fmt_int(g.nodes), fmt_int(len(g.links)), fmt_int(pred.answers)]
    if isinstance(without, Run):
        cells.append(fmt_int(without.total))
    elif isinstance(without, Skipped):
        cells.append(f"{fmt_int(without.predicted)} (predicted, not run: {without.why})")
    else:
        cells.append(f"CRASH ({without.error.split(':')[0]}, listed below)")
    if isinstance(with_, Run):
        aux = sum(n for r, n in with_.tuples.items() if r.startswith(("magic_", "sup_")))
        cells.append(f"{fmt_int(with_.total)} ({fmt_int(aux)})")
    else:
        cells.append(f"CRASH ({with_.error.split(':')[0]}, listed below)")
    both = isinstance(with_, Run) and not isinstance(without, Crash)
    n_without = without.total if isinstance(without, Run) else getattr(without, "predicted", None)
    cells.append((ratio(n_without, with_.total) + (" (predicted)" if isinstance(without, Skipped) else ""))
                 if both else "-")
    t_without = statistics.median(without.seconds) if isinstance(without, Run) else None
    t_with = statistics.median(with_.seconds) if isinstance(with_, Run) else None
    cells.append(f"{t_without:.2f} s" if t_without is not None else "not run" if isinstance(without, Skipped) else "-")
    cells.append(f"{t_with:.2f} s" if t_with is not None else "-")
    cells.append(ratio(t_without, t_with) if t_without is not None and t_with is not None else "-")
    return "| " + " | ".join(cells) + " |"


def check(what: str, measure_name: str, got: int, expected: int) -> None:
    if got != expected:
        raise SystemExit(f"WRONG RESULT: {what}: {measure_name} {got:,}, expected {expected:,} "
                         "(counted in Python from the graph)")


if __name__ == "__main__":
    sys.exit(main())
