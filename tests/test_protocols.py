"""The protocols of examples/protocols under the Dedalus simulator (runtime/simulate.py):
each runs over 200 seeds with random delays, and the tests check its invariants on the
trace and the final state.

Voting, two-phase commit and the hashset (seed 000, TR §5.2; research notes
decouple_partition.md §3, §4). One simulation per protocol (a module fixture) serves all of
its tests; the simulator runs all seeds together.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

from conftest import EXAMPLES, logical_value, simulated

PROTOCOLS = EXAMPLES / "protocols"
SEEDS = range(200)
DELAY = "uniform:1-5"


def _simulate(spark, name: str, steps: int):
    return simulated(spark, PROTOCOLS / name, steps)


def _events(res, kind: str, relation: str) -> list:
    """(seed, step, node, peer, tuple) of the trace's events of one kind and relation."""
    t = res.trace
    t = t[(t["kind"] == kind) & (t["relation"] == relation)]
    return [(int(r.seed), int(r.step), logical_value(r.node), logical_value(r.peer), tuple(map(logical_value, r.tuple)))
            for r in t.itertuples(index=False)]


def _final(res, relation: str) -> list:
    """(seed, node, tuple) of what relation holds at each node at the end."""
    df = res.final(relation)
    cols = [c for c in df.columns if c not in ("seed", "node")]
    return [(int(r["seed"]), logical_value(r["node"]), tuple(logical_value(r[c]) for c in cols)) for _, r in df.iterrows()]


def _all_quiesced(res):
    late = [s for s in SEEDS if res.quiesced.get(s) is None]
    assert not late, f"{len(late)} seeds did not quiesce within the horizon, e.g. {late[:5]}"


# ---------------------------------------------------------------------------- voting
# leader:1 broadcasts request(Id, V) to 3 participants, which vote back; one reply per Id.

VOTING_REQUESTS = {1: "alpha", 2: "beta", 3: "gamma", 4: "delta"}
PARTICIPANTS = ("participant:1", "participant:2", "participant:3")


@pytest.fixture(scope="module")
def voting(spark):
    return _simulate(spark, "voting.olg", steps=40)


def test_voting_one_reply_per_request_after_all_votes(voting):
    replies = defaultdict(list)  # (seed, Id) -> [(arrival step, V)]
    for seed, step, node, peer, tup in _events(voting, "external", "reply"):
        assert node == "client:1" and peer == "leader:1"
        replies[seed, tup[1]].append((step, tup[2]))
    sent = defaultdict(list)  # (seed, Id) -> steps where the leader commits, so sends the reply
    for seed, step, node, peer, tup in _events(voting, "output", "committed"):
        sent[seed, tup[1]].append(step)
    votes = defaultdict(dict)  # (seed, Id) -> participant id -> delivery step at the leader
    for seed, step, node, peer, tup in _events(voting, "deliver", "voteAck"):
        assert node == "leader:1"
        _, vid, v, src = tup
        assert v == VOTING_REQUESTS[vid]
        assert src not in votes[seed, vid], f"seed {seed}: participant {src} voted twice on {vid}"
        votes[seed, vid][src] = step
    for seed in SEEDS:
        for rid, v in VOTING_REQUESTS.items():
            got = replies.get((seed, rid), [])
            # liveness and exactly once: one reply per request, with the request's value
            assert [x[1] for x in got] == [v] and got[0][0] < voting.steps, f"seed {seed}, request {rid}: {got}"
            # safety: the reply left the leader only once every participant's vote was there
            assert sorted(votes[seed, rid]) == [1, 2, 3], f"seed {seed}, request {rid}: votes {votes[seed, rid]}"
            # (the trace has no send row for a message leaving the system: the reply goes out
            # at the one step where committed holds, query'd so the trace shows it)
            send = sent[seed, rid]
            assert len(send) == 1 and max(votes[seed, rid].values()) <= send[0] < got[0][0], (
                f"seed {seed}, request {rid}: committed at {send}, votes delivered at {votes[seed, rid]}, "
                f"reply arrived at {got[0][0]}")


def test_voting_participants_accept_every_request(voting):
    accepted = defaultdict(set)
    for seed, node, tup in _final(voting, "accepted"):
        assert node == tup[0]
        accepted[seed, node].add((tup[1], tup[2]))
    for seed in SEEDS:
        for p in PARTICIPANTS:
            assert accepted[seed, p] == set(VOTING_REQUESTS.items()), f"seed {seed}, {p}"


def test_voting_quiesces(voting):
    _all_quiesced(voting)


# ---------------------------------------------------------------------------- two-phase commit
# coordinator:1 and 3 participants; participant 3 refuses transaction 2.

TWOPC_TXNS = (1, 2, 3, 4)
TWOPC_EXPECTED = {1: "commit", 2: "abort", 3: "commit", 4: "commit"}


@pytest.fixture(scope="module")
def twopc(spark):
    return _simulate(spark, "twopc.olg", steps=60)


