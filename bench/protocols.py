"""Throughput of the protocols before and after the decouple/partition stages, modeled
(seed 000 §5; research notes §5): a model, not a measurement of Spark or of a network.

    .venv/bin/python bench/protocols.py              # ~2 min on the 2-core machine
    .venv/bin/python bench/protocols.py --seeds 5    # smoke run
    .venv/bin/python bench/protocols.py --requests 4 # the examples' own 4 requests

Every protocol runs with --requests client requests (default 120, ids 1..N, in place of
the example's 4): a partitioned deployment spreads requests by a hash of their id, and 4
requests over 5 partitions would measure hash skew, not steady-state load; and Paxos's
leader election (p1a, p1b, heartbeats), spread over 4 requests, would be counted as a
third of its proposer's messages. Paxos's two proposers get the commands in opposite
orders, as in the example.

For each protocol of examples/protocols, each deployment (as written; as the stages
rewrite it by default; with directives where the paper chose by hand) runs in the
simulator over --seeds seeds (delays uniform:1-5) to quiescence. Per node and per
committed request it counts client messages in (requests) and out (replies), internal
messages in and out, new derivations, log flushes (new derivations of the relations
FLUSHES names) and busy steps (timesteps the node derived or received something).

The model (a bottleneck bound; research notes §5): a node's service demand per request is
    D_n = a * client messages + b * internal messages + c * derivations + e * flushes
(in + out for messages; a flush is also a derivation, e is its extra cost) and the
throughput bound is X = 1 / max_n D_n. The unit costs a, b, c, e (>= 0) are fitted so
that the original deployments reach the paper's measured base throughputs (voting
100k/s, 2PC 30k/s, Paxos 50k/s; TR §5.2); the rewritten deployments' factors
X_after / X_before are then predictions, printed next to the paper's (voting 2.5x at
26 machines, 2PC 5.3x at 46, Paxos 3x at 29). Three base throughputs barely constrain
four costs, so a second table gives the last deployment's factor under each cost shape
(SHAPES). Only 2PC logs (voting and Paxos have no flush relation), so e is pinned by
2PC's base alone: a free e takes up whatever part of it the other costs leave, and says
little about the cost of a flush. Busy steps are printed, not modelled; the cost of a
rule's joins is not in the model.
"""
from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
PROTOCOLS = REPO / "examples" / "protocols"

# protocol -> (base throughput per second (TR §5.2), paper's factor, machines after, the
# relation holding the client requests, horizon)
PAPER = {
    "voting": (100_000, 2.5, 26, "request", 80),
    "twopc": (30_000, 5.3, 46, "txn", 80),
    "paxos": (50_000, 3.0, 29, "clientIn", 160),
}
SCALED_DIR = PROTOCOLS / "scaled"  # the paper's deployments, as directive files

# protocol -> the relations whose new tuples are log flushes: a durable log write is
# modelled as a relation derived @next from the write (examples/protocols/twopc.olg, its
# header): the coordinator's c14 logCommitComplete and c25 endLogged, the participants' p3
# voteLogged and p9 outcomeLogged. Voting and Paxos write no log. The stages rename components, not
# relations, so the names hold in every deployment (demands checks they exist).
FLUSHES = {
    "voting": (),
    "twopc": ("logCommitComplete", "endLogged", "voteLogged", "outcomeLogged"),
    "paxos": (),
}


