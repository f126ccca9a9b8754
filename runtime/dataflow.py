"""The physical dataflow: what the planner emits and the runtime executes.

Plain dataclasses carrying the decisions stages wrote into the catalog, as the planner
copied them: which atom drives a rule (`Step.delta`), the join method (`Step.method`),
how a relation is stored (`Storage.partition`, `broadcast`, `cached`) and how a
recursive stratum runs (`Stratum.strategy`, and `Stratum.rounds` when its partitions run
in tasks: to their own fixpoint, or in rounds with an exchange between them). This module is the leaf both the planner and
the runtime import.

Two renderings: `to_text()` in the spirit of P2DL/Click (one element per line, arrows
for the pipeline) for people, `to_json()` for tools. Both are deterministic.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional

from ..bootstrap import syntax as S


DELETION_SUFFIX = "#delete"


def deletion_relation(relation: str) -> str:
    """The relation that collects a `delete` rule's tuples until the timestep ends."""
    return relation + DELETION_SUFFIX


@dataclass(frozen=True)
class Aggregation:
    """How a relation is aggregated: group on every column but `column`, apply `func`.

    `premappable` is set for min/max inside recursion (seed 003): the constraint is
    applied after every iteration and an improved tuple replaces the old one."""
    column: int
    func: str
    premappable: bool = False


@dataclass
class Storage:
    """One relation: its columns and how it lives on Spark."""
    name: str
    arity: int
    columns: tuple
    types: tuple  # declared types (number, symbol, float, ...) or "any"
    kind: str  # "base" (facts and inputs only), "derived", "deletion" (a delete rule's target)
    keys: Optional[tuple] = None  # primary key positions: a new tuple replaces the old one
    aggregates: tuple = ()  # Aggregation per aggregated column
    partition: tuple = ()  # hash-partitioned on these columns
    broadcast: bool = False  # a join reading it broadcasts it, unless its step names a method
    replicated: bool = False  # each partition of a partitioned recursion holds a copy (Step.copy)
    located: bool = False  # partitioned on its @ column, `partition`: a location is a partition
    cached: bool = False  # kept in memory once computed
    input: bool = False  # .input: read from outside
    output: bool = False  # .output: written out
    stratum: Optional[int] = None  # stratum that derives it; None for base relations
    # Soufflé's `.limitsize R(n=N)`: the recursion deriving it stops at the end of the
    # first round after which it holds N tuples or more (its stratum is its SCC alone)
    limit: Optional[int] = None
    # Soufflé's subsumption: the helper relation whose rules (in this relation's stratum)
    # derive the tuples another tuple dominates; they are removed after the stratum's
    # start and after every round (`semantics.subsume`)
    dominated: Optional[str] = None
    # Soufflé's `choice-domain`: per domain its column positions. A tuple agreeing with
    # one held on a domain's columns never enters; of the candidates that arrive together,
    # the least wins (`semantics.choose`)
    choice: tuple = ()
    # Soufflé's records and ADTs (bootstrap/records.py): per column the record or ADT type
    # it holds, or None (empty when no column holds one), and every such type's fields'
    # kinds, what reading Soufflé's text form of a record or an ADT value needs
    records: tuple = ()
    record_table: tuple = ()  # (record type, (kind of each field, ...)), (ADT type, ((branch, kinds), ...)) pairs

    @property
    def location(self) -> Optional[int]:
        """The @ column of a located relation, else None."""
        return self.partition[0] if self.located and self.partition else None

    @property
    def group_columns(self) -> tuple:
        agg = {a.column for a in self.aggregates}
        return tuple(i for i in range(self.arity) if i not in agg)


