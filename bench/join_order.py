"""Benchmark: join orders chosen by the system_r and cascades stages, measured on Spark.

    .venv/bin/python bench/join_order.py                 # everything (about 10 minutes here)
    .venv/bin/python bench/join_order.py --only chain4 --skip-search

Workloads, whose data realizes the statistics the stages measure (fixed, no randomness):
  golden1  q(A, E) :- r1(A, B), r3(C, D), r2(B, C), r4(D, E).   r_i = {(x, x) | x < 10,000}:
           the cross product r1 x r3 (10^8 rows) written second (research note, golden 1)
  golden2  q(A, C) :- r1(A, B), r2(B, C), r3(A, C).   r1 = {(a, a % 10)}, r2 = {(c % 10, c)},
           r3 = {(a, a)}, a < 10,000, c < 100,000: r1 join r2 makes 10^8 rows (golden 2, x10)
  chain4   a 4-way chain written from its big end: h1 join h2 (10^6 rows each) makes 4 * 10^8
           rows, the small end (s3, s4) keeps 100
  star6    a 6-way star written with its selective dimension last: f1 ... f5 fan out 7 each
           per key (6.7 * 10^7 rows after f5), d keeps 10 of 4,000 keys

Contenders, in one run and one SparkSession, inputs cached:
  written    the order as written (`--skip system_r`); Spark's rule-based ReorderJoin on (it
             moves cross products later, so it repairs golden1 by itself) and, for golden1,
             also with it excluded (`spark.sql.optimizer.excludedRules`)
  system_r   the default compile; cascades: `--choose join_order=cascades`
  spark-cbo  the written SQL with Spark's cost-based reorder (`spark.sql.cbo.enabled`,
             `spark.sql.cbo.joinReorder.enabled`) after `ANALYZE TABLE ... FOR ALL COLUMNS`:
             the oracle of a good plan (itself a System R dynamic program, bushy allowed);
             and "written + spark-cbo": Evita's written order run with the CBO on, the same
             engine as Evita's contenders with Spark's order
Reported: seconds to evaluate (median of 3; compiling excluded), the rows out of each join
in execution order (Spark SQL metrics), and for Evita's orders the rows the stage estimated
after each atom. Then the search itself: for one rule of n = 2..10 atoms (chain, star,
clique; random statistics), each stage's time on a warm session and the plans it costed.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

WORKLOADS = {
    "golden1": ("""
.decl r1(a: number, b: number)
.decl r2(b: number, c: number)
.decl r3(c: number, d: number)
.decl r4(d: number, e: number)
.decl q(a: number, e: number)
.input r1
.input r2
.input r3
.input r4
.output q
q1 q(A, E) :- r1(A, B), r3(C, D), r2(B, C), r4(D, E).
""", lambda: {f"r{i}": [(x, x) for x in range(10000)] for i in range(1, 5)},
        "SELECT DISTINCT r1.c0, r4.c1 FROM r1 CROSS JOIN r3 JOIN r2 ON r1.c1 = r2.c0 AND r2.c1 = r3.c0 "
        "JOIN r4 ON r3.c1 = r4.c0"),
    "golden2": ("""
.decl r1(a: number, b: number)
.decl r2(b: number, c: number)
.decl r3(a: number, c: number)
.decl q(a: number, c: number)
.input r1
.input r2
.input r3
.output q
q1 q(A, C) :- r1(A, B), r2(B, C), r3(A, C).
""", lambda: {"r1": [(a, a % 10) for a in range(10000)], "r2": [(c % 10, c) for c in range(100000)],
              "r3": [(a, a) for a in range(10000)]},
        "SELECT DISTINCT r1.c0, r2.c1 FROM r1 JOIN r2 ON r1.c1 = r2.c0 JOIN r3 ON r1.c0 = r3.c0 AND r2.c1 = r3.c1"),
    "chain4": ("""
.decl h1(a: number, b: number)
.decl h2(b: number, c: number)
.decl s3(c: number, d: number)
.decl s4(d: number, e: number)
.decl q(a: number, e: number)
.input h1
.input h2
.input s3
.input s4
.output q
q1 q(A, E) :- h1(A, B), h2(B, C), s3(C, D), s4(D, E).
""", lambda: {"h1": [(a, a % 2500) for a in range(1000000)], "h2": [(c % 2500, c) for c in range(1000000)],
              "s3": [(c * 10000, c) for c in range(100)], "s4": [(d, d) for d in range(100)]},
        "SELECT DISTINCT h1.c0, s4.c1 FROM h1 JOIN h2 ON h1.c1 = h2.c0 JOIN s3 ON h2.c1 = s3.c0 "
        "JOIN s4 ON s3.c1 = s4.c0"),
    "star6": ("""