def test_twopc_atomicity_and_agreement(twopc):
    voted = defaultdict(dict)  # (seed, Tx) -> participant -> its logged vote
    for seed, node, (p, tx, v) in _final(twopc, "voted"):
        voted[seed, tx][p] = v
    outcome = defaultdict(dict)  # (seed, Tx) -> participant -> its decision
    for seed, node, (p, tx, d) in _final(twopc, "outcome"):
        assert p not in outcome[seed, tx] or outcome[seed, tx][p] == d, f"seed {seed}: {p} has two outcomes for {tx}"
        outcome[seed, tx][p] = d
    for seed in SEEDS:
        for tx in TWOPC_TXNS:
            votes, decisions = voted[seed, tx], outcome[seed, tx]
            # liveness: every participant voted and learnt the outcome
            assert sorted(votes) == list(PARTICIPANTS) and sorted(decisions) == list(PARTICIPANTS), (
                f"seed {seed}, tx {tx}: votes {votes}, outcomes {decisions}")
            # agreement: one decision per transaction
            assert len(set(decisions.values())) == 1, f"seed {seed}, tx {tx}: {decisions}"
            # atomicity: commit only if every participant voted yes (and abort otherwise)
            all_yes = all(v == "yes" for v in votes.values())
            assert set(decisions.values()) == {"commit" if all_yes else "abort"}, f"seed {seed}, tx {tx}"
            assert decisions["participant:1"] == TWOPC_EXPECTED[tx]


def test_twopc_decision_sent_after_the_log_flush(twopc):
    logged = defaultdict(list)  # (seed, Tx) -> steps where logCommit appears at the coordinator
    for seed, step, node, peer, (c, tx, d) in _events(twopc, "output", "logCommit"):
        logged[seed, tx].append((step, d))
    votes_in = defaultdict(list)  # (seed, Tx) -> delivery steps of the votes at the coordinator
    for seed, step, node, peer, (c, tx, src, v) in _events(twopc, "deliver", "voteResp"):
        votes_in[seed, tx].append((step, v))
    decisions = defaultdict(list)  # (seed, Tx) -> (send step, destination, D)
    for seed, step, node, peer, (p, c, tx, d) in _events(twopc, "send", "decision"):
        decisions[seed, tx].append((step, peer, d))
    for seed in SEEDS:
        for tx in TWOPC_TXNS:
            log, sends = logged[seed, tx], decisions[seed, tx]
            assert len(log) == 1, f"seed {seed}, tx {tx}: logCommit {log}"  # decided once
            log_step, d = log[0]
            assert d == TWOPC_EXPECTED[tx]
            # one decision message per participant, all the logged one, after the flush step
            assert sorted(p for _, p, _ in sends) == list(PARTICIPANTS), f"seed {seed}, tx {tx}: {sends}"
            assert all(s >= log_step + 1 and dd == d for s, _, dd in sends), (
                f"seed {seed}, tx {tx}: logged at {log_step}, decision sent {sends}")
            if d == "commit":  # a commit only once all three yes votes were in
                assert len(votes_in[seed, tx]) == 3 and log_step >= max(s for s, _ in votes_in[seed, tx])


def test_twopc_every_client_gets_one_reply(twopc):
    replies = defaultdict(list)
    for seed, step, node, peer, tup in _events(twopc, "external", "reply"):
        assert node == "client:1" and peer == "coordinator:1"
        assert step < twopc.steps, f"seed {seed}: reply for {tup[1]} at {step}, past the horizon"
        replies[seed, tup[1]].append(tup[2])
    acks = defaultdict(set)
    for seed, step, node, peer, (c, tx, src, _d) in _events(twopc, "deliver", "ack"):
        acks[seed, tx].add(src)
    for seed in SEEDS:
        for tx in TWOPC_TXNS:
            assert replies[seed, tx] == [TWOPC_EXPECTED[tx]], f"seed {seed}, tx {tx}: {replies[seed, tx]}"
            assert acks[seed, tx] == {1, 2, 3}


def test_twopc_quiesces(twopc):
    _all_quiesced(twopc)


# ---------------------------------------------------------------------------- hashset
# leader:1 signs 4 values, 3 storage nodes store and countersign; one certificate each.

HASHSET_VALUES = ("apple", "pear", "fig", "cherry")
STORAGE = ("storage:1", "storage:2", "storage:3")


@pytest.fixture(scope="module")
def hashset(spark):
    return _simulate(spark, "hashset.olg", steps=40)


def test_hashset_one_certificate_per_value(hashset):
    assert not _events(hashset, "external", "outInconsistent")
    sigs = defaultdict(dict)  # (seed, Val) -> storage node -> its signature, as the leader received it
    for seed, step, node, peer, (l, src, sig, val, cnt) in _events(hashset, "deliver", "fromStorage"):
        assert src == peer and src not in sigs[seed, val]
        sigs[seed, val][src] = sig
    certs = defaultdict(list)
    for seed, step, node, peer, (c, cert, val, cnt) in _events(hashset, "external", "outCert"):
        assert step < hashset.steps, f"seed {seed}: {val} certified at {step}, past the horizon"
        certs[seed, val].append((tuple(sorted(cert)), cnt))
    for seed in SEEDS:
        for val in HASHSET_VALUES:
            got = certs[seed, val]
            # liveness and exactly once: one certificate per value ...
            assert len(got) == 1, f"seed {seed}, {val}: certificates {got}"
            cert, cnt = got[0]
            # ... holding the three storage nodes' signatures; the values share no bucket
            assert sorted(sigs[seed, val]) == list(STORAGE)
            assert cert == tuple(sorted(sigs[seed, val].values())) and len(set(cert)) == 3
            assert cnt == 1


def test_hashset_storage_holds_every_value(hashset):
    stored = defaultdict(set)
    for seed, node, (s, hashed, val) in _final(hashset, "hashset"):
        stored[seed, node].add(val)
    for seed in SEEDS:
        for s in STORAGE:
            assert stored[seed, s] == set(HASHSET_VALUES), f"seed {seed}, {s}"


def test_hashset_quiesces(hashset):
    _all_quiesced(hashset)