@dataclass(frozen=True)
class Step:
    """One element of a rule's pipeline.

    op: scan (first atom), join, antijoin, filter, assign, generate (one row per value of
    `expr`, a range call, bound to `var`).
    For atoms, `args` are the atom's terms in column order and `keys` the variables
    shared with earlier steps (the join keys); `delta` marks the atom whose delta drives
    an ECA rule; `method` is a join method ("" lets Spark choose; "broadcast",
    "shuffle_hash", "merge" become hints); `copy`, in a stratum in rounds, what each
    partition holds of the atom's lower relation, as a stage placed it (predicate.copy):
    the column its copy is partitioned on, or "whole" ("" elsewhere)."""
    op: str
    relation: str = ""
    args: tuple = ()
    delta: bool = False
    keys: tuple = ()
    method: str = ""
    copy: str = ""
    expr: object = None
    var: str = ""
    span: S.Span = field(default=S.NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class RulePlan:
    name: str  # r2 or r2_d1 for the ECA rule driven by body position 1
    rule: str  # the source rule's label
    head: str  # relation written (for delete rules: the deletion relation)
    head_args: tuple
    steps: tuple
    driven_by: Optional[str] = None  # relation whose delta triggers it, None when run once
    delete: bool = False
    span: S.Span = field(default=S.NOWHERE, compare=False, repr=False)

    @property
    def aggregates(self) -> list:
        return [(i, a) for i, a in enumerate(self.head_args) if isinstance(a, S.Aggregate)]


@dataclass(frozen=True)
class RoundsPlan:
    """A monotone recursive stratum run in rounds (`runtime/rounds.py`, seed 003 §3-4):
    each looping relation hash-partitioned on its column in `partition` ((relation,
    column), ...), each Spark job a round of up to `local_iterations` iterations per
    partition, then one exchange of the new tuples; None for a decomposable (`local`)
    stratum, whose partitions run to their fixpoint in one round."""
    partition: tuple
    local_iterations: Optional[int]

    @staticmethod
    def unfit(s: "Storage") -> Optional[str]:
        """Why relation `s` cannot loop in rounds (None when it can): a partition absorbs
        the tuples sent to it in any order, so it must be a set or one PreM min/max."""
        from . import semantics

        if s.choice:  # which candidate wins depends on the order rounds find them in, everywhere at once
            return f"{s.name} has a choice-domain"
        if s.keys is not None or semantics.kind(s) == "numbered":
            return f"{s.name} is {'keyed' if s.keys is not None else 'numbered'}"
        if s.aggregates and not all(a.premappable and a.func in ("min", "max", "umin", "umax") for a in s.aggregates):
            return f"{s.name} aggregates other than by a PreM min/max"
        return None

    @staticmethod
    def misfit(rule: "RulePlan", owner: dict) -> Optional[str]:
        """Why `rule` cannot run in rounds partitioned as `owner` says ({relation: column}),
        None when it can: one delta drives it, every atom of a looping relation holds the
        driver's partition variable at its partition column, and every lower relation it
        reads has a copy placed (`Step.copy`) that meets it there, or whole."""
        drivers = [s for s in rule.steps if s.delta and s.relation in owner]
        if len(drivers) != 1:
            return f"rule {rule.name} is driven by {len(drivers)} deltas"
        key = _shared(drivers[0].args[owner[drivers[0].relation]])
        if key is None:
            return f"rule {rule.name}: no variable or constant at the partition column of {drivers[0].relation}"
        for s in rule.steps:
            if s.relation in owner and _shared(s.args[owner[s.relation]]) != key:
                return f"rule {rule.name} joins {drivers[0].relation} with {s.relation} off their partition columns"
            if s.relation and s.relation not in owner and not s.copy:
                return (f"rule {rule.name} reads {s.relation} with no copy placed for a partition "
                        f"(.plan rule {rule.name}(copyK=COLUMN|{S.WHOLE}))")
            if s.relation and s.relation not in owner and s.copy != S.WHOLE and (
                    int(s.copy) >= len(s.args) or _shared(s.args[int(s.copy)]) != key):
                return f"rule {rule.name}: the copy {copy_name(s)} does not meet the partition's tuples"
        return None

    @staticmethod
    def copies(rules) -> tuple:
        """The copies the rules read, sorted by name: ((name, relation, column or None), ...)."""
        found = {copy_name(s): (copy_name(s), s.relation, None if s.copy == S.WHOLE else int(s.copy))
                 for r in rules for s in r.steps if s.copy}
        return tuple(found[n] for n in sorted(found))


def _shared(t):
    """A term as two atoms can share it: a variable's name or a constant (None otherwise)."""
    if isinstance(t, S.Var):
        return ("var", t.name)
    if isinstance(t, S.Const):
        return ("const", repr(t.value))
    return None


def copy_name(step: "Step") -> str:
    """A lower relation as a partition in rounds holds it: `edge@0`, its rows partitioned on
    column #0 (they meet the partition's tuples there), or `edge@*`, all of it."""
    return f"{step.relation}@{'*' if step.copy == S.WHOLE else step.copy}"


@dataclass
class Stratum:
    index: int
    relations: tuple  # relations derived here
    recursive: bool
    init_rules: tuple  # run once over complete lower strata
    delta_rules: tuple  # ECA rules run every iteration, driven by a delta of this stratum
    strategy: str = ""  # recursive strata: 'local', 'rounds' or 'distributed', as a stage chose (stratum table)
    reason: str = ""
    rounds: Optional[RoundsPlan] = None


@dataclass
class IterationStats:
    stratum: int
    iteration: int  # 0: the stratum's init rules
    actions: int  # Spark actions started for this iteration
    deltas: dict  # relation -> size of its delta
    seconds: float
    mode: str = "sql"  # "sql" (distributed loop), "local" (per-partition tasks), "small" (driver),
    # "here" (a whole run in process, no Spark: runtime/here.py)
    exchanged: Optional[int] = None  # a round's bytes written to Spark's exchange (runtime/rounds.py)


@dataclass
class Dataflow:
    program: str
    relations: dict  # name -> Storage, in order of first mention
    facts: tuple  # (relation, (value, ...)) in program order
    strata: list
    queries: tuple = ()  # atoms of `query` statements
    deferred: tuple = ()  # rule labels this one-timestep runtime does not run (@next)
    number_bits: int = 64  # the width of whole numbers (bootstrap/numbers.py): how files are read and written

    def storage(self, name: str) -> Storage:
        return self.relations[name]

    @property
    def outputs(self) -> list:
        return [s.name for s in self.relations.values() if s.output]

    @property
    def inputs(self) -> list:
        return [s.name for s in self.relations.values() if s.input]

    # ------------------------------------------------------------ renderings

    def to_json(self) -> str:
        return json.dumps(_jsonable(self), indent=2, sort_keys=False)

    def to_text(self) -> str:
        out = [f"dataflow {self.program} {{"]
        for s in self.relations.values():
            out.append("  " + _storage_text(s))
        if self.facts:
            counts: dict = {}
            for rel, _ in self.facts:
                counts[rel] = counts.get(rel, 0) + 1
            out.append("  facts " + ", ".join(f"{r}: {n}" for r, n in counts.items()))
        for st in self.strata:
            kind = "recursive" if st.recursive else "once"
            out.append("")
            out.append(f"  stratum {st.index} ({kind}) derives {', '.join(st.relations)} {{")
            if st.strategy:
                out.append(f"    strategy {st.strategy}  // {st.reason}")
            if st.recursive:
                out.append("    " + _small_text(st, self))
            if st.rounds:
                parts = ", ".join(f"{rel} on {_cols((col,))}" for rel, col in st.rounds.partition)
                copies = ", ".join(name for name, _, _ in RoundsPlan.copies(st.delta_rules)) or "-"
                out.append(f"    local fixpoint per partition: {parts}; each partition holds {copies}; one Spark job "
                           f"(no tuple leaves its partition)" if st.rounds.local_iterations is None else
                           f"    rounds: {parts}; each partition holds {copies}; up to {st.rounds.local_iterations} "
                           f"iterations per partition per round, then one exchange (staleness bound "
                           f"{st.rounds.local_iterations})")
            for r in st.init_rules:
                out.append("    " + _rule_text(r, "init"))
            pruned = {self.relations[n].dominated: n for n in st.relations if self.relations[n].dominated}
            for r in st.delta_rules:
                trigger = f"on Δ{r.driven_by}" if r.driven_by else \
                    f"removed from {pruned[r.head]} after the start and every round" if r.head in pruned else \
                    "every iteration"
                out.append("    " + _rule_text(r, trigger))
            out.append("  }")
        for q in self.queries:
            out.append(f"  query {_atom_text(q)}")
        for d in self.deferred:
            out.append(f"  deferred {d}  // @next: runs in the next timestep")
        out.append("}")
        return "\n".join(out)


# ---------------------------------------------------------------- text helpers

def _cols(cols) -> str:
    return "(" + ", ".join(f"#{c}" for c in cols) + ")"


def _storage_text(s: Storage) -> str:
    attrs = [s.kind]
    if s.keys is not None:
        attrs.append(f"keys{_cols(s.keys)}")
    for a in s.aggregates:
        attrs.append(f"{a.func}<#{a.column}>" + (" premappable" if a.premappable else ""))
    if s.limit is not None:
        attrs.append(f"limit {s.limit}")
    if s.dominated is not None:
        attrs.append(f"subsumed by {s.dominated}")
    if s.choice:
        attrs.append("choice" + "".join(_cols(d) for d in s.choice))
    if s.located:
        attrs.append(f"located{_cols(s.partition)}")
    elif s.partition:
        attrs.append(f"partition{_cols(s.partition)}")
    if s.broadcast:
        attrs.append("broadcast")
    if s.replicated:
        attrs.append("replicated")
    if s.cached:
        attrs.append("cached")
    if s.input:
        attrs.append("input")
    if s.output:
        attrs.append("output")
    cols = ", ".join(f"{c}: {t}" for c, t in zip(s.columns, s.types))
    return f"table {s.name}({cols}) [{' '.join(attrs)}]"


def _small_text(st: Stratum, flow: "Dataflow") -> str:
    """What the runtime does when the stratum's inputs turn out small (it knows sizes)."""
    from .columnar import SMALL_ROWS, unsupported

    if st.strategy == "local" and st.rounds is not None:
        return "small inputs: per-partition tasks all the same  // a stage chose them (strategy local)"
    why = unsupported(st.init_rules + st.delta_rules, [flow.relations[n] for n in st.relations])
    if why:
        return f"small inputs: still on Spark  // the columnar evaluator cannot: {why}"
    return (f"small inputs: on the driver, columnar  // when its inputs hold at most {SMALL_ROWS:,} rows "
            f"(EVITA_SMALL_ROWS)")


def _rule_text(r: RulePlan, trigger: str) -> str:
    parts = [_step_text(st) for st in r.steps]
    head = ("delete " if r.delete else "") + f"{r.head}({', '.join(term_text(a) for a in r.head_args)})"
    return f"{r.name}: [{trigger}] " + " -> ".join(parts + [f"project {head}"])


def _step_text(st: Step) -> str:
    if st.op in ("scan", "join", "antijoin"):
        rel = ("Δ" if st.delta else "") + st.relation
        text = f"{st.op} {rel}({', '.join(term_text(a) for a in st.args)})"
        if st.keys:
            text += f" on {', '.join(st.keys)}"
        if st.method:
            text += f" [{st.method}]"
        return text
    if st.op == "filter":
        return f"filter {term_text(st.expr)}"
    if st.op == "assign":
        return f"assign {st.var} := {term_text(st.expr)}"
    if st.op == "generate":
        return f"generate {st.var} in {term_text(st.expr)}"
    return st.op


def _atom_text(a: S.Atom) -> str:
    return f"{a.relation}({', '.join(term_text(x) for x in a.args)})"


_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}


