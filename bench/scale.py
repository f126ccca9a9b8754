"""Recursion at scale, as a user runs it: `evita run prog.dl -F facts -D out` from the shell.

    .venv/bin/python bench/scale.py                          # every workload, default sizes
    .venv/bin/python bench/scale.py --only cc sssp --edges 100000 1000000
    .venv/bin/python bench/scale.py --only tree --depth 16 19
    .venv/bin/python bench/scale.py --no-inprocess           # the --spark runs and baselines only

Each workload writes its facts once (fixed seeds) and then times, in the same run:
  evita        `evita run` in process (the driver's evaluator; start-up included)
  evita-spark  `evita run --spark` (local[*]; the JVM start included), with its Spark job count
  evita-bsp    (--bsp) `evita run --spark --no-local`: the bulk-synchronous loop, for comparison
  duckdb       DuckDB reading the same files, in a fresh Python process (start-up included):
               a recursive CTE where UNION is the semantics (tree, sg, tc), a loop of SQL
               statements where the recursion needs min inside it (cc, sssp)
  spark-cte    Spark's own `WITH RECURSIVE ... UNION ALL` (acyclic inputs only: the tree)
and prints seconds and the ratio against DuckDB. Answers are compared by row counts and a
checksum of the output files; each evita run's `--stats` is kept beside its output
(WORK/out/WORKLOAD-SIZE-RUNNER.stats.txt: phases, rounds, each round's Spark jobs and
bytes exchanged). Peak resident memory: for evita, the Python driver's own
(as `--stats` prints it; the JVM apart); for the baselines, the child process's.

Workloads:
  cc      connected components: label = the least node id reachable (min in recursion),
          random graph with E edges over E/5 nodes
  sssp    single-source shortest paths (min in recursion), E weighted edges over E/2.5 nodes
  tree    ancestors of a complete binary tree of depth D (left-linear recursion)
  sg      same generation on a binary tree of depth D (non-linear join of two parents)
  nltc    non-linear transitive closure of a random DAG (tc(x,z) :- tc(x,y), tc(y,z))
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
EVITA = str(Path(PY).parent / "evita")

PROGRAMS = {
    # the programs of examples/ (tests/test_rounds.py runs them too)
    "cc": (REPO / "examples" / "components.dl").read_text(),
    "sssp": (REPO / "examples" / "sssp.dl").read_text(),
    "tree": """
.decl parent(child: number, parent: number)
.input parent
.decl anc(x: number, y: number)
.output anc
anc(X, Y) :- parent(X, Y).
anc(X, Z) :- anc(X, Y), parent(Y, Z).
""",
    "sg": """
.decl parent(child: number, parent: number)
.input parent
.decl sg(x: number, y: number)
.output sg
sg(X, Y) :- parent(X, P), parent(Y, P), X != Y.
sg(X, Y) :- parent(X, A), sg(A, B), parent(Y, B).
""",
    "nltc": """
.decl edge(x: number, y: number)
.input edge
.decl tc(x: number, y: number)
.output tc
tc(X, Y) :- edge(X, Y).
tc(X, Z) :- tc(X, Y), tc(Y, Z).
""",
}

# DuckDB, as a user of it writes each workload (a fresh process: start-up included)
DUCKDB = {
    "cc": """
import duckdb, sys
con = duckdb.connect()
con.execute("create table edge as select * from read_csv('{facts}/edge.facts', delim='\\t', header=false, columns={{'x':'BIGINT','y':'BIGINT'}})")
con.execute("create table und as select x, y from edge union all select y, x from edge")
con.execute("create table cc as select x, min(x) as label from (select x from edge union select y from edge) group by x")
con.execute("create table delta as select * from cc")
while True:
    con.execute("create or replace table cand as select u.y as x, min(d.label) as label from delta d join und u on u.x = d.x group by u.y")
    con.execute("create or replace table delta as select c.x, c.label from cand c join cc on cc.x = c.x where c.label < cc.label")
    if con.execute("select count(*) from delta").fetchone()[0] == 0:
        break
    con.execute("update cc set label = delta.label from delta where cc.x = delta.x")
con.execute("copy cc to '{out}/cc.csv' (header false, delimiter '\\t')")
""",
    "sssp": """
