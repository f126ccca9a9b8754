"""Recursion in rounds (`runtime/rounds.py`, seed 003): a monotone stratum that does not
decompose runs partitioned, each Spark job a round of local iterations and one exchange.
Its answers are the distributed loop's and the driver's; the plan says why it runs so."""
from __future__ import annotations

import random

import pytest

from evita.runtime.engine import run

import oracle

from conftest import EXAMPLES, compiled_plan

# the programs of examples/ (bench/scale.py runs them at scale); the facts are added below
CC = (EXAMPLES / "components.dl").read_text()
SSSP = (EXAMPLES / "sssp.dl").read_text()

# a set recursion joined on the column the head does not keep: not decomposable
REACH = """
.decl edge(x: number, y: number)
.decl reach(x: number)
.output reach
r1 reach(X) :- edge(0, X).
r2 reach(Y) :- reach(X), edge(X, Y).
"""


def graph(nodes: int, edges: int, seed: int, weighted: bool = False) -> str:
    rng = random.Random(seed)
    rows = set()
    while len(rows) < edges:
        x, y = rng.randrange(nodes), rng.randrange(nodes)
        rows.add((x, y, rng.randint(1, 9)) if weighted else (x, y))
    return "".join(f"edge({', '.join(map(str, r))}).\n" for r in sorted(rows))


def oracle_tuples(text: str, relations: list) -> dict:
    """The answers of tests/oracle.py, the independent reference evaluator."""
    from evita.bootstrap.parser import parse_program

    got = oracle.evaluate(parse_program(text, "t.olg", name="t"), {})
    return {r: {tuple(t) for t in got[r]} for r in relations}


_PLANS: dict = {}


def answers(spark, text: str, relation: str, **options):
    if text not in _PLANS:  # one compile per program text: a test runs it several ways
        _PLANS[text] = compiled_plan(spark, text)
    flow = _PLANS[text]
    result = run(flow, spark, **options)
    return flow, result, result.tuples([relation])[relation]


@pytest.mark.parametrize("program, relation, weighted", [(CC, "cc", False), (SSSP, "dist", True),
                                                        (REACH, "reach", False)], ids=["cc", "sssp", "reach"])
def test_rounds_give_the_answers_of_the_loop_and_the_driver(spark, program, relation, weighted):
    text = program + graph(120, 260, seed=len(relation), weighted=weighted)
    flow, rounds, got = answers(spark, text, relation, small_rows=0)
    stratum = next(st for st in flow.strata if relation in st.relations)
    assert stratum.strategy == "rounds" and stratum.rounds.local_iterations > 0, stratum.reason
    assert "rounds:" in flow.to_text()
    modes = {s.mode for s in rounds.stats if s.stratum == stratum.index and s.iteration > 0}
    assert modes == {"rounds"}, rounds.notes
    # one Spark job per round: the round's counts come back with the job that computes it
    assert all(s.actions == 1 for s in rounds.stats if s.stratum == stratum.index and s.iteration > 0)
    _, loop, want = answers(spark, text, relation, local=False)
    _, driver, small = answers(spark, text, relation)
    assert got == want == small and got


def test_rounds_take_fewer_global_steps_than_iterations(spark):
    """A long chain: each partition walks its own stretch in one round, where the loop
    needs an iteration per edge."""
    chain = "".join(f"edge({i}, {i + 1}).\n" for i in range(30))
    text = REACH + chain
    flow, rounds, got = answers(spark, text, "reach", small_rows=0)
    stratum = next(st for st in flow.strata if "reach" in st.relations)
    n_rounds = sum(1 for s in rounds.stats if s.stratum == stratum.index and s.iteration > 0)
    assert got == {(i,) for i in range(1, 31)}
    # 30 iterations in the loop. Hashing scatters neighbours over the N partitions, so a
    # round walks on while the next node stays in the partition (1 - 1/N of the steps
    # cross: about 15 rounds with 2 partitions, 23 with 4), never fewer edges than one
    assert n_rounds < 28, n_rounds


