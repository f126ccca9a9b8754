"""The abstract syntax of Evita programs: Overlog, Dedalus time and a Soufflé subset.

One tree serves all three dialects. The parser builds it, the static checks read it,
`catalog.encode` turns it into catalog rows and `catalog.decode` turns rows back into it.
Source positions (`Span`) ride along for diagnostics but never take part in equality,
so a program printed and parsed again compares equal to the original.
"""
from __future__ import annotations

import re

from dataclasses import dataclass, field, replace
from typing import Optional, Union


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        # A diagnostic with no place in a text (a missing file, the API's call, the command
        # line) names just its source: `nosuch.dl`, `<api>`, never `nosuch.dl:0:0`.
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}" if self.col > 0 else f"{self.file}:{self.line}"


NOWHERE = Span("<generated>", 0, 0)


def _span() -> Span:
    return field(default=NOWHERE, compare=False, repr=False)


# ---------------------------------------------------------------- terms and expressions

@dataclass(frozen=True)
class Var:
    name: str
    span: Span = _span()


@dataclass(frozen=True)
class Wildcard:
    """`_`: a fresh variable nobody reads."""
    span: Span = _span()


# Constant types. Overlog is dynamically typed; Soufflé declares number/unsigned/float/symbol.
INT, FLOAT, STRING, BOOL, NULL, INFINITY = "int", "float", "string", "bool", "null", "infinity"
# A Soufflé record constant: its canonical text (bootstrap/records.py), `null` for nil.
RECORD = "record"


@dataclass(frozen=True)
class Const:
    value: Union[int, float, str, bool, None]
    type: str
    span: Span = _span()


@dataclass(frozen=True)
class Call:
    """A built-in function call: `f_cons(X, Y)`, `cat(A, B)`, `id("delta", R, A)`."""
    func: str
    args: tuple
    span: Span = _span()


@dataclass(frozen=True)
class BinOp:
    """Arithmetic, comparison and boolean operators: + - * / % == != < <= > >= && ||."""
    op: str
    left: object
    right: object
    span: Span = _span()


@dataclass(frozen=True)
class UnOp:
    op: str  # "-" or "!"
    arg: object
    span: Span = _span()


@dataclass(frozen=True)
class Cond:
    """`Test ? Then : Else`."""
    test: object
    then: object
    other: object
    span: Span = _span()


@dataclass(frozen=True)
class ListExpr:
    """`[A, B, C]`: a list literal (a Spark array at run time), or in Soufflé a record;
    with `branch`, Soufflé's ADT constructor `$B(A, B)` (`$B` without fields), which
    bootstrap/lowering/records.py lowers as it lowers records."""
    items: tuple
    span: Span = _span()
    branch: Optional[str] = None


@dataclass(frozen=True)
class Aggregate:
    """A head aggregate: `min<C>`, `a_min<C>`, `count<*>`; `arg` is None for `<*>`."""
    func: str  # normalized: count sum min max avg set list autoinc
    arg: object
    span: Span = _span()


Term = Union[Var, Wildcard, Const, Call, BinOp, UnOp, Cond, ListExpr, Aggregate]

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
ARITHMETIC = ("+", "-", "*", "/", "%")
BOOLEAN = ("&&", "||")
AGGREGATES = ("count", "sum", "min", "max", "avg", "set", "list", "autoinc", "seal")
# autoinc<*> numbers the groups (docs/language.md, "Aggregates"): it may sit inside
# recursion, where a group keeps the number it was first given
NUMBERING = ("autoinc",)


# ---------------------------------------------------------------- atoms and body literals

@dataclass(frozen=True)
class Atom:
    """`rel(@X, Y, _)`. `location` is the index of the `@` argument, if any.

    `named` records that the atom was written with named fields
    (`sys::rule{program: P, id: R}`); `args` are always positional, unnamed fields being
    wildcards, so the printer can write the named form back.
    """
    relation: str
    args: tuple
    location: Optional[int] = None
    negated: bool = False
    delta: bool = False
    named: bool = False
    span: Span = _span()

    @property
    def arity(self) -> int:
        return len(self.args)


@dataclass(frozen=True)
class NamedAtom:
    """An atom with named fields, before the schema resolves it to an `Atom`."""
    relation: str
    fields: tuple  # ((name, term, span), ...)
    negated: bool = False
    delta: bool = False
    span: Span = _span()


