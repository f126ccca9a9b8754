"""One stage on catalogs of growing size: the in-process evaluator against the engine.

    python bench/catalog_scale.py [--stage magic_sets] [--chain 50 100 200] [PROGRAM ...]

A catalog program runs in the Python process (the columnar backend's hash joins,
semi-naive) while its catalog fits in memory, else on the engine's SQL loop on Spark,
which pays a Spark job per iteration. The adversarial program here is a chain of n
recursive relations whose query sits at the end, so the magic-sets stage's rule/goal
graph is n deep. Each row: catalog rows, then seconds of `run_stage` alone with each
evaluator (the better of two warm runs, after one warm-up) and the engine's actions,
and the ratio engine / in-process (the baseline is the engine, measured in the same run).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def chain_program(n: int) -> str:
    """e1..e{n-1}, each the transitive closure of the one before, queried at the end."""
    lines = ["materialize(e0, infinity, infinity, keys(1, 2))."]
    lines += [f"e0({i}, {i + 1})." for i in range(20)]
    for i in range(1, n):
        lines.append(f"r{i}a e{i}(X, Y) :- e{i - 1}(X, Y).")
        lines.append(f"r{i}b e{i}(X, Z) :- e{i}(X, Y), e{i - 1}(Y, Z), X != Z.")
    lines.append(f"query e{n - 1}(1, Y).")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("programs", nargs="*", default=[str(REPO / "examples" / "shortest_path.olg"),
                                                    str(REPO / "stages" / "magic_sets.dl")])
    ap.add_argument("--stage", default="magic_sets")
    ap.add_argument("--chain", type=int, nargs="*", default=[50, 100, 200])
    args = ap.parse_args()

    from evita.bootstrap import stage as st
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_file
    from evita.catalog.encode import encode
    from evita.runtime.session import spark_session

    spark = spark_session(master="local[2]", warehouse="/tmp/evita-bench-warehouse")
    stage = st.find_stages()[args.stage]
    work = Path(tempfile.mkdtemp(prefix="evita-scale-"))
    paths = [Path(p) for p in args.programs]
    for n in args.chain:
        paths.append(work / f"chain{n}.olg")
        paths[-1].write_text(chain_program(n))

    print(f"stage {args.stage}, run alone; seconds are the better of two warm runs")
    print(f"  {'program':<24} {'catalog rows':>12} {'in-process':>10} {'engine':>8} {'actions':>8} {'engine/in-process':>18}")
    for path in paths:
        program = check_program(parse_file(path))
        rows = encode(program)
        seconds, actions = {}, {}
        for evaluator in ("in-process", "engine"):
            times = []
            for _ in range(3):
                t = time.perf_counter()
                out = st.run_stage(spark, stage, rows, program.name, evaluator=evaluator)
                times.append(time.perf_counter() - t)
            seconds[evaluator], actions[evaluator] = min(times[1:]), out.actions
        size = sum(len(v) for v in rows.values())
        print(f"  {path.name:<24} {size:>12,} {seconds['in-process']:>10.2f} {seconds['engine']:>8.2f} "
              f"{actions['engine']:>8} {seconds['engine'] / seconds['in-process']:>17.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
