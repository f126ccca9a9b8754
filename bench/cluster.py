"""Benchmark: the same programs in local mode and on the loopback standalone cluster.

    .venv/bin/python bench/cluster.py              # TC and same generation, local[2] and the cluster
    .venv/bin/python bench/cluster.py --repeat 3

The cluster is `scripts/local-cluster`'s: a master and two workers of one core and
2 GiB each, started by this script on free ports and stopped at the end. Each run is
one `evita run ... --stats` process, as a user runs it, in both modes:

  tc   transitive closure of a random graph (1,000 nodes, 2,000 edges): decomposable,
       so its fixpoint runs inside the tasks (`mapInArrow`), on the executors
  sg   same generation on a binary tree of depth 8, `--no-local`: the distributed
       loop, one Spark job per iteration

The baseline is local mode (`--master local[2]`: the same two cores, executors inside
the driver's JVM), measured in the same run. On one machine the cluster is expected to
be slower: separate executor JVMs, the package zip shipped to them, tasks scheduled
over RPC; the point is that the answers are the same and what the move costs. Printed:
wall time of the process, and the `--stats` phases that differ (Spark start-up, the
fixpoint), per mode, with the ratio cluster / local.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli import evita_run  # noqa: E402
from run import SG_PROGRAM, TC_PROGRAM, binary_tree, random_graph  # noqa: E402

from evita.runtime import cluster as local_cluster  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=2, help="runs per program and mode (the median is shown)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tc.dl").write_text(TC_PROGRAM)
        (root / "sg.dl").write_text(SG_PROGRAM)
        (root / "facts").mkdir()
        (root / "facts" / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in random_graph(1000, 2000, 7)))
        (root / "facts" / "parent.facts").write_text("".join(f"{a}\t{b}\n" for a, b in binary_tree(8)))
        programs = {"tc": ["tc.dl", "-F", "facts"], "sg": ["sg.dl", "-F", "facts", "--no-local"]}
        env = {k: v for k, v in os.environ.items() if k not in ("EVITA_MASTER", "EVITA_REMOTE")}
        env.update(EVITA_WAREHOUSE=str(root / "warehouse"), EVITA_SPARK_LOG=str(root / "spark.log"))
        started = time.perf_counter()
        c = local_cluster.start(port=local_cluster.free_port(), directory=root / "cluster", timeout=150)
        print(f"loopback cluster up in {time.perf_counter() - started:.1f} s: {c.master}, 2 workers x 1 core, 2 GiB",
              flush=True)
        results: dict = {}
        try:
            for name, prog in programs.items():
                for mode, master in (("local[2]", "local[2]"), ("cluster", c.master)):
                    runs = []
                    for i in range(args.repeat):
                        out = root / "out" / f"{name}-{mode}-{i}"
                        runs.append(evita_run([*prog, "-D", str(out), "--master", master], root, env))
                        rows = sorted((out / f"{name}.csv").read_text().splitlines())
                        results.setdefault((name, "rows"), set()).add(tuple(rows))
                    results[(name, mode)] = runs
                    print(f"  {name} on {mode}: " + ", ".join(f"{w:.1f} s" for w, _ in runs), flush=True)
        finally:
            local_cluster.stop(root / "cluster")

    def median(runs, phase=None):
        return statistics.median(w if phase is None else p.get(phase, (0.0, 0))[0] for w, p in runs)

    print("\nprogram  phase               local[2] s  cluster s  cluster/local")
    for name in programs:
        assert len(results[(name, "rows")]) == 1, f"{name}: the modes gave different answers"
        local, remote = results[(name, "local[2]")], results[(name, "cluster")]
        for phase in (None, "start Spark (JVM)", "read inputs", "fixpoint", "write outputs"):
            a, b = median(local, phase), median(remote, phase)
            label = "wall (whole process)" if phase is None else phase
            print(f"{name:<8} {label:<20} {a:>9.2f}  {b:>9.2f}  {b / a if a else float('nan'):>12.2f}x")
    print("\nanswers: the same in both modes for every program")
    return 0


if __name__ == "__main__":
    sys.exit(main())