# examples/protocols/paxos.olg as first written, the base Paxos is measured on (its header
# says what was restated and why), as substitutions (text in paxos.olg, the first form's):
# - the p2b collector: the proposer collects the p2bs itself (b5, e4 and q7 read p2b and the
#   count) and sends each commit once (q7-q9: chosen, guarded by commitSent). The restated
#   collector sends a slot's commit at each p2b arrival once the slot has a quorum, 1.76
#   times per slot here, which would swell the base's messages. The p2b keeps its value,
#   unread: the simulator draws a message's delay from its content.
# - the acceptors: a p2a raises the ballot (a2) and is accepted into the same step's log;
#   a p1a gets a p1b with the log's size (a9, a10) and a p1bLog per entry, which the
#   proposer counts (p6, p8).
# tests/test_decouple.py holds the first to the same outputs at the same steps, the second
# to the same replica logs at quiescence.
PAXOS_P2B_FIRST = [
    ("b5 seen(@P, M) :- p2bBallot(@P, M).", "b5 seen(@P, M) :- p2b(@P, _, _, _, M, _)."),
    ("p2bBallot(@P, M), curBallot(@P, My)", "p2b(@P, _, _, _, M, _), curBallot(@P, My)"),
    ("q4b p2bBallot(@P, M) :- p2b(@P, _, B, _, M, _), M > B.", ""),
    ("q6b quorumAt(@P, B, S, V) :- p2b(@P, _, B, S, B, V), acks(@P, B, S, N), quorum(@P, Q), N >= Q.", ""),
    ("q10 commit(@R, S, V)@async :- quorumAt(@P, _, S, V), replicas(@P, R).",
     "q7 chosen(@P, B, S, V) :- acks(@P, B, S, N), quorum(@P, Q), N >= Q, proposed(@P, B, S, V),"
     " notin commitSent(@P, B, S).\n"
     "q8 commitSent(@P, B, S)@next :- chosen(@P, B, S, _).\n"
     "q9 commitSent(@P, B, S)@next :- commitSent(@P, B, S).\n"
     "q10 commit(@R, S, V)@async :- chosen(@P, B, S, V), replicas(@P, R)."),
    ("d1 known(@P, V)@next :- quorumAt(@P, _, _, V).", "d1 known(@P, V)@next :- chosen(@P, _, _, V)."),
]
PAXOS_ACCEPTOR_FIRST = [
    ("b4 seen(@P, M) :- p1bLog(@P, _, _, M, -1, _, _).", "b4 seen(@P, M) :- p1b(@P, _, _, M, _)."),
    ("p1bLog(@P, _, _, M, -1, _, _), curBallot(@P, My)", "p1b(@P, _, _, M, _), curBallot(@P, My)"),
    ("p2 p1bs(@P, A, B, M) :- p1bLog(@P, A, B, M, -1, _, _).\n"
     "    p3 p1bs(@P, A, B, M)@next :- p1bs(@P, A, B, M).\n"
     "    p4 p1bLogs(@P, A, B, S, AB, V) :- p1bLog(@P, A, B, B, S, AB, V), S >= 0.\n"
     "    p5 p1bLogs(@P, A, B, S, AB, V)@next :- p1bLogs(@P, A, B, S, AB, V).\n"
     "    p7 promiseOk(@P, A, B) :- p1bs(@P, A, B, B).",
     "p2 p1bs(@P, A, B, M, N) :- p1b(@P, A, B, M, N).\n"
     "p3 p1bs(@P, A, B, M, N)@next :- p1bs(@P, A, B, M, N).\n"
     "p4 p1bLogs(@P, A, B, S, AB, V) :- p1bLog(@P, A, B, S, AB, V).\n"
     "p5 p1bLogs(@P, A, B, S, AB, V)@next :- p1bLogs(@P, A, B, S, AB, V).\n"
     "p6 logRecv(@P, A, B, count<*>) :- p1bLogs(@P, A, B, _, _, _).\n"
     "p7 promiseOk(@P, A, B) :- p1bs(@P, A, B, B, 0).\n"
     "p8 promiseOk(@P, A, B) :- p1bs(@P, A, B, B, N), logRecv(@P, A, B, N)."),
    ('accepted(@"a1", -1, 0, "").', ""), ('accepted(@"a2", -1, 0, "").', ""), ('accepted(@"a3", -1, 0, "").', ""),
    ("a0 p1aNow(@A, P, B) :- p1a(@A, P, B).", ""),
    ("a1 ballots(@A, B) :- p1aNow(@A, _, B).",
     "a1 ballots(@A, B) :- p1a(@A, _, B).\na2 ballots(@A, B) :- p2a(@A, _, B, _, _)."),
    ("a4 ballots(@A, B)@next :- ballots(@A, B).", "a4 ballots(@A, B)@next :- maxBallot(@A, B)."),
    ("a5 accepted(@A, S, B, V)@next :- p2a(", "a5 accepted(@A, S, B, V) :- p2a("),
    ("a11 p1bLog(@P, A, B, M, seal<S, AB, V>)@async :- p1aNow(@A, P, B), maxBallot(@A, M),\n"
     "                                                     accepted(@A, S, AB, V).",
     "a7 hasLog(@A) :- accepted(@A, _, _, _).\n"
     "a8 logSize(@A, count<*>) :- accepted(@A, _, _, _).\n"
     "a9 p1b(@P, A, B, M, N)@async :- p1a(@A, P, B), maxBallot(@A, M), logSize(@A, N).\n"
     "a10 p1b(@P, A, B, M, 0)@async :- p1a(@A, P, B), maxBallot(@A, M), notin hasLog(@A).\n"
     "a11 p1bLog(@P, A, B, S, AB, V)@async :- p1a(@A, P, B), maxBallot(@A, B), accepted(@A, S, AB, V)."),
]
PAXOS_AS_FIRST_WRITTEN = PAXOS_P2B_FIRST + PAXOS_ACCEPTOR_FIRST
BASE_FORM = {"paxos": PAXOS_AS_FIRST_WRITTEN}  # protocol -> its base's substitutions


