"""Many seeds of the simulator fanned out over Spark tasks (`evita simulate --fanout K`).

The simulator is one process by design (`simulate.py`); what Spark adds is more
processes: the seeds are split into K chunks, each chunk simulated by one task
(`mapInPandas`, so it also runs over Spark Connect), and the runs come back to the
driver as one `Run`, as if simulated together. Seeds do not interact, so the result is
the one a single process gives.
"""
from __future__ import annotations

import base64
import pickle
import time


def fan_out(sim, steps: int, tasks: int, spark=None):
    from .session import spark_session
    from .simulate import Run

    spark = spark or spark_session()
    seeds = list(sim.seeds)
    tasks = max(1, min(tasks, len(seeds)))
    chunks = [seeds[i::tasks] for i in range(tasks)]
    blob = base64.b64encode(pickle.dumps(sim)).decode()

    def simulate_chunks(frames):
        import pandas as pd

        for frame in frames:
            out = []
            for i in frame["chunk"]:
                s = pickle.loads(base64.b64decode(blob))
                s.seeds = chunks[int(i)]
                out.append(base64.b64encode(pickle.dumps(s.run(steps))).decode())
            yield pd.DataFrame({"run": out})

    started = time.perf_counter()
    parts = (spark.createDataFrame([(i,) for i in range(tasks)], "chunk int").repartition(tasks, "chunk")
             .mapInPandas(simulate_chunks, "run string").collect())
    runs = [pickle.loads(base64.b64decode(r["run"])) for r in parts]
    return Run(sim.t, steps, _concat([r.trace for r in runs], ["seed", "step", "node"]),
               _concat([r.counts for r in runs], ["seed", "node"]),
               {s: q for r in runs for s, q in r.quiesced.items()},
               {rel: _concat([r.states[rel] for r in runs], ["seed", "node"]) for rel in sim.t.arity},
               time.perf_counter() - started, sum(r.node_steps for r in runs))


def _concat(frames: list, order: list):
    import pandas as pd

    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(order, kind="stable").reset_index(drop=True)