.decl f1(x: number, v: number)
.decl f2(x: number, v: number)
.decl f3(x: number, v: number)
.decl f4(x: number, v: number)
.decl f5(x: number, v: number)
.decl d(x: number, tag: symbol)
.decl q(x: number, a: number, b: number, c: number, e: number, g: number)
.input f1
.input f2
.input f3
.input f4
.input f5
.input d
.output q
q1 q(X, A, B, C, E, G) :- f1(X, A), f2(X, B), f3(X, C), f4(X, E), f5(X, G), d(X, "keep").
""", lambda: {**{f"f{i}": [(v % 4000, v) for v in range(28000)] for i in range(1, 6)},
              "d": [(x, "keep" if x % 400 == 0 else "drop") for x in range(4000)]},
        "SELECT DISTINCT f1.c0, f1.c1, f2.c1, f3.c1, f4.c1, f5.c1 FROM f1 JOIN f2 ON f1.c0 = f2.c0 "
        "JOIN f3 ON f1.c0 = f3.c0 JOIN f4 ON f1.c0 = f4.c0 JOIN f5 ON f1.c0 = f5.c0 "
        "JOIN d ON f1.c0 = d.c0 AND d.c1 = 'keep'"),
}

REPEATS = 3
REORDER_JOIN = "org.apache.spark.sql.catalyst.optimizer.ReorderJoin"


def join_rows(df) -> list:
    """Rows out of each join of `df`'s executed plan (Spark SQL metrics), first join first."""
    out = []

    def walk(node):
        name = node.nodeName()
        if "AdaptiveSparkPlan" in name:
            return walk(node.executedPlan())
        if "QueryStage" in name:
            return walk(node.plan())
        metrics = node.metrics()
        if ("Join" in name or "CartesianProduct" in name) and metrics.contains("numOutputRows"):
            out.append(int(metrics.apply("numOutputRows").value()))
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))
    walk(df._jdf.queryExecution().executedPlan())
    return out[::-1]


def timed(make):
    """(median seconds, joins' rows, answer size) of collecting `make()`, REPEATS times."""
    times, joins, n = [], [], 0
    for _ in range(REPEATS):
        df = make()
        t0 = time.perf_counter()
        n = len(df.collect())
        times.append(time.perf_counter() - t0)
        joins = join_rows(df)
    return statistics.median(times), joins, n


def compiled(spark, text: str, frames: dict, **choices):
    """The program compiled through the stages with its inputs' statistics, as `evita run`
    does: (dataflow, the stage's estimated rows per prefix of rule q1)."""
    from evita.bootstrap import stage as st
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_program
    from evita.bootstrap.planner import plan_catalog
    from evita.bootstrap.scheduler import compile_program
    from evita.catalog.encode import encode
    from evita.runtime.statistics import catalog_rows, measure

    program = check_program(parse_program(text, "bench.dl"))
    rows = encode(program)
    rows["statistic"] += catalog_rows(program.name, measure(frames))
    comp = compile_program(spark, rows, program.name, **choices)
    estimates = []
    stage = (choices.get("choose") or {}).get("join_order", "system_r")
    if stage not in choices.get("skip", ()):
        before = next(v.rows for v in comp.versions if v.stage == "delta")
        t = st.evaluate(spark, st.find_stages()[stage].program, before, program.name, ["on_path", "set_size", "rows_of"],
                        origin=stage).tuples
        size = {m: k for r, m, k in t["set_size"]}
        est = {m: n for r, m, n in t["rows_of"]}
        estimates = [int(est[m]) for _, m in sorted(t["on_path"], key=lambda x: size[x[1]])]
    return plan_catalog(comp.final, program.name), estimates


def evita_run(spark, dataflow, frames):
    from evita.runtime.engine import run

    return run(dataflow, spark, frames, tuning="large").relations["q"]


def order_text(dataflow) -> str:
    rule = next(r for st in dataflow.strata for r in st.init_rules + st.delta_rules if r.name == "q1")
    return " ".join(s.relation for s in rule.steps if s.op in ("scan", "join"))


