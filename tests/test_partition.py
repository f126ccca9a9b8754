"""stages/partition.dl, checked by running: the co-hashed program is simulated against the
program as written over 200 seeds with coupled delays (a message's delay is drawn from
its logical source, destination and content, so `coll:1#1` draws as `coll:1`), and the
oracle is the one of the TR's proof (parallel disjoint correctness, B.1.2; research
notes §4): the same outputs at the same timesteps. Programs: the research notes'
cohash and fd pairs (tests/fixtures/partition) and voting's participants; their wrong-key
program (wrongkey_after.txt, not .olg: it has no directive) must fail the oracle.

Directives the co-hashing check refuses fail with a diagnostic naming the rule, and the
stored catalog stays as it was. The expected program texts are in the stage's case file
(tests/fixtures/stages/partition.dl).
"""
from __future__ import annotations


import pytest

from evita.runtime.simulate import Simulation
from evita.runtime.xxhash import xxhash64

from conftest import EXAMPLES, FIXTURES, bench_protocols, logical_value, shown_outputs, simulated, stage_alone

COHASH = FIXTURES / "partition" / "cohash.olg"
SEEDS = range(200)
# The partial and sealed pairs (a replica and its partitioned copy, simulated to
# quiescence) are the suite's largest simulations: fewer seeds, still many orders.
PAIR_SEEDS = range(60)
DELAY = "uniform:1-5"
STEPS = 14  # the votes are facts (they hold at every step): compared over a horizon


FD = FIXTURES / "partition" / "fd.olg"
BUCKETS = FIXTURES / "partition" / "buckets.olg"  # keyed by the tree f_hash(_) % 4 that two rules compute
SHARED_ACK = FIXTURES / "partition" / "shared.olg"  # ack read by the collector and an audit: routed conditionally
_TIMED: dict = {}


def _tick(spark, path, skip=()):
    """The program compiled through the lattice (not stored: `compile_timed` without the
    catalog tables) and lowered to its tick program. Partition alone: decouple (before
    it, automatic) is left out; tests/test_decouple.py composes the two."""
    skip = tuple(skip) + ("decouple",)
    from evita.bootstrap.cli import parse_and_check
    from evita.bootstrap.scheduler import compile_program
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode
    from evita.runtime.dedalus import lower

    program = parse_and_check(str(path))
    comp = compile_program(spark, encode(program), program.name, stage_paths=[], skip=list(skip), only=None,
                           choose={}, max_iterations=1000)
    return lower(decode(comp.final, program.name))


def _timed(spark, path) -> tuple:
    """(as written, partitioned) tick programs of a program, compiled once per run."""
    if path not in _TIMED:
        _TIMED[path] = (_tick(spark, path, skip=("partition",)), _tick(spark, path))
    return _TIMED[path]


@pytest.fixture(scope="module")
def timed(spark):
    return _timed(spark, COHASH)


# the suite samples three key choices (co-hashed, buckets, a shared ack); extended runs all six
@pytest.mark.parametrize("path,component,steps", [(COHASH, "collector", STEPS),
                                                  pytest.param(FD, "node", STEPS, marks=pytest.mark.extended),
                                                  (BUCKETS, "server", STEPS),
                                                  pytest.param("chained", "server", STEPS, marks=pytest.mark.extended),
                                                  (SHARED_ACK, "collector", STEPS),
                                                  pytest.param("voting", "participant", 40, marks=pytest.mark.extended)],
                         ids=["cohash", "fd", "buckets", "chained", "shared", "voting"])
def test_a_partitioned_component_shows_the_same_outputs_at_the_same_steps(spark, tmp_path_factory, path, component,
                                                                          steps):
    if path == "voting":  # the paper partitions voting's participants (TR §5.2): keyed on the request's Id
        path = tmp_path_factory.mktemp("voting") / "voting.olg"
        path.write_text('partition::count("participant", 2).\n' + (EXAMPLES / "protocols" / "voting.olg").read_text())
    if path == "chained":  # buckets.olg with s1's bucket in two steps: the sender computes the composed tree
        path = tmp_path_factory.mktemp("chained") / "chained.olg"
        path.write_text(BUCKETS.read_text().replace("H := f_hash(V) % 4", "G := f_hash(V), H := G % 4"))
    original, partitioned = _timed(spark, path)
    assert len(partitioned.components[component]) == 2 * len(original.components[component])
    runs = [Simulation(t, SEEDS, DELAY).run(steps) for t in (original, partitioned)]
    want, have = shown_outputs(runs[0]), shown_outputs(runs[1])
    assert len({seed for seed, *_ in want}) == len(SEEDS), "some seed shows nothing: the check would show nothing"
    assert have == want, f"missing {sorted((want - have).elements())[:5]}, extra {sorted((have - want).elements())[:5]}"