def first_form(text: str, substitutions) -> str:
    for new, old in substitutions:
        if new not in text:
            raise SystemExit(f"the first form's substitution no longer applies: {new!r} is not in the program")
        text = text.replace(new, old)
    return text


def scaled(protocol: str) -> str:
    """The directives of examples/protocols/scaled/PROTOCOL.olg (its #include left out)."""
    lines = (SCALED_DIR / f"{protocol}.olg").read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith("#include"))


# deployment name -> (stages skipped, directive facts prepended to the program)
DEPLOYMENTS = {
    "voting": [
        ("as written", ("decouple", "partition"), ""),
        ("decouple (automatic)", ("partition",), ""),
        ("decouple + partition x5 (collectors, participants)", (),
         'partition::count("leader_2", 5).\npartition::count("participant", 5).'),
        ("scaled/voting.olg: + broadcasters x5 (the paper's deployment)", (), scaled("voting")),
    ],
    "twopc": [
        ("as written", ("decouple", "partition"), ""),
        ("decouple (automatic)", ("partition",), ""),
        ("decouple + partition x5 (committers, enders, participants' voters and ackers)", (),
         'partition::count("coordinator_2", 5).\npartition::count("coordinator_3", 5).\n'
         'partition::count("participant", 5).\npartition::count("participant_2", 5).'),
        ("scaled/twopc.olg: + vote requesters x5 (the paper's deployment)", (), scaled("twopc")),
    ],
    "paxos": [
        ("as written", ("decouple", "partition"), ""),
        ("decouple::asymmetric: the p2b collector (q4-q10, sending the commits) to p1/2", ("partition",),
         "\n".join(line for line in scaled("paxos").splitlines() if "asymmetric" in line)),
        ("scaled/paxos.olg without partition: + p2a broadcast to p1/3", ("partition",), scaled("paxos")),
        ("+ p2b collector and p2a halves x3 on the slot (acceptors whole)", (),
         "\n".join(line for line in scaled("paxos").splitlines() if '"acceptor"' not in line)),
        ("scaled/paxos.olg: + acceptors partially partitioned x3 on the slot (the paper's deployment)", (),
         scaled("paxos")),
    ],
}


SCALED = {"voting", "twopc", "paxos"}  # protocols whose client requests --requests replaces


def deployment(spark, protocol: str, skip: tuple, directives: str, requests: int, base: bool = False):
    from evita.bootstrap.stage import find_stages
    from evita.runtime.simulate import compile_timed

    known = set(find_stages([]))
    skip = tuple(s for s in skip if s in known)
    path = PROTOCOLS / f"{protocol}.olg"
    text = path.read_text()
    if protocol in SCALED:
        text = with_requests(text, PAPER[protocol][3], requests)
    if base and protocol in BASE_FORM:
        text = first_form(text, BASE_FORM[protocol])
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / path.name
        copy.write_text(directives + "\n" + text)
        return compile_timed(str(copy), spark, skip=skip)


