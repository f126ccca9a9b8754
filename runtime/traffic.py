"""Per-node traffic of a located program: tuples sent, received and derived locally.

A location is a partition (`Storage.located`, placed by the localize stage). After
localization every rule reads one location, its body's, and writes its head at the
head's location. A rule whose head location differs from its body location ships the
tuple: the body's node sends it, the head's node receives it. Otherwise the tuple is
derived locally. This is the measurement of seed 002 Fig 4.19.

Counts are set semantics over the fixpoint: one shipment per distinct (rule, source
node, head tuple), the derivations of the final relations, however many iterations
found them. (P2's message counts also include re-sends; they depend on execution order.)
All rules are measured in one Spark action, after the run, only when asked
(`Result.traffic()`, `evita run --stats`). Rules that read no located relation (magic
sets' helpers, unlocated programs) are not counted: they run centralized.

For r2 of the shortest-path program, localized:

    r2_loc1 loc_r2_2(@Y, X, Y, C1) :- link(@X, Y, C1).          X sends to Y
    r2_loc2 path(@X, Z, P, C) :- loc_r2_2(@Y, X, Y, C1), ...    Y sends to X
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from ..bootstrap import syntax as S
from .dataflow import Dataflow, RulePlan


@dataclass(frozen=True)
class NodeTraffic:
    node: object
    sent: int  # tuples derived here and shipped to another node
    received: int  # tuples derived at another node and shipped here
    derived: int  # tuples derived here that stay here

    @property
    def total(self) -> int:
        return self.sent + self.received + self.derived


def located_rules(flow: Dataflow) -> dict:
    """(source rule, head relation) -> [(plan, body location term, head location term)]
    for every rule that reads a located relation. The plans of one group derive the
    same tuples over the final relations (the delta stage's variants of a rule), so a
    group counts each tuple once."""
    out: dict = {}
    for st in flow.strata:
        for r in st.init_rules + st.delta_rules:
            source = None if r.delete else body_location(r, flow)
            if source is None:
                continue
            head = flow.relations[r.head]
            dest = r.head_args[head.location] if head.location is not None else source
            out.setdefault((r.rule, r.head), []).append((r, source, dest))
    return dict(sorted(out.items()))


def body_location(rule: RulePlan, flow: Dataflow) -> Optional[S.Term]:
    """The location term of the first located atom the rule reads, or None."""
    for step in rule.steps:
        if step.op in ("scan", "join") and step.relation in flow.relations:
            loc = flow.relations[step.relation].location
            if loc is not None and isinstance(step.args[loc], (S.Var, S.Const)):
                return step.args[loc]
    return None


def measure(result) -> list:
    """The per-node traffic of a finished run, sorted by node (one Spark action)."""
    from sqlglot import exp

    from .sql import rule_select, union_all

    engine = result.engine
    rules = located_rules(result.dataflow)
    if not rules:
        return []

    def view_of(step):  # every atom over its final relation: the fixpoint's derivations
        return engine.view(engine.full[step.relation])

    parts = []
    for group in rules.values():
        tagged = [rule_select(replace(r, head_args=(source, dest) + tuple(r.head_args)), view_of,
                              engine.array_cols, engine.now) for r, source, dest in group]
        derivations = union_all(tagged) if len(tagged) > 1 else tagged[0]
        distinct = exp.select("*", copy=False).from_(derivations.subquery("u", copy=False), copy=False).distinct(copy=False)
        parts.append(exp.select("c0 AS src", "c1 AS dst", "COUNT(*) AS n", copy=False)
                     .from_(distinct.subquery("d", copy=False), copy=False)
                     .group_by("c0", "c1", copy=False))
    return _per_node((row["src"], row["dst"], row["n"]) for row in engine.action(engine.scope.frame(union_all(parts))))


def measure_held(result) -> list:
    """`measure` over the pandas tables of a run in this process (`runtime/here.py`):
    the same derivations, evaluated by the columnar backend (no Spark)."""
    import pandas as pd

    from .columnar import evaluate_rule

    rules = located_rules(result.dataflow)
    counted = []
    for group in rules.values():
        tagged = [evaluate_rule(replace(r, head_args=(source, dest) + tuple(r.head_args)),
                                lambda step: result.held[step.relation]) for r, source, dest in group]
        derivations = pd.concat(tagged, ignore_index=True) if len(tagged) > 1 else tagged[0]
        if not len(derivations):
            continue
        derivations = derivations.drop_duplicates()
        for (src, dst), n in derivations.groupby(["c0", "c1"], dropna=False, sort=False).size().items():
            counted.append((None if pd.isna(src) else src, None if pd.isna(dst) else dst, int(n)))
    return _per_node(counted)


def _per_node(counted) -> list:
    """(source node, destination node, tuples) -> NodeTraffic per node, sorted by node."""
    totals: dict = {}
    for src, dst, n in counted:
        if src is None or dst is None:
            continue
        for node in (src, dst):
            totals.setdefault(node, [0, 0, 0])
        if src == dst:
            totals[src][2] += n
        else:
            totals[src][0] += n
            totals[dst][1] += n
    return [NodeTraffic(node, *counts) for node, counts in sorted(totals.items(), key=lambda kv: _order(kv[0]))]


def _order(node):
    """Nodes in natural order: node2 before node10, numbers before text."""
    import re

    text = str(node)
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def traffic_text(rows: list) -> str:
    """The per-node table `evita run --stats` prints.

    >>> print(traffic_text([NodeTraffic("n1", 3, 1, 2), NodeTraffic("n2", 1, 3, 0)]))
    node   sent  received  derived
    n1        3         1        2
    n2        1         3        0
    total     4         4        2
    """
    if not rows:
        return ""
    width = max(5, *(len(str(r.node)) for r in rows))
    lines = [f"{'node':<{width}}  sent  received  derived"]
    for r in rows:
        lines.append(f"{str(r.node):<{width}}  {r.sent:>4}  {r.received:>8}  {r.derived:>7}")
    lines.append(f"{'total':<{width}}  {sum(r.sent for r in rows):>4}  {sum(r.received for r in rows):>8}  "
                 f"{sum(r.derived for r in rows):>7}")
    return "\n".join(lines)