def test_the_oracle_catches_a_partitioning_on_the_wrong_key(spark, tmp_path):
    """The research notes' cohash_wrongkey.olg, routed by hash(R) (what the check refuses),
    against the program as written with the same replicas: the outputs differ."""
    before, after = tmp_path / "before.olg", tmp_path / "after.olg"
    before.write_text(COHASH.read_text().replace('partition::count("collector", 2).', "").replace('"r2"', '"r3"'))
    after.write_text((FIXTURES / "partition" / "wrongkey_after.txt").read_text())
    runs = [Simulation(_tick(spark, p), range(20), DELAY).run(STEPS) for p in (before, after)]
    want, have = shown_outputs(runs[0]), shown_outputs(runs[1])
    assert want and have != want and sum(have.values()) < sum(want.values())  # ids whose acks split never commit


def test_the_oracle_catches_a_route_by_another_tree(spark, tmp_path):
    """buckets.olg routed by hash(upper(V)) instead of the bucket: a bucket's values split,
    its load is counted apart, and the outputs differ. (hash(V) would not do: its parity
    is the bucket's, f_hash(V) % 4 keeping the sign and the low bits of the same hash.)"""
    text = BUCKETS.read_text().replace('partition::count("server", 2).', "")
    before, after = tmp_path / "before.olg", tmp_path / "after.olg"
    before.write_text(text)
    route = 'D := cat("s:1", "#", to_string(abs(hash(upper({})) % 2)))'
    text = text.replace('component server @ "s:1"', 'component server @ ["s:1#0", "s:1#1"]')
    text = text.replace('store(@"s:1", V)@async :- put(@C, V).',
                        f"store(@D, V)@async :- put(@C, V), {route.format('V')}.")
    after.write_text(text.replace('probe(@"s:1", W)@async :- ask(@C, W).',
                                  f"probe(@D, W)@async :- ask(@C, W), {route.format('W')}."))
    runs = [Simulation(_tick(spark, p), range(20), DELAY).run(STEPS) for p in (before, after)]
    want, have = shown_outputs(runs[0]), shown_outputs(runs[1])
    assert want and sum(have.values()) < sum(want.values())  # probes miss the values stored at the other partition


def test_a_shared_message_routed_unconditionally_would_miss_the_audit(spark, tmp_path):
    """shared.olg with every ack routed to a partition, the audit's too (what the stage did
    before conditional routes, had it not refused): the acks for the audit go to audit:1#i,
    which no component has (the simulator stops there)."""
    from evita.bootstrap.diagnostics import EvitaError

    text = SHARED_ACK.read_text().replace('partition::count("collector", 2).', "")
    text = text.replace('component collector @ "coll:1"', 'component collector @ ["coll:1#0", "coll:1#1"]')
    text = text.replace('numReplicas(@"coll:1", 2).', 'numReplicas(@"coll:1#0", 2). numReplicas(@"coll:1#1", 2).')
    after = tmp_path / "after.olg"
    after.write_text(text.replace("to(@R, Id, D).", 'to(@R, Id, D0), D := cat(D0, "#", to_string(abs(hash(Id) % 2))).'))
    with pytest.raises(EvitaError, match=r"sends ack\('audit:1#"):
        Simulation(_tick(spark, after), range(5), DELAY).run(STEPS)


def test_each_partition_commits_the_ids_its_hash_names(timed):
    original, partitioned = timed
    assert list(partitioned.components["collector"]) == ["coll:1#0", "coll:1#1"]
    assert list(original.components["collector"]) == ["coll:1"]
    done = Simulation(partitioned, SEEDS, DELAY).run(STEPS).final("committed")
    per_node = done.groupby("node")["c1"].apply(set).to_dict()
    assert set(per_node) == {"coll:1#0", "coll:1#1"} and not per_node["coll:1#0"] & per_node["coll:1#1"], per_node
    # at the partition Spark's hash names: abs(xxhash64(Id) % 2), % keeping the dividend's sign
    for node, ids in per_node.items():
        assert {f"coll:1#{abs(_java_mod(xxhash64(i), 2))}" for i in ids} == {node}


def test_an_expression_key_is_computed_by_the_sender(spark):
    """buckets.olg: the client routes store(V) by hash(f_hash(V) % 4), so each partition
    holds the buckets its hash names, whichever rule (s1, s4) wrote the expression."""
    _, partitioned = _timed(spark, BUCKETS)
    buckets = Simulation(partitioned, range(20), DELAY).run(STEPS).final("bucket")
    per_node = buckets.groupby("node")["c1"].apply(set).to_dict()
    assert set(per_node) == {"s:1#0", "s:1#1"}, per_node
    for node, hs in per_node.items():
        assert {f"s:1#{abs(_java_mod(xxhash64(h), 2))}" for h in hs} == {node}, (node, hs)
    for value in ("apple", "fig", "kiwi"):  # and the bucket is the one s1 computes
        assert _java_mod(xxhash64(value), 4) in set().union(*per_node.values())


def _java_mod(a: int, n: int) -> int:
    return (abs(a) % n) * (1 if a >= 0 else -1)


def test_the_collectors_facts_land_at_both_partitions_and_the_directives_are_gone(timed):
    _, partitioned = timed
    facts = sorted((rel, node) for rel, node, _ in partitioned.facts if rel == "numReplicas")
    assert facts == [("numReplicas", "coll:1#0"), ("numReplicas", "coll:1#1")]
    assert not [rel for rel, _, _ in partitioned.facts if rel.startswith("partition::")]
    original, _ = timed
    assert [rel for rel, _, _ in original.facts if rel.startswith("partition::")], "left out, they stay facts"




