"""Which rules of a Dedalus tick program a timestep must evaluate: both runners
(`evita run --steps`, `runtime/supersteps.py`; `evita simulate`, `runtime/simulate.py`)
evaluate only what changed since the timestep before.

Every operator of the tick program is deterministic (`now()` is refused in a Dedalus
program; `rand()`, `hash()`, `id()` are functions of the tuple; `tick()` is read from
`__clock`), so a rule whose inputs hold what they held at the previous timestep derives
what it derived then: seed 004's determinism rewrite, `op(prev a, prev b) = prev(op(a, b))`.
And a rule with a positive atom over a relation that is empty derives nothing. So a
timestep evaluates only the rules that may derive something other than at the previous
timestep, over the others' previous tuples:
- a relation is *changed* when its inputs (facts, carried `@next` tuples, messages,
  timed inputs) differ from the previous timestep's; `__clock` is changed for the rules
  that read `tick()` (at every timestep) and, when its rows change otherwise (timestep 0;
  in the simulator, a node crashing), for every rule that reads it;
- a rule *fires* when it reads a changed relation and none of its positive atoms reads
  a relation that is unchanged and empty; the head of a rule that fires is changed;
- the relations changed are evaluated, each by all of its rules (a rule blocked by such
  an empty atom derives nothing, but it keeps the relation's storage, an aggregate's
  shape for one, what the whole program plans); every other relation holds what it held.
Before timestep 0 every relation is empty (a virtual timestep −1), so timestep 0
evaluates only what its facts and the clock reach.

The rule graph (which relations each rule reads, positively, and whether it reads
`tick()`) is the planner's (`bootstrap/strata.py`, `rule_reads`). A stage could state it
as rows (issue 37's `flow_input`); the choice per timestep depends on the data and stays
here. Sub-programs are planned once per set of rules.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..bootstrap import syntax as S
from .dedalus import CLOCK, MEMBER, STEP


def of(timed) -> "Fired":
    """The tick program's `Fired`, made once per `Timed` (its sub-programs are planned
    once, whatever the runs of it)."""
    if timed.fired is None:
        timed.fired = Fired(timed.program)
    return timed.fired


@dataclass(frozen=True)
class _Rule:
    name: str
    head: str
    reads: frozenset  # every relation it reads, but __member
    positive: frozenset  # relations whose emptiness empties it
    ticks: bool  # it reads tick() (its clock atom binds __t)


class Fired:
    """The choice of rules per timestep for one tick program, and their dataflows."""

    def __init__(self, program: S.Program):
        from ..bootstrap.strata import rule_reads

        self.program = program
        self.rules: list = []
        for r in rule_reads(program.rules):
            # the members never change and are never empty; the clock is never empty
            ticks = any(a.relation == CLOCK and a.args and a.args[0] == S.Var(STEP) for a, _ in r.atoms)
            self.rules.append(_Rule(r.rule.name, r.head, r.relations - {MEMBER},
                                    r.positive - {MEMBER, CLOCK}, ticks))
        self.derived = {r.head for r in self.rules}  # relations some rule derives
        self.flows: dict = {}

    def fire(self, changed: set, nonempty: set, clock: bool) -> tuple:
        """(the relations to evaluate, the labels of the rules that evaluate them), given
        the relations whose inputs `changed`, those `nonempty` at the previous timestep,
        and whether the clock's rows changed other than by their timestep (`clock`)."""
        out = set(changed)
        if clock:
            out.add(CLOCK)

        def empty(rel):  # unchanged and empty: known to be empty now
            return rel not in out and rel not in nonempty

        grown = True
        while grown:
            grown = False
            for r in self.rules:
                if r.head in out or not (r.ticks or r.reads & out) or any(empty(p) for p in r.positive):
                    continue
                out.add(r.head)
                grown = True
        out.discard(CLOCK)
        return frozenset(out), frozenset(r.name for r in self.rules if r.head in out)

    def reads(self, rules: frozenset) -> set:
        """The relations `rules` read."""
        return {rel for r in self.rules if r.name in rules for rel in r.reads}

    def flow(self, rules: frozenset):
        """The dataflow of `rules` alone: the relations they read and no rule of theirs
        derives are inputs (their previous tuples). Planned once per set."""
        from ..bootstrap.planner import plan

        if rules not in self.flows:
            p = self.program
            kept = tuple(s for s in p.statements if not isinstance(s, S.Rule) or s.name in rules)
            self.flows[rules] = plan(S.Program(p.name, kept, p.path, p.dialect, p.text, p.number_bits))
        return self.flows[rules]