@dataclass(frozen=True)
class Select:
    """A boolean condition over bound variables."""
    expr: object
    span: Span = _span()


@dataclass(frozen=True)
class Assign:
    """`X := expr`, or Soufflé's `X = expr` when X is bound nowhere else."""
    var: Var
    expr: object
    span: Span = _span()


@dataclass(frozen=True)
class BodyAggregate:
    """Soufflé's aggregate `count : { body }` / `sum E : { body }`: a literal `V = AGG`
    (`var` V) or a term anywhere in a rule (`var` None). The parser lowers both to
    helper rules; nothing after it sees one."""
    var: Optional[Var]
    func: str
    expr: object  # None for count
    body: tuple
    span: Span = _span()


Literal = Union[Atom, Select, Assign]


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Rule:
    name: str
    head: Atom
    body: tuple
    delete: bool = False
    time: Optional[str] = None  # None, "next" or "async" (Dedalus)
    component: Optional[str] = None
    span: Span = _span()
    origin: Optional[str] = field(default=None, compare=False)  # label of the user's rule a stage made it from


@dataclass(frozen=True)
class Fact:
    atom: Atom
    component: Optional[str] = None
    span: Span = _span()


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # number unsigned float symbol any ..., or a type a `.type` declares
    span: Span = _span()


@dataclass(frozen=True)
class Declaration:
    """A typed relation: Soufflé `.decl r(a: number, b: symbol)` or Overlog
    `define(r, keys(0), {Integer, String})`. `keys` are 0-based column positions."""
    relation: str
    columns: tuple
    keys: Optional[tuple] = None
    style: str = "decl"  # "decl" or "define"
    span: Span = _span()
    # Soufflé qualifiers as written (`btree`, `brie`, `inline`, ...): storage and
    # optimization hints, kept so the program prints back whole. `eqrel`, `input` and
    # `output` are lowered by the parser and do not stay here (docs/language.md).
    qualifiers: tuple = ()
    # Soufflé's `choice-domain x, (x, y)`: each domain a tuple of 0-based column positions
    # (docs/language.md, "choice-domain"); () for none
    choice: tuple = ()


# Soufflé's primitive types; every `.type` reaches exactly one of them.
PRIMITIVE_TYPES = ("number", "unsigned", "float", "symbol")
DECL_QUALIFIERS = ("brie", "btree", "btree_delete", "eqrel", "inline", "no_inline", "magic", "no_magic",
                   "overridable", "printsize", "input", "output")


@dataclass(frozen=True)
class TypeDecl:
    """Soufflé `.type NAME <: BASE` (kind "subtype"), `.type NAME = BASE` ("equivalence")
    or `.type NAME = A | B | ...` ("union"), or the record type `.type NAME = [x: A, y: B]`
    ("record"), or the algebraic data type `.type NAME = A {x: T} | B {}` ("adt"). `bases`
    holds the named types in order; `fields` a record's field names. An ADT's branches
    are flattened into both: each branch is a marker (field `$A`, base "") followed by
    its fields (`adt_branches` in bootstrap/types.py reads them back), so the catalog's
    type_base rows hold an ADT as they hold a record."""
    name: str
    kind: str
    bases: tuple
    span: Span = _span()
    fields: tuple = ()


@dataclass(frozen=True)
class Materialize:
    """`materialize(name, lifetime, size, keys(1,2))`: keys are stored 0-based."""
    relation: str
    lifetime: Const
    size: Const
    keys: tuple
    span: Span = _span()


@dataclass(frozen=True)
class IODirective:
    """Soufflé `.input r(IO=file, filename="x")` / `.output r`."""
    direction: str  # "input" or "output"
    relation: str
    params: tuple = ()  # ((key, value), ...)
    span: Span = _span()


@dataclass(frozen=True)
class Plan:
    """`.plan relation NAME(key=value, ...)` or `.plan rule LABEL(joinK=method)`: physical
    decisions a stage wrote into the catalog (join methods, placement, caching, how a
    recursive stratum runs), and what a relation a stage made is for (its role, for a
    later stage to read), in text so a compiled program prints and parses back whole."""
    kind: str  # "relation", "rule", "statistics" or "op"
    name: str
    params: tuple = ()  # ((key, value), ...)
    span: Span = _span()