ENTANGLED = """
component replica @ "r1" {
    vote(@"r1", 5).
    p1 ack(@"coll:1", X)@async :- vote(@R, X).
}
component collector @ "coll:1" {
    c1 stamped(@L, X, L) :- ack(@L, X).
    c2 out(@"client:1", X, W)@async :- stamped(@L, X, W).
}
"""
CLIENT = """
component collector @ "coll:1" {
    c1 seen(@L, X) :- request(@L, X).
    c2 out(@"client:1", X)@async :- seen(@L, X).
}
"""
SHARED = """
component replica @ "r1" {
    vote(@"r1", 5, "coll:1").
    p1 ack(@D, X)@async :- vote(@R, X, D).
}
component collector @ "coll:1" {
    c1 seen(@L, X) :- ack(@L, X).
}
component audit @ "audit:1" {
    a1 logged(@L, X) :- ack(@L, X).
}
"""
COMPUTED = """
component replica @ "r1" {
    vote(@"r1", 5).
    p1 ack(@cat("coll", ":1"), X)@async :- vote(@R, X).
}
component collector @ "coll:1" {
    c1 seen(@L, X) :- ack(@L, X).
}
"""
CONSTKEY = COMPUTED.replace('ack(@cat("coll", ":1"), X)', 'ack(@"coll:1", 5)')
SELF = """
component replica @ "r1" {
    vote(@"r1", 5).
    p1 ack(@"coll:1", X)@async :- vote(@R, X).
}
component collector @ "coll:1" {
    c1 seen(@L, X) :- ack(@L, X).
    c2 ack(@L, X + 1)@async :- seen(@L, X), X < 7.
}
"""
REPLICATED = """
component replica @ "r1" {
    vote(@"r1", 5).
    p1 ack(@"coll:1", X)@async :- vote(@R, X).
}
component collector @ "coll:1" {
    hello(@"coll:1", "hi").
    c1 seen(@L, X) :- ack(@L, X).
    c2 greet(@"client:1", H)@async :- hello(@L, H).
}
"""
TWO_TREES = """
component src @ "s" {
    a(@"s", "Fig"). b(@"s", "FIG", 1).
    e1 aa(@"coll:1", W)@async :- a(@S, W).
    e2 bb(@"coll:1", U, X)@async :- b(@S, U, X).
}
component collector @ "coll:1" {
    j1 up(@"client:1", W, X)@async :- aa(@N, W), U := upper(W), bb(@N, U, X).
    j2 down(@"client:1", W, X)@async :- aa(@N, W), V := lower(W), bb(@N, V, X).
}
"""
IMPURE = TWO_TREES.replace("V := lower(W)", 'V := cat(upper(W), substr("", 0, rand()))').replace(
    "U := upper(W)", 'U := cat(upper(W), substr("", 0, rand()))')
NARROW = TWO_TREES.replace("lower(W)", "strlen(W)").replace("upper(W)", "strlen(W)")
# a chain is followed only through trees that are members themselves: strlen (a 32-bit int) stops it
NARROW_CHAIN = TWO_TREES.replace("U := upper(W)", "G := strlen(W), U := G + 0").replace("V := lower(W)",
                                                                                        "G := strlen(W), V := G + 0")
KEYED = COHASH.read_text().replace('partition::count("collector", 2).',
                                   "materialize(acks, infinity, infinity, keys(1, 2)).")
REFUSED = [  # (program text, directive, code, rule, words)
    (None, 'partition::key("collector", "ack", 1)', "partition-key", "c3",
     "relation numAcks has no column in key class ack.1"),
    (None, 'partition::key("collector", "ack", 0)', "partition-key", None, "column 0 of ack is no key candidate"),
    (None, 'partition::count("collector", 0)', "partition-directive", None, "a whole number N >= 1"),
    (None, 'partition::count("collecter", 2)', "partition-directive", None, "needs a component C"),
    (None, 'partition::key("replica", "vote", 1)', "partition-directive", None, "partition::key for replica without"),
    (CLIENT, None, "client-input", "c1", "reads request, which nothing derives or holds"),
    (SHARED, 'partition::count("audit", 2)', "not supported yet", "p1",
     "sends ack, which both audit and collector partition: one route per message"),
    (COMPUTED, None, "not supported yet", "p1", "the destination of its ack message is expr"),
    (CONSTKEY, None, "not supported yet", "p1", "the key of its ack message is const, not a variable"),
    (SELF, None, "not supported yet", "c2", "sends ack to its own location L"),
    (REPLICATED, None, "replicated-send", "c2", "every partition would send its greet"),
    (TWO_TREES, 'partition::key("collector", "bb", 1)', "partition-key", "j2",
     "it keys aa by lower(aa.1) where rule j1 keys it by upper(aa.1) (key class"),
    (IMPURE, None, "partition-key", None, "no column class of collector is a valid partition key"),
    (NARROW, None, "partition-key", None, "no column class of collector is a valid partition key"),
    (NARROW_CHAIN, None, "partition-key", None, "no column class of collector is a valid partition key"),
    (KEYED, 'partition::key("collector", "acks", 2)', "partition-key", "c1",
     "relation acks has a primary key without its column 2 in key class ack.2"),
]