def bench_workload(spark, name: str) -> list:
    text, data, sql = WORKLOADS[name]
    frames = {}
    for rel, rows in data().items():
        df = spark.createDataFrame(rows, [f"c{i}" for i in range(len(rows[0]))]).cache()
        df.count()
        df.createOrReplaceTempView(rel)
        frames[rel] = df
    results = []
    contenders = [("written", {"skip": ["system_r"]}), ("system_r", {}),
                  ("cascades", {"choose": {"join_order": "cascades"}})]
    for label, choices in contenders:
        dataflow, est = compiled(spark, text, frames, **choices)
        if label == "written":
            written_flow = dataflow
        secs, joins, n = timed(lambda: evita_run(spark, dataflow, frames))
        results.append((name, label, order_text(dataflow), secs, joins, est, n))
        if label == "written" and name == "golden1":
            spark.conf.set("spark.sql.optimizer.excludedRules", REORDER_JOIN)
            try:
                secs, joins, n = timed(lambda: evita_run(spark, dataflow, frames))
            finally:
                spark.conf.unset("spark.sql.optimizer.excludedRules")
            results.append((name, "written, no ReorderJoin", order_text(dataflow), secs, joins, [], n))
    for rel in frames:
        spark.sql(f"ANALYZE TABLE {rel} COMPUTE STATISTICS FOR ALL COLUMNS")
    spark.conf.set("spark.sql.cbo.enabled", "true")
    spark.conf.set("spark.sql.cbo.joinReorder.enabled", "true")
    try:
        secs, joins, n = timed(lambda: spark.sql(sql))
        results.append((name, "spark-cbo", "(Spark's choice)", secs, joins, [], n))
        # Spark's reorder of Evita's written plan: the same engine, Spark's order
        secs, joins, n = timed(lambda: evita_run(spark, written_flow, frames))
        results.append((name, "written + spark-cbo", "(Spark's choice)", secs, joins, [], n))
    finally:
        spark.conf.unset("spark.sql.cbo.enabled")
        spark.conf.unset("spark.sql.cbo.joinReorder.enabled")
    for df in frames.values():
        df.unpersist()
    return results


def search_effort(spark, sizes=range(2, 11)) -> list:
    """Per n: each stage's seconds on one rule of n atoms (warm) and the plans it costed."""
    from evita.bootstrap import stage as st
    from evita.bootstrap.parser import parse_program
    from evita.catalog.encode import encode

    stages = st.find_stages()
    rnd = random.Random(7)
    out = []
    for shape in ("chain", "star", "clique"):
        for n in sizes:
            stats, atoms = [], []
            for i in range(n):
                args = {"chain": (f"V{i}", f"V{i + 1}"), "star": ("V0", f"V{i + 1}"),
                        "clique": ("V0", f"V{i + 1}") if i == 0 else (f"V{rnd.randrange(i + 1)}", f"V{i + 1}")}[shape]
                rows = rnd.choice([10, 100, 1000, 10000, 100000])
                stats.append(f".plan statistics t{i}(rows={rows}, distinct0={rnd.randint(1, rows)}, "
                             f"distinct1={rnd.randint(1, rows)})")
                atoms.append(f"t{i}({', '.join(args)})")
            if shape == "clique":  # every pair shares a variable: all of V0
                atoms = [f"t{i}(V0, V{i + 1})" for i in range(n)]
            rnd.shuffle(atoms)
            program = parse_program("\n".join(stats) + f"\nq1 q(V0) :- {', '.join(atoms)}.\n", "search.dl")
            rows = encode(program)
            row = [shape, n]
            for name in ("system_r", "cascades"):
                st.run_stage(spark, stages[name], rows, program.name)  # warm: compiled, types probed
                t0 = time.perf_counter()
                st.run_stage(spark, stages[name], rows, program.name)
                secs = time.perf_counter() - t0
                t = st.evaluate(spark, stages[name].program, rows, program.name,
                                ["best", "step"] + (["wanted"] if name == "cascades" else []), origin=name).tuples
                best = {m for _, m, _ in t["best"]}
                wanted = {m for _, m in t["wanted"]} if "wanted" in t else None
                costed = sum(1 for _, m, k in t["step"] if m in best and (wanted is None or m | 1 << k in wanted))
                row += [secs, costed]
            out.append(tuple(row))
            print(f"  {shape:<6} n={n:<2}  system_r {row[2]:6.2f} s {row[3]:6d} plans   "
                  f"cascades {row[4]:6.2f} s {row[5]:6d} plans", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(WORKLOADS))
    ap.add_argument("--skip-search", action="store_true", help="leave out the search-effort table")
    ap.add_argument("--skip-workloads", action="store_true", help="only the search-effort table")
    ap.add_argument("--max-atoms", type=int, default=10)
    ap.add_argument("--atoms", type=int, nargs="+", help="only these rule sizes in the search table")
    args = ap.parse_args(argv)
    from evita.runtime.session import spark_session

    spark = spark_session()
    print(f"{'workload':<9} {'contender':<24} {'seconds':>8} {'vs written':>10} {'vs cbo*':>7}  "
          f"{'answer':>7}  joins' rows (estimated)   order")
    for name in [] if args.skip_workloads else args.only or list(WORKLOADS):
        rows = bench_workload(spark, name)
        written = next(r[3] for r in rows if r[1] == "written")
        cbo = next(r[3] for r in rows if r[1] == "written + spark-cbo")
        for w, label, order, secs, joins, est, n in rows:
            print(f"{w:<9} {label:<24} {secs:8.2f} {written / secs:9.1f}x {secs / cbo:6.2f}x  {n:7d}  "
                  f"{joins} ({est if est else '-'})   {order}", flush=True)
    if not args.skip_search:
        print("\nsearch effort (one rule of n atoms, warm session): seconds and plans costed per stage")
        search_effort(spark, args.atoms or range(2, args.max_atoms + 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