import duckdb
con = duckdb.connect()
con.execute("create table edge as select * from read_csv('{facts}/edge.facts', delim='\\t', header=false, columns={{'x':'BIGINT','y':'BIGINT','w':'BIGINT'}})")
con.execute("create table dist as select 0::BIGINT as x, 0::BIGINT as d")
con.execute("create table delta as select * from dist")
while True:
    con.execute("create or replace table cand as select e.y as x, min(d.d + e.w) as d from delta d join edge e on e.x = d.x group by e.y")
    con.execute("create or replace table delta as select c.x, c.d from cand c left join dist on dist.x = c.x where dist.x is null or c.d < dist.d")
    if con.execute("select count(*) from delta").fetchone()[0] == 0:
        break
    con.execute("delete from dist where x in (select x from delta)")
    con.execute("insert into dist select * from delta")
con.execute("copy dist to '{out}/dist.csv' (header false, delimiter '\\t')")
""",
    "tree": """
import duckdb
con = duckdb.connect()
con.execute("create table parent as select * from read_csv('{facts}/parent.facts', delim='\\t', header=false, columns={{'c':'BIGINT','p':'BIGINT'}})")
con.execute("copy (with recursive anc(x, y) as (select c, p from parent union select anc.x, parent.p from anc join parent on parent.c = anc.y) select * from anc) to '{out}/anc.csv' (header false, delimiter '\\t')")
""",
    "sg": """
import duckdb
con = duckdb.connect()
con.execute("create table parent as select * from read_csv('{facts}/parent.facts', delim='\\t', header=false, columns={{'c':'BIGINT','p':'BIGINT'}})")
con.execute("copy (with recursive sg(x, y) as (select a.c, b.c from parent a join parent b on a.p = b.p where a.c <> b.c union select a.c, b.c from sg join parent a on a.p = sg.x join parent b on b.p = sg.y) select * from sg) to '{out}/sg.csv' (header false, delimiter '\\t')")
""",
    "nltc": """
import duckdb
con = duckdb.connect()
con.execute("create table edge as select * from read_csv('{facts}/edge.facts', delim='\\t', header=false, columns={{'x':'BIGINT','y':'BIGINT'}})")
con.execute("copy (with recursive tc(x, y) as (select x, y from edge union select tc.x, edge.y from tc join edge on edge.x = tc.y) select * from tc) to '{out}/tc.csv' (header false, delimiter '\\t')")
""",
}

# Spark's own recursive CTE (UNION ALL: correct on acyclic inputs only)
SPARK_CTE = {
    "tree": """
import sys
sys.path.insert(0, {repo!r})
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false")
         .config("spark.sql.cteRecursionLevelLimit", "-1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.csv("{facts}/parent.facts", sep="\\t", schema="c BIGINT, p BIGINT").createOrReplaceTempView("parent")
spark.sql("with recursive anc(x, y) as (select c, p from parent union all select anc.x, parent.p from anc join parent on parent.c = anc.y) select * from anc").write.mode("overwrite").csv("{out}/anc", sep="\\t")
""",
}


def write_facts(workload: str, size: int, work: Path) -> Path:
    """The workload's facts at this size (edges, or the tree's depth), once per run."""
    facts = work / f"{workload}-{size}"
    if facts.exists():
        return facts
    facts.mkdir(parents=True)
    rng = random.Random(11)
    if workload in ("cc", "sssp"):
        nodes = max(2, int(size / (5 if workload == "cc" else 2.5)))
        with open(facts / "edge.facts", "w") as f:
            for _ in range(size):
                x, y = rng.randrange(nodes), rng.randrange(nodes)
                f.write(f"{x}\t{y}\t{rng.randint(1, 100)}\n" if workload == "sssp" else f"{x}\t{y}\n")
    elif workload in ("tree", "sg"):
        with open(facts / "parent.facts", "w") as f:
            for child in range(2, 2 ** (size + 1)):
                f.write(f"{child}\t{child // 2}\n")
    elif workload == "nltc":  # a DAG: edges go from a lower to a higher id, within a window
        nodes = max(2, size // 2)
        with open(facts / "edge.facts", "w") as f:
            for _ in range(size):
                x = rng.randrange(nodes - 1)
                f.write(f"{x}\t{min(nodes - 1, x + 1 + rng.randrange(8))}\n")
    return facts


def answer(out: Path) -> tuple:
    """(rows, checksum) over every output file under `out`, order-free."""
    rows, digest = 0, 0
    for path in sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))):
        for line in path.read_text().splitlines():
            if line.strip():
                rows += 1
                digest ^= int.from_bytes(hashlib.blake2b(line.strip().replace(",", "\t").encode(),
                                                         digest_size=8).digest(), "little")
    return rows, f"{digest:016x}"


def timed(cmd: list, env=None) -> tuple:
    """(seconds, peak resident MiB of the child, stdout+stderr) of one shell command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    # ru_maxrss of children is the largest so far: only a new maximum is this child's own
    return seconds, (peak / 1024 if peak > before else None), p.stdout + p.stderr