def test_a_rule_using_its_location_as_data_keeps_the_logical_address(spark, tmp_path):
    """c1 stores its own address L: at coll:1#0 and coll:1#1 it stores "coll:1" still,
    read from the facts evita_logical(@"coll:1#i", "coll:1")."""
    path = tmp_path / "entangled.olg"
    path.write_text('partition::count("collector", 2).\n' + ENTANGLED)
    original = simulated(spark, path, 10, skip=("decouple", "partition"))
    rewritten = simulated(spark, path, 10, skip=("decouple",))
    assert shown_outputs(rewritten) == shown_outputs(original)
    sent = {tuple(r.tuple) for r in rewritten.trace.itertuples(index=False) if r.relation == "out"}
    assert sent and all(t[-1] == "coll:1" for t in sent), sent  # the logical address, not coll:1#0


NAMED_LIKE_A_HALF = """
component replica @ "r1" {
    vote(@"r1", 5). vote(@"r1", 6).
    p1 ack(@"coll:1", X)@async :- vote(@R, X).
}
component collector @ "coll:1" {
    collector_home(@"coll:1", "client:1").
    c1 stamped(@L, X, L) :- ack(@L, X).
    c2 out(@"client:1", X, W)@async :- stamped(@L, X, W).
    c3 collector_acked(@D, X, L)@async :- ack(@L, X), collector_home(@L, D).
}
"""


def test_a_component_whose_relations_are_named_like_an_asymmetric_halfs_is_partitioned_as_usual(spark, tmp_path):
    """The user's collector_home and collector_acked are named as decouple::asymmetric names
    a half's batch relations (N_home, N_acked), but no stage made them: partition.dl knows
    a half by the marks asymmetric.dl writes (relation.role, made_for), so c3 is an ordinary
    rule of the collector and sends its logical address, as c1 stores it. (Told by the names,
    c3 would be a batch rule and send its partition's physical address coll:1#i.)"""
    path = tmp_path / "named_like_a_half.olg"
    path.write_text('partition::count("collector", 2).\n' + NAMED_LIKE_A_HALF)
    original = simulated(spark, path, 10, skip=("decouple", "partition"))
    rewritten = simulated(spark, path, 10, skip=("decouple",))
    assert shown_outputs(rewritten) == shown_outputs(original)
    for rel in ("out", "collector_acked"):
        sent = {tuple(r.tuple) for r in rewritten.trace.itertuples(index=False) if r.relation == rel}
        assert sent and all(t[-1] == "coll:1" for t in sent), (rel, sent)  # the logical address, not coll:1#0
    assert {r.node for r in rewritten.trace.itertuples(index=False)} >= {"coll:1#0", "coll:1#1"}


@pytest.mark.parametrize("text,directive,code,rule,words", REFUSED, ids=[f"{c}-{w[:24]}" for *_, c, _, w in REFUSED])
def test_a_directive_the_check_refuses_fails_at_the_rule(spark, tmp_path, text, directive, code, rule, words):
    text = (COHASH.read_text() if text is None else 'partition::count("collector", 2).\n' + text)
    path = tmp_path / "refused.olg"
    path.write_text((directive + ".\n" if directive else "") + text)
    with pytest.raises(Exception) as e:
        _tick(spark, path)
    shown = str(e.value)
    assert f"error[{code}]" in shown, shown
    if rule:
        assert f"rule {rule}" in shown and f"| {' ' * 4}{rule} " in shown, shown  # the source line shown is the rule's
    assert words in shown, shown


def test_the_named_key_and_the_only_valid_class_are_the_same_rewrite(spark, tmp_path):
    path = tmp_path / "named.olg"
    path.write_text('partition::key("collector", "acks", 2).\n' + COHASH.read_text())
    named = _tick(spark, path)
    automatic = _timed(spark, COHASH)[1]
    assert named.components == automatic.components
    assert sorted(named.facts) == sorted(automatic.facts)


def test_a_refused_directive_leaves_the_catalog_as_it_was(spark, tmp_path):
    """The compile stops at the last good version: the directives, the address and the
    sender as written (the scheduler stores that version; `evita print` shows it)."""
    from evita.bootstrap.stage import StageFailure

    path = tmp_path / "kept.olg"
    path.write_text('partition::key("collector", "ack", 1).\n' + COHASH.read_text())
    with pytest.raises(StageFailure) as e:
        _tick(spark, path)
    last = e.value.versions[-1]
    assert last.stage == "system_r"  # the last stage before partition
    assert [r[-1] for r in last.rows["component_address"] if r[1] == "collector"] == ["coll:1"]
    assert sorted(r[3] for r in last.rows["fact"] if r[3].startswith("partition::")) == ["partition::count",
                                                                                        "partition::key"]
    assert not last.rows.get("assignment")


