"""Compile latency: parse -> lattice -> delta -> integrity -> planner for one program,
on a warm Spark session, with wall time, engine actions and the Spark jobs actually
started (from Spark's status tracker) per step.

    python bench/compile.py [PROGRAM] [--repeat N]

Prints a table per run and the median of the warm runs; the first run warms the JVM.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program", nargs="?", default=str(REPO / "examples" / "shortest_path.olg"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from evita.bootstrap import scheduler, stage
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file
    from evita.bootstrap.planner import plan
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode
    from evita.runtime.session import spark_session

    spark = spark_session(master=args.master, warehouse="/tmp/evita-bench-warehouse")
    tracker = spark.sparkContext.statusTracker()

    def jobs() -> int:
        return len(tracker.getJobIdsForGroup(None))

    totals = []
    for run in range(args.repeat + 1):
        steps = []

        def step(name, fn, actions=lambda r: 0):
            j, t = jobs(), time.perf_counter()
            result = fn()
            steps.append((name, time.perf_counter() - t, actions(result), jobs() - j))
            return result

        program = step("parse + checks", lambda: check_program(parse_file(args.program)))
        rows = step("encode", lambda: encode(program))
        stages = stage.find_stages()
        lattice = scheduler.Lattice(stages)
        done = ["parse"]
        current = scheduler.Version(0, "parse", rows)
        while True:
            name = step("lattice: next?", lambda: lattice.next(spark, program.name, done, [], {}),
                        lambda r: lattice.actions)
            if name in (None, "planner"):
                break
            out = step(f"stage {name}", lambda: stage.run_stage(spark, stages[name], current.rows, program.name),
                       lambda o: o.actions)
            new_rows = step("apply", lambda: scheduler.mark_stage(stage.apply(current.rows, out), program.name, name))
            bad = step("integrity checks", lambda: scheduler.check_integrity(spark, new_rows, program.name),
                       lambda _: scheduler.check_integrity.actions)
            assert not bad, bad
            current = scheduler.Version(current.number + 1, name, new_rows)
            done.append(name)
        step("planner", lambda: plan(decode(current.rows, program.name)))
        total = sum(s[1] for s in steps)
        label = "warm-up" if run == 0 else f"run {run}"
        print(f"\n{label}: {Path(args.program).name}  total {total:.2f} s, "
              f"{sum(s[2] for s in steps)} engine actions, {sum(s[3] for s in steps)} Spark jobs")
        print(f"  {'step':<28} {'seconds':>8} {'actions':>8} {'jobs':>6}")
        for name, sec, act, nj in steps:
            print(f"  {name:<28} {sec:>8.2f} {act:>8} {nj:>6}")
        if run:
            totals.append(total)
    print(f"\nmedian of {len(totals)} warm runs: {statistics.median(totals):.2f} s (target: 3 s)")
    print("baseline in the same run: one Spark job over the same session, "
          f"{baseline(spark):.3f} s (spark.range(10).count())")
    return 0


def baseline(spark) -> float:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        spark.range(10).count()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
