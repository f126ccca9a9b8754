"""Stratification: the relation dependency graph, its strongly connected components, and
the two checks that belong to them (no negation or non-monotone aggregate inside a
cycle; one aggregate shape per relation).

The static checks (`checks.py`) report these before anything reaches the catalog, so
`evita check` rejects what a compile would; the planner reuses the same graph to cut a
program into strata and never meets an unstratifiable program.

Rules writing the catalog (`sys::T` or `stage::` heads, in stages) are left out of the
graph: their rows are applied after the stage's fixpoint and never read back by it.

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program("r1 p(X) :- q(X), !p(X).", "bad.olg")
>>> [d.code for d in diagnose(p)]
['unstratifiable']
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Iterator

from ..runtime.dataflow import deletion_relation, term_text
from . import syntax as S
from .diagnostics import Diagnostic

PREMAPPABLE = ("min", "max", "umin", "umax")  # umin, umax: lowering/unsigned.py; aggregates that may sit inside recursion (PreM, seed 003)
# ... and autoinc<*>: a group keeps the number it is first given, so recursion only adds
# groups (Soufflé's autoinc() inside recursion, bootstrap/parser.py)
IN_RECURSION = PREMAPPABLE + S.NUMBERING
WRITES = ("sys::", "stage::")


def head_of(rule: S.Rule) -> str:
    return deletion_relation(rule.head.relation) if rule.delete else rule.head.relation


def same_timestep(program: S.Program, writes: bool = False) -> list:
    """The rules of one fixpoint: not @next, and unless `writes`, not writing the catalog
    (a stage as written; the planner sees stages with their writes renamed, `stage.py`)."""
    return [r for r in program.rules if r.time != "next" and (writes or not r.head.relation.startswith(WRITES))]


def body_atoms(literals, within=None) -> Iterator[tuple]:
    """(atom, aggregate) for each atom a rule body reads: its atom literals (aggregate
    None) and the atoms of an aggregate body nested in any literal (Soufflé's
    `count : { ... }`, the aggregate's function; the parser lowers these to helper rules,
    so only a program built in Python meets one)."""
    from .lowering.aggregates import aggregate_terms

    for lit in literals:
        if isinstance(lit, S.Atom):
            yield lit, within
        for agg in aggregate_terms(lit):
            yield from body_atoms(agg.body, agg.func)
            if agg.expr is not None:
                yield from body_atoms((agg.expr,), agg.func)


@dataclasses.dataclass(frozen=True)
class Reads:
    """What one rule reads, as relations: `positive` its positive atoms (the rule derives
    nothing while one of them is empty), `negative` its negated atoms, `aggregated` the
    atoms of a nested aggregate body (an empty one still gives `count` 0)."""
    rule: S.Rule
    head: str  # `head_of`: the relation its tuples go to
    positive: frozenset
    negative: frozenset
    aggregated: frozenset
    atoms: tuple  # (atom, the function of the aggregate body it sits in, or None)

    @property
    def relations(self) -> frozenset:
        return self.positive | self.negative | self.aggregated


def rule_reads(rules: list) -> list:
    """Per rule, in order, what it reads (`Reads`): the one relation graph of the strata,
    the checks and the Dedalus runners' choice of rules per timestep (`runtime/fired.py`)."""
    out = []
    for r in rules:
        atoms = tuple(body_atoms(r.body))
        out.append(Reads(r, head_of(r),
                         frozenset(a.relation for a, agg in atoms if agg is None and not a.negated),
                         frozenset(a.relation for a, agg in atoms if agg is None and a.negated),
                         frozenset(a.relation for a, agg in atoms if agg is not None), atoms))
    return out


def dependency_graph(rules: list) -> dict:
    """head -> [(body relation, label, (rule, atom))]; label 'pos', 'neg' or an aggregate
    (the head's, or that of the aggregate body the atom sits in)."""
    graph = defaultdict(list)
    for reads in rule_reads(rules):
        aggs = [a.func for a in reads.rule.head.args if isinstance(a, S.Aggregate)]
        for atom, within in reads.atoms:
            label = within or ("neg" if atom.negated else (aggs[0] if aggs else "pos"))
            graph[reads.head].append((atom.relation, label, (reads.rule, atom)))
    return graph


def aggregate_shape(rule: S.Rule) -> tuple:
    return tuple((i, a.func) for i, a in enumerate(rule.head.args) if isinstance(a, S.Aggregate))