def test_explain_shows_the_partitions_the_key_chosen_and_why_the_others_are_not(spark, tmp_path, capsys):
    from evita.bootstrap.cli import main

    dot = tmp_path / "partition.dot"
    capsys.readouterr()
    code = main(["explain", str(FIXTURES / "partition" / "cohash.olg"), "--stage", "partition", "--dot", str(dot)])
    seen = capsys.readouterr()
    text = seen.out + seen.err
    assert code == 0, text
    assert "collector: 2 partitions of each address, key class ack.2 (the only valid class)" in text
    assert "checked: no rule aggregates over the key" in text
    assert "candidate ack.1: its head aggregates the key: count<R>" in text
    assert "acks: key column 2" in text and "sends ack by column 2" in text
    assert dot.read_text().startswith("digraph")


# ---------------------------------------------------------------- partial partitioning (TR §4.3, B.3)
PARTIAL = FIXTURES / "partition" / "partial.olg"  # the golden pair's replica: C1 ballots, C2 storage keyed on Id
PARTIAL_STEPS = 60  # every seed quiesces well before (asserted)


def _partial_pair(spark, path, steps):
    """The program as written and partially partitioned (its replica gains a coordinator),
    simulated over the same seeds and delays."""
    original, partitioned = _timed(spark, path)
    assert set(partitioned.components) == set(original.components) | {"replica_coord"}
    return [Simulation(t, PAIR_SEEDS, DELAY).run(steps) for t in (original, partitioned)]


@pytest.fixture(scope="module")
def partial_runs(spark):
    return _partial_pair(spark, PARTIAL, PARTIAL_STEPS)


def _at_quiescence(run):
    """(seed, relation, peer, tuple) of every output, addresses logical, steps dropped."""
    t = run.trace[run.trace["kind"].isin(("external", "output"))]
    return {(int(r.seed), r.relation, logical_value(r.peer), tuple(map(logical_value, r.tuple)))
            for r in t.itertuples(index=False)}


def _by_seed(frame, columns):
    out = {}
    for r in frame.itertuples(index=False):
        out.setdefault(int(r.seed), set()).add(tuple(logical_value(getattr(r, c)) for c in columns))
    return out


def test_a_partially_partitioned_component_shows_the_same_outputs_at_quiescence(partial_runs):
    """The oracle of the research notes §4 for partial partitioning: equal output sets at
    quiescence (the replicated inputs wait for the coordinator, so steps differ), and the
    same final state: C1 (maxBallot) whole at every partition, C2 (storage) split."""
    original, partitioned = partial_runs
    assert not original.late and not partitioned.late, "some seed did not quiesce: raise PARTIAL_STEPS"
    want, have = _at_quiescence(original), _at_quiescence(partitioned)
    assert len({seed for seed, *_ in want}) == len(PAIR_SEEDS) and want == have
    want_max = _by_seed(original.final("maxBallot"), ["c1"])
    have_max = partitioned.final("maxBallot")
    for node in ("r1#0", "r1#1"):
        assert _by_seed(have_max[have_max["node"] == node], ["c1"]) == want_max, node
    for rel, columns in (("storage", ["c0", "c1", "c2"]), ("who", ["c0", "c1"])):
        assert _by_seed(partitioned.final(rel), columns) == _by_seed(original.final(rel), columns), rel
    who = partitioned.final("who")
    assert len(who) == 2 * len(original.final("who"))  # whole at both partitions


def test_every_partition_applies_the_replicated_inputs_in_one_order(partial_runs):
    """The coordinator's commits, as delivered: each partition gets the same (order, ballot,
    who) triples, the orders 0..3 with one tuple each (two tuples share ballot 1), and applied them all (its
    ballotIn_processed holds every order). The order is the coordinator's, not the leader's:
    it differs across seeds, so the check is not vacuous."""
    _, partitioned = partial_runs
    t = partitioned.trace
    commits = t[(t["kind"] == "deliver") & (t["relation"] == "ballotIn_commit")]
    got: dict = {}
    for r in commits.itertuples(index=False):
        got.setdefault(int(r.seed), {}).setdefault(r.node, set()).add(tuple(r.tuple[1:]))
    done = partitioned.final("ballotIn_processed")
    processed = {(int(r.seed), r.node, int(r.c1)) for r in done.itertuples(index=False)}
    orders = set()
    for seed in PAIR_SEEDS:
        at = got[seed]
        assert set(at) == {"r1#0", "r1#1"} and at["r1#0"] == at["r1#1"], (seed, at)
        assert sorted(o for o, *_ in at["r1#0"]) == [0, 1, 2, 3], (seed, at)
        assert {(seed, n, o) for n in at for o in range(4)} <= processed, seed
        orders.add(tuple(tuple(b) for _, *b in sorted(at["r1#0"])))
    assert len(orders) > 1, orders