def with_requests(text: str, relation: str, n: int) -> str:
    """The program with its `relation(@"A", Id, "...")` facts replaced by n requests, ids
    1..n, at every address that held some. The first address gets values v1..vn in id
    order; another address gets them in the opposite order when it listed the example's
    values that way (Paxos: a client sends every command to both proposers, which receive
    them in opposite orders)."""
    fact = re.compile(rf'^([ \t]*){relation}\(@"([^"]+)", (\d+), "([^"]*)"\)\.[ \t]*\n', re.M)
    found = fact.findall(text)
    if not found:
        raise SystemExit(f"{relation}: no requests written as {relation}(@\"A\", Id, \"V\")")
    addresses = list(dict.fromkeys(a for _, a, _, _ in found))
    values = {a: [v for _, b, _, v in found if b == a] for a in addresses}
    indent = found[0][0]
    generated = ""
    for a in addresses:
        reverse = a != addresses[0] and values[a] == values[addresses[0]][::-1] != values[a][::-1]
        for i in range(1, n + 1):
            v = n + 1 - i if reverse else i
            generated += f'{indent}{relation}(@"{a}", {i}, "v{v}").\n'
    first = fact.search(text)
    return text[:first.start()] + generated + fact.sub("", text[first.start():])


class Counts(NamedTuple):
    """One node's counts per committed request, averaged over the seeds."""
    client_in: float  # requests it holds (EDB facts: a client message each)
    client_out: float  # replies that leave the system
    internal_in: float
    internal_out: float
    derived: float  # new derivations, flushes included
    flushes: float
    busy: float  # timesteps it derived or received something

    def model(self) -> tuple:
        """What the unit costs (a, b, c, e) multiply."""
        return (self.client_in + self.client_out, self.internal_in + self.internal_out,
                self.derived, self.flushes)


def demands(timed, seeds: int, steps: int, requests_relation: str, flushes=()) -> dict:
    """node -> its Counts per committed request."""
    import dataclasses

    from evita.runtime.simulate import Simulation

    missing = [r for r in flushes if r not in timed.arity]
    if missing:
        raise SystemExit(f"{timed.name}: no flush relation {', '.join(missing)} (renamed?)")
    # the simulator traces every new tuple of a shown relation as an "output" row: showing
    # the flush relations too counts their derivations per node without a new counter
    timed = dataclasses.replace(timed, shown=list(dict.fromkeys(list(timed.shown) + list(flushes))))
    run = Simulation(timed, range(seeds), "uniform:1-5").run(steps)
    late = run.late
    if late:
        raise SystemExit(f"{timed.name}: seeds {late[:5]} did not quiesce within {steps} steps")
    requests = [node for rel, node, _ in timed.facts if rel == requests_relation]
    per_node_requests = {n: requests.count(n) for n in set(requests)}
    committed = max(per_node_requests.values())  # every node holding requests holds them all
    t = run.trace
    replies = t[t["kind"] == "external"].groupby("peer").size()
    flushed = t[(t["kind"] == "output") & t["relation"].isin(list(flushes))].groupby("node").size()
    out = {}
    for node, rows in run.counts.groupby("node"):
        r = replies.get(node, 0) / seeds
        counts = (per_node_requests.get(node, 0), r, rows["received"].mean(), rows["sent"].mean() - r,
                  rows["derived"].mean(), flushed.get(node, 0) / seeds, rows["busy_steps"].mean())
        out[node] = Counts(*(k / committed for k in counts))
    return out


def bottleneck(nodes: dict, cost) -> tuple:
    """(max demand, the node with it) under unit costs (a, b, c, e)."""
    return max((sum(k * v for k, v in zip(cost, counts.model())), node) for node, counts in nodes.items())