def test_a_straggler_changes_the_time_of_a_round_not_its_answers(spark, monkeypatch):
    text = CC + graph(80, 160, seed=5)
    flow, _, fast = answers(spark, text, "cc", small_rows=0)
    monkeypatch.setenv("EVITA_SLOW_PARTITION", "0:0.2")
    slow_run = run(flow, spark, small_rows=0)
    slow = slow_run.tuples(["cc"])["cc"]
    driver = run(flow, spark).tuples(["cc"])["cc"]  # the loop's answers: test_rounds_give_the_answers_...
    assert fast == slow == driver
    rounds = [s for s in slow_run.stats if s.mode == "rounds" and s.iteration > 0]
    assert all(s.seconds >= 0.2 for s in rounds)


def test_a_user_plan_keeps_the_distributed_loop(spark):
    text = CC + graph(30, 40, seed=2) + ".plan relation cc(strategy=distributed)\n"
    flow = compiled_plan(spark, text)
    stratum = next(st for st in flow.strata if "cc" in st.relations)
    assert stratum.strategy == "distributed" and stratum.rounds is None


def test_a_decomposable_recursion_beside_one_in_rounds_runs_in_rounds_with_the_copies_the_stage_placed(spark):
    """tc decomposes (local) and shares cc's level: the planner runs the level as one
    stratum in rounds, reading the copies partition.dl placed for tc's rule too (cp5)."""
    text = CC + ".decl tc(x: number, y: number)\n.output tc\nt1 tc(X, Y) :- node(X), edge(X, Y).\n" \
        "t2 tc(X, Z) :- tc(X, Y), edge(Y, Z).\n" + graph(40, 60, seed=3)
    flow = compiled_plan(spark, text)
    stratum = next(st for st in flow.strata if "cc" in st.relations)
    assert "tc" in stratum.relations and stratum.strategy == "rounds", stratum.reason
    assert "each partition holds edge@*, edge@0, edge@1;" in flow.to_text()
    rounds = run(flow, spark, small_rows=0)
    assert {s.mode for s in rounds.stats if s.stratum == stratum.index and s.iteration > 0} == {"rounds"}
    driver = run(flow, spark)  # the same evaluator core in the driver, no Spark job per iteration
    assert rounds.tuples(["cc", "tc"]) == driver.tuples(["cc", "tc"]) == oracle_tuples(text, ["cc", "tc"])


def test_a_plan_in_rounds_written_without_copies_keeps_the_loop_and_says_why(spark):
    text = CC + graph(10, 12, seed=4) + ".plan relation cc(strategy=rounds, partition=0, local_iterations=4)\n"
    stratum = next(st for st in compiled_plan(spark, text).strata if "cc" in st.relations)
    assert stratum.strategy == "distributed" and stratum.rounds is None
    assert "but rule r2_d1 reads edge with no copy placed for a partition" in stratum.reason


def test_the_copies_cross_the_exchange_once_not_every_round(spark):
    """Many edges over few nodes: the edge copies outweigh the state and the messages.
    Spark's own stage metrics say what each round's job wrote to the exchange: round 1
    places the copies, later rounds move only the state and the new tuples (a round that
    shipped the copies again would write about as much as round 1)."""
    text = CC + graph(100, 4000, seed=7)
    flow, rounds, got = answers(spark, text, "cc", small_rows=0)
    stratum = next(st for st in flow.strata if "cc" in st.relations)
    steps = sorted((s for s in rounds.stats if s.stratum == stratum.index and s.iteration > 0),
                   key=lambda s: s.iteration)
    assert len(steps) >= 2 and all(s.actions == 1 for s in steps), steps
    first, later = steps[0].exchanged, [s.exchanged for s in steps[1:]]
    assert first and all(b is not None and b < first / 4 for b in later), (first, later)
    assert got == answers(spark, text, "cc")[2]