PARTIAL_TEXT = PARTIAL.read_text()
PARTIAL_REFUSED = [  # (replace this, by that, code, rule, words)
    ("q4 maxBallot(@R, max<B>) :- ballots(@R, B).", "q4 maxBallot(@R, max<B>) :- ballots(@R, B), storage(@R, B, _).",
     "partial-independence", "q4", "reads storage, which C2 (partitioned) derives"),
    ("q3 ballots(@R, B)@next :- ballots(@R, B).", "q3 ballots(@R, B + 1)@next :- ballots(@R, B).",
     "partial-state-machine", "q3", "C1 must change only on its inputs"),
    ("q6 storage(@R, Id, V)@next :- storage(@R, Id, V).",
     "q6 storage(@R, Id, V)@next :- storage(@R, Id, V), ballotIn(@R, Id, _).", "partial-input", "q6",
     "reads ballotIn, an input of C1 (replicated)"),
    ("q7 ack(@L, R, Id, V)@async :- request(@R, Id, V), startBallot(@R, B), ballots(@R, B), leader(@R, L).",
     "q7 ack(@L, R, B)@async :- startBallot(@R, B), leader(@R, L).", "partial-state-machine", "q7",
     "no existence dependency"),
    ('partition::replicate("replica", "maxBallot").',
     'partition::replicate("replica", "maxBallot").\npartition::replicate("replica", "nope").', "partition-directive",
     None, "no rule of replica derives nope"),
    (("q2b who(@R, W) :- ballotIn(@R, _, W).", "l3 request("),  # a second input of C1, and its sender
     ("q2b who(@R, W) :- other(@R, W).", 'l5 other(@"r1", 7)@async :- b(@L, 7, _).\n    l3 request('),
     "not supported yet", None, "C1 of replica reads 2 messages"),
]


@pytest.mark.parametrize("old,new,code,rule,words", PARTIAL_REFUSED,
                         ids=[c.replace(" ", "-") + "-" + w[:20] for *_, c, _, w in PARTIAL_REFUSED])
def test_a_partial_partitioning_the_check_refuses_fails_at_the_rule(spark, tmp_path, old, new, code, rule, words):
    text = PARTIAL_TEXT
    for o, n in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
        assert o in text
        text = text.replace(o, n)
    from evita.bootstrap.parser import parse_program

    with pytest.raises(Exception) as e:  # the stage alone (in process): the checks are all its own
        stage_alone(spark, "partition", parse_program(text, str(tmp_path / "refused.olg")))
    shown = str(e.value)
    assert f"error[{code}]" in shown and words in shown, shown
    if rule:
        assert f"rule {rule}" in shown, shown


# ---------------------------------------------------------------- partitioning a seal (TR B.4.2)
SEALED = FIXTURES / "partition" / "sealed.olg"  # a replica answering each ballot with its whole store, sealed
SEALED_STEPS = 80  # every seed quiesces well before (asserted)


@pytest.fixture(scope="module")
def sealed_runs(spark):
    return _partial_pair(spark, SEALED, SEALED_STEPS)


def _answers(run) -> tuple:
    """({(seed, ballot): (the steps the leader's answered rows came at, {(Id, V)})}, the same
    of the replicas' snap, every partition's rows together: the whole store at that ballot)."""
    answered, snap = {}, {}
    t = run.trace[(run.trace["kind"] == "output") & run.trace["relation"].isin(("answered", "snap"))]
    for r in t.itertuples(index=False):
        _, ballot, ident, value = r.tuple
        steps, rows = (answered if r.relation == "answered" else snap).setdefault((int(r.seed), ballot), (set(), set()))
        steps.add(int(r.step))
        rows.add((ident, value))
    return answered, snap


def test_a_partitioned_seal_shows_the_same_outputs_at_quiescence(sealed_runs):
    original, partitioned = sealed_runs
    assert not original.late and not partitioned.late, "some seed did not quiesce: raise SEALED_STEPS"
    want, have = _at_quiescence(original), _at_quiescence(partitioned)
    assert len({seed for seed, *_ in want}) == len(PAIR_SEEDS) and want == have
    # each partition answers with its part: two senders of answer_count per ballot, and
    # some partition reports a batch of 0 (ballot 1 finds the store {10}, at one partition)
    counts = partitioned.trace[(partitioned.trace["kind"] == "send") & (partitioned.trace["relation"] == "answer_count")]
    senders = {(int(r.seed), r.tuple[1], r.node) for r in counts.itertuples(index=False)}
    assert {len({n for s, b, n in senders if (s, b) == k}) for k in {(s, b) for s, b, _ in senders}} == {2}
    assert any(r.tuple[-1] == 0 for r in counts.itertuples(index=False))


def test_each_sealed_answer_is_the_whole_store_at_its_ballot(sealed_runs):
    """The leader's answer to a ballot comes in one step and holds what the partitions
    together stored when they applied that ballot (the union of their snap rows)."""
    for run in sealed_runs:
        answered, snap = _answers(run)
        assert set(answered) == set(snap) and len(answered) == 3 * len(PAIR_SEEDS)
        for key, (steps, rows) in answered.items():
            assert len(steps) == 1 and rows == snap[key][1], (key, steps, rows, snap[key])
    _, partitioned = sealed_runs  # and a batch the leader saw whole was sent in parts, by both partitions
    parts = partitioned.trace[(partitioned.trace["kind"] == "send") & (partitioned.trace["relation"] == "answer_part")]
    by_batch: dict = {}
    for r in parts.itertuples(index=False):
        by_batch.setdefault((int(r.seed), r.tuple[1]), set()).add(r.node)
    assert any(len(nodes) == 2 for nodes in by_batch.values()), by_batch


