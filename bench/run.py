"""Benchmark: Evita's runtime against a hand-written PySpark loop and DuckDB.

    /work/venv/bin/python bench/run.py                 # everything (the hand-written TC loop takes ~2 min)
    /work/venv/bin/python bench/run.py --skip-handwritten
    /work/venv/bin/python bench/run.py --only tc
    /work/venv/bin/python bench/run.py --only tc --repeat 3   # medians of 3 (not the hand-written loop)

Workloads (fixed seeds):
  tc        transitive closure of a random graph, 2,000 nodes and 4,000 edges
  sg        same generation on a complete binary tree (depth 12, 4,095 nodes)
  sssp      single-source shortest paths on a weighted random graph (2,000 nodes, 8,000
            edges), min inside recursion (PreM)
  nat       nat(n+1) :- nat(n), n < 2000, joined with a small relation: 2,000 iterations
  tc-large  TC of 6,000 disjoint chains of 40 edges: inputs above the small threshold

Evita runs under each strategy (`STRATEGIES`): the default, where stages and input sizes
choose (per-partition tasks for decomposable strata, the driver's columnar evaluator for
small ones), and the distributed SQL loop alone.

Baselines:
  (a) the semi-naive loop a Spark user writes: DataFrame join, distinct, left-anti against
      the total, localCheckpoint, repeat until the delta is empty;
  (b) DuckDB: recursive CTE with UNION (tc, sg); for sssp, whose recursion needs min
      inside it, a Bellman-Ford loop of SQL statements driven from Python.
Each result is checked against the others (tuple counts, distance sums).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

TC_PROGRAM = """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
.output tc
tc(x, y) :- edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
"""

SG_PROGRAM = """
.decl parent(child: number, parent: number)
.input parent
.decl sg(x: number, y: number)
.output sg
sg(x, y) :- parent(x, p), parent(y, p), x != y.
sg(x, y) :- parent(x, a), sg(a, b), parent(y, b).
"""

SSSP_PROGRAM = """
start(0).
r1 dist(Y, min<D>) :- start(Y), D := 0.
r2 dist(Y, min<D>) :- dist(X, D1), edge(X, Y, W), D := D1 + W.
"""


def random_graph(nodes: int, edges: int, seed: int, weights: bool = False) -> list:
    rng = random.Random(seed)
    out: dict = {}
    while len(out) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b and (a, b) not in out:
            out[(a, b)] = rng.randint(1, 100) if weights else None
    return [(a, b, w) if weights else (a, b) for (a, b), w in out.items()]


def binary_tree(depth: int) -> list:
    """(child, parent) pairs of a complete binary tree with nodes 1 .. 2^depth - 1."""
    return [(c, c // 2) for c in range(2, 2 ** depth)]


# ---------------------------------------------------------------- Evita

def compiled(spark, program_text: str):
    """The dataflow `evita run` would execute: parsed, compiled through the stages, planned."""
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_program
    from evita.bootstrap.planner import plan_catalog
    from evita.bootstrap.scheduler import compile_program
    from evita.catalog.encode import encode

    program = check_program(parse_program(program_text, "bench.dl"))
    return plan_catalog(compile_program(spark, encode(program), program.name).final, program.name)


# Evita's strategies, as `run` options: the default lets stages and sizes choose (a
# decomposable stratum runs in per-partition tasks, a small one on the driver);
# "distributed" forces the SQL loop on Spark.
STRATEGIES = {"auto": {}, "distributed": {"local": False}}


def evita(spark, program_text: str, inputs: dict, relation: str, **kw):
    from evita.runtime.engine import run

    dataflow = compiled(spark, program_text)
    frames = {k: spark.createDataFrame(v, [f"c{i}" for i in range(len(v[0]))]) for k, v in inputs.items()}
    for f in frames.values():
        f.cache().count()  # inputs in memory for every contender
    t0 = time.perf_counter()
    result = run(dataflow, spark, frames, **kw)
    df = result.relations[relation]
    n = df.count()
    df.unpersist()
    extra = df.agg({df.columns[1]: "sum"}).collect()[0][0] if relation == "dist" else None
    seconds = time.perf_counter() - t0
    return seconds, n, extra, result


# ---------------------------------------------------------------- (a) the hand-written loop

def handwritten_tc(spark, edges: list):
    from pyspark.sql import functions as F

    edge = spark.createDataFrame(edges, ["x", "y"]).cache()
    edge.count()
    t0 = time.perf_counter()
    total = edge.distinct().localCheckpoint()
    n, iterations = _seminaive(total, lambda delta: (
        delta.alias("d").join(edge.alias("e"), F.col("d.y") == F.col("e.x"))
        .select(F.col("d.x").alias("x"), F.col("e.y").alias("y")).distinct()))
    return time.perf_counter() - t0, n, iterations


def handwritten_sg(spark, parents: list):
    from pyspark.sql import functions as F

    par = spark.createDataFrame(parents, ["c", "p"]).cache()
    par.count()
    t0 = time.perf_counter()
    a, b = par.alias("a"), par.alias("b")
    total = (a.join(b, F.col("a.p") == F.col("b.p")).where(F.col("a.c") != F.col("b.c"))
             .select(F.col("a.c").alias("x"), F.col("b.c").alias("y")).distinct().localCheckpoint())
    n, iterations = _seminaive(total, lambda delta: (
        par.alias("px").join(delta.alias("d"), F.col("px.p") == F.col("d.x"))
        .join(par.alias("py"), F.col("py.p") == F.col("d.y"))
        .select(F.col("px.c").alias("x"), F.col("py.c").alias("y")).distinct()))
    return time.perf_counter() - t0, n, iterations


def _seminaive(total, step) -> tuple:
    """The loop a Spark user writes: new = step(delta) minus total, checkpointed, until empty.
    Returns (tuples, iterations)."""
    delta, iterations = total, 0
    while True:
        iterations += 1
        delta = step(delta).join(total, ["x", "y"], "left_anti").localCheckpoint()
        if delta.count() == 0:
            break
        total = total.union(delta).localCheckpoint()
    return total.count(), iterations


def handwritten_sssp(spark, edges: list, source: int = 0):
    from pyspark.sql import functions as F

    edge = spark.createDataFrame(edges, ["x", "y", "w"]).cache()
    edge.count()
    t0 = time.perf_counter()
    dist = spark.createDataFrame([(source, 0)], ["n", "d"]).localCheckpoint()
    delta = dist
    iterations = 0
    while True:
        iterations += 1
        cand = (delta.join(edge, delta.n == edge.x).groupBy(F.col("y").alias("n"))
                .agg(F.min(F.col("d") + F.col("w")).alias("d")))
        better = (cand.alias("c").join(dist.alias("o"), "n", "left")
                  .where(F.col("o.d").isNull() | (F.col("c.d") < F.col("o.d")))
                  .select("n", F.col("c.d").alias("d")).localCheckpoint())
        if better.count() == 0:
            break
        dist = dist.join(better, "n", "left_anti").union(better).localCheckpoint()
        delta = better
    n = dist.count()
    total = dist.agg(F.sum("d")).collect()[0][0]
    return time.perf_counter() - t0, n, total, iterations


# ---------------------------------------------------------------- (b) DuckDB

def duck_recursive(sql: str, tables: dict):
    import duckdb
    import pandas as pd

    con = duckdb.connect()
    for name, (rows, cols) in tables.items():
        frame = pd.DataFrame(rows, columns=cols)
        con.register(f"{name}_df", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
    t0 = time.perf_counter()
    n = con.execute(sql).fetchone()[0]
    return time.perf_counter() - t0, n


def duck_sssp(edges: list, source: int = 0):
    import duckdb
    import pandas as pd

    con = duckdb.connect()
    con.register("edge_df", pd.DataFrame(edges, columns=["x", "y", "w"]))
    con.execute("CREATE TABLE edge AS SELECT * FROM edge_df")
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE dist AS SELECT {source}::BIGINT AS n, 0::BIGINT AS d")
    con.execute("CREATE TABLE delta AS SELECT * FROM dist")
    while True:
        con.execute("""CREATE OR REPLACE TABLE better AS
            SELECT c.n, c.d FROM (SELECT e.y AS n, min(delta.d + e.w) AS d FROM delta JOIN edge e ON delta.n = e.x
                                  GROUP BY e.y) c
            LEFT JOIN dist o ON o.n = c.n WHERE o.d IS NULL OR c.d < o.d""")
        if con.execute("SELECT count(*) FROM better").fetchone()[0] == 0:
            break
        con.execute("""CREATE OR REPLACE TABLE dist AS
            SELECT * FROM dist WHERE n NOT IN (SELECT n FROM better) UNION ALL SELECT * FROM better""")
        con.execute("CREATE OR REPLACE TABLE delta AS SELECT * FROM better")
    n, total = con.execute("SELECT count(*), sum(d) FROM dist").fetchone()
    return time.perf_counter() - t0, n, total


TC_SQL = """WITH RECURSIVE tc(x, y) AS (SELECT x, y FROM edge UNION SELECT tc.x, e.y FROM tc JOIN edge e ON tc.y = e.x)
SELECT count(*) FROM tc"""
SG_SQL = """WITH RECURSIVE sg(x, y) AS (
  SELECT a.c, b.c FROM parent a JOIN parent b ON a.p = b.p WHERE a.c <> b.c
  UNION SELECT px.c, py.c FROM sg JOIN parent px ON px.p = sg.x JOIN parent py ON py.p = sg.y)