def term_text(t, prec: int = 0) -> str:
    """A term in concrete syntax, parenthesized only where precedence needs it."""
    if isinstance(t, S.Var):
        return t.name
    if isinstance(t, S.Wildcard):
        return "_"
    if isinstance(t, S.Const):
        if t.type == S.STRING:
            return json.dumps(t.value)
        if t.type == S.BOOL:
            return "true" if t.value else "false"
        if t.type == S.NULL:
            return "null"
        if t.type == S.INFINITY:
            return "infinity"
        return repr(t.value)
    if isinstance(t, S.Call):
        return f"{t.func}({', '.join(term_text(a) for a in t.args)})"
    if isinstance(t, S.BinOp):
        p = _PREC.get(t.op, 3)
        text = f"{term_text(t.left, p)} {t.op} {term_text(t.right, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(t, S.UnOp) and t.op.isalnum():  # the planner's wrap32 (bootstrap/lowering/width.py)
        return f"{t.op}({term_text(t.arg)})"
    if isinstance(t, S.UnOp):
        return f"{t.op}{term_text(t.arg, 9)}"
    if isinstance(t, S.Cond):
        text = f"{term_text(t.test, 1)} ? {term_text(t.then)} : {term_text(t.other)}"
        return f"({text})" if prec > 0 else text
    if isinstance(t, S.ListExpr):
        return "[" + ", ".join(term_text(a) for a in t.items) + "]"
    if isinstance(t, S.Aggregate):
        return f"{t.func}<{'*' if t.arg is None else term_text(t.arg)}>"
    if isinstance(t, S.Atom):
        return _atom_text(t)
    return str(t)