def components(nodes: list, graph: dict) -> list:
    """Strongly connected components (Tarjan), each after the components it depends on."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list = []
    node_set = set(nodes)

    def succ(n):
        return [b for (b, _, _) in graph.get(n, ()) if b in node_set]

    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            n, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(succ(nxt))))
                elif nxt in on:
                    low[n] = min(low[n], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[n])
            if low[n] == index[n]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == n:
                        break
                out.append(sorted(comp, key=nodes.index))
    return out


def is_recursive(comp: list, graph: dict) -> bool:
    members = set(comp)
    return len(comp) > 1 or any(b in members for h in comp for (b, _, _) in graph.get(h, ()))


def premappable(comp: list, graph: dict, shapes: dict) -> set:
    """Relations of `comp` whose one min/max aggregate sits inside the recursion."""
    members = set(comp)
    return {h for h in comp for (b, label, _) in graph.get(h, ())
            if b in members and label in PREMAPPABLE and len(shapes.get(h, ())) == 1}


# ---------------------------------------------------------------- the checks

def diagnose(program: S.Program) -> list:
    rules = same_timestep(program)
    if _dedalus(program):
        # Dedalus: a message arrives at a later timestep, so an @async rule is no edge of the
        # timestep's fixpoint (the tick program derives __send_r, runtime/dedalus.py); a quorum
        # count over replies that leads to the next request is no cycle
        rules = [r for r in rules if r.time != "async"]
    from .prem import prem_diagnostics

    return list(_aggregate_shapes(rules)) + list(_stratification(rules)) + prem_diagnostics(program)


def limitsize_without_effect(program: S.Program) -> list:
    """Warnings for `.limitsize R` where no recursion derives R: as in Soufflé, the limit
    is checked between the rounds of a recursion only, so it changes nothing there."""
    rules = same_timestep(program)
    graph = dependency_graph(rules)
    heads = list(dict.fromkeys(head_of(r) for r in rules))
    recursive = {n for comp in components(heads, graph) if is_recursive(comp, graph) for n in comp}
    return [Diagnostic("limitsize", f".limitsize {d.relation} has no effect: no recursion derives {d.relation}",
                       d.span, ".limitsize", "Soufflé checks a size limit between the rounds of a recursion only, "
                       "and so does Evita; every tuple of this relation is kept", severity="warning")
            for d in program.of(S.IODirective) if d.direction == "limitsize" and d.relation not in recursive]


def _dedalus(program: S.Program) -> bool:
    return bool(program.of(S.Component)) or any(r.time for r in program.rules)


def one_timestep(program: S.Program) -> list:
    """`evita run` evaluates a Dedalus program as one timestep in which every @async message
    is delivered at once: the cycles through negation or aggregation that only a message's
    delay breaks (`diagnose` accepts them) have no fixpoint there."""
    if not _dedalus(program):
        return []
    return [dataclasses.replace(d, message=d.message + " when messages are delivered in the timestep they are sent",
                                hint="the program is stratified only with Dedalus time: run it with evita run --steps N "
                                     "or evita simulate")
            for d in _stratification(same_timestep(program))]


def relation_shapes(rules: list) -> dict:
    """relation -> its aggregate shape ((column, function), ...), for aggregated relations."""
    out = {}
    for r in rules:
        if aggregate_shape(r):
            out.setdefault(head_of(r), aggregate_shape(r))
    return out


def _aggregate_shapes(rules: list) -> Iterator[Diagnostic]:
    by_rel = defaultdict(list)
    for r in rules:
        by_rel[head_of(r)].append(r)
    for name, rs in by_rel.items():
        shapes = {aggregate_shape(r) for r in rs}
        agg_shapes = {s for s in shapes if s}
        if len(agg_shapes) > 1:
            r = next(r for r in rs if aggregate_shape(r))
            yield Diagnostic("aggregate-mismatch", f"the rules deriving {name} aggregate different columns or with "
                             "different functions", r.span, term_text(r.head),
                             "give every rule of a relation the same aggregates in the same positions")
        elif agg_shapes and () in shapes and not all(f in PREMAPPABLE for _, f in next(iter(agg_shapes))):
            r = next(r for r in rs if not aggregate_shape(r))
            yield Diagnostic("aggregate-mismatch", f"rule {r.name} derives {name} without the aggregate the other "
                             "rules of it use", r.span, term_text(r.head),
                             "only min and max aggregates may be mixed with plain rules")


def _stratification(rules: list) -> Iterator[Diagnostic]:
    graph = dependency_graph(rules)
    shapes = relation_shapes(rules)
    heads = list(dict.fromkeys(head_of(r) for r in rules))
    for comp in components(heads, graph):
        members = set(comp)
        for head in comp:
            for body, label, (rule, atom) in graph.get(head, ()):
                if body not in members or label == "pos":
                    continue
                if label in IN_RECURSION and len(shapes.get(head, ())) == 1:
                    continue
                if label in IN_RECURSION:
                    why = "more than one aggregate column inside recursion"
                elif label == "neg":
                    why = f"negation of {body}"
                else:
                    why = f"the {label} aggregate (only min, max and autoinc may sit inside recursion)"
                cycle = _cycle(head, body, graph, members)
                where = "; ".join(f"{a} -> {b} in rule {r.name} at {r.span}" for a, b, r in cycle)
                names = " -> ".join([c[0] for c in cycle] + [cycle[0][0]])
                yield Diagnostic("unstratifiable", f"relation cycle {names} goes through {why} ({where})",
                                 atom.span if atom.span != S.NOWHERE else rule.span, term_text(atom),
                                 "a relation may not depend on its own negation or count/sum/avg/set/list "
                                 "aggregate; split the recursion into strata")


def _cycle(head: str, body: str, graph: dict, members: set) -> list:
    """The edges (from, to, rule) of a cycle that uses `body` -> `head`, in data-flow
    order: body feeds head, head feeds ..., ... feeds body again."""
    first_rule = next(r for (b, _, (r, _)) in graph[head] if b == body)
    prev = {body: None}  # relation -> (relation it feeds, rule), searched backwards from body
    queue = [body]
    while queue and head not in prev:
        n = queue.pop(0)
        for b, _, (rule, _) in graph.get(n, ()):
            if b in members and b not in prev:
                prev[b] = (n, rule)
                queue.append(b)
    edges = [(body, head, first_rule)]
    node = head
    while node != body and prev.get(node):
        fed, rule = prev[node]
        edges.append((node, fed, rule))
        node = fed
    return edges
