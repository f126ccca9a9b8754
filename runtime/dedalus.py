"""Dedalus time, lowered to one timestep's program: what the simulator and the Spark
supersteps both evaluate (`docs/dedalus.md` states the semantics).

A compiled Dedalus program becomes one ordinary program, the *tick program*, whose
fixpoint is one timestep at every node at once:
- every atom gets two hidden columns, the world `__w` (a seed of the simulator) and the
  node `__n`, so a join, a negation or a group never mixes two nodes or two runs;
- a rule of component C also selects `__n == "a1" || __n == "a2" ...` over C's
  addresses: it runs there only;
- `r(...)@next :- body` derives `__next_r(...)`, which the caller turns into `r` at the
  same node one timestep later; `r(@D, ...)@async :- body` derives `__send_r(@D, ...)`,
  a message the network delivers at D later. A link the localize stage made (its head at
  another location than its body) is a message too;
- `tick()` reads `__clock(T, __w, __n)`, the node's current timestep.

>>> from evita.bootstrap.parser import parse_program
>>> t = lower(parse_program('''
...   component c @ ["a", "b"] {
...     r1 seen(@N, X)@next :- seen(@N, X).
...     r2 ping(@M, X)@async :- seen(@N, X), peer(@N, M).
...   }''', "doc.olg"))
>>> for r in t.program.rules: print(r.name, r.head.relation, [getattr(a, "relation", "select") for a in r.body])
r1 __next_seen ['seen', 'select']
r2 __send_ping ['seen', 'peer', 'select']
>>> t.sends["__send_ping"].location, t.components
(0, {'c': ('a', 'b')})
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from ..bootstrap import syntax as S
from ..bootstrap.dedalus_checks import is_dedalus  # noqa: F401  (callers import it from here too)
from ..bootstrap.diagnostics import Diagnostic, EvitaError

WORLD, NODE, STEP = "__w", "__n", "__t"
NEXT, SEND, CLOCK, MEMBER = "__next_", "__send_", "__clock", "__member"


@dataclass(frozen=True)
class Send:
    relation: str  # the message's relation at its destination
    location: int  # the column naming the destination
    rules: tuple  # labels of the rules that send it (for diagnostics)
    spans: tuple


@dataclass
class Timed:
    """A Dedalus program lowered to its tick program, with what the caller needs to move
    tuples between timesteps and nodes."""
    name: str
    program: S.Program  # the tick program
    arity: dict  # user relation -> its columns (without the hidden ones)
    nexts: dict  # "__next_r" -> "r"
    sends: dict  # "__send_r" -> Send
    components: dict  # component -> its addresses
    facts: list  # (relation, node, values): the EDB, each fact at its node
    read: set  # relations some rule body reads (a message to them must reach a node)
    shown: list  # relations whose tuples are outputs: .output, else queries, else none
    uses_clock: bool
    location: dict = field(default_factory=dict)  # relation -> the column its `@` names
    rules: dict = field(default_factory=dict)  # label -> Rule of the compiled program (spans)
    # runtime/fired.py's choice of rules per timestep and its sub-programs, made once per
    # tick program (`fired.of`); not pickled (a fan-out's task makes its own)
    fired: object = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        return {**self.__dict__, "fired": None}

    @property
    def nodes(self) -> list:
        """Every address of every component, in program order."""
        out: list = []
        for addresses in self.components.values():
            out += [a for a in addresses if a not in out]
        return out

    @property
    def relations(self) -> list:
        """The user's relations: what a node's state holds."""
        return list(self.arity)


def _hidden(atom: S.Atom) -> S.Atom:
    return dataclasses.replace(atom, args=atom.args + (S.Var(WORLD), S.Var(NODE)))


def _uses_tick(term) -> bool:
    if isinstance(term, S.Call) and term.func == "tick" and not term.args:
        return True
    return any(_uses_tick(c) for c in _children(term))


def _children(term) -> list:
    if isinstance(term, S.Call):
        return list(term.args)
    if isinstance(term, S.BinOp):
        return [term.left, term.right]
    if isinstance(term, S.UnOp):
        return [term.arg]
    if isinstance(term, S.Cond):
        return [term.test, term.then, term.other]
    if isinstance(term, S.ListExpr):
        return list(term.items)
    if isinstance(term, S.Aggregate):
        return [term.arg] if term.arg is not None else []
    if isinstance(term, S.Atom):
        return list(term.args)
    if isinstance(term, (S.Select,)):
        return [term.expr]
    if isinstance(term, S.Assign):
        return [term.expr]
    return []


def _untick(term):
    """`tick()` -> the variable __t (bound by __clock)."""
    if isinstance(term, S.Call) and term.func == "tick" and not term.args:
        return S.Var(STEP)
    if isinstance(term, S.Call):
        return dataclasses.replace(term, args=tuple(_untick(a) for a in term.args))
    if isinstance(term, S.BinOp):
        return dataclasses.replace(term, left=_untick(term.left), right=_untick(term.right))
    if isinstance(term, S.UnOp):
        return dataclasses.replace(term, arg=_untick(term.arg))
    if isinstance(term, S.Cond):
        return dataclasses.replace(term, test=_untick(term.test), then=_untick(term.then), other=_untick(term.other))
    if isinstance(term, S.ListExpr):
        return dataclasses.replace(term, items=tuple(_untick(a) for a in term.items))
    if isinstance(term, S.Aggregate) and term.arg is not None:
        return dataclasses.replace(term, arg=_untick(term.arg))
    if isinstance(term, S.Atom):
        return dataclasses.replace(term, args=tuple(_untick(a) for a in term.args))
    if isinstance(term, (S.Select, S.Assign)):
        return dataclasses.replace(term, expr=_untick(term.expr))
    return term


def _location_terms(rule: S.Rule) -> list:
    out = []
    for lit in rule.body:
        if isinstance(lit, S.Atom) and lit.location is not None and not lit.negated:
            t = lit.args[lit.location]
            if t not in out:
                out.append(t)
    return out


def _is_message(rule: S.Rule) -> bool:
    """An @async rule, or a link whose head sits at a location its body does not read."""
    if rule.time == "async":
        return True
    if rule.time == "next" or rule.head.location is None:
        return False
    where = _location_terms(rule)
    return bool(where) and rule.head.args[rule.head.location] not in where


def _value(term):
    from ..bootstrap.planner import const_value

    return const_value(term)


def lower(program: S.Program) -> Timed:
    """The tick program of a compiled Dedalus program. Raises EvitaError with a positioned
    diagnostic for what cannot run over time (a rule that still reads two locations)."""
    components = {c.name: tuple(c.addresses) for c in program.of(S.Component)}
    arity: dict = {}
    problems = []

    location: dict = {}

    def see(atom: S.Atom):
        arity.setdefault(atom.relation, atom.arity)
        if atom.location is not None:
            location.setdefault(atom.relation, atom.location)

    rules, nexts, sends, read, spans = [], {}, {}, set(), {}
    uses_clock = False
    compiled = {}
    for r in program.rules:
        compiled[r.name] = r
        see(r.head)
        for lit in r.body:
            if isinstance(lit, S.Atom):
                see(lit)
                read.add(lit.relation)
        if len(_location_terms(r)) > 1:
            problems.append(Diagnostic(
                "two-locations", f"rule {r.name} reads relations at two locations, which no node holds together",
                r.span, "", "keep the localize stage (it splits such a rule into messages), or read one location"))
            continue
        if any(isinstance(a, S.Aggregate) and a.func == "seal" for a in r.head.args):
            problems.append(Diagnostic(
                "sealed-message", f"rule {r.name} still seals {r.head.relation}: seal<...> is no aggregate at run "
                "time", r.span, "", "keep the seal stage (stages/seal.dl desugars it into messages and counts)"))
            continue
        body = [_hidden(lit) if isinstance(lit, S.Atom) else lit for lit in r.body]
        head = _hidden(r.head)
        ticked = _uses_tick(r.head) or any(_uses_tick(lit) for lit in r.body)
        if ticked:
            head, body = _untick(head), [_untick(lit) for lit in body]
        if ticked or not any(isinstance(lit, S.Atom) and not lit.negated for lit in r.body):
            uses_clock = uses_clock or ticked
            body.insert(0, S.Atom(CLOCK, (S.Var(STEP if ticked else "__t_"), S.Var(WORLD), S.Var(NODE))))
        if r.component is not None:
            body.append(_at(components[r.component]) if components.get(r.component)
                        else S.Atom(MEMBER, (S.Const(r.component, S.STRING), S.Var(NODE))))
        if _is_message(r):
            name = SEND + r.head.relation
            old = sends.get(name)
            sends[name] = Send(r.head.relation, r.head.location,
                               (old.rules if old else ()) + (r.name,), (old.spans if old else ()) + (r.span,))
            head = dataclasses.replace(head, relation=name)
        elif r.time == "next":
            name = NEXT + r.head.relation
            nexts[name] = r.head.relation
            head = dataclasses.replace(head, relation=name)
        rules.append(dataclasses.replace(r, head=head, body=tuple(body), time=None))
    if problems:
        raise EvitaError(problems)

    facts = []
    everywhere = list(dict.fromkeys(a for addrs in components.values() for a in addrs))
    if not components:  # no component: the nodes are the locations the facts name
        everywhere = list(dict.fromkeys(_value(f.atom.args[f.atom.location]) for f in program.facts
                                        if f.atom.location is not None))
    for f in program.facts:
        see(f.atom)
        values = tuple(_value(a) for a in f.atom.args)
        if f.atom.location is not None:
            facts.append((f.atom.relation, values[f.atom.location], values))
        else:
            for node in components.get(f.component, everywhere) if f.component else everywhere:
                facts.append((f.atom.relation, node, values))
    for q in program.of(S.Query):
        see(q.atom)

    statements: list = []
    for s in program.statements:
        if isinstance(s, (S.Rule, S.Fact, S.Component)):
            continue
        if isinstance(s, S.Declaration):
            extra = (S.Column(WORLD, "number"), S.Column(NODE, "symbol"))
            keys = None if s.keys is None else s.keys + (len(s.columns), len(s.columns) + 1)
            statements.append(dataclasses.replace(s, columns=s.columns + extra, keys=keys))
            for prefix, names in ((NEXT, nexts), (SEND, sends)):
                if prefix + s.relation in names:
                    statements.append(dataclasses.replace(s, relation=prefix + s.relation, columns=s.columns + extra,
                                                          keys=None))
        elif isinstance(s, S.Materialize):
            n = arity.get(s.relation)
            statements.append(s if n is None else dataclasses.replace(s, keys=s.keys + (n, n + 1)))
        elif isinstance(s, S.Query):
            statements.append(dataclasses.replace(s, atom=_hidden(s.atom)))
        elif isinstance(s, S.Plan) and s.kind == "rule" and _clocked(compiled.get(s.name)):
            statements.append(dataclasses.replace(s, params=tuple(
                (f"join{int(k[4:]) + 1}", v) if k.startswith("join") else (k, v) for k, v in s.params)))
        else:
            statements.append(s)
    lowered = S.Program(program.name, tuple(statements) + tuple(rules), program.path, program.dialect, program.text,
                        program.number_bits)
    outputs = [d.relation for d in program.of(S.IODirective) if d.direction == "output"]
    shown = list(dict.fromkeys(outputs or [q.atom.relation for q in program.of(S.Query)]))
    return Timed(program.name, lowered, arity, nexts, sends, components, facts, read, shown, uses_clock, location,
                 compiled)


def _at(addresses: tuple) -> S.Select:
    """`__n == "a1" || __n == "a2" || ...`: the rule runs at these addresses only. A
    selection on the node, not a join with `__member`: the addresses are known when the
    program is lowered, and a join per rule doubles the plan Spark analyzes per superstep."""
    tests = [S.BinOp("==", S.Var(NODE), S.Const(a, S.STRING)) for a in addresses]
    expr = tests[0]
    for t in tests[1:]:
        expr = S.BinOp("||", expr, t)
    return S.Select(expr)


def unknown_address(send: Send, dst, values: tuple, nodes: list) -> EvitaError:
    """A message to an address no component has, whose relation some rule reads."""
    return EvitaError([Diagnostic(
        "unknown-address", f"rule {'/'.join(send.rules)} sends {send.relation}{values!r} to {dst!r}, an "
        f"address no component has (nodes: {', '.join(map(str, nodes))})", send.spans[0],
        send.relation, "send to a component's address, or add a component at that address")])


def _clocked(rule: Optional[S.Rule]) -> bool:
    if rule is None:
        return False
    return (_uses_tick(rule.head) or any(_uses_tick(lit) for lit in rule.body)
            or not any(isinstance(lit, S.Atom) and not lit.negated for lit in rule.body))
