"""Dedalus time (docs/dedalus.md): the tick program, the simulator's network and
book-keeping, `evita simulate`, and `evita run --steps` on Spark agreeing with the
simulator at delay 1 on every example.

The protocols' own invariants are in tests/test_protocols.py and tests/test_paxos.py.
"""
from __future__ import annotations

import json

import pytest

from evita.bootstrap.cli import main
from evita.bootstrap.diagnostics import EvitaError
from evita.runtime.simulate import Delay, Simulation, compile_timed, draw, logical, simulate

from conftest import EXAMPLES, compiled_timed

PROTOCOLS = EXAMPLES / "protocols"

PING = """
// a sends ping once; b answers with pong; a keeps what it got; b tells the client
component pinger @ "a" {
  start(@"a", 1).
  r1 ping(@"b", X)@async :- start(@"a", X), notin sent(@"a", X).
  r2 sent(@"a", X)@next :- start(@"a", X).
  r3 sent(@N, X)@next :- sent(@N, X).
  r4 got(@N, X)@next :- pong(@N, X).
  r5 got(@N, X)@next :- got(@N, X).
}
component ponger @ "b" {
  r6 pong(@"a", X + 1)@async :- ping(@N, X).
  r7 reply(@"client:1", X)@async :- ping(@N, X).
}
query got(N, X).
"""