@pytest.mark.extended  # 25 s; the suite holds the seal at one address (sealed_runs above)
def test_a_partitioned_seal_at_two_addresses_keeps_their_batches_apart(spark, tmp_path):
    """The replica at r1 and r2, each at 2 partitions with a coordinator of its own: two
    commit sequences, so a batch is named by the coordinator and its order (O__s), or the
    leader would merge r1's and r2's batches for one order and wait for 2 partitions where 4
    reported. Every answer is whole: what the replicas stored at that ballot (50 seeds: the
    200 above hold the rest)."""
    text = SEALED.read_text().replace('component replica @ "r1" {\n    leader(@"r1", "leader:1").',
                                      'component replica @ ["r1", "r2"] {\n    leader(@"r1", "leader:1").\n'
                                      '    leader(@"r2", "leader:1").')
    for rule in ("l2 request", "l6 ballotIn", "l12 request", "l15 ballotIn"):  # to both addresses
        line = next(x for x in text.splitlines() if x.strip().startswith(rule))
        text = text.replace(line, line + "\n" + line.replace(rule, rule.replace(" ", "b ")).replace('@"r1"', '@"r2"'))
    path = tmp_path / "sealed_two.olg"
    path.write_text(text)
    run = Simulation(_tick(spark, path), range(50), DELAY).run(100)
    assert not run.late
    assert {n for n in run.trace["node"].unique() if n.startswith("r")} >= {"r1#0", "r1#1", "r2#0", "r2#1"}
    answered, snap = _answers(run)
    assert len(answered) == 3 * 50 and all(rows == snap[key][1] for key, (_, rows) in answered.items())


SEALED_TEXT = SEALED.read_text()
SEALED_REFUSED = [  # (replace this, by that, stage, code, words)
    ("q6 answer(@Ld, B, seal<Id, V>)@async", "q6 answer(@Ld, B, Id, V)@async", "partition", "partial-seal",
     "rule q6 of C2 sends answer from cur"),
    ("q6 answer(@Ld, B, seal<Id, V>)@async :- cur(@R, B),", "q6 answer(@Ld, B, seal<Id, V>)@async :- cur(@R, B), "
     "request(@R, Id, _),", "partition", "not supported yet", "from both an input of C2 and what C1"),
    ("q6 answer(@Ld, B, seal<Id, V>)@async :- cur(@R, B), storage(@R, Id, V), leader(@R, Ld).",
     "q6 answer(@Ld, B, seal<Id, V>)@async :- cur(@R, B), storage(@R, Id, V), owner(@R, Id, Ld).\n"
     '    owner(@"r1", 10, "leader:1").', "seal", "not supported yet", "column Ld is bound only by atoms that hold"),
]


@pytest.mark.parametrize("old,new,stage,code,words", SEALED_REFUSED, ids=[w[:24] for *_, w in SEALED_REFUSED])
def test_a_partitioned_seal_the_stages_refuse_fails_at_the_rule(spark, tmp_path, old, new, stage, code, words):
    assert old in SEALED_TEXT
    path = tmp_path / "refused.olg"
    path.write_text(SEALED_TEXT.replace(old, new))
    with pytest.raises(Exception) as e:
        _tick(spark, path)
    shown = str(e.value)
    assert f"error[{code}]" in shown and words in shown and f"stage {stage}" in shown, shown
    assert "q6 answer(" in shown, shown  # the source line shown is the sealed rule's


SEALS_THE_KEY = '''component client @ "c" {
    t(@"c", 1, "a"). t(@"c", 2, "b"). t(@"c", 3, "c").
    k0 put(@"s", Id, V)@async :- t(@L, Id, V).
    k1 trig(@"s", Id)@async :- t(@L, Id, _).
}
component s @ "s" {
    s0 store(@R, Id, V) :- put(@R, Id, V).
    s2 store(@R, Id, V)@next :- store(@R, Id, V).
    s1 out(@"l", seal<Id, V>)@async :- trig(@R, Id), store(@R, Id, V).
}
component l @ "l" {
    l1 got(@"client", Id, V)@async :- out(@L, Id, V).
}
partition::count("s", 2).
partition::key("s", "store", 1).
'''


def test_a_seal_over_the_key_of_a_co_hashed_component_is_refused(spark, tmp_path):
    """partition::count would have each partition send its part of a batch as a whole one:
    only partial partitioning's sealing from C1's input gathers the parts (B.4.2)."""
    path = tmp_path / "seals_the_key.olg"
    path.write_text(SEALS_THE_KEY)
    with pytest.raises(Exception) as e:
        _tick(spark, path)
    shown = str(e.value)
    assert "error[partition-key]" in shown and "it seals the key: seal<Id>" in shown and "rule s1" in shown, shown


