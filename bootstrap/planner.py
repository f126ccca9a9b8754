"""The planner: a program (as decoded from the catalog) -> a physical dataflow.

This is the bootstrap path, as P2's first compiler took it: the planner stratifies the
program, differentiates rules into event-condition-action form itself (seed 002 §3.2:
one ECA rule per body atom whose relation changes within the stratum, driven by that
relation's delta), and keeps each body in the order written. When a later stage has
already marked delta atoms (`Atom.delta`), those rules are taken as given.

It also decides when a recursive stratum is decomposable (seed 003 §3, seed 001): linear
recursion whose recursive relation keeps one column unchanged from body to head can be
partitioned on that column, the other relations replicated, and each partition run to
its own fixpoint without coordination. That decision belongs to a partitioning stage
later; the dataflow carries it (`Stratum.local`) so the runtime does not care who made it.

>>> from evita.bootstrap.syntax import Atom, Rule, Var, Program
>>> X, Y, Z = Var("X"), Var("Y"), Var("Z")
>>> tc = Program("tc", (
...     Rule("r1", Atom("tc", (X, Y)), (Atom("edge", (X, Y)),)),
...     Rule("r2", Atom("tc", (X, Z)), (Atom("tc", (X, Y)), Atom("edge", (Y, Z)))),
... ))
>>> df = plan(tc)
>>> [r.name for r in df.strata[0].delta_rules]
['r2_d1']
>>> df.strata[0].local.partition
(0,)
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Optional

from ..runtime.dataflow import (
    Aggregation, Dataflow, LocalPlan, RulePlan, Step, Storage, Stratum, term_text,
)
from . import syntax as S
from .diagnostics import Diagnostic, EvitaError

PREMAPPABLE = ("min", "max")
DELETION_SUFFIX = "#delete"


def deletion_relation(relation: str) -> str:
    """The relation that collects a `delete` rule's tuples until the timestep ends."""
    return relation + DELETION_SUFFIX


def plan(program: S.Program, *, methods: Optional[dict] = None) -> Dataflow:
    """Plan `program`. `methods` maps (rule label, body position) to a join method, the
    hook through which a System R / Cascades stage will pass its choices."""
    from .differentiate import differentiate

    if not any(isinstance(l, S.Atom) and l.delta for r in program.rules for l in r.body):
        program = differentiate(program)  # no delta stage ran: the bootstrap path
    return _Planner(program, methods or {}).run()


