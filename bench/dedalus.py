"""Dedalus time (issue 15): the simulator's speed per protocol, 1,000 seeds of two-phase
commit in one process and fanned out over Spark tasks, and Spark supersteps against the
simulator at delay 1.

    .venv/bin/python bench/dedalus.py                  # ~5 min on the shared 2-core machine
    .venv/bin/python bench/dedalus.py --seeds 50 --fan-seeds 200   # smoke run

Per protocol of examples/protocols (compiled once, not timed):
- 1 seed and --seeds seeds (all in one vectorized evaluation per timestep), delays
  uniform:1-5: timesteps per second (global timesteps of one run, and node-timesteps)
  and the ratio of --seeds seeds together against --seeds times one seed;
- `evita run --steps` on Spark (`runtime/supersteps.py`) against the simulator at delay 1,
  whole runs: seconds per superstep vs per simulated timestep, and the same trace
  (asserted).
Then --fan-seeds seeds of twopc: in this process, and split over --tasks Spark tasks.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOCOLS = REPO / "examples" / "protocols"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--fan-seeds", type=int, default=1000)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--no-spark-steps", action="store_true", help="skip the supersteps comparison")
    args = ap.parse_args()

    from evita.runtime.session import spark_session
    from evita.runtime.simulate import Simulation, compile_timed
    from evita.runtime.simulate_spark import fan_out
    from evita.runtime.supersteps import run_steps

    spark = spark_session()
    print(f"{'protocol':10} {'1 seed s':>9} {'steps':>6} {'steps/s':>8} {'N seeds s':>10} {'node-steps/s':>13} "
          f"{'N x 1 / N':>10} {'superstep s':>12} {'sim step s':>11} {'spark/sim':>10}")
    compiled = {}
    for path in sorted(PROTOCOLS.glob("*.olg")):
        timed = compiled[path.stem] = compile_timed(str(path), spark)
        Simulation(timed, [0], "uniform:1-5").run(args.steps)  # warm (imports, planning)
        t0 = time.perf_counter()
        one = Simulation(timed, [0], "uniform:1-5").run(args.steps)
        t_one = time.perf_counter() - t0
        steps_one = (one.quiesced[0] if one.quiesced[0] is not None else args.steps) + 1
        t0 = time.perf_counter()
        many = Simulation(timed, range(args.seeds), "uniform:1-5").run(args.steps)
        t_many = time.perf_counter() - t0
        line = (f"{path.stem:10} {t_one:9.2f} {steps_one:6d} {steps_one / t_one:8.0f} {t_many:10.2f} "
                f"{many.node_steps / t_many:13,.0f} {t_one * args.seeds / t_many:9.1f}x")
        if not args.no_spark_steps:
            t0 = time.perf_counter()
            on_spark = run_steps(timed, spark, args.steps)
            per_superstep = (time.perf_counter() - t0) / len(on_spark.supersteps)
            t0 = time.perf_counter()
            sim = Simulation(timed, [0], "fixed:1").run(args.steps)
            per_step = (time.perf_counter() - t0) / ((sim.quiesced[0] or args.steps) + 1)
            key = ["step", "node", "kind", "relation", "tuple"]
            assert sorted(map(tuple, on_spark.trace[key].astype(str).values.tolist())) == sorted(
                map(tuple, sim.trace[key].astype(str).values.tolist())), f"{path.stem}: supersteps disagree"
            assert on_spark.quiesced == sim.quiesced, f"{path.stem}: supersteps quiesce elsewhere"
            line += f" {per_superstep:12.2f} {per_step:11.3f} {per_superstep / per_step:9.0f}x"
        print(line, flush=True)
    timed = compiled["twopc"]
    t0 = time.perf_counter()
    here = Simulation(timed, range(args.fan_seeds), "uniform:1-5").run(args.steps)
    t_here = time.perf_counter() - t0
    t0 = time.perf_counter()
    there = fan_out(Simulation(timed, range(args.fan_seeds), "uniform:1-5"), args.steps, args.tasks, spark)
    t_there = time.perf_counter() - t0
    assert there.quiesced == here.quiesced
    print(f"\n{args.fan_seeds} seeds of twopc: {t_here:.1f} s in this process, {t_there:.1f} s over {args.tasks} "
          f"Spark tasks ({t_here / t_there:.2f}x); every seed quiesced: {not here.late}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
