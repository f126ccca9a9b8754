"""The planner: a program as the stages left it in the catalog -> a physical dataflow.

The planner is a reader. It stratifies (`strata.py`), keeps every rule body in the order
of the catalog's positions, and copies the physical decisions stages wrote
(`Program.physical`, decoded from the catalog): which atom's delta drives a rule
(`predicate.delta`, from `stages/delta.dl`), join methods (`predicate.method`), how a
relation is placed and cached (`relation.distribution`, `relation.cached`,
`partition_column`) and how a recursive stratum runs (`stratum`, from
`stages/partition.dl`, `stages/cache.dl`). Where no stage decided, one default each, documented in
`docs/runtime.md`: no hint (Spark chooses by size), nothing cached, the distributed
semi-naive loop; and a rule that reads its own stratum without a delta atom is
evaluated in full every iteration (naive, still correct).

Selections and assignments are placed where their variables are first bound: their
place in the pipeline does not change the result, only whether it can be computed.

>>> from evita.bootstrap.parser import parse_program
>>> df = plan(parse_program("r1 tc(X, Y) :- e(X, Y).\\nr2 tc(X, Z) :- delta tc(X, Y), e(Y, Z)."))
>>> [(r.name, r.driven_by) for r in df.strata[0].delta_rules], df.strata[0].strategy
([('r2', 'tc')], 'distributed')
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace
from typing import Optional

from ..runtime.dataflow import (
    DELETION_SUFFIX, Aggregation, Dataflow, RoundsPlan, RulePlan, Step, Storage, Stratum, deletion_relation,
    term_text,
)
from ..runtime.inputs import size_limits
from . import numbers
from . import strata as G
from . import syntax as S
from .diagnostics import Diagnostic, EvitaError, plural
from .lowering.division import whole_divisions
from .lowering.unsigned import unsigned_order
from .lowering.width import at_width
from .lowering.conversions import spelled_numbers
from .lowering.symbols import joined_symbols
from .ranges import is_range
from .types import TypeSystem

__all__ = ["plan", "plan_catalog", "const_value", "deletion_relation", "DELETION_SUFFIX"]


def plan(program: S.Program) -> Dataflow:
    """Plan `program` (checked: `checks.check_program` has passed)."""
    return _Planner(program).run()


def plan_catalog(rows, program_id: str) -> Dataflow:
    """The dataflow of a program stored in the catalog: a function of the rows alone."""
    from evita.catalog.decode import decode

    return plan(decode(rows, program_id))


class _Planner:
    def __init__(self, program: S.Program):
        self.program = program
        phys = program.physical
        self.methods = dict(phys.methods)
        self.distribution = dict(phys.distribution)
        self.partition = dict(phys.partition)
        self.strategy = {rel: (how, why) for rel, how, why in phys.strategy}
        self.local_iterations = dict(phys.local_iterations)
        self.copies = dict(phys.copies)
        self.diags: list = []

    def fail(self, code, message, span, text="", hint=""):
        self.diags.append(Diagnostic(code, message, span or S.NOWHERE, text, hint))

    def raise_if_failed(self):
        if self.diags:
            raise EvitaError(self.diags, source=self.program.text)

    # ------------------------------------------------------------ main

    def run(self) -> Dataflow:
        prog = self.program
        rules = joined_symbols(G.same_timestep(prog, writes=True), prog)  # Soufflé 2.4's `+` on symbols
        rules = whole_divisions(rules, prog)  # Soufflé's `/` on numbers
        rules = unsigned_order(rules, prog)  # unsigned values ordered and divided as unsigned
        rules = at_width(rules, prog)  # wrap around at 32 bits (--number-bits 32)
        rules = spelled_numbers(rules, prog)  # to_number of text spelling no number: no tuple
        deferred = tuple(r.name for r in prog.rules if r.time == "next")
        relations = self.relations(prog, rules)
        self.raise_if_failed()
        shapes = G.relation_shapes(rules)
        for name, shape in shapes.items():
            relations[name].aggregates = tuple(Aggregation(i, f) for i, f in shape)
            relations[name].keys = None

        heads = defaultdict(list)
        for r in rules:
            heads[G.head_of(r)].append(r)
        graph = G.dependency_graph(rules)
        pruning = self.subsumption(relations, graph)
        # a relation with subsumption gets a stratum even when only facts or inputs fill it
        # (and a relation with a choice-domain: its facts and inputs are chosen among too)
        sccs = G.components([n for n in relations if (n in heads or relations[n].dominated or relations[n].choice)
                             and n not in pruning], graph)
        scc_of = {n: i for i, comp in enumerate(sccs) for n in comp}
        for comp in sccs:
            for name in G.premappable(comp, graph, shapes):
                agg = relations[name].aggregates[0]
                relations[name].aggregates = (Aggregation(agg.column, agg.func, True),)

        # One stratum per level of the condensed graph: SCCs at the same level do not
        # depend on each other, so one semi-naive loop (one Spark action per iteration)
        # serves them all.
        level: dict = {}
        for i, comp in enumerate(sccs):  # dependencies come first
            deps = [scc_of[b] for h in comp for (b, _, _) in graph.get(h, ()) if b in scc_of and scc_of[b] != i]
            level[i] = 1 + max((level[d] for d in deps), default=-1)
        # A recursion with a size limit stops as a whole when it is reached: a stratum of
        # its own, so that the SCCs that share its level run on.
        limited = {i for i, comp in enumerate(sccs) if G.is_recursive(comp, graph)
                   and any(relations[n].limit is not None for n in comp)}
        order = list(relations)
        strata = []
        for lv, alone in sorted({(lv, i if i in limited else -1) for i, lv in level.items()}):
            members = sorted((n for i, comp in enumerate(sccs) if level[i] == lv and (i == alone or alone < 0
                              and i not in limited) for n in comp), key=order.index)
            # a relation with subsumption is pruned after its start too: a fixpoint, maybe of no rounds
            recursive = any(G.is_recursive(sccs[scc_of[n]], graph) or relations[n].dominated for n in members)
            strata.append(self.stratum(len(strata), members, recursive, heads, relations))
        for st in strata:
            for n in st.relations:
                relations[n].stratum = st.index
                if relations[n].dominated:
                    relations[relations[n].dominated].stratum = st.index
        facts = self.facts(prog, relations)
        self.raise_if_failed()
        queries = tuple(q.atom for q in prog.of(S.Query))
        return Dataflow(prog.name, relations, facts, strata, queries, deferred, prog.number_bits)

    def subsumption(self, relations: dict, graph: dict) -> dict:
        """Soufflé's subsumption (`lowering/subsumption.py`): helper relation -> the relation
        it prunes, from `.plan relation D(role=dominated, made_for=R)`. Each R learns its
        helper (`Storage.dominated`); the helper's rules run in R's stratum (`stratum`),
        so what their bodies read besides R comes before R (edges of `graph`)."""
        pruning = {}
        for p in self.program.of(S.Plan):
            params = dict(p.params)
            if p.kind == "relation" and params.get("role") == "dominated" and p.name in relations \
                    and params.get("made_for") in relations:
                pruning[p.name] = params["made_for"]
                relations[params["made_for"]].dominated = p.name
                relations[params["made_for"]].kind = "derived"  # what remains of its facts and inputs
        for helper, target in pruning.items():
            graph[target] = list(graph.get(target, ())) + [e for e in graph.get(helper, ()) if e[0] != target]
        return pruning

    # ------------------------------------------------------------ relations

    def relations(self, prog: S.Program, rules: list) -> dict:
        arity: dict = {}
        where: dict = {}
        decl: dict = {}

        def see(name, n, span, text):
            if name in arity and arity[name] != n:
                self.fail("arity", f"relation {name} is used with {plural(n, 'argument')} here but {arity[name]} "
                          f"at {where[name]}", span, text, f"give every use of {name} {plural(arity[name], 'argument')}")
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
        limits = size_limits(prog)
        type_system = TypeSystem.of(prog)
        out: dict = {}
        for name, n in arity.items():
            d = decl.get(name)
            cols = tuple(c.name for c in d.columns) if d else tuple(f"c{i}" for i in range(n))
            # The runtime stores primitives: a column of a `.type` holds its primitive's values.
            types = tuple(type_system.primitive(c.type) for c in d.columns) if d else ("any",) * n
            records = tuple(getattr(type_system.held_as_text(c.type), "name", None) for c in d.columns) if d else ()
            records = records if any(records) else ()
            k = keys.get(name, d.keys if d else None)
            if k is not None and (len(k) == 0 or set(k) == set(range(n))):
                k = None  # a key over every column is plain set semantics
            out[name] = Storage(name, n, cols, types, "derived" if name in derived else "base", k,
                                partition=self.partition.get(name, ()),
                                broadcast=self.distribution.get(name) == "broadcast",
                                replicated=self.distribution.get(name) == "replicated",
                                located=self.distribution.get(name) == "located",
                                cached=name in self.program.physical.cached,
                                input=("input", name) in io, output=("output", name) in io,
                                limit=limits.get(name), choice=choice_domains(d, n), records=records,
                                record_table=tuple(sorted(type_system.record_table().items())) if records else ())
            if out[name].choice:  # what remains of its facts and inputs is chosen in its stratum
                out[name].kind = "derived"
        for r in rules:
            if r.delete:
                base = out[r.head.relation]
                name = deletion_relation(base.name)
                out.setdefault(name, Storage(name, base.arity, base.columns, base.types, "deletion"))
        return out

    # ------------------------------------------------------------ rules -> pipelines

    def stratum(self, index, members, recursive, heads, relations) -> Stratum:
        here = set(members)
        init, delta = [], []
        for name in members:
            for rule in heads[name]:
                drivers = [l for l in rule.body if isinstance(l, S.Atom) and l.delta and l.relation in here]
                reads_here = any(isinstance(l, S.Atom) and not l.negated and l.relation in here for l in rule.body)
                if drivers:
                    delta.append(self.rule_plan(rule, drivers[0].relation, relations))
                elif reads_here:  # no stage differentiated it: the whole rule, every iteration
                    delta.append(self.rule_plan(rule, None, relations))
                else:  # reads lower strata only (a delta there is the whole relation): once
                    init.append(self.rule_plan(rule, None, relations))
            if relations[name].dominated:  # its dominated tuples: asked after the start and every round
                delta += [self.rule_plan(rule, None, relations) for rule in heads[relations[name].dominated]]
        st = Stratum(index, tuple(members), recursive, tuple(init), tuple(delta))
        chosen = [(self.strategy[n], n) for n in members if n in self.strategy]
        # A level of independent recursions is one stratum (above: the planner's grouping,
        # so that one loop serves them all). Local and rounds are one mechanism
        # (runtime/rounds.py; local: no budget, since nothing leaves a partition), so a
        # level whose recursions are all local or in rounds runs in rounds, the budget the
        # stage gave those in rounds: no choice made here. The stage wrote every row that
        # needs (partition columns and copies: partition.dl o, s and cp), which in_rounds
        # checks; a row missing keeps the distributed loop, saying which.
        in_rounds = [c for c in chosen if c[0][0] == "rounds"]
        if recursive and chosen and all(how in ("local", "rounds") for (how, _), _ in chosen):
            chosen = in_rounds or chosen
        if recursive and chosen:
            (how, why), rel = chosen[0]
            st.strategy, st.reason = how, why
            if how in ("local", "rounds"):
                self.in_rounds(st, rel, relations)
        elif recursive:
            st.strategy, st.reason = "distributed", "a barrier per iteration (seed 001): no stage chose a strategy"
        return st

    def in_rounds(self, st: Stratum, rel: str, relations: dict) -> None:
        """A stratum a stage put in rounds: every relation it loops over needs the column
        it is partitioned on and to be a set or a PreM min/max, the stratum how many
        iterations a round runs, and every delta rule one driving delta and a placed copy
        of each lower relation it reads (stages/partition.dl guarantees them all; a plan
        written by hand may lack some: then the distributed loop, saying which)."""
        looping = [n for n in st.relations if any(r.head == n for r in st.delta_rules)]
        unplaced = [n for n in looping if not self.partition.get(n)]
        owner = {n: self.partition[n][0] for n in looping if not unplaced}
        missing = (f"no partition column for {', '.join(unplaced)}" if unplaced
                   else "no local_iterations" if st.strategy == "rounds" and rel not in self.local_iterations
                   else next(filter(None, [RoundsPlan.unfit(relations[n]) for n in looping]
                                 + [RoundsPlan.misfit(r, owner) for r in st.delta_rules]), None))
        if missing:
            st.strategy, st.reason = "distributed", f"{st.reason}, but {missing}"
            return
        st.rounds = RoundsPlan(tuple((n, self.partition[n][0]) for n in looping),
                               self.local_iterations[rel] if st.strategy == "rounds" else None)

    def rule_plan(self, rule: S.Rule, driven_by: Optional[str], relations) -> RulePlan:
        """The rule's pipeline in the catalog's order: atoms as written, each selection or
        assignment as soon as its variables are bound."""
        body, written_at = with_plain_atoms(rule)
        positive_vars = set()
        for l in body:
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
            return set(S.term_vars(l.expr)) <= bound

        def emit(l):
            if isinstance(l, S.Atom):
                keys = tuple(v for v in S.atom_vars(l) if v in bound)
                if l.negated:
                    op = "antijoin"
                else:
                    op = "scan" if not steps else "join"
                    bound.update(S.atom_vars(l))
                # a relation placed `broadcast` is broadcast by the joins that read it, unless
                # the stage chose this atom's method itself
                method = self.methods.get((rule.name, written_at[id(l)] + 1)) or (
                    "broadcast" if op == "join" and self.distribution.get(l.relation) == "broadcast" else "")
                copy = self.copies.get((rule.name, written_at[id(l)] + 1), "")
                steps.append(Step(op, l.relation, l.args, l.delta and l.relation == driven_by, keys, method,
                                  copy, span=l.span))
            elif isinstance(l, S.Assign) and is_range(l.expr):  # a generator: one row per value
                var = l.var.name if l.var.name not in bound else f"{l.var.name}_generated"
                steps.append(Step("generate", expr=l.expr, var=var, span=l.span))
                if var != l.var.name:  # already bound: the value must be one of the range's
                    steps.append(Step("filter", expr=S.BinOp("==", l.var, S.Var(var, l.span)), span=l.span))
                bound.add(var)
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

        for l in body:
            if isinstance(l, S.Atom) and not l.negated:
                emit(l)
            else:
                pending.append(l)
            flush()
        for l in pending:  # unsafe rules are the static checks' business; keep them visible
            emit(l)
        return RulePlan(rule.name, rule.origin or rule.name, G.head_of(rule), rule.head.args, tuple(steps),
                        driven_by, rule.delete, rule.span)

    # ------------------------------------------------------------ facts

    def facts(self, prog: S.Program, relations: dict) -> tuple:
        out = []
        for f in prog.facts:
            try:
                out.append((f.atom.relation, tuple(numbers.held(const_value(a), prog.number_bits)
                                                   for a in f.atom.args)))
            except ValueError as e:
                self.fail("fact-not-ground", f"fact of {f.atom.relation} has a non-constant argument {e}",
                          f.span, term_text(f.atom), "facts hold constants only")
        return tuple(out)


def with_plain_atoms(rule: S.Rule):
    """The rule's body with every atom argument a variable, a constant or `_`, and where
    each atom was written. An expression an atom holds (`fib(n - 1, x)`, as a delta
    rule may put it first) becomes a new variable and an equality that waits for the
    expression's variables: `fib(a, x), a == n - 1`; in a negated atom, an assignment
    before it. Every backend then joins on columns alone, and no pipeline reads a
    variable before an atom binds it, whatever order a stage gave the atoms."""
    taken = _vars_of(rule)
    fresh = (f"_arg{i}" for i in itertools.count() if f"_arg{i}" not in taken)
    body, written_at = [], {}
    for pos, l in enumerate(rule.body):
        if not isinstance(l, S.Atom) or all(isinstance(a, (S.Var, S.Wildcard, S.Const)) for a in l.args):
            body.append(l)
            written_at[id(l)] = pos
            continue
        args, tests = [], []
        for a in l.args:
            if isinstance(a, (S.Var, S.Wildcard, S.Const)):
                args.append(a)
                continue
            var = S.Var(next(fresh), l.span)
            args.append(var)
            tests.append(S.Assign(var, a, l.span) if l.negated else S.Select(S.BinOp("==", var, a), l.span))
        plain = replace(l, args=tuple(args))
        written_at[id(plain)] = pos
        body += ([*tests, plain] if l.negated else [plain, *tests])
    return body, written_at


def _vars_of(rule: S.Rule) -> set:
    out = set(S.atom_vars(rule.head))
    for l in rule.body:
        if isinstance(l, S.Atom):
            out |= set(S.atom_vars(l))
        elif isinstance(l, S.Assign):
            out |= {l.var.name, *S.term_vars(l.expr)}
        elif isinstance(l, S.Select):
            out |= set(S.term_vars(l.expr))
    return out


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


def choice_domains(d, arity: int) -> tuple:
    """A declaration's choice domains, less any over every column (it constrains nothing)."""
    return tuple(c for c in getattr(d, "choice", ()) if len(c) < arity)
