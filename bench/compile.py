"""Compile latency: parse -> lattice -> stages (each with its integrity checks and the
lattice's next question) -> planner, for one program on a warm Spark session, with wall
time, engine actions, and the Spark jobs and Spark stages actually started (from Spark's
status tracker) per step.

    python bench/compile.py [PROGRAM] [--repeat N] [--skip STAGE ...] [--evaluator E ...]

Catalog programs run in the Python process while their catalog fits in memory (the
columnar backend: `--evaluator in-process`); the baseline measured in the same run is
the engine's SQL loop on Spark (`--evaluator engine`), and the last line gives the ratio.

The steps are those of `scheduler.compile_program`: the lattice's first question is one
action; then each stage is one action that also asks the lattice what comes next, and
the integrity checks of the catalog it leaves are one more (`scheduler.run_one`). A
stage row splits its time into driver work (planning, building SQL and DataFrames), the
stage's action, and the integrity checks. Prints a table per run and the median of the
warm runs; the first run warms the JVM.
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
    ap.add_argument("--skip", action="append", default=[], help="leave a stage out (as `evita compile --skip`)")
    ap.add_argument("--evaluator", action="append", choices=["in-process", "engine"],
                    help="how catalog programs run; several: each in turn (default: in-process, then engine)")
    args = ap.parse_args()

    from evita.runtime.session import spark_session

    spark = spark_session(master=args.master, warehouse="/tmp/evita-bench-warehouse")
    tracker = spark.sparkContext.statusTracker()

    def jobs() -> set:
        return set(tracker.getJobIdsForGroup(None))

    def spark_stages(job_ids) -> int:
        return sum(len(info.stageIds) for info in map(tracker.getJobInfo, job_ids) if info is not None)

    medians = {}
    for evaluator in args.evaluator or ["in-process", "engine"]:
        print(f"\n=== catalog programs evaluated by: {evaluator}")
        medians[evaluator] = measure(spark, args, evaluator, jobs, spark_stages)
    if len(medians) > 1:
        print("\nmedians: " + ", ".join(f"{e} {m:.2f} s" for e, m in medians.items())
              + f"; engine / in-process = {medians['engine'] / medians['in-process']:.1f}x"
              if {"engine", "in-process"} <= set(medians) else "")
    print("baseline in the same run: one Spark job over the same session, "
          f"{baseline(spark):.3f} s (spark.range(10).count())")
    return 0


def measure(spark, args, evaluator: str, jobs, spark_stages) -> float:
    """Median seconds of the warm runs of one compile, printing each run's steps."""
    from evita.bootstrap import scheduler, stage
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file
    from evita.bootstrap.planner import plan
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode

    totals, per_step = [], {}
    for run in range(args.repeat + 1):
        steps = []

        def step(name, fn, actions=lambda r: 0, note=lambda r: ""):
            before, t = jobs(), time.perf_counter()
            result = fn()
            seconds = time.perf_counter() - t
            started = jobs() - before
            steps.append((name, seconds, actions(result), len(started), spark_stages(started), note(result)))
            return result

        program = step("parse + checks", lambda: check_program(parse_file(args.program)))
        rows = step("encode", lambda: encode(program))
        stages = stage.find_stages()
        lattice = scheduler.Lattice(stages)
        disabled = sorted(args.skip)
        done = ["parse"]
        current = scheduler.Version(0, "parse", rows)
        name = step("lattice: first next?", lambda: lattice.next(spark, program.name, done, disabled, {}, evaluator),
                    lambda r: lattice.actions)
        while name not in (None, "planner"):
            question = lattice.question(done + [name], disabled, {})
            current = step(f"stage {name} + next? ; integrity",
                           lambda: scheduler.run_one(spark, stages[name], current, program.name, 1000, question,
                                                     evaluator),
                           lambda v: v.actions, _note)
            done.append(name)
            name = current.next_stage
        step("planner", lambda: plan(decode(current.rows, program.name)))
        total = sum(s[1] for s in steps)
        label = "warm-up" if run == 0 else f"run {run}"
        print(f"\n{label}: {Path(args.program).name}  total {total:.2f} s, {sum(s[2] for s in steps)} engine actions, "
              f"{sum(s[3] for s in steps)} Spark jobs, {sum(s[4] for s in steps)} Spark stages")
        print(f"  {'step':<44} {'seconds':>8} {'actions':>8} {'jobs':>5} {'stages':>7}  note")
        for name_, sec, act, nj, ns, note in steps:
            print(f"  {name_:<44} {sec:>8.2f} {act:>8} {nj:>5} {ns:>7}  {note}")
        if run:
            totals.append(total)
            for s in steps:
                per_step.setdefault(s[0], []).append(s[1])
    print(f"\nmedian of {len(totals)} warm runs: {statistics.median(totals):.2f} s (target: 3 s)")
    for name_, secs in per_step.items():
        print(f"  {name_:<44} median {statistics.median(secs):.2f} s")
    return statistics.median(totals)


def _note(version) -> str:
    """Where a stage's time went: driver work building the programs vs the action."""
    t = version.timing
    if not t:
        return ""
    return f"stage: build {t['stage'][0]:.2f} s + action {t['stage'][1]:.2f} s; integrity {t['integrity']:.2f} s"


def baseline(spark) -> float:
    times = []
    for _ in range(5):
        t = time.perf_counter()
        spark.range(10).count()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