# ---------------------------------------------------------------- json helpers

def _jsonable(obj):
    """Dataclasses become dicts tagged with their kind; spans are left out."""
    if isinstance(obj, (S.Var, S.Wildcard, S.Const, S.Call, S.BinOp, S.UnOp, S.Cond,
                        S.ListExpr, S.Aggregate, S.Atom)):
        return _term_json(obj)
    if hasattr(obj, "__dataclass_fields__"):
        out = {}
        for name in obj.__dataclass_fields__:
            if name == "span":
                continue
            out[name] = _jsonable(getattr(obj, name))
        return out
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return "infinity" if obj > 0 else "-infinity"
    return obj


def _term_json(t):
    if isinstance(t, S.Var):
        return {"var": t.name}
    if isinstance(t, S.Wildcard):
        return {"wildcard": True}
    if isinstance(t, S.Const):
        return {"const": _jsonable(t.value), "type": t.type}
    if isinstance(t, S.Call):
        return {"call": t.func, "args": [_term_json(a) for a in t.args]}
    if isinstance(t, S.BinOp):
        return {"op": t.op, "args": [_term_json(t.left), _term_json(t.right)]}
    if isinstance(t, S.UnOp):
        return {"op": t.op, "args": [_term_json(t.arg)]}
    if isinstance(t, S.Cond):
        return {"cond": [_term_json(t.test), _term_json(t.then), _term_json(t.other)]}
    if isinstance(t, S.ListExpr):
        return {"list": [_term_json(a) for a in t.items]}
    if isinstance(t, S.Aggregate):
        return {"agg": t.func, "arg": None if t.arg is None else _term_json(t.arg)}
    if isinstance(t, S.Atom):
        return {"atom": t.relation, "args": [_term_json(a) for a in t.args]}
    raise TypeError(t)