class _Planner:
    def __init__(self, program: S.Program, methods: dict):
        self.program = program
        self.methods = methods
        self.diags: list = []

    def fail(self, code, message, span, text="", hint=""):
        self.diags.append(Diagnostic(code, message, span or S.NOWHERE, text, hint))

    def raise_if_failed(self):
        if self.diags:
            raise EvitaError(self.diags, source=self.program.text)

    # ------------------------------------------------------------ main

    def run(self) -> Dataflow:
        prog = self.program
        rules = [r for r in prog.rules if r.time != "next"]
        deferred = tuple(r.name for r in prog.rules if r.time == "next")
        relations = self.relations(prog, rules)
        self.raise_if_failed()
        self.aggregations(rules, relations)
        self.raise_if_failed()

        heads = defaultdict(list)
        for r in rules:
            heads[self.head_of(r)].append(r)
        graph = self.dependency_graph(rules)
        sccs = _tarjan([n for n in relations if n in heads], graph)
        scc_of = {n: i for i, comp in enumerate(sccs) for n in comp}
        self.check_stratified(sccs, scc_of, graph, relations)
        self.raise_if_failed()

        # One stratum per level of the condensed graph: SCCs at the same level do not
        # depend on each other, so one semi-naive loop (one Spark action per iteration)
        # serves them all.
        level: dict = {}
        for i, comp in enumerate(sccs):  # Tarjan emits dependencies first
            deps = [scc_of[b] for h in comp for (b, _, _) in graph.get(h, ()) if b in scc_of and scc_of[b] != i]
            level[i] = 1 + max((level[d] for d in deps), default=-1)
        order = list(relations)
        strata = []
        for lv in sorted(set(level.values())):
            members = sorted((n for i, comp in enumerate(sccs) if level[i] == lv for n in comp), key=order.index)
            recursive = any(self.is_recursive(sccs[scc_of[n]], graph) for n in members)
            strata.append(self.stratum(len(strata), members, recursive, heads, relations))
        for st in strata:
            for n in st.relations:
                relations[n].stratum = st.index
        self.storage_hints(strata, relations)
        facts = self.facts(prog, relations)
        self.raise_if_failed()
        queries = tuple(q.atom for q in prog.of(S.Query))
        return Dataflow(prog.name, relations, facts, strata, queries, deferred)

    def head_of(self, rule: S.Rule) -> str:
        return deletion_relation(rule.head.relation) if rule.delete else rule.head.relation

    # ------------------------------------------------------------ relations

    def relations(self, prog: S.Program, rules: list) -> dict:
        arity: dict = {}
        where: dict = {}
        decl: dict = {}

        def see(name, n, span, text):
            if name in arity and arity[name] != n:
                self.fail("arity", f"relation {name} is used with {n} arguments here but {arity[name]} "
                          f"at {where[name]}", span, text, f"give every use of {name} {arity[name]} arguments")
            arity.setdefault(name, n)
            where.setdefault(name, span)

        for st in prog.statements:
            if isinstance(st, S.Declaration):
                see(st.relation, len(st.columns), st.span, st.relation)
                decl[st.relation] = st
        keys: dict = {}
        for m in prog.of(S.Materialize):
            keys[m.relation] = tuple(m.keys)
        for st in prog.statements:
            if isinstance(st, S.Fact):
                see(st.atom.relation, st.atom.arity, st.span, term_text(st.atom))
            elif isinstance(st, S.Rule) and st.time != "next":
                see(st.head.relation, st.head.arity, st.head.span, term_text(st.head))
                for lit in st.body:
                    if isinstance(lit, S.Atom):
                        see(lit.relation, lit.arity, lit.span, term_text(lit))
            elif isinstance(st, S.Query):
                see(st.atom.relation, st.atom.arity, st.span, term_text(st.atom))
        io = {(d.direction, d.relation) for d in prog.of(S.IODirective)}
        for direction, rel in sorted(io):
            if rel not in arity:
                self.fail("unknown-relation", f".{direction} names {rel}, which no declaration, fact or rule "
                          "mentions", S.NOWHERE, rel, f"declare it: .decl {rel}(...)")
        derived = {r.head.relation for r in rules if not r.delete}
        out: dict = {}
        for name, n in arity.items():
            d = decl.get(name)
            cols = tuple(c.name for c in d.columns) if d else tuple(f"c{i}" for i in range(n))
            types = tuple(c.type for c in d.columns) if d else ("any",) * n
            k = keys.get(name, d.keys if d else None)
            if k is not None and (len(k) == 0 or set(k) == set(range(n))):
                k = None  # a key over every column is plain set semantics
            out[name] = Storage(name, n, cols, types, "derived" if name in derived else "base", k,
                                input=("input", name) in io, output=("output", name) in io)
        for r in rules:
            if r.delete:
                base = out[r.head.relation]
                name = deletion_relation(base.name)
                out.setdefault(name, Storage(name, base.arity, base.columns, base.types, "deletion"))
        return out

    def aggregations(self, rules: list, relations: dict):
        by_rel = defaultdict(list)
        for r in rules:
            by_rel[self.head_of(r)].append(r)
        for name, rs in by_rel.items():
            shapes = {tuple((i, a.func) for i, a in enumerate(r.head.args) if isinstance(a, S.Aggregate)) for r in rs}
            agg_shapes = {s for s in shapes if s}
            if not agg_shapes:
                continue
            if len(agg_shapes) > 1:
                r = next(r for r in rs if r.head.args and any(isinstance(a, S.Aggregate) for a in r.head.args))
                self.fail("aggregate-mismatch", f"the rules deriving {name} aggregate different columns or with "
                          f"different functions", r.span, term_text(r.head),
                          "give every rule of a relation the same aggregates in the same positions")
                continue
            shape = next(iter(agg_shapes))
            if () in shapes and not all(f in PREMAPPABLE for _, f in shape):
                r = next(r for r in rs if not any(isinstance(a, S.Aggregate) for a in r.head.args))
                self.fail("aggregate-mismatch", f"rule {r.name} derives {name} without the aggregate the other "
                          "rules of it use", r.span, term_text(r.head),
                          "only min and max aggregates may be mixed with plain rules")
                continue
            relations[name].aggregates = tuple(Aggregation(i, f) for i, f in shape)
            relations[name].keys = None

    # ------------------------------------------------------------ stratification

    def dependency_graph(self, rules: list) -> dict:
        """head -> [(body relation, label, rule)], label 'pos', 'neg' or an aggregate function."""
        graph = defaultdict(list)
        for r in rules:
            aggs = [a.func for a in r.head.args if isinstance(a, S.Aggregate)]
            for lit in r.body:
                if isinstance(lit, S.Atom):
                    label = "neg" if lit.negated else (aggs[0] if aggs else "pos")
                    graph[self.head_of(r)].append((lit.relation, label, (r, lit)))
        return graph

    @staticmethod
    def is_recursive(comp: list, graph: dict) -> bool:
        members = set(comp)
        return len(comp) > 1 or any(b in members for h in comp for (b, _, _) in graph.get(h, ()))

    def check_stratified(self, sccs, scc_of, graph, relations):
        for i, comp in enumerate(sccs):
            members = set(comp)
            for head in comp:
                for body, label, (rule, atom) in graph.get(head, ()):
                    if body not in members or label == "pos":
                        continue
                    if label in PREMAPPABLE:
                        agg = relations[head].aggregates
                        if len(agg) == 1:
                            relations[head].aggregates = (Aggregation(agg[0].column, agg[0].func, True),)
                            continue
                        why = "more than one aggregate column inside recursion"
                    elif label == "neg":
                        why = f"negation of {body}"
                    else:
                        why = f"the {label} aggregate (only min and max may sit inside recursion)"
                    cycle = _cycle(head, body, graph, members)
                    where = "; ".join(f"{a} -> {b} in rule {r.name} at {r.span}" for a, b, r in cycle)
                    names = " -> ".join([c[0] for c in cycle] + [cycle[0][0]])
                    self.fail("unstratifiable", f"relation cycle {names} goes through {why} ({where})",
                              atom.span if atom.span != S.NOWHERE else rule.span, term_text(atom),
                              "a relation may not depend on its own negation or count/sum/avg/set/list "
                              "aggregate; split the recursion into strata")

    # ------------------------------------------------------------ rules -> ECA plans

    def stratum(self, index, members, recursive, heads, relations) -> Stratum:
        here = set(members)
        init, delta = [], []
        once = set()  # ECA rules driven from a lower stratum run once, when the stratum starts

        def plain(rule):
            # The rule's meaning: order and delta marks aside.
            return rule.head, frozenset(replace(l, delta=False) if isinstance(l, S.Atom) else l for l in rule.body)

        def driver_of(rule):
            return next((l for l in rule.body if isinstance(l, S.Atom) and l.delta), None)

        # Rules with a sibling driven by this stratum's own delta: those siblings see every
        # tuple of the stratum, so a sibling driven from below adds nothing.
        covered = {plain(r) for n in members for r in heads[n]
                   if driver_of(r) is not None and driver_of(r).relation in here}
        for name in members:
            for rule in heads[name]:
                marked = [i for i, l in enumerate(rule.body) if isinstance(l, S.Atom) and l.delta]
                if marked:  # ECA form (from the delta stage or the bootstrap differentiation)
                    driver = rule.body[marked[0]]
                    if driver.relation in here:
                        delta.append(self.rule_plan(rule, rule.name, marked[0], relations))
                        continue
                    # Its delta is the whole lower relation: the rule is an ordinary join, and
                    # its siblings driven by other lower relations compute the same join.
                    if plain(rule) in once or plain(rule) in covered:
                        continue
                    once.add(plain(rule))
                    if not any(isinstance(l, S.Atom) and not l.negated and l.relation in here for l in rule.body):
                        init.append(self.rule_plan(rule, rule.name, None, relations))
                        continue
                    # hand-written, and it reads the stratum: differentiate it as below
                    rule = replace(rule, body=tuple(replace(l, delta=False) if isinstance(l, S.Atom) else l
                                                    for l in rule.body))
                rec = [i for i, l in enumerate(rule.body)
                       if isinstance(l, S.Atom) and not l.negated and l.relation in here]
                if not rec:
                    init.append(self.rule_plan(rule, rule.name, None, relations))
                for i in rec:
                    delta.append(self.rule_plan(rule, f"{rule.name}_d{i + 1}", i, relations))
        return Stratum(index, tuple(members), recursive, tuple(init), tuple(delta))

    def rule_plan(self, rule: S.Rule, name: str, driver: Optional[int], relations) -> RulePlan:
        lits = list(rule.body)
        if driver is not None:  # the event drives the pipeline: it goes first
            lits = [lits[driver]] + lits[:driver] + lits[driver + 1:]
        positive_vars = set()
        for l in rule.body:
            if isinstance(l, S.Atom) and not l.negated:
                positive_vars |= set(S.atom_vars(l))
            elif isinstance(l, S.Assign):
                positive_vars.add(l.var.name)
        bound: set = set()
        steps: list = []
        pending: list = []

        def ready(l) -> bool:
            if isinstance(l, S.Atom):
                return set(S.atom_vars(l)) & positive_vars <= bound
            if isinstance(l, S.Assign):
                return set(S.term_vars(l.expr)) <= bound
            return set(S.term_vars(l.expr)) <= bound

        def emit(l, force=False):
            if isinstance(l, S.Atom):
                keys = tuple(v for v in S.atom_vars(l) if v in bound)
                if l.negated:
                    op = "antijoin"
                else:
                    op = "scan" if not steps else "join"
                    bound.update(S.atom_vars(l))
                pos = rule.body.index(l) + 1
                method = self.methods.get((rule.name, pos), "")
                is_driver = driver is not None and l is rule.body[driver]
                steps.append(Step(op, l.relation, l.args, is_driver, keys, method, span=l.span))
            elif isinstance(l, S.Assign):
                if l.var.name in bound:  # already bound: the assignment is a test
                    steps.append(Step("filter", expr=S.BinOp("==", l.var, l.expr), span=l.span))
                else:
                    steps.append(Step("assign", expr=l.expr, var=l.var.name, span=l.span))
                    bound.add(l.var.name)
            else:
                steps.append(Step("filter", expr=l.expr, span=l.span))

        def flush():
            progress = True
            while progress:
                progress = False
                for l in list(pending):
                    if ready(l):
                        pending.remove(l)
                        emit(l)
                        progress = True

        for l in lits:
            if isinstance(l, S.Atom) and not l.negated:
                emit(l)
            else:
                pending.append(l)
            flush()
        for l in pending:  # unsafe rules are the static checks' business; keep them visible
            emit(l)
        driven = rule.body[driver].relation if driver is not None else None
        return RulePlan(name, rule.name, self.head_of(rule), rule.head.args, tuple(steps), driven,
                        rule.delete, rule.span)

    # ------------------------------------------------------------ storage and decomposition

    def storage_hints(self, strata: list, relations: dict):
        uses = defaultdict(int)
        for st in strata:
            for r in st.init_rules + st.delta_rules:
                for s in r.steps:
                    if s.relation:
                        uses[s.relation] += 1
        # Cache what is read more than once, and what a loop reads every iteration.
        for name, s in relations.items():
            s.cached = uses[name] > 1
        for st in strata:
            if st.recursive:
                for n in st.relations:
                    relations[n].cached = True
        for st in strata:
            lp = self.decomposition(st, relations)
            if lp is None:
                continue
            st.local = lp
            relations[lp.relation].partition = lp.partition
            for rel in lp.replicated:
                relations[rel].broadcast = True
            st.delta_rules = tuple(
                RulePlan(r.name, r.rule, r.head, r.head_args,
                         tuple(s if s.delta or s.op not in ("join", "antijoin") or s.method
                               else Step(s.op, s.relation, s.args, s.delta, s.keys, "broadcast", span=s.span)
                               for s in r.steps),
                         r.driven_by, r.delete, r.span)
                for r in st.delta_rules)

    def decomposition(self, st: Stratum, relations: dict) -> Optional[LocalPlan]:
        """Linear recursion over one relation that carries a column unchanged from the
        recursive atom to the head: partition on it (a discriminating set, seed 003)."""
        looping = sorted({r.head for r in st.delta_rules})
        if not st.recursive or len(looping) != 1:
            return None  # the other relations of the stratum are non-recursive: run once
        rel = looping[0]
        store = relations[rel]
        if store.keys is not None or store.kind != "derived":
            return None
        if any(a.func not in PREMAPPABLE for a in store.aggregates):
            return None
        candidates = None
        replicated: list = []
        for r in st.delta_rules:
            atoms = [s for s in r.steps if s.op in ("scan", "join") and s.relation == rel]
            if len(atoms) != 1 or not atoms[0].delta or r.aggregates and not store.aggregates:
                return None
            drv = atoms[0]
            keep = {i for i, (h, b) in enumerate(zip(r.head_args, drv.args))
                    if isinstance(h, S.Var) and isinstance(b, S.Var) and h.name == b.name}
            candidates = keep if candidates is None else candidates & keep
            for s in r.steps:
                if s.relation and s.relation != rel and s.relation not in replicated:
                    replicated.append(s.relation)
        # Seed 003, Theorem 1: with min/max inside recursion the partition column must be
        # among the group-by columns.
        candidates = {c for c in (candidates or ()) if c in store.group_columns}
        if not candidates:
            return None
        p = min(candidates)
        return LocalPlan(rel, (p,), tuple(replicated),
                         f"linear recursion keeps column #{p} of {rel} from body to head")

    # ------------------------------------------------------------ facts

    def facts(self, prog: S.Program, relations: dict) -> tuple:
        out = []
        for f in prog.facts:
            try:
                out.append((f.atom.relation, tuple(const_value(a) for a in f.atom.args)))
            except ValueError as e:
                self.fail("fact-not-ground", f"fact of {f.atom.relation} has a non-constant argument {e}",
                          f.span, term_text(f.atom), "facts hold constants only")
        return tuple(out)


def const_value(t):
    """The Python value of a ground term (constants, lists, negated numbers)."""
    if isinstance(t, S.Const):
        if t.type == S.INFINITY:
            return float("inf")
        return t.value
    if isinstance(t, S.ListExpr):
        return [const_value(a) for a in t.items]
    if isinstance(t, S.UnOp) and t.op == "-":
        return -const_value(t.arg)
    raise ValueError(term_text(t))


def _tarjan(nodes: list, graph: dict) -> list:
    """Strongly connected components, each after the components it depends on."""
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