@pytest.fixture(scope="module")
def ping(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("dedalus") / "ping.olg"
    path.write_text(PING)
    # the simulator's own tests, on the program as written (decouple would move pinger's
    # reply handling to a/2; tests/test_decouple.py checks that)
    return path, compile_timed(str(path), spark, skip=("decouple",))


def _rows(df) -> list:
    return sorted(tuple(r) for r in df.itertuples(index=False, name=None))


def _events(run, kind: str) -> list:
    t = run.trace[run.trace["kind"] == kind]
    return [(int(r.seed), int(r.step), r.node, r.relation, tuple(r.tuple), r.peer) for r in t.itertuples()]


# ---------------------------------------------------------------- the network

def test_delays_follow_their_distribution():
    assert [Delay.parse("uniform:2-4").of(u) for u in (0.0, 0.34, 0.67, 0.999)] == [2, 3, 4, 4]
    assert Delay.parse("fixed:3").of(0.5) == 3
    geometric = Delay.parse("geometric:0.5")
    assert geometric.of(0.0) == 1 and geometric.of(0.75) == 3
    for bad in ("uniform:0-3", "uniform:4-2", "geometric:0", "fixed:0", "normal:1", "uniform:a-b"):
        with pytest.raises(EvitaError, match="not a delay distribution"):
            Delay.parse(bad)


def test_a_delay_is_keyed_on_the_logical_message():
    assert logical("leader:1/2") == logical("leader:1#1") == "leader:1"
    assert logical("p2") == "p2"
    a = draw(7, "delay", logical("leader:1"), "r1", "ack", ("r1", 5))
    assert a == draw(7, "delay", logical("leader:1/2"), "r1", "ack", ("r1", 5))  # a decoupled copy draws alike
    assert a != draw(8, "delay", "leader:1", "r1", "ack", ("r1", 5))
    assert a != draw(7, "delay", "leader:1", "r1", "ack", ("r1", 6))


def test_the_same_seed_gives_the_same_run_and_seeds_differ(ping):
    _, timed = ping
    one = Simulation(timed, range(30), "uniform:1-5").run(40)
    again = Simulation(timed, range(30), "uniform:1-5").run(40)
    assert one.trace.equals(again.trace) and one.counts.equals(again.counts)
    arrivals = {s for (s, step, *_rest) in _events(one, "deliver")}
    assert len({tuple(e[1] for e in _events(one, "deliver") if e[0] == s) for s in arrivals}) > 1
    assert one.late == [] and _rows(one.final("got")) == [(s, "a", "a", 2) for s in range(30)]


def test_a_run_records_sends_deliveries_outputs_and_what_left(ping):
    _, timed = ping
    run = Simulation(timed, [5], "fixed:2").run(20)
    assert _events(run, "send") == [(5, 0, "a", "ping", ("b", 1), "b"), (5, 2, "b", "pong", ("a", 2), "a")]
    assert _events(run, "deliver") == [(5, 2, "b", "ping", ("b", 1), "a"), (5, 4, "a", "pong", ("a", 2), "b")]
    assert _events(run, "external") == [(5, 4, "client:1", "reply", ("client:1", 1), "b")]
    assert _events(run, "output") == [(5, 5, "a", "got", ("a", 2), None)]  # got@next: one step after pong
    assert run.quiesced == {5: 6}
    counts = {r.node: (r.sent, r.received) for r in run.counts.itertuples()}
    assert counts == {"a": (1, 1), "b": (2, 1)}


def test_drops_and_crashes(ping):
    _, timed = ping
    dropped = Simulation(timed, range(5), "fixed:1", drop=1.0).run(20)
    assert _events(dropped, "deliver") == [] and dropped.final("got").empty
    crashed = Simulation(timed, [0], "fixed:1", crash={"b": 0}).run(20)
    assert _events(crashed, "deliver") == [] and crashed.final("got").empty


# ---------------------------------------------------------------- only what changed
# A timestep evaluates only the rules an input change reaches (runtime/fired.py); every
# other relation holds its previous tuples. The result must be the run that evaluates
# every rule at every timestep, exactly: final states, trace, counts, quiescence.

def _both_ways(timed, seeds, delay, steps, **kw):
    runs = []
    for every in (True, False):
        sim = Simulation(timed, seeds, delay, **kw)
        sim.every_rule = every
        runs.append(sim.run(steps))
    return runs


def _identical(every, changed):
    import pandas as pd

    assert changed.quiesced == every.quiesced and changed.node_steps == every.node_steps
    pd.testing.assert_frame_equal(changed.trace, every.trace)
    pd.testing.assert_frame_equal(changed.counts, every.counts)
    assert set(changed.states) == set(every.states)
    for rel in every.states:
        pd.testing.assert_frame_equal(changed.states[rel], every.states[rel], obj=rel)


def _skipped_some(timed):
    """The runs evaluated a strict subset of the rules at some timestep."""
    return any(len(rules) < len(timed.program.rules) for rules in timed.fired.flows)


def test_only_what_changed_gives_the_same_run_with_drops_crashes_and_inputs(ping, spark, tmp_path):
    _, timed = ping
    for kw in ({}, {"drop": 0.3}, {"crash": {"b": 2}}, {"crash": {"a": 1, "b": 4}}):
        _identical(*_both_ways(timed, range(12), "uniform:1-4", 30, **kw))
    path = tmp_path / "late.olg"  # tick(), a late message chain, a negation over a relation empty until then
    path.write_text(LATE)
    late = compile_timed(str(path), spark, skip=("decouple",))
    _identical(*_both_ways(late, range(6), "uniform:1-3", 14, crash={"b:1": 9}))
    _identical(*_both_ways(late, [0], "fixed:1", 12, inputs={"heard": [(1, ("a:1", 5))]}))
    assert _skipped_some(timed) and _skipped_some(late)


def test_only_what_changed_gives_the_same_run_on_a_protocol(spark):
    timed = compiled_timed(spark, PROTOCOLS / "voting.olg")  # the others: the extended test below
    _identical(*_both_ways(timed, range(20), "uniform:1-5", 60))
    assert _skipped_some(timed)


@pytest.mark.extended
@pytest.mark.parametrize("example", [f"protocols/{p.name}" for p in sorted(PROTOCOLS.glob("*.olg"))] +
                         [f"protocols/scaled/{p.name}" for p in sorted((PROTOCOLS / "scaled").glob("*.olg"))] +
                         ["two_phase_commit.olg", "hashset.olg"])
def test_only_what_changed_gives_the_same_run_at_scale(spark, example):
    timed = compiled_timed(spark, EXAMPLES / example)
    for seeds, delay in ((range(50), "uniform:1-5"), ([3], "fixed:1"), (range(20), "geometric:0.4")):
        _identical(*_both_ways(timed, seeds, delay, 80))
    _identical(*_both_ways(timed, range(10), "uniform:1-3", 80, drop=0.2))


def test_inputs_arrive_at_their_step_and_node(spark, tmp_path):
    path = tmp_path / "echo.olg"
    path.write_text("""
        component server @ ["s1", "s2"] {
          e1 seen(@N, X, tick())@next :- request(@N, X).
          e2 seen(@N, X, T)@next :- seen(@N, X, T).
        }
        query seen(N, X, T).""")
    timed = compile_timed(str(path), spark)
    run = Simulation(timed, [0], "fixed:1", inputs={"request": [(3, ("s2", "x")), (7, ("s1", "y"))]}).run(12)
    assert _rows(run.final("seen")) == [(0, "s1", "s1", "y", 7), (0, "s2", "s2", "x", 3)]
    assert [(e[1], e[2]) for e in _events(run, "input")] == [(3, "s2"), (7, "s1")]
    assert run.late == [0]  # tick() is read: the state could change at any step, so no quiescence


def test_timed_inputs_from_files_and_their_errors(spark, tmp_path, capsys):
    path = tmp_path / "echo.olg"
    path.write_text("""
        component server @ "s1" { e1 seen(@N, X)@next :- request(@N, X). e2 seen(@N, X)@next :- seen(@N, X). }
        query seen(N, X).""")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "request.csv").write_text("2,s1,hello\n4,s1,again\n")
    assert main(["simulate", str(path), "--timed-inputs", str(inputs), "--steps", "10", "--delay", "fixed:1"]) == 0
    out = capsys.readouterr().out
    assert "hello" in out and "again" in out and "quiesced: 1 of 1 runs, at step 6" in out
    # the located column is the node: headed once, as `node`, then the other columns (no c0 copy of it)
    heading = next(line for line in out.splitlines() if "node" in line and "┃" in line and "component" not in line)
    assert [c.strip() for c in heading.strip("┃ ").split("┃")] == ["node", "c1"]
    assert "(2 rows)" in " ".join(out.split())
    (inputs / "request.csv").write_text("2,s1,hello\nlater,s1,x\n")
    assert main(["simulate", str(path), "--inputs", str(inputs)]) == 1  # the older spelling still works
    err = capsys.readouterr().err
    assert "request.csv:2:1" in err and "bad-input-row" in err and "Traceback" not in err


