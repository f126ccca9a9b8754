"""Localization and located execution (issue 14): per-node traffic, and wall time on Spark
with relations partitioned by location against the same program unpartitioned.

    .venv/bin/python bench/localize.py                 # ~10 min on the shared 2-core machine
    .venv/bin/python bench/localize.py --nodes 200 --repeat 1   # smoke run

1. Seed 002 Fig 4.19: tuples sent, received and derived locally per node for the path
   program of Fig 4.1 on the Fig 4.2 topology (examples/path_magic.olg), localized,
   without and with magic sets (`Result.traffic()`, set semantics).

2. A random topology of --nodes nodes, each with --degree links to random others, and a
   hop-bounded path program (`hop(@X, Z, H)`: Z is H <= --hops links away from X). The
   localized program runs in the distributed loop (every stratum on Spark) twice: as
   placed by the stage (`located`: every located relation hash-partitioned on its @
   column, derived tuples repartitioned to their location) and the same dataflow with
   the placement removed (Spark chooses every exchange). Reported: wall time (median of
   --repeat), per-node traffic totals, and per iteration the exchanges in the physical
   plan of the new delta: explicit ones (REPARTITION_BY_NUM, the shipments) and those
   Spark adds to meet a join's or a set difference's requirements (ENSURE_REQUIREMENTS).
   Joins are forced to be shuffle joins (no broadcast) so the placement is visible.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

HOPS_PROGRAM = """
r1 hop(@X, Y, 1) :- link(@X, Y).
r2 hop(@X, Z, H) :- link(@X, Y), hop(@Y, Z, H1), H1 < {hops}, H := H1 + 1.
"""


def compiled(spark, text_or_path, **kw):
    from conftest import compiled_plan
    from evita.bootstrap.parser import parse_file, parse_program

    program = parse_file(text_or_path) if isinstance(text_or_path, Path) else parse_program(text_or_path, "hops.olg", "hops")
    return compiled_plan(spark, program, **kw)


def fig_4_19(spark) -> None:
    from evita.runtime.engine import run
    from evita.runtime.traffic import traffic_text

    example = REPO / "examples" / "path_magic.olg"
    for label, kw in (("without magic sets", {"skip": ["magic_sets"]}), ("with magic sets", {})):
        result = run(compiled(spark, example, **kw), spark)
        print(f"\n## Fig 4.19, path program on the Fig 4.2 topology, localized, {label}\n")
        print("```\n" + traffic_text(result.traffic()) + "\n```")


def topology(nodes: int, degree: int, seed: int = 7) -> list:
    rng = random.Random(seed)
    links = set()
    for x in range(nodes):
        for y in rng.sample([n for n in range(nodes) if n != x], degree):
            links.add((f"n{x}", f"n{y}"))
    return sorted(links)


def exchanges(plan: str) -> tuple:
    """(explicit, implicit) exchanges this iteration runs: those inside a cached
    relation (InMemoryRelation) ran when it was cached, and are left out."""
    explicit = implicit = 0
    cached_at = None  # indentation of the InMemoryRelation being skipped
    for line in plan.splitlines():
        depth = len(line) - len(line.lstrip(" :+-"))
        if cached_at is not None and depth > cached_at:
            continue
        cached_at = depth if "InMemoryRelation" in line else None
        explicit += "REPARTITION_BY_NUM" in line
        implicit += "ENSURE_REQUIREMENTS" in line
    return explicit, implicit


def run_once(spark, flow, links, record: list):
    """One run in the distributed loop; `record` gets (explicit, implicit) exchanges of
    every iteration's new delta, read from its physical plan before it runs."""
    from evita.runtime import engine as E

    advance = E._Engine.advance

    def recorded(self, s, cand):
        df = advance(self, s, cand)
        # a projection over the delta: planning the delta itself before its checkpoint
        # trips a Spark 4 bug (UnionBase constraints), and the projection adds no exchange
        record.append(exchanges(df.select("*")._jdf.queryExecution().executedPlan().toString()))
        return df

    E._Engine.advance = recorded
    try:
        frame = spark.createDataFrame(links, "c0 string, c1 string")
        t0 = time.perf_counter()
        result = E.run(flow, spark, {"link": frame}, local=False, tuning="large")
        rows = result.relations["hop"].count()
        return time.perf_counter() - t0, rows, result
    finally:
        E._Engine.advance = advance


def random_topology(spark, nodes: int, degree: int, hops: int, repeat: int, partitions: int) -> None:
    from evita.runtime.traffic import measure

    links = topology(nodes, degree)
    text = 'link("n0", "n1").\n' + HOPS_PROGRAM.format(hops=hops)  # the links are an input: this fact types them
    located = compiled(spark, text)
    assert located.relations["hop"].located, located.to_text()
    unplaced = replace(located, relations={n: replace(s, located=False, partition=())
                                           for n, s in located.relations.items()})
    saved = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.autoBroadcastJoinThreshold")}
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        print(f"\n## Random topology: {nodes} nodes, {len(links)} links, hop(@X, Z, H) for H <= {hops}, "
              f"{partitions} partitions, shuffle joins\n")
        print("| placement | wall s (median of %d) | hop tuples | shipped tuples | exchanges per iteration "
              "(explicit + implicit) |" % repeat)
        print("|---|---|---|---|---|")
        times = {}
        for label, flow in (("located (partitioned on @)", located), ("unplaced (Spark decides)", unplaced)):
            seconds, record = [], []
            for _ in range(repeat):
                record.clear()
                s, rows, result = run_once(spark, flow, links, record)
                seconds.append(s)
            shipped = sum(t.sent for t in measure(result)) if flow is located else "-"
            per_iteration = sorted({f"{a} + {b}" for a, b in record})
            times[label] = statistics.median(seconds)
            print(f"| {label} | {times[label]:.2f} | {rows} | {shipped} | {', '.join(per_iteration)} |")
        base = times["unplaced (Spark decides)"]
        print(f"\nlocated / unplaced wall time: {times['located (partitioned on @)'] / base:.2f}x")
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--degree", type=int, default=3)
    ap.add_argument("--hops", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8)
    args = ap.parse_args(argv)
    from evita.runtime.session import spark_session

    spark = spark_session()
    print(f"# bench/localize.py  {' '.join(sys.argv[1:])}")
    fig_4_19(spark)
    random_topology(spark, args.nodes, args.degree, args.hops, args.repeat, args.partitions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