SELECT count(*) FROM sg"""


# ---------------------------------------------------------------- main

NAT_PROGRAM = """
.decl every(k: number)
.input every
.decl nat(n: number)
.decl hit(n: number, k: number)
nat(0).
r1 nat(M) :- nat(N), N < 2000, M := N + 1.
r2 hit(N, K) :- nat(N), every(K), N % K == 0.
"""


def chains(count: int, length: int) -> list:
    """`count` disjoint paths of `length` edges: TC has count * length * (length + 1) / 2 tuples."""
    return [(c * (length + 1) + i, c * (length + 1) + i + 1) for c in range(count) for i in range(length)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("tc", "sg", "sssp", "nat", "tc-large"), action="append")
    ap.add_argument("--skip-handwritten", action="store_true", help="skip baseline (a)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time Evita's strategies and DuckDB this many times each and show the median "
                         "(the hand-written loops run once: minutes each)")
    args = ap.parse_args(argv)
    work = args.only or ["tc", "sg", "sssp", "nat", "tc-large"]

    from evita.runtime.session import spark_session

    spark = spark_session(master=args.master)
    table = []
    # Warm up the JVM and the Python workers on a small graph, so the timings below are
    # steady-state for every contender (a cold first Spark job costs ~10 s here).
    small = random_graph(200, 400, seed=1)
    for options in STRATEGIES.values():
        evita(spark, TC_PROGRAM, {"edge": small}, "tc", **options)
        evita(spark, SSSP_PROGRAM, {"edge": random_graph(200, 400, seed=1, weights=True)}, "dist", **options)
    if not args.skip_handwritten:
        handwritten_tc(spark, small)
    duck_recursive(TC_SQL, {"edge": (small, ["x", "y"])})

    def contenders(name, program, inputs, relation, duck, hand=None, strategies=STRATEGIES, **kw):
        """Evita under each strategy, the hand-written loop, DuckDB; one table row."""
        row = {"workload": name}
        answers = []
        for strategy, options in strategies.items():
            runs = [evita(spark, program, inputs, relation, **options, **kw) for _ in range(args.repeat)]
            ev, n, extra, res = runs[0]
            ev = statistics.median(r[0] for r in runs)
            modes = sorted({s.mode for s in res.stats if s.iteration or s.mode == "local"}) or ["sql"]
            iterations = max((s.iteration for s in res.stats), default=0)
            row[strategy] = (ev, "+".join(modes), res.actions, iterations)
            if strategy not in STRATEGIES:
                row["note"] = f"{strategy}: {ev:.2f} s ({'+'.join(modes)}, {res.actions} jobs)"
            answers.append((n, extra))
            print(f"{name}: evita {strategy:<11} {ev:8.2f} s  {n:,} tuples  modes {modes}  "
                  f"{res.actions} actions, {iterations} iterations", flush=True)
        if hand is not None and not args.skip_handwritten:
            row["hand"] = hand()
            answers.append(row["hand"][1:])
            print(f"{name}: hand-written loop {row['hand'][0]:8.2f} s", flush=True)
        if duck is not None:
            runs = [duck() for _ in range(args.repeat)]
            row["duckdb"] = (statistics.median(r[0] for r in runs),) + tuple(runs[0][1:])
            answers.append(row["duckdb"][1:])
            print(f"{name}: duckdb {row['duckdb'][0]:8.2f} s", flush=True)
        row["agree"] = len({a for a in answers}) == 1
        table.append(row)

    if "tc" in work:
        edges = random_graph(2000, 4000, seed=7)
        contenders("TC, random graph 2,000 nodes / 4,000 edges", TC_PROGRAM, {"edge": edges}, "tc",
                   lambda: duck_recursive(TC_SQL, {"edge": (edges, ["x", "y"])}) + (None,),
                   lambda: handwritten_tc(spark, edges)[:2] + (None,),
                   strategies={**STRATEGIES, "tasks": {"small_rows": 0}})
    if "sg" in work:
        parents = binary_tree(12)
        contenders("same generation, binary tree depth 12", SG_PROGRAM, {"parent": parents}, "sg",
                   lambda: duck_recursive(SG_SQL, {"parent": (parents, ["c", "p"])}) + (None,),
                   lambda: handwritten_sg(spark, parents)[:2] + (None,))
    if "sssp" in work:
        edges = random_graph(2000, 8000, seed=11, weights=True)
        contenders("SSSP, 2,000 nodes / 8,000 edges, min in recursion", SSSP_PROGRAM, {"edge": edges}, "dist",
                   lambda: duck_sssp(edges), lambda: handwritten_sssp(spark, edges)[:3])
    if "nat" in work:  # 2,000 iterations: the distributed loop would need ~25 min here
        every = [(7,), (11,), (1999,)]
        contenders("nat: 2,000 iterations over small data", NAT_PROGRAM, {"every": every}, "hit", None,
                   strategies={"auto": {}}, max_iterations=5000)
    if "tc-large" in work:  # inputs above the small threshold: Spark's paths only
        edges = chains(6000, 40)  # 240,000 edges, 4.9M TC tuples
        contenders("TC, 6,000 chains of 40 edges (240,000 edges)", TC_PROGRAM, {"edge": edges}, "tc",
                   lambda: duck_recursive(TC_SQL, {"edge": (edges, ["x", "y"])}) + (None,))

    print("\n| workload | Evita, default strategy | Evita, distributed SQL loop | hand-written PySpark loop "
          "| DuckDB | default / DuckDB | distributed / DuckDB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in table:
        def cell(key):
            if key not in row:
                return "-"
            v = row[key]
            return f"{v[0]:.2f} s ({v[1]}, {v[2]} jobs, {v[3]} iterations)" if key in STRATEGIES else f"{v[0]:.2f} s"

        duck = row.get("duckdb", (None,))[0]
        ratio = {k: f"{row[k][0] / duck:.1f}x" if duck and k in row else "-" for k in STRATEGIES}
        print(f"| {row['workload']} | {cell('auto')} | {cell('distributed')} | {cell('hand')} | {cell('duckdb')} "
              f"| {ratio['auto']} | {ratio['distributed']} |" + ("" if row["agree"] else " RESULTS DIFFER")
              + (f" {row['note']}" if "note" in row else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