# The cost shapes the model is fitted in: which unit costs (a client message, an internal
# message, a derivation, a flush) are free, and which are tied. Three base throughputs do
# not pin four costs down (the counts of the three protocols are alike), so the factors
# are printed under each shape: a prediction that changes with the shape is not one.
# Only 2PC flushes, so a free e fits 2PC's base alone.
SHAPES = {
    "free a, b, c, e": lambda ra, rc, re: (ra, 1.0, rc, re),
    "free a, b, c (e = 0)": lambda ra, rc, re: (ra, 1.0, rc, 0.0),
    "messages only (a = b)": lambda ra, rc, re: (1.0, 1.0, 0.0, 0.0),
    "derivations only": lambda ra, rc, re: (0.0, 0.0, 1.0, 0.0),
    "messages and derivations (a = b)": lambda ra, rc, re: (1.0, 1.0, rc, 0.0),
    "messages and flushes (a = b)": lambda ra, rc, re: (1.0, 1.0, 0.0, re),
    "messages, derivations and flushes (a = b)": lambda ra, rc, re: (1.0, 1.0, rc, re),
    # the research notes (§5) fit voting's base and its 26-node point: a client message
    # about 3.5 us, an internal one about 0.5 us; voting's factor is then not a prediction
    "the research notes' a = 7 b": lambda ra, rc, re: (7.0, 1.0, 0.0, 0.0),
    "the research notes' a = 7 b, and flushes": lambda ra, rc, re: (7.0, 1.0, 0.0, re),
}


def fit(bases: dict, shape=SHAPES["free a, b, c, e"]) -> tuple:
    """(unit costs (a, b, c, e) >= 0 in seconds, the fit's root mean squared relative
    error) that bring each original deployment's bottleneck demand closest (relative
    squared error) to 1 / its base throughput: a grid over the cost ratios the shape
    leaves free, then the scale in closed form."""
    best = None
    grid = [0.0] + [2 ** (k / 2) for k in range(-12, 13)]
    target = {p: 1.0 / x for p, (_, x) in bases.items()}
    # a shape that ties a ratio gives the same cost for every value of it: try each once
    for cost in dict.fromkeys(shape(*r) for r in itertools.product(grid, repeat=3)):
        d = {p: bottleneck(nodes, cost)[0] for p, (nodes, _) in bases.items()}
        # scale s minimizing sum ((s d - t) / t)^2
        s = sum(d[p] / target[p] for p in d) / sum((d[p] / target[p]) ** 2 for p in d)
        err = sum(((s * d[p] - target[p]) / target[p]) ** 2 for p in d)
        if best is None or err < best[0]:
            best = (err, tuple(s * k for k in cost))
    return best[1], (best[0] / len(bases)) ** 0.5


def last_factors(measured: dict, cost) -> dict:
    """protocol -> the factor of its last deployment over its base, under unit costs cost."""
    factors = {}
    for protocol, deps in DEPLOYMENTS.items():
        d0 = bottleneck(measured[protocol, "as written"], cost)[0]
        d = bottleneck(measured[protocol, deps[-1][0]], cost)[0]
        factors[protocol] = d0 / d if d else float("inf")
    return factors