ACCEPTORS_PARTIAL = ('partition::partial("acceptor", 3).\npartition::replicate("acceptor", "ballots").\n'
                     'partition::replicate("acceptor", "maxBallot").\npartition::replicate("acceptor", "p1aNow").\n')


def test_partitioning_paxos_acceptors_as_first_written_is_refused_naming_what_stands_in_the_way(spark, tmp_path):
    """The acceptors of examples/protocols/paxos.olg as first written (a p2a raises the
    ballot and is accepted in its step; bench/protocols.py's PAXOS_ACCEPTOR_FIRST),
    partially partitioned by slot with their log (p1bLog) sealed: refused, and the
    diagnostics name each obstacle (docs/dedalus.md, "Partitioning a seal")."""
    bench = bench_protocols()
    text = bench.first_form((EXAMPLES / "protocols" / "paxos.olg").read_text(), bench.PAXOS_ACCEPTOR_FIRST)
    old = "a11 p1bLog(@P, A, B, S, AB, V)@async"
    assert old in text
    path = tmp_path / "paxos_acceptors.olg"
    path.write_text('partition::partial("acceptor", 3).\npartition::replicate("acceptor", "ballots").\n'
                    'partition::replicate("acceptor", "maxBallot").\n'
                    + text.replace(old, "a11 p1bLog(@P, A, B, seal<S, AB, V>)@async"))
    with pytest.raises(Exception) as e:
        _tick(spark, path)
    shown = str(e.value)
    for words in ("C1 of acceptor reads 2 messages", "rule a4 of C1 changes ballots at the next step",
                  "rule a5 of C2 (partitioned) reads p2a", "rule a11 of C2 (partitioned) reads p1a"):
        assert words in shown, (words, shown)


@pytest.mark.extended  # Paxos at scale: test_decouple.PAXOS_AT_SCALE says why
def test_paxos_acceptors_partially_partitioned_keep_the_logs_and_stay_safe(spark, tmp_path):
    """examples/protocols/paxos.olg's acceptors (as restated: ballots from p1a only, the log
    sealed), partially partitioned 3 ways on the slot (TR §4.3, B.3-B.4; the paper's
    ScalablePaxos acceptors): the proposers send each p1a to every partition of the
    acceptor (a variable address: one copy of p1 per partition), a coordinator per acceptor
    orders them, and each partition answers with its part of the sealed p1bLog. Against the
    acceptors whole (200 seeds): every seed quiesces; where p1 alone led in both runs, with
    the same replica logs; everywhere with safe and complete logs. The coordinators slow
    p1's election, so in a few seeds p2 times out and competes, which a run of the whole
    acceptors allows under other delays. With both proposers competing
    (tests/test_paxos.py's duel, 50 seeds) the logs stay safe and complete; and the
    p1bLog parts come from more than one partition per acceptor."""
    from test_paxos import COMMANDS, check_safety

    path = tmp_path / "paxos_acceptors.olg"
    path.write_text(ACCEPTORS_PARTIAL + (EXAMPLES / "protocols" / "paxos.olg").read_text())
    whole, parted = _tick(spark, path, skip=("partition",)), _tick(spark, path)
    assert {c: len(a) for c, a in parted.components.items() if c.startswith("acceptor")} == \
        {"acceptor": 9, "acceptor_coord": 3}
    was, now = (Simulation(t, SEEDS, DELAY).run(120) for t in (whole, parted))
    assert not was.late and not now.late, (was.late[:5], now.late[:5])

    def logs(run):
        return {(int(r.seed), r.node, r.c1, r.c2) for r in run.final("rlog").itertuples(index=False)}

    def p1_alone(run):  # the seeds where p2 never started phase 1 (it times out after 20 steps
        tr = run.trace  # without a heartbeat, and the coordinators make p1's election slower)
        return set(SEEDS) - set(tr[(tr["kind"] == "send") & (tr["relation"] == "p1a") & (tr["node"] == "p2")]["seed"])

    alone = p1_alone(was) & p1_alone(now)
    assert len(alone) >= 190, f"p2 competed in {200 - len(alone)} seeds"
    assert {x for x in logs(now) if x[0] in alone} == {x for x in logs(was) if x[0] in alone}
    every = check_safety(now)
    assert all(COMMANDS <= set(every[seed][r].values()) for seed in SEEDS for r in ("r1", "r2", "r3"))
    tr = now.trace
    parts = tr[(tr["kind"] == "send") & (tr["relation"] == "p1bLog_part")]
    assert parts["node"].nunique() > 3, "the log's parts came from one partition per acceptor"
    duel = {"startNow": [(0, ("p1",)), (0, ("p2",)), (6, ("p1",)), (12, ("p2",))]}
    competing = Simulation(parted, range(50), DELAY, inputs=duel).run(120)
    assert not competing.late, competing.late[:5]
    logs = check_safety(competing)
    assert all(COMMANDS <= set(logs[seed][r].values()) for seed in range(50) for r in ("r1", "r2", "r3"))