PLAN_KEYS = {
    "relation": ("distribution", "partition", "cached", "strategy", "reason", "local_iterations", "prem", "role",
                 "made_for"),
    # joinK: the method of the join with the atom at body position K; copyK: in a stratum in
    # rounds, what a partition holds of that atom's lower relation (a column, or whole)
    "rule": (),
    "statistics": (),  # rows=N, and per column K: distinctK, minK, maxK, nullsK (STATISTIC_KEYS)
    # `.plan op n3(op=join, in0=n1, in1=n2)`: one operator of the physical dataflow (tables flow_op,
    # flow_input; bootstrap/flow.py), so stage cases can state a dataflow and print the egraph's choice
    "op": ("op", "in0", "in1", "detail", "relation", "rule", "graph"),
}
JOIN_METHODS = ("broadcast", "shuffle_hash", "merge", "nested")
WHOLE = "whole"  # predicate.copy: every partition holds all of the relation (else a column number)
DISTRIBUTIONS = ("partitioned", "replicated", "broadcast", "located")
# `.plan relation leader_2_batch(role=batch, made_for=leader_2)`: a relation a stage made for
# a component it rewrote, and what it is there (catalog columns relation.role, made_for);
# `dominated`: the tuples of relation made_for that a subsumptive rule removes (lowering/subsumption.py)
ROLES = ("batch", "seal", "held", "dominated")
# `.plan statistics edge(rows=4000, distinct0=2000)`: what the cost-based stages know of a
# relation's data (catalog table `statistic`), in text so cases and goldens can state it.
# Key (with the column after it, but for rows) -> metric.
STATISTIC_KEYS = {"rows": "cardinality", "distinct": "distinct", "min": "min", "max": "max", "nulls": "nulls"}


def statistic_key(key: str):
    """`distinct2` -> ('distinct', 2); `rows` -> ('cardinality', None); None if unknown."""
    if key == "rows":
        return STATISTIC_KEYS[key], None
    m = re.fullmatch(r"(distinct|min|max|nulls)([0-9]+)", key)
    return (STATISTIC_KEYS[m.group(1)], int(m.group(2))) if m else None


@dataclass(frozen=True)
class Query:
    atom: Atom
    span: Span = _span()


@dataclass(frozen=True)
class Component:
    """A Dedalus component: rules deployed at one or more addresses."""
    name: str
    addresses: tuple
    span: Span = _span()


Statement = Union[Rule, Fact, Declaration, TypeDecl, Materialize, IODirective, Plan, Query, Component]


# ---------------------------------------------------------------- Soufflé components
# Templates the parser expands (`components.py`): no Program after parsing holds them.

@dataclass(frozen=True)
class CompType:
    """`Graph<number, T>`: a component's name and its type arguments (formal parameters
    in a `.comp` header, actual ones after `.init` and `:`)."""
    name: str
    args: tuple = ()
    span: Span = _span()


@dataclass(frozen=True)
class CompDecl:
    """`.comp Graph<T> : Base<T> { ... }`: `body` holds the statements as lowered,
    nested `CompDecl`, `CompInit` and `Override` among them."""
    type: CompType
    bases: tuple  # CompType, ...
    body: tuple
    span: Span = _span()


@dataclass(frozen=True)
class CompInit:
    """`.init g = Graph<number>`: the instance `g` of a component."""
    instance: str
    type: CompType
    span: Span = _span()
    name_span: Span = _span()  # of the instance name, where a clash is reported


@dataclass(frozen=True)
class Override:
    """`.override R` in a component: the rules and facts its bases give R are dropped."""
    relation: str
    span: Span = _span()


@dataclass(frozen=True)
class Physical:
    """The physical decisions of a program's `.plan` statements, as the planner reads
    them. A program as written has none (all empty)."""
    methods: tuple = ()  # ((rule label, body position), join method)
    distribution: tuple = ()  # (relation, 'partitioned' | 'replicated' | 'broadcast' | 'located')
    cached: tuple = ()  # relations to keep in memory
    partition: tuple = ()  # (relation, (column, ...))
    strategy: tuple = ()  # (relation, strategy, reason): how its recursive stratum runs
    local_iterations: tuple = ()  # (relation, N): a stratum in rounds, N iterations per round
    copies: tuple = ()  # ((rule label, body position), column number as text or WHOLE): a stratum in rounds


