"""The semantics of a stratum, defined once for every strategy that evaluates one.

A strategy is a backend of this module: it says how a relation's tuples are held and
how the few operations of `Tables` run (pandas frames in `runtime/columnar.py`, Spark
DataFrames or SQL common table expressions in `runtime/engine.py`). What a relation holds, what a
round of recursion finds new, and when a recursion stops are decided here and nowhere
else; `runtime/oracle.py` is the independent reference all of them are tested against.

What a relation holds (`kind`):

- ``set``: a set of tuples. New in a round: the tuples not held yet.
- ``numbered`` (`autoinc<*>`): its distinct groups, numbered 0, 1, ... in ascending
  order. Inside recursion a round's new groups are numbered after every earlier one,
  and a group keeps its number.
- ``grouped`` (head aggregates): group on the other columns; no group columns is one
  group, and no valuations give no tuple. Inside recursion only min/max are allowed
  and follow PreM (seed 003): a tuple is new when its group is new or its value
  better, and it replaces the old tuple of its group.
- ``keyed`` (a primary key): per key one tuple, the greatest of the other columns (for
  determinism); a derived tuple that differs from the one held replaces it (Overlog
  §2.2.3).

A semi-naive round, per kind (`new_delta`, then `absorb`); `cand` is what the delta
rules derived this round, `full` the relation so far:

    set        delta = cand - full                                  full = full + delta
    numbered   delta = groups(cand) - groups(full), numbered from |full|   full = full + delta
    grouped    delta = aggregate(cand), where new or better than full   full = full, delta replacing its groups
    keyed      delta = greatest per key(cand) - full                full = full, delta replacing its keys

Soufflé's subsumption (`Storage.dominated`, a set relation): the rules of a helper
relation derive the tuples another tuple dominates (`bootstrap/lowering/subsumption.py`);
`subsume` removes them from the relation and its delta, judged all at once against
the relation as it stands, after the stratum's start and after every round. So a
dominated tuple never drives a round, and the loop stops when a round's new tuples are
all dominated. A tuple removed may be derived again: it is new then, and judged again
(so a subsumptive relation's delta is found against what it holds, not against every
tuple ever seen).

Soufflé's `choice-domain` (`Storage.choice`, kind ``chosen``): a functional dependency
from each domain's columns to the rest. A tuple enters only when no tuple it holds
agrees with it on a domain's columns, and it is never replaced. The candidates that
arrive together (the stratum's start: facts, inputs and the rules reading lower strata;
then each round's derivations) are taken in ascending order of their tuples, each kept
when it agrees with no tuple held or kept before it: the least tuple wins (`choose`).
Soufflé takes the first in its own evaluation order, which is arbitrary; Evita's order is
the tuples' own, so every backend keeps the same tuples.

    chosen     delta = choose(cand, against full)                   full = full + delta

A recursive stratum (`fixpoint`) runs rounds while a relation that a delta rule derives
gained tuples. Soufflé's `.limitsize R(n=N)` stops it before a round once R holds N
tuples (the round that reached N is kept whole). More rounds than the iteration limit is
`NoFixpoint`, which `no_fixpoint_error` turns into the diagnostic naming the stratum,
the relations still growing and the likeliest rule. Negation reads complete lower
strata: the planner's stratification guarantees it, so nothing here checks it.

>>> import pandas as pd
>>> from evita.runtime.columnar import PandasTables
>>> from evita.runtime.dataflow import Aggregation, Storage
>>> dist = Storage("dist", 2, ("node", "d"), ("number", "number"), "derived",
...                aggregates=(Aggregation(1, "min", premappable=True),))
>>> t = PandasTables()
>>> full = combine(t, dist, [pd.DataFrame({"c0": [1, 2, 2], "c1": [5, 7, 4]})])
>>> delta = new_delta(t, dist, full, pd.DataFrame({"c0": [1, 3], "c1": [6, 1]}))
>>> delta.values.tolist()          # 1 is no better than 5; 3 is a new group
[[3, 1]]
>>> sorted(absorb(t, dist, full, delta).values.tolist())
[[1, 5], [2, 4], [3, 1]]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError, plural
from .dataflow import Storage, Stratum


# ---------------------------------------------------------------- what a relation holds

def kind(s: Storage) -> str:
    """``set``, ``numbered``, ``grouped``, ``keyed`` or ``chosen`` (the module docstring says
    what each holds)."""
    if s.choice:
        return "chosen"
    if any(a.func in S.NUMBERING for a in s.aggregates):
        return "numbered"
    if s.aggregates:
        return "grouped"
    if s.keys is not None:
        return "keyed"
    return "set"


def replaced_on(s: Storage) -> tuple:
    """The columns on which a new tuple replaces an old one: the group columns of a
    grouped relation, the key of a keyed one."""
    return tuple(s.group_columns) if s.aggregates else tuple(s.keys)


class Tables:
    """A backend: how tables are held, and the operations the semantics is built from.

    Every operation gets the relation's `Storage` first, so a backend may keep state per
    relation (the columnar evaluator's hash set of tuples seen). `union` takes a list of
    parts, which a backend may hold in any form it can union (rule outputs, facts); the
    other operations take what `union` or an earlier operation returned.

    The operations below the line have a definition in terms of the ones above it; a
    backend overrides them where it has a cheaper way to the same answer.
    """

    def empty(self, s: Storage):
        raise NotImplementedError

    def union(self, s: Storage, parts: list):
        """The bag union of `parts` (at least one)."""
        raise NotImplementedError

    def distinct(self, s: Storage, t):
        raise NotImplementedError

    def aggregate(self, s: Storage, t):
        """Per group of `s.group_columns`, the aggregates of `s.aggregates`."""
        raise NotImplementedError

    def greatest_per_key(self, s: Storage, t):
        raise NotImplementedError

    def least_in_groups(self, s: Storage, t, domains: tuple):
        """The rows of `t` (distinct) that are least, comparing whole tuples column by
        column, among the rows agreeing with them on the columns of each of `domains`."""
        raise NotImplementedError

    def number(self, s: Storage, t, old=None):
        """The distinct groups of `t` that `old` does not hold, numbered |old|, |old| + 1,
        ... in ascending order of their columns (`old` None: none, from 0)."""
        raise NotImplementedError

    def minus(self, s: Storage, t, other, columns: Optional[tuple] = None):
        """The rows of `t` whose `columns` (all when None) match no row of `other`."""
        raise NotImplementedError

    def count(self, tables: dict) -> dict:
        """name -> how many rows, for several tables at once (on Spark, one action)."""
        raise NotImplementedError

    def cleared(self, s: Storage, t):
        """No rows, typed as `t` is."""
        raise NotImplementedError

    # ------------------------------------------------------------ derived operations

    def new_tuples(self, s: Storage, full, cand):
        """A set's delta: the distinct tuples of `cand` that `full` does not hold."""
        return self.minus(s, self.distinct(s, cand), full)

    def improved(self, s: Storage, new, full):
        """PreM: the tuples of `new` (one per group) whose group `full` lacks or whose
        value beats the one `full` holds."""
        return self.minus(s, self.aggregate(s, self.union(s, [full, new])), full)

    def replace(self, s: Storage, full, delta, columns: tuple):
        """`full` with the tuples of `delta` replacing those that agree on `columns`."""
        return self.union(s, [self.minus(s, full, delta, columns), delta])

    def extend(self, s: Storage, full, delta):
        """`full` with `delta`, which holds nothing `full` does, added."""
        return self.union(s, [full, delta])

    def hold(self, s: Storage, delta):
        """A round's delta, about to be counted and then read by the next round (on
        Spark: cached, so the counting fills it)."""
        return delta

    def settle(self, s: Storage, delta):
        """A delta once counted (on Spark: cut from its lineage)."""
        return delta


def facts_kept(s: Storage, rows: list) -> list:
    """A relation's facts as the program lists them -> those it holds: of a keyed
    relation's facts with the same key, the later replaces the earlier (Overlog's
    `materialize` keys: a fact is an insert, a later insert with the key an update)."""
    if s.keys is None:
        return rows
    last = {}
    for r in rows:
        last[tuple(r[k] for k in s.keys)] = r
    return list(last.values())


def combine(tables: Tables, s: Storage, parts: list):
    """Rule outputs, facts and inputs -> what the relation holds."""
    if not parts:
        return tables.empty(s)
    bag = tables.union(s, parts)
    k = kind(s)
    if k == "numbered":
        return tables.number(s, bag)
    if k == "grouped":
        return tables.aggregate(s, bag)
    if k == "keyed":
        return tables.greatest_per_key(s, bag)
    if k == "chosen":
        return choose(tables, s, None, bag)
    return tables.distinct(s, bag)


def new_delta(tables: Tables, s: Storage, full, cand):
    """What this round's derivations `cand` (a bag from `Tables.union`) add to `full`."""
    k = kind(s)
    if k == "set" and s.dominated:  # a tuple subsumption removed may come back: judged again
        return tables.minus(s, tables.distinct(s, cand), full)
    if k == "set":
        return tables.new_tuples(s, full, cand)
    if k == "numbered":
        return tables.number(s, cand, full)
    if k == "grouped":
        return tables.improved(s, tables.aggregate(s, cand), full)
    if k == "chosen":
        return choose(tables, s, full, cand)
    return tables.minus(s, tables.greatest_per_key(s, cand), full)


def absorb(tables: Tables, s: Storage, full, delta):
    """The relation after a round whose delta is `delta`."""
    if s.dominated:  # pruned after the round, so not one of `extend`'s growing unions
        return tables.distinct(s, tables.union(s, [full, delta]))
    if kind(s) in ("set", "numbered", "chosen"):  # a chosen tuple stays: the relation only grows
        return tables.extend(s, full, delta)
    return tables.replace(s, full, delta, replaced_on(s))


def choose(tables: Tables, s: Storage, full, cand):
    """Soufflé's choice-domain: of the distinct tuples of `cand` that agree with no tuple
    of `full` (None: none held yet) on any domain, those a walk in ascending order keeps,
    each kept when it agrees with none kept before it.

    The walk is sequential; it runs as rounds of whole tables instead. A candidate least
    in every domain group it belongs to has no smaller rival, so the walk keeps it; all
    such are kept at once (two of them never agree on a domain: they would be one tuple),
    their rivals dropped, and the rest walked again. The rounds keep exactly the walk's
    tuples. With one domain the first round keeps the least of every group and leaves
    nothing, so it is one step."""
    pool = tables.distinct(s, cand)
    if full is not None:
        for domain in s.choice:
            pool = tables.minus(s, pool, full, domain)
    kept = []
    while True:
        least = tables.least_in_groups(s, pool, s.choice)
        kept.append(least)
        if len(s.choice) == 1:
            return least
        for domain in s.choice:  # the rivals of what was kept go, and so does what was kept
            pool = tables.minus(s, pool, least, domain)
        pool = tables.hold(s, pool)
        left = tables.count({s.name: pool})[s.name]
        pool = tables.settle(s, pool)
        if not left:
            return tables.distinct(s, tables.union(s, kept))


def subsume(tables: Tables, relations: tuple, storages: dict, full: dict, delta: dict, derive: Callable) -> dict:
    """Soufflé's subsumption, in place: every relation of `relations` with a helper of
    dominated tuples loses them from `full` and `delta`. The helpers' rules all read
    `full` as it stands before any removal (two tuples dominating each other both go).
    -> relation -> the size of its delta after."""
    gone = {}
    for n in relations:
        helper = storages[n].dominated
        if helper is not None:
            bag = derive(helper, lambda step: full[step.relation])
            if bag is not None:
                gone[n] = tables.distinct(storages[helper], bag)
    kept = {}
    for n, g in gone.items():
        s = storages[n]
        kept[n] = tables.hold(s, tables.minus(s, full[n], g))
        kept[n + "\0delta"] = tables.hold(s, tables.minus(s, delta[n], g))
    counts = tables.count(kept)  # on Spark one action, which also fills the held tables
    for n in gone:
        s = storages[n]
        full[n], delta[n] = tables.settle(s, kept[n]), tables.settle(s, kept[n + "\0delta"])
    return {n: counts[n + "\0delta"] for n in gone}


# ---------------------------------------------------------------- a recursive stratum

def looping(st: Stratum) -> list:
    """The stratum's relations that a delta rule derives: the ones whose deltas drive rounds."""
    return [n for n in st.relations if any(r.head == n for r in st.delta_rules)]


class NoFixpoint(Exception):
    """The iteration limit was reached; `sizes`: the last deltas' sizes."""

    def __init__(self, sizes: dict):
        super().__init__(f"no fixpoint; last deltas: {sizes}")
        self.sizes = sizes


@dataclass
class Fixpoint:
    full: dict  # relation -> what it holds at the end
    rounds: list = field(default_factory=list)  # (seconds, {relation: delta size}) per round, from 1
    stopped: Optional[str] = None  # why a size limit ended the recursion early
    # with `route`: relation -> the tuples each round handed elsewhere (new there, maybe)
    sent: dict = field(default_factory=dict)
    # with `budget`: relation -> the last delta, not yet read by a round, when the budget ran out
    pending: Optional[dict] = None


def fixpoint(st: Stratum, storages: dict, tables: Tables, start: dict, sizes: dict, derive: Callable, *,
             max_iterations: Optional[int], on_round: Optional[Callable] = None,
             delta: Optional[dict] = None, route: Optional[Callable] = None,
             budget: Optional[int] = None) -> Fixpoint:
    """Run the rounds of a recursive stratum from `start` (relation -> its tuples after
    the init rules; `sizes`: how many each delta holds). `derive(name, read)` -> the bag
    of what the delta rules of `name` derive this round, reading each atom's relation
    through `read(step)` (the relation so far, or its last delta for a delta atom), or
    None when no rule derives anything. `on_round(i, sizes, seconds)` follows each round.

    One partition of a stratum run in rounds (`runtime/rounds.py`) uses three more:
    `delta` (relation -> the first delta, when it is not all of `start`), `route(name,
    delta)` -> (the tuples this partition owns, the tuples it hands on: `sent`), and
    `budget`, the most rounds to run before returning with the unread delta (`pending`).
    The semantics of a round is this function's, whoever owns the tuples."""
    full = dict(start)
    delta = dict(start) if delta is None else {n: delta.get(n, start[n]) for n in start}
    sizes = {**sizes, **subsume(tables, st.relations, storages, full, delta, derive)}
    growing = looping(st)
    limits = {n: storages[n].limit for n in st.relations if storages[n].limit is not None}
    held = {n: sizes.get(n, 0) for n in limits}
    out = Fixpoint(full)

    def read(step):
        return delta[step.relation] if step.delta else full[step.relation]

    iteration = 0
    while any(sizes.get(n, 0) for n in growing):
        if budget is not None and iteration >= budget:
            out.pending = {n: delta[n] for n in growing if sizes.get(n, 0)}
            break
        reached = [n for n, limit in limits.items() if held[n] >= limit]
        if reached:  # Soufflé's rule: before a round, once R holds N tuples
            out.stopped = (f"stratum {st.index} stopped after {plural(iteration, 'round')}: " + ", ".join(
                f"{n} holds {plural(held[n], 'tuple')} (.limitsize {n}(n={limits[n]}))" for n in reached))
            break
        iteration += 1
        if max_iterations is not None and iteration > max_iterations:
            raise NoFixpoint(sizes)
        t0 = time.perf_counter()
        new = {}
        for n in growing:
            s = storages[n]
            cand = derive(n, read)
            new[n] = tables.hold(s, new_delta(tables, s, full[n], cand)) if cand is not None else \
                tables.cleared(s, delta[n])
            if route is not None:
                new[n], away = route(n, new[n])
                out.sent.setdefault(n, []).append(away)
        sizes = tables.count(new)
        for n in st.relations:
            s = storages[n]
            if n in new:
                delta[n] = tables.settle(s, new[n])
                full[n] = absorb(tables, s, full[n], delta[n])
            else:
                delta[n] = tables.cleared(s, delta[n])
        sizes = {**sizes, **subsume(tables, st.relations, storages, full, delta, derive)}
        for n in limits:  # a set gains its delta; what a grouped or keyed relation holds is counted
            s = storages[n]
            held[n] = held[n] + sizes.get(n, 0) if kind(s) in ("set", "numbered") and not s.dominated else \
                tables.count({n: full[n]})[n]
        seconds = time.perf_counter() - t0
        out.rounds.append((seconds, sizes))
        if on_round is not None:
            on_round(iteration, sizes, seconds)
    return out


def no_fixpoint_error(st: Stratum, storages: dict, sizes: dict, max_iterations: int) -> EvitaError:
    """The diagnostic for a stratum that did not converge, the same for every strategy."""
    growing = [n for n, v in sizes.items() if v]
    # autoinc(): its numbers make every tuple new, so a rule of it is the likelier cause
    numbering = [n for n in st.relations if kind(storages[n]) == "numbered"]
    rule = next((r for r in st.delta_rules if r.head in numbering), None) or \
        next((r for r in st.delta_rules if r.head in growing), None)
    span = rule.span if rule else S.NOWHERE
    hint = ("a rule may build ever new values (unbounded arithmetic, growing lists); bound it, "
            "or raise the limit with --max-iterations")
    if numbering:
        hint = ("autoinc() gives each new binding of its rule a fresh number, so the tuples it derives are "
                "always new, and a recursion that reads them back ends only when no new binding comes (Soufflé's "
                "does not end either); bound it with a condition (x < 100), or number the relation in a later "
                "stratum: q(x, autoinc()) :- p(x).")
    return EvitaError([Diagnostic(
        "no-fixpoint",
        f"stratum {st.index} did not reach a fixpoint within {plural(max_iterations, 'iteration')}: "
        + ", ".join(f"{n} still gains {plural(sizes[n], 'tuple')}" for n in growing)
        + (f" (rule {rule.rule}" + (f", as {rule.name}" if rule.name != rule.rule else "") + ")" if rule else ""),
        span, "autoinc" if numbering else growing[0] if growing else "", hint)])