def closest(measured: dict, bases: dict) -> tuple:
    """How near the paper's factors any unit costs bring the model, fit or no fit: over
    the grid of cost ratios (a, c, e relative to b, and b = 0), the costs whose worst
    factor is least off the paper's, |predicted / paper - 1| as the target measures it.
    Returns (that worst miss, the costs scaled to the bases, their fit error on the
    bases, {protocol: factor}). A miss above 30% here means no costs meet the target
    with these counts: the model, not the fit, falls short."""
    grid = [0.0] + [2 ** (k / 2) for k in range(-12, 13)]
    best = None
    for b in (1.0, 0.0):
        for a, c, e in itertools.product(grid, repeat=3):
            cost = (a, b, c, e)
            if not any(cost):
                continue
            factors = last_factors(measured, cost)
            worst = max(abs(f / PAPER[p][1] - 1) for p, f in factors.items())
            if best is None or worst < best[0]:
                best = (worst, cost, factors)
    worst, cost, factors = best
    scaled, err = fit(bases, lambda *_: cost)
    return worst, scaled, err, factors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--requests", type=int, default=120, help="client requests of each protocol")
    args = ap.parse_args()

    from evita.runtime.session import spark_session

    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    measured = {}
    for protocol, deps in DEPLOYMENTS.items():
        base, factor, machines, requests, steps = PAPER[protocol]
        for name, skip, directives in deps:
            timed = deployment(spark, protocol, skip, directives, args.requests, base=name == "as written")
            measured[protocol, name] = demands(timed, args.seeds, steps, requests, FLUSHES[protocol])
    bases = {p: (measured[p, "as written"], PAPER[p][0]) for p in DEPLOYMENTS}
    cost, _ = fit(bases)
    print(f"unit costs fitted on the base throughputs: client message {cost[0] * 1e6:.2f} us, "
          f"internal message {cost[1] * 1e6:.2f} us, derivation {cost[2] * 1e6:.2f} us, "
          f"log flush {cost[3] * 1e6:.2f} us (only 2PC flushes: its base alone pins the flush cost)")
    print()
    print("| protocol | deployment | nodes | bottleneck | its client msgs in / out | internal in / out "
          "| derivations | flushes | busy steps | demand (us) | bound (req/s) | factor | paper |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for protocol, deps in DEPLOYMENTS.items():
        base, factor, machines, _, _ = PAPER[protocol]
        d0 = bottleneck(measured[protocol, "as written"], cost)[0]
        for name, _, _ in deps:
            nodes = measured[protocol, name]
            d, node = bottleneck(nodes, cost)
            c = nodes[node]
            paper = f"{base / 1000:.0f}k/s" if name == "as written" else f"{factor}x at {machines}"
            print(f"| {protocol} | {name} | {len(nodes)} | {node} | {c.client_in:.1f} / {c.client_out:.1f} | "
                  f"{c.internal_in:.1f} / {c.internal_out:.1f} | {c.derived:.1f} | {c.flushes:.1f} | {c.busy:.2f} | "
                  f"{d * 1e6:.1f} | {1 / d:,.0f} | {d0 / d:.2f}x | {paper} |")
    print()
    # a check that the rewrites keep the flush relations: the same flushes, spread out
    print("Log flushes per request, all nodes (where they happen):")
    for protocol, deps in DEPLOYMENTS.items():
        for name, _, _ in deps if FLUSHES[protocol] else ():
            nodes = measured[protocol, name]
            group = {}  # a partitioned node's partitions A#0, A#1, ... summed as A xN
            for n, c in nodes.items():
                if c.flushes:
                    g = re.sub(r"#\d+$", "", str(n))
                    k, f = group.get(g, (0, 0.0))
                    group[g] = (k + 1, f + c.flushes)
            at = ", ".join(f"{g}{f' x{k}' if k > 1 else ''} {f:.2f}" for g, (k, f) in sorted(group.items()))
            print(f"- {protocol}, {name}: {sum(c.flushes for c in nodes.values()):.2f} ({at})")
    print()
    print("The last deployment of each protocol under each cost shape (the fit's error is on the base "
          "throughputs; only 2PC has flushes, so e is fitted on 2PC's base alone):")
    print()
    print("| cost shape | a / b / c / e (us) | fit error | " + " | ".join(DEPLOYMENTS) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in DEPLOYMENTS) + " |")
    for shape, tie in SHAPES.items():
        cost, err = fit(bases, tie)
        factors = [f"{f:.2f}x (paper {PAPER[p][1]}x)" for p, f in last_factors(measured, cost).items()]
        print(f"| {shape} | {' / '.join(f'{k * 1e6:.2f}' for k in cost)} | {err:.0%} | " + " | ".join(factors) + " |")
    miss, cost, err, factors = closest(measured, bases)
    print()
    print(f"The closest any costs come to the paper's factors (fitted on them, not on the bases): worst factor "
          f"{miss:.0%} off, at a / b / c / e = {' / '.join(f'{k * 1e6:.2f}' for k in cost)} us (fit error on the "
          f"bases {err:.0%}): " + ", ".join(f"{p} {f:.2f}x (paper {PAPER[p][1]}x)" for p, f in factors.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