@dataclass(frozen=True)
class Program:
    name: str
    statements: tuple
    path: str = ""
    dialect: str = "overlog"  # "overlog" or "souffle"
    text: str = field(default="", compare=False, repr=False)
    number_bits: int = 64  # the width of whole numbers, 64 or 32 (bootstrap/numbers.py)

    def of(self, kind) -> list:
        return [s for s in self.statements if isinstance(s, kind)]

    @property
    def rules(self) -> list:
        return self.of(Rule)

    @property
    def facts(self) -> list:
        return self.of(Fact)

    @property
    def physical(self) -> Physical:
        methods, dist, cached, part, strategy, iterations, copies = [], [], [], [], [], [], []
        for p in self.of(Plan):
            kv = dict(p.params)
            if p.kind == "rule":
                methods += [((p.name, int(k[4:])), v) for k, v in p.params if k.startswith("join")]
                copies += [((p.name, int(k[4:])), str(v)) for k, v in p.params if k.startswith("copy")]
                continue
            if kv.get("distribution"):
                dist.append((p.name, kv["distribution"]))
            if kv.get("cached") == "true":
                cached.append(p.name)
            if kv.get("partition"):
                part.append((p.name, tuple(int(c) for c in kv["partition"].split(","))))
            if kv.get("strategy"):
                strategy.append((p.name, kv["strategy"], kv.get("reason", "")))
            if kv.get("local_iterations"):
                iterations.append((p.name, int(kv["local_iterations"])))
        return Physical(*(tuple(sorted(x)) for x in (methods, dist, cached, part, strategy, iterations, copies)))


# ---------------------------------------------------------------- helpers over terms

def subterms(t) -> tuple:
    """The direct subterms of a term (an aggregate's argument included)."""
    if isinstance(t, Call):
        return t.args
    if isinstance(t, BinOp):
        return (t.left, t.right)
    if isinstance(t, UnOp):
        return (t.arg,)
    if isinstance(t, Cond):
        return (t.test, t.then, t.other)
    if isinstance(t, ListExpr):
        return t.items
    if isinstance(t, Aggregate) and t.arg is not None:
        return (t.arg,)
    return ()


def map_subterms(t, f):
    """`t` with `f` applied to each of its direct subterms (a leaf is returned as it is)."""
    if isinstance(t, Call):
        return replace(t, args=tuple(f(a) for a in t.args))
    if isinstance(t, BinOp):
        return replace(t, left=f(t.left), right=f(t.right))
    if isinstance(t, UnOp):
        return replace(t, arg=f(t.arg))
    if isinstance(t, Cond):
        return replace(t, test=f(t.test), then=f(t.then), other=f(t.other))
    if isinstance(t, ListExpr):
        return replace(t, items=tuple(f(a) for a in t.items))
    if isinstance(t, Aggregate) and t.arg is not None:
        return replace(t, arg=f(t.arg))
    return t


def map_literal(lit, f):
    """A body literal with `f` applied to its terms: an atom's arguments, an assignment's
    or a condition's expression."""
    if isinstance(lit, Atom):
        return replace(lit, args=tuple(f(a) for a in lit.args))
    if isinstance(lit, (Assign, Select)):
        return replace(lit, expr=f(lit.expr))
    return lit


def rule_terms(rule) -> list:
    """The top-level terms of a rule: the head's arguments, then each body literal's."""
    out = list(rule.head.args)
    for lit in rule.body:
        if isinstance(lit, Atom):
            out.extend(lit.args)
        elif isinstance(lit, (Assign, Select)):
            out.append(lit.expr)
    return out


def term_vars(term) -> list:
    """Variables a term mentions, in order of first appearance (aggregates included)."""
    out: list = []

    def walk(t):
        if isinstance(t, Var):
            if t.name not in out:
                out.append(t.name)
        for s in subterms(t):
            walk(s)

    walk(term)
    return out


def atom_vars(atom: Atom) -> list:
    out: list = []
    for a in atom.args:
        for v in term_vars(a):
            if v not in out:
                out.append(v)
    return out