def jobs_of(text: str):
    """The Spark jobs `--stats` counted over every phase of the run."""
    found = re.findall(r"^total\s+[\d.]+\s+(\d+)\s*$", text, re.M)
    return int(found[-1]) if found else None


def driver_peak(text: str):
    """The evita driver's own peak resident MiB, as `--stats` reports it."""
    found = re.findall(r"driver peak resident memory: ([\d,]+) MiB", text)
    return float(found[-1].replace(",", "")) if found else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=list(PROGRAMS), choices=list(PROGRAMS))
    ap.add_argument("--edges", type=int, nargs="*", default=[100_000, 1_000_000, 2_000_000])
    ap.add_argument("--depth", type=int, nargs="*", default=[16, 19])
    ap.add_argument("--nltc-edges", type=int, nargs="*", default=[20_000])
    ap.add_argument("--no-inprocess", action="store_true")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--bsp", action="store_true",
                    help="also `--spark --no-local`: the bulk-synchronous loop, one iteration per step")
    ap.add_argument("--runners", nargs="*", default=None,
                    help="only these runners (duckdb, spark-cte, evita, evita-spark, evita-bsp)")
    ap.add_argument("--work", default=None, help="where facts and outputs go (default: a temporary directory)")
    args = ap.parse_args(argv)

    work = Path(args.work or tempfile.mkdtemp(prefix="evita-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, EVITA_WAREHOUSE=str(work / "warehouse"))
    print(f"# bench/scale.py  (work: {work}; cores: {os.cpu_count()})")
    print(f"{'workload':<8} {'size':>10} {'runner':<12} {'seconds':>8} {'vs duckdb':>9} {'jobs':>6} "
          f"{'peak MiB':>8} {'rows':>10}  answer")
    for workload in args.only:
        sizes = {"cc": args.edges, "sssp": args.edges, "tree": args.depth, "sg": args.depth,
                 "nltc": args.nltc_edges}[workload]
        for size in sizes:
            facts = write_facts(workload, size, work)
            program = work / f"{workload}.dl"
            program.write_text(PROGRAMS[workload])
            runs = [("duckdb", [PY, "-c", DUCKDB[workload]], True)]
            if workload in SPARK_CTE and not args.no_spark:
                runs.append(("spark-cte", [PY, "-c", SPARK_CTE[workload]], True))
            if not args.no_inprocess:
                runs.append(("evita", [EVITA, "run", str(program), "-F", str(facts), "-q", "--stats"], False))
            if not args.no_spark:
                runs.append(("evita-spark", [EVITA, "run", str(program), "-F", str(facts), "-q", "--spark",
                                             "--stats"], False))
                if args.bsp:
                    runs.append(("evita-bsp", [EVITA, "run", str(program), "-F", str(facts), "-q", "--spark",
                                               "--stats", "--no-local"], False))
            runs = [r for r in runs if not args.runners or r[0] in args.runners]
            base = None
            answers = set()
            for runner, cmd, formatted in runs:
                out = work / "out" / f"{workload}-{size}-{runner}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                if formatted:
                    cmd = cmd[:-1] + [cmd[-1].format(facts=facts, out=out, repo=str(REPO.parent))]
                else:
                    cmd = cmd + ["-D", str(out)]
                try:
                    seconds, peak, text = timed(cmd, env)
                except RuntimeError as e:
                    print(f"{workload:<8} {size:>10,} {runner:<12} failed: {str(e).splitlines()[-1][:80]}")
                    continue
                if not formatted:  # evita's --stats (phases, rounds, each round's jobs and exchange), to read after
                    (work / "out" / f"{workload}-{size}-{runner}.stats.txt").write_text(text)
                rows, digest = answer(out)
                answers.add((rows, digest))
                base = seconds if runner == "duckdb" else base
                ratio = f"{seconds / base:.1f}x" if base else "-"
                jobs = jobs_of(text) if runner.startswith("evita-") else None
                peak = driver_peak(text) or peak  # evita: the Python driver alone, not its JVM
                print(f"{workload:<8} {size:>10,} {runner:<12} {seconds:8.2f} {ratio:>9} "
                      f"{jobs if jobs is not None else '-':>6} {f'{peak:.0f}' if peak else '-':>8} {rows:>10,}  {digest}",
                      flush=True)
            if len(answers) > 1:
                print(f"   !! the runners disagree on {workload} at {size}: {sorted(answers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