def test_a_message_to_no_node_is_a_positioned_error(spark, tmp_path, capsys):
    path = tmp_path / "lost.olg"
    path.write_text("""component a @ "a" {
  go(@"a", "zz").
  r1 hello(@D, 1)@async :- go(@"a", D).
  r2 heard(@N, X) :- hello(@N, X).
}""")
    with pytest.raises(EvitaError, match="sends hello.*'zz', an address no component has"):
        simulate(str(path), spark=spark)
    assert main(["simulate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "lost.olg:3:" in err and "error[unknown-address]" in err and "Traceback" not in err


def test_a_run_that_does_not_quiesce_stops_at_the_horizon_and_says_so(capsys):
    assert main(["simulate", str(EXAMPLES / "two_phase_commit.olg"), "--steps", "6"]) == 0
    out = capsys.readouterr().out
    assert "did not quiesce within 6 steps" in out and "messages out" in out


def test_simulate_writes_comparable_traces(ping, tmp_path, capsys):
    path, _ = ping
    for fmt in ("csv", "parquet"):
        out = tmp_path / fmt
        assert main(["simulate", str(path), "--seeds", "1-3", "--trace", str(out), "--trace-format", fmt]) == 0
        assert (out / f"trace.{fmt}").exists() and (out / f"counts.{fmt}").exists()
    text = capsys.readouterr().out
    assert "got: 1 distinct final answer over 3 seeds" in text
    import pandas as pd

    a, b = pd.read_csv(tmp_path / "csv" / "trace.csv"), pd.read_parquet(tmp_path / "parquet" / "trace.parquet")
    assert list(a["tuple"]) == list(b["tuple"]) and json.loads(a["tuple"][0]) == ["b", 1]


def test_fanning_seeds_out_over_spark_gives_the_same_run(ping, spark):
    from evita.runtime.simulate_spark import fan_out

    _, timed = ping
    here = Simulation(timed, range(12), "uniform:1-4").run(30)
    there = fan_out(Simulation(timed, range(12), "uniform:1-4"), 30, 3, spark)
    cols = ["seed", "step", "node", "kind", "relation"]
    assert there.trace[cols].equals(here.trace[cols]) and there.quiesced == here.quiesced
    assert _rows(there.final("got")) == _rows(here.final("got"))


def test_a_program_without_time_is_not_simulated(spark):
    with pytest.raises(EvitaError, match="nothing happens over time"):
        compile_timed(str(EXAMPLES / "tc.dl"), spark)


# ---------------------------------------------------------------- Spark supersteps

def _agree(spark, timed, steps: int, small=None):
    from evita.runtime.supersteps import run_steps

    on_spark = run_steps(timed, spark, steps, small=small)
    simulated = Simulation(timed, [0], "fixed:1").run(steps)
    key = ["step", "node", "kind", "relation", "tuple"]
    assert sorted(map(tuple, on_spark.trace[key].astype(str).values.tolist())) == \
        sorted(map(tuple, simulated.trace[key].astype(str).values.tolist()))
    for rel in timed.arity:
        assert _rows(on_spark.final(rel).astype(str)) == _rows(simulated.final(rel).astype(str)), rel
    assert on_spark.quiesced == simulated.quiesced
    return on_spark


# Every example with time, over a prefix of its timesteps (a superstep is a Spark job of
# 1-20 s here): supersteps and simulator must agree step by step. Whole runs agree too:
# bench/dedalus.py checks every protocol to quiescence; here the ping program does.
# Paxos's (40 s of the suite here) runs with `pytest -m extended`: its rules are the
# others' constructs at greater size.
SUPERSTEP_EXAMPLES = [pytest.param(f"protocols/{p.name}", 1 if p.name in ("hashset.olg", "paxos.olg") else 2,
                                   id=f"protocols/{p.name}", marks=pytest.mark.extended if p.stem == "paxos" else ())
                      for p in sorted(PROTOCOLS.glob("*.olg"))] + \
    [pytest.param("two_phase_commit.olg", 2, id="two_phase_commit.olg"), pytest.param("hashset.olg", 1, id="hashset.olg")]


@pytest.mark.parametrize("example,steps", SUPERSTEP_EXAMPLES)
def test_supersteps_agree_with_the_simulator_at_delay_one(spark, example, steps):
    _agree(spark, compiled_timed(spark, EXAMPLES / example), steps)


def test_large_supersteps_keep_the_state_in_spark_and_agree(spark, ping):
    _, timed = ping
    run = _agree(spark, timed, 2, small=False)
    assert run.quiesced == {0: None} and len(run.supersteps) == 2


def test_a_whole_run_agrees_on_spark(spark, ping):
    _, timed = ping
    assert _agree(spark, timed, 20).quiesced == {0: 4}


# A superstep evaluates only the rules an input that changed reaches, and skips a rule
# whose positive atom reads a relation that stayed empty (runtime/supersteps.py, _Fired).
# Here inputs change late and in every way that must wake a rule: tick() (alarm, at 3
# only), a message chain after it (ping, pong), a persisted relation that is empty until
# then (heard: blocks echo and total until it holds), a negation over it (quiet must go),
# and facts that never change (seed, peer, reply).
LATE = """
component a @ "a:1" {
    seed(@"a:1", 1).
    peer(@"a:1", "b:1").
    t1 alarm(@N, T) :- seed(@N, _), T := tick(), T == 3.
    t2 ping(@P, N, T)@async :- alarm(@N, T), peer(@N, P).
    t3 heard(@N, X)@next :- pong(@N, X).
    t4 heard(@N, X)@next :- heard(@N, X).
    t5 quiet(@N, S) :- seed(@N, S), notin heard(@N, _).
    t6 total(@N, count<X>) :- heard(@N, X).
    t7 echo(@N, X, S) :- heard(@N, X), seed(@N, S).
}
component b @ "b:1" {
    reply(@"b:1", 7).
    u1 pong(@N, X)@async :- ping(@B, N, _), reply(@B, X).
}
query quiet(N, S).
query total(N, C).
query echo(N, X, S).
"""


def test_supersteps_wake_the_rules_a_late_change_reaches(spark, tmp_path):
    path = tmp_path / "late.olg"
    path.write_text(LATE)
    run = _agree(spark, compile_timed(str(path), spark, skip=("decouple",)), 9)
    assert _rows(run.final("total")) == [(0, "a:1", "a:1", 1)] and _rows(run.final("quiet")) == []
    assert _rows(run.final("echo")) == [(0, "a:1", "a:1", 7, 1)]
    # steps 1 and 2 change nothing but the clock: only the tick() rule runs, one Spark job
    assert [s.actions for s in run.supersteps][1:3] == [1, 1]


def test_evita_run_steps(ping, capsys):
    path, _ = ping
    assert main(["run", str(path), "--steps", "3", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "did not quiesce within 3 steps" in out and "superstep 2:" in out and "client:1" in out
    assert main(["run", str(path)]) == 0
    assert "a Dedalus program run as one timestep" in capsys.readouterr().out


def test_plan_shows_one_timestep(ping, capsys):
    path, _ = ping
    assert main(["plan", str(path), "--timestep"]) == 0
    out = capsys.readouterr().out
    assert "__send_ping" in out and "__next_got" in out and 'filter __n == "b"' in out  # where a rule runs
    assert main(["plan", str(EXAMPLES / "tc.dl"), "--timestep"]) == 1
    assert "it has no timesteps" in capsys.readouterr().err
