"""Benchmark: where the driver stops winning. One stratum, the same program and inputs,
run on the driver (the columnar evaluator, `small`) and on Spark's distributed loop,
with inputs from a thousand to a few million rows, in one run:

    .venv/bin/python bench/crossover.py
    .venv/bin/python bench/crossover.py --sizes 1000,100000 --repeat 3

The program is a recursion the partition stage does not decompose (its recursive
column is not kept from body to head), so only these two strategies apply: reach from
one source per chain over disjoint chains (as many result tuples as edges), with chains
of 10 edges (10 iterations) and of 3 (3 iterations: the fewer the iterations, the less
a Spark job per iteration costs, so the least favourable case for the driver). Strata
run once (no recursion) go to the driver only when their inputs are there already
(`engine.run_small`), so they have no crossover to measure.

Each contender is timed after compiling, over inputs already cached in Spark (as
`bench/run.py` does); the driver's time includes collecting its inputs from Spark and
handing its result back as a DataFrame (counted). The threshold `evita run` uses is
`columnar.SMALL_ROWS` rows of input per stratum ($EVITA_SMALL_ROWS).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import compiled  # noqa: E402

REACH = """
.decl edge(x: number, y: number)
.decl source(x: number)
.decl reach(y: number)
reach(y) :- source(x), edge(x, y).
reach(y) :- reach(x), edge(x, y).
"""

CHAINS = (10, 3)  # edges per chain: iterations


def chains(rows: int, length: int) -> tuple:
    """Disjoint chains of `length` edges, about `rows` edges in all, and their first nodes."""
    count = max(1, rows // length)
    edges = [(c * (length + 1) + i, c * (length + 1) + i + 1) for c in range(count) for i in range(length)]
    return edges, [(c * (length + 1),) for c in range(count)]


def timed(spark, flow, frames: dict, relation: str, small_rows: int) -> tuple:
    from evita.runtime.engine import run

    t0 = time.perf_counter()
    result = run(flow, spark, frames, small_rows=small_rows)
    n = result.relations[relation].count()
    seconds = time.perf_counter() - t0
    modes = sorted({s.mode for s in result.stats})
    return seconds, n, "+".join(modes), result.actions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000,300000,1000000,3000000",
                    help="input rows (edges), comma-separated")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per contender (the median is shown)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from evita.runtime.columnar import SMALL_ROWS
    from evita.runtime.session import spark_session

    spark = spark_session(master=args.master)
    flow = compiled(spark, REACH)
    rows, warm = [], False
    for length in CHAINS:
        for size in [int(s) for s in args.sizes.split(",")]:
            edges, sources = chains(size, length)
            edge = spark.createDataFrame(edges, "c0 long, c1 long").cache()
            source = spark.createDataFrame(sources, "c0 long").cache()
            edge.count(), source.count()
            frames, n, cells = {"edge": edge, "source": source}, len(edges) + len(sources), {}
            for strategy, small_rows in (("driver", 10 ** 12), ("spark", 0)):
                if not warm:  # the first jobs of a process pay for class loading and code generation
                    timed(spark, flow, frames, "reach", small_rows)
                runs = [timed(spark, flow, frames, "reach", small_rows) for _ in range(args.repeat)]
                seconds = statistics.median(r[0] for r in runs)
                cells[strategy] = (seconds, *runs[0][1:])
                print(f"reach, {length:>2} iterations {n:>10,} input rows  {strategy:<6} {seconds:8.2f} s  "
                      f"{runs[0][1]:>10,} tuples  {runs[0][2]}  {runs[0][3]} jobs", flush=True)
            warm = True
            assert cells["driver"][1] == cells["spark"][1], cells
            rows.append((f"reach, {length} iterations", n, cells))
            edge.unpersist(), source.unpersist()

    print(f"\n`evita run`'s threshold: {SMALL_ROWS:,} input rows per stratum\n")
    print("| workload | input rows | driver (columnar) | Spark (distributed loop) | driver / Spark |")
    print("| --- | --- | --- | --- | --- |")
    for name, n, cells in rows:
        d, s = cells["driver"], cells["spark"]
        print(f"| {name} | {n:,} | {d[0]:.2f} s ({d[2]}) | {s[0]:.2f} s ({s[2]}, {s[3]} jobs) | {d[0] / s[0]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
