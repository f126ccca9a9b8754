"""Catalog-sized programs as one Spark SQL statement over one row: the array backend
of `runtime/semantics.py`.

A catalog program (a stage, the lattice, the integrity checks) reads a few hundred
rows, so what it costs is Spark's fixed price per job and per planning round, not
data. Here the whole program becomes one SELECT that yields a single row:

- a relation is a column holding an array of structs (c0, c1, ...), and `ArrayTables`
  holds the semantics' tables as such arrays: its operations are Spark's higher-order
  functions (`array_except`, `filter`/`exists`, a sort to group by), so what a relation
  holds and what a round finds new are `semantics.combine`, `new_delta` and `absorb`;
- a stratum is one projection adding its relations' columns to the row;
- a rule is nested higher-order functions: each atom `filter`s its relation's array
  by the equalities on variables bound so far, and each match is `transform`ed into
  the rest of the rule (`flatten` joins the pieces); a negated atom or a selection
  wraps the rest in `IF(...)` (`NOT exists(...)` for negation); assignments are inlined;
- a recursive stratum is `semantics.fixpoint`'s loop as a fold,
  `aggregate(sequence(1, max_iterations), start, step)`, whose state holds each
  relation's tuples so far (`f`) and its last delta (`d`); a step is one round and,
  once every delta is empty, returns the state unchanged.

So a program is one Spark job of one task, whatever its depth of recursion, and no
plan is built per iteration. For example, the transitive closure of `e` is

    aggregate(sequence(1, 1000), named_struct('f0', r0, 'd0', r0), (acc, i) ->
      IF(size(acc.d0) = 0, acc, <acc with the new delta, derived from acc.d0 and r0>))

The fold's state must keep one type, so the types of a recursive stratum's relations
come from Spark's analysis of a probe statement (no job), remembered per program.
The row is built a stratum at a time as DataFrames (`Built.frame`; `Built.statement`
is the same evaluation as one SELECT, to read), and every column sits behind a
non-deterministic no-op (`_computed_once`) so that Spark computes it once.

What it does not do (`Unsupported`; the caller runs the program on `engine.run`):
lists, nullary relations, delete rules, numbering (autoinc), size limits (the fold
cannot stop before its deltas are empty), aggregates inside recursion other than the
min/max that recursion allows.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

from sqlglot import exp
from sqlglot.dialects import spark as sqlglot_spark

from ..bootstrap import syntax as S
from . import semantics
from .dataflow import Dataflow, RulePlan, Storage, Stratum
from .sql import DIALECT, Expr, fn, list_free, lit

# sqlglot's Spark dialect, without the rewrites it applies to every SELECT (qualify,
# DISTINCT ON, UNNEST, ANY): these statements use none, and walking the deep
# expressions of a one-row program once per SELECT costs more than generating them.
class _Spark(sqlglot_spark.Spark):
    class Generator(sqlglot_spark.Spark.Generator):
        TRANSFORMS = {**sqlglot_spark.Spark.Generator.TRANSFORMS, exp.Select: lambda self, e: self.select_sql(e)}


_DIALECT = _Spark


class Unsupported(Exception):
    """The program needs something only the engine does (the message says what)."""


@dataclass(frozen=True)
class ArrayInput:
    """An input relation as JSON rows and the Spark types of its columns."""
    rows: tuple
    types: tuple


def unsupported(dataflow: Dataflow, inputs: dict) -> Optional[str]:
    """Why this evaluator cannot run the program, or None."""
    if not list_free(dataflow, {}):
        return "a relation may hold lists"
    for name, s in dataflow.relations.items():
        if s.arity == 0:
            return f"{name} has no columns"
        if s.kind == "deletion":
            return f"{name} has delete rules"
        if s.limit is not None:  # the fold has no way to stop before its deltas are empty
            return f"{name} has a size limit (.limitsize)"
        if semantics.kind(s) == "numbered":
            return f"{name} numbers its tuples (autoinc)"
    for st in dataflow.strata:
        # A level's relations that no rule of it re-derives (no delta rule) are computed
        # once at its start, like a stratum of their own: only looping ones matter here.
        looping = {r.head for r in st.delta_rules}
        if st.recursive and any(a.func not in ("min", "max") for n in st.relations if n in looping
                                for a in dataflow.relations[n].aggregates):
            return f"stratum {st.index} aggregates inside recursion other than min/max"
    return None


def struct_type(types) -> str:
    return "struct<" + ",".join(f"c{i}:{t}" for i, t in enumerate(types)) + ">"


def array_literal(rows, types) -> exp.Expression:
    """Rows as an array of structs: one JSON text parsed by Spark."""
    names = [f"c{i}" for i in range(len(types))]
    text = json.dumps([dict(zip(names, r)) for r in rows])
    return fn("from_json", exp.Literal.string(text), exp.Literal.string(f"array<{struct_type(types)}>"))


def typed_empty(types) -> exp.Expression:
    return exp.Cast(this=fn("array"), to=data_type(f"array<{struct_type(types)}>"))


@lru_cache(maxsize=None)
def _parsed_type(text: str) -> exp.DataType:
    return exp.DataType.build(text, dialect=DIALECT)


def data_type(text: str) -> exp.DataType:
    """A Spark type name as a sqlglot type (parsed once per name)."""
    return _parsed_type(text).copy()


def _lambda(var: str, body) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(var)])


def _struct(values: list) -> exp.Expression:
    args = []
    for i, v in enumerate(values):
        args += [exp.Literal.string(f"c{i}"), v]
    return fn("named_struct", *args)


def _and(conds: list) -> exp.Expression:
    return exp.and_(*conds, copy=False) if len(conds) > 1 else conds[0]


def _concat(parts: list) -> exp.Expression:
    return parts[0] if len(parts) == 1 else fn("concat", *parts)


def _field(var: str, name: str) -> exp.Column:
    return exp.column(name, table=var)


# ---------------------------------------------------------------- rules

def rule_array(rule: RulePlan, source, now: str) -> exp.Expression:
    """The rule's derivations (a bag) as an array of head structs. `source(step)` is
    the array an atom reads. An aggregated head column holds the aggregate's input.

    >>> from evita.bootstrap.parser import parse_program
    >>> from evita.bootstrap.planner import plan
    >>> flow = plan(parse_program("e(1, 2). t(X, Z) :- e(X, Y), e(Y, Z), !e(Z, X)."))
    >>> rule = flow.strata[-1].init_rules[0]
    >>> print(rule_array(rule, lambda step: exp.column(step.relation), "").sql(_DIALECT))
    FLATTEN(TRANSFORM(e, x0 -> FLATTEN(TRANSFORM(FILTER(e, x1 -> x1.c0 = x0.c1), x1 -> IF(NOT (EXISTS(e, n2 -> n2.c0 = x1.c1 AND n2.c1 = x0.c0)), ARRAY(NAMED_STRUCT('c0', x0.c0, 'c1', x1.c1)), ARRAY())))))
    """
    steps = rule.steps

    def match(step, var: str, env: dict):
        conds, local = [], {}
        for i, arg in enumerate(step.args):
            c = _field(var, f"c{i}")
            if isinstance(arg, S.Wildcard):
                continue
            if isinstance(arg, S.Var) and arg.name not in env and arg.name not in local:
                local[arg.name] = c
            elif isinstance(arg, S.Var):
                conds.append(exp.EQ(this=c, expression=(env.get(arg.name) or local[arg.name]).copy()))
            else:
                conds.append(exp.EQ(this=c, expression=Expr({**env, **local}, (), now).compile(arg)))
        return conds, local

    def build(k: int, env: dict):
        """(expression, True when it is one struct rather than an array)."""
        preds = []
        while k < len(steps) and steps[k].op not in ("scan", "join", "generate"):
            step = steps[k]
            if step.op == "filter":
                preds.append(Expr(env, (), now).compile(step.expr))
            elif step.op == "assign":
                env = {**env, step.var: exp.Paren(this=Expr(env, (), now).compile(step.expr))}
            elif step.op == "antijoin":
                var = f"n{k}"
                conds, _ = match(step, var, env)
                hit = fn("exists", source(step), _lambda(var, _and(conds))) if conds else \
                    exp.GT(this=fn("size", source(step)), expression=lit(0))
                preds.append(exp.Not(this=exp.Paren(this=hit)))
            else:
                raise Unsupported(f"step {step.op}")
            k += 1
        if k == len(steps):
            ex = Expr(env, (), now)
            body = _struct([lit(1) if isinstance(a, S.Aggregate) and a.arg is None else
                            ex.compile(a.arg if isinstance(a, S.Aggregate) else a) for a in rule.head_args])
            one = True
        elif steps[k].op == "generate":  # range(...): the rest of the rule once per value
            step, var = steps[k], f"x{k}"
            rest, rest_one = build(k + 1, {**env, step.var: exp.column(var)})
            body = fn("transform", Expr(env, (), now).compile(step.expr), _lambda(var, rest))
            if not rest_one:
                body = fn("flatten", body)
            one = False
        else:
            step, var = steps[k], f"x{k}"
            conds, local = match(step, var, env)
            rest, rest_one = build(k + 1, {**env, **local})
            src = source(step)
            if conds:
                src = fn("filter", src, _lambda(var, _and(conds)))
            body = fn("transform", src, _lambda(var, rest))
            if not rest_one:
                body = fn("flatten", body)
            one = False
        if preds:
            body = exp.If(this=_and(preds), true=fn("array", body) if one else body, false=fn("array"))
            one = False
        return body, one

    body, one = build(0, {})
    return fn("array", body) if one else body


# ---------------------------------------------------------------- relation semantics

def _plus(a: str, b: str) -> exp.Lambda:
    return _lambda_pair(a, b, exp.Add(this=exp.column(a), expression=exp.column(b)))


def _aggregate(func: str, values) -> exp.Expression:
    """An aggregate over an array of values, nulls ignored as SQL's aggregates do
    (an empty array cannot occur: a group has members)."""
    v = fn("filter", values, _lambda("v", exp.Not(this=exp.Is(this=exp.column("v"), expression=exp.Null()))))
    if func == "count":
        return fn("size", v)
    if func in ("min", "max"):
        return fn(f"array_{func}", v)
    none = exp.EQ(this=fn("size", v), expression=lit(0))
    if func == "sum":  # folded from the first value, so the sum keeps the values' type
        total = fn("aggregate", fn("slice", v, lit(2), fn("size", v)), fn("element_at", v, lit(1)), _plus("s", "v"))
        return exp.If(this=none, true=exp.Null(), false=total)
    if func == "avg":
        total = fn("aggregate", v, exp.Cast(this=lit(0), to=data_type("double")), _plus("s", "v"))
        return exp.If(this=none, true=exp.Null(), false=exp.Div(this=total, expression=fn("size", v)))
    raise Unsupported(f"aggregate {func}")


def _lambda_pair(a: str, b: str, body) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(a), exp.to_identifier(b)])


class ArrayTables(semantics.Tables):
    """`runtime/semantics.py`'s operations over arrays of structs (c0, c1, ...): each
    returns a sqlglot expression, to be computed by Spark inside the one statement.

    A table is an expression, not a value, so one that is read twice is bound first
    (`_let`, or the fold's bindings): these operations read each argument once, except
    `minus` by columns (and so a keyed relation's `replace`), which reads `other` once
    per tuple of `t`: the fold hands it the round's bound delta.

    A keyed relation's delta replaces the tuples of `full` with its keys:

    >>> from .dataflow import Storage
    >>> level = Storage("level", 2, ("x", "n"), ("number", "number"), "derived", keys=(0,))
    >>> print(semantics.absorb(TABLES, level, exp.column("full"), exp.column("delta")).sql(_DIALECT))
    CONCAT(FILTER(full, mx -> NOT (EXISTS(delta, my -> my.c0 IS NOT DISTINCT FROM mx.c0))), delta)
    """

    def empty(self, s: Storage):
        from .io import schema_for

        return typed_empty([f.dataType.simpleString() for f in schema_for(s).fields])

    def union(self, s: Storage, parts: list):
        return _concat(parts)

    def distinct(self, s: Storage, t):
        return fn("array_distinct", t)

    def aggregate(self, s: Storage, t):
        aggs = {a.column: a.func for a in s.aggregates}
        groups = list(s.group_columns)
        if not groups:  # grouped on a constant: no valuations give no tuple
            return _let(t, "agg_u", exp.If(
                this=exp.EQ(this=fn("size", exp.column("agg_u")), expression=lit(0)), true=fn("array"),
                false=fn("array", _struct([_aggregate(aggs[i], fn("transform", exp.column("agg_u"), _lambda(
                    "t", _field("t", f"c{i}")))) for i in range(s.arity)]))))

        def aggregated(members, key):
            return _struct([_aggregate(aggs[i], fn("transform", members, _lambda("t", _field("t", f"c{i}"))))
                            if i in aggs else exp.Dot(this=exp.Paren(this=key), expression=exp.to_identifier(f"k{i}"))
                            for i in range(s.arity)])
        return _grouped(t, groups, aggregated)

    def greatest_per_key(self, s: Storage, t):
        rest = [i for i in range(s.arity) if i not in s.keys]

        def greatest(members, key):
            best = exp.Paren(this=fn("array_max", fn("transform", members, _lambda("t", _struct_of("t", rest)))))
            return _struct([exp.Dot(this=exp.Paren(this=key) if i in s.keys else best, expression=exp.to_identifier(
                f"k{i}")) for i in range(s.arity)])
        return _grouped(t, list(s.keys), greatest)

    def number(self, s: Storage, t, old=None):
        raise Unsupported(f"{s.name} numbers its tuples (autoinc)")

    def minus(self, s: Storage, t, other, columns=None):
        """Distinct when `columns` is None (array_except); tables that meet here are sets."""
        if columns is None:
            return fn("array_except", t, other)
        if not columns:  # every tuple agrees on no columns
            return exp.If(this=exp.EQ(this=fn("size", other), expression=lit(0)), true=t,
                          false=fn("filter", t, _lambda("mx", exp.false())))
        # null-safe, as array_except and the grouping's key comparison are
        same = _and([exp.NullSafeEQ(this=_field("my", f"c{i}"), expression=_field("mx", f"c{i}")) for i in columns])
        return fn("filter", t, _lambda("mx", exp.Not(this=exp.Paren(this=fn("exists", other, _lambda("my", same))))))

    def count(self, tables: dict) -> dict:
        """Sizes as expressions: inside one statement nothing is counted until the end."""
        return {n: fn("size", t) for n, t in tables.items()}

    def cleared(self, s: Storage, t):
        return fn("filter", t, _lambda("t", exp.false()))

    def new_tuples(self, s: Storage, full, cand):
        return fn("array_except", cand, full)  # distinct already

    def replace(self, s: Storage, full, delta, columns: tuple):
        if semantics.kind(s) == "grouped":
            # Only min/max aggregate inside recursion (`unsupported`), and a delta tuple
            # beats the one it replaces: aggregating both is the replacement, by sorting
            # rather than by a search of `delta` per tuple of `full`.
            return self.aggregate(s, _concat([full, delta]))
        return super().replace(s, full, delta, columns)


TABLES = ArrayTables()


def combine(s: Storage, parts: list) -> exp.Expression:
    """The relation's tuples from its parts (bags): `semantics.combine` over arrays."""
    return semantics.combine(TABLES, s, parts)


def _let(value, var: str, body) -> exp.Expression:
    """`body` with `var` bound to `value`, computed once (a lambda over a one-element array)."""
    return fn("element_at", fn("transform", fn("array", value), _lambda(var, body)), lit(1))


def _at(array: str, index) -> exp.Expression:
    return fn("element_at", exp.column(array), index)


def _grouped(union, columns: list, make) -> exp.Expression:
    """`make(members, key)` for each group of `union`'s tuples by `columns` (key: a
    struct k<col>, ...), in O(n log n): the tuples sorted by key with Spark's own struct
    order, then cut where the key changes (a filter per key would be O(groups * n))."""
    tagged = fn("transform", exp.column("grp_u"), _lambda("t", fn("named_struct", exp.Literal.string("k"),
                                                                  _struct_of("t", columns), exp.Literal.string("t"),
                                                                  exp.column("t"))))

    def key_at(i):
        return exp.Dot(this=exp.Paren(this=_at("grp_s", i)), expression=exp.to_identifier("k"))
    i = exp.column("grp_i")
    starts = fn("filter", fn("sequence", lit(1), fn("size", exp.column("grp_s"))), _lambda("grp_i", exp.or_(
        exp.EQ(this=i, expression=lit(1)),
        exp.Not(this=exp.Paren(this=exp.NullSafeEQ(this=key_at(i), expression=key_at(exp.Sub(this=i, expression=lit(1)))))))))
    j = exp.column("grp_j")
    first = _at("grp_b", j)
    after = exp.If(this=exp.EQ(this=j, expression=fn("size", exp.column("grp_b"))),
                   true=exp.Add(this=fn("size", exp.column("grp_s")), expression=lit(1)),
                   false=_at("grp_b", exp.Add(this=j, expression=lit(1))))
    members = fn("transform", fn("slice", exp.column("grp_s"), first, exp.Sub(this=after, expression=first)),
                 _lambda("grp_x", exp.Dot(this=exp.column("grp_x"), expression=exp.to_identifier("t"))))
    groups = fn("transform", fn("sequence", lit(1), fn("size", exp.column("grp_b"))),
                _lambda("grp_j", make(members, key_at(first))))
    body = exp.If(this=exp.EQ(this=fn("size", exp.column("grp_u")), expression=lit(0)), true=fn("array"),
                  false=_let(fn("array_sort", tagged), "grp_s", _let(starts, "grp_b", groups)))
    return _let(union, "grp_u", body)


def _computed_once(e) -> exp.Expression:
    """The expression behind a non-deterministic no-op, so Spark computes the column
    once. Spark inlines a column read by one expression into it (CollapseProject, and
    again when planning), even when that read sits inside a lambda, where it would be
    recomputed for every element; it never inlines a non-deterministic column."""
    return exp.If(this=exp.LT(this=fn("spark_partition_id"), expression=lit(0)), true=exp.Null(), false=e)


def _struct_of(var: str, columns) -> exp.Expression:
    """named_struct('k2', var.c2, ...): some columns of a tuple."""
    args = []
    for i in columns:
        args += [exp.Literal.string(f"k{i}"), _field(var, f"c{i}")]
    return fn("named_struct", *args)


# ---------------------------------------------------------------- the program

@dataclass
class Built:
    """A program's one-row evaluation: `levels` of (column, expression) pairs, each
    level reading the columns of those before it, and the output columns (the wanted
    relations, then per recursive stratum its fold's final state)."""
    levels: list
    outputs: list  # (output column, expression)
    wanted: list  # relation names, in the order of the first outputs
    recursive: list  # (stratum, state column) per recursive stratum

    def statement(self) -> exp.Select:
        """The whole evaluation as one SELECT (for reading; `frame` runs it)."""
        row = None
        for k, level in enumerate(self.levels):
            cols = [exp.alias_(e, c, copy=False) for c, e in level]
            row = exp.select(*cols, copy=False) if row is None else exp.select(exp.Star(), *cols, copy=False).from_(
                exp.Subquery(this=row, alias=exp.TableAlias(this=exp.to_identifier(f"l{k}"))), copy=False)
        return exp.select(*[exp.alias_(e, o) for o, e in self.outputs], copy=False).from_(
            exp.Subquery(this=row, alias=exp.TableAlias(this=exp.to_identifier("l"))), copy=False)

    def frame(self, spark, below=None):
        """The evaluation as a DataFrame built a level at a time: Spark analyzes each
        level's new expressions once, over an already analyzed child (one statement
        would be re-resolved whole, once per level of nesting). `below`: the frame of
        another program, whose columns this one's levels add to (column names are
        prefixed per program), so several programs share one row and one action."""
        df = spark.range(1) if below is None else below
        for k, level in enumerate(self.levels):
            cols = [exp.alias_(e, c, copy=False).sql(_DIALECT) for c, e in level]
            df = df.selectExpr(*cols) if k == 0 and below is None else df.selectExpr("*", *cols)
        return df

    def output_columns(self) -> list:
        return [exp.alias_(e, o).sql(_DIALECT) for o, e in self.outputs]


class Program:
    """Builds the one-row statement of a planned program.

    `types`: relation -> Spark type names of its columns, for the relations of
    recursive strata (from `probe_types`); None builds the probe itself, where a
    recursive relation is approximated by one naive round (types only)."""

    def __init__(self, dataflow: Dataflow, inputs: dict, *, max_iterations: int, now: str,
                 types: Optional[dict] = None, prefix: str = "r"):
        self.df = dataflow
        self.inputs = inputs
        self.max_iterations = max_iterations
        self.now = now
        self.types = types
        self.column = {name: f"{prefix}{i}" for i, name in enumerate(dataflow.relations)}
        self.prefix = prefix
        self.facts: dict = {}
        for rel, values in dataflow.facts:
            self.facts.setdefault(rel, []).append(values)

    def seeds(self, name: str) -> list:
        """Facts and inputs of a relation, as arrays."""
        from .io import _convert, schema_for

        s = self.df.relations[name]
        parts = []
        rows = self.facts.get(name)
        if rows:
            if s.keys is not None:  # a later fact replaces an earlier one with the same key
                rows = list({tuple(r[k] for k in s.keys): r for r in rows}.values())
            fields = schema_for(s, list(zip(*rows))).fields
            types = [f.dataType.simpleString() for f in fields]
            data = [tuple(_convert(v, f.dataType) for v, f in zip(r, fields)) for r in rows]
            parts.append(typed_empty(types) if self.types is None else array_literal(data, types))
        if name in self.inputs:
            given = self.inputs[name]
            if len(given.types) != s.arity:
                raise Unsupported(f"input {name} has {len(given.types)} columns, the program uses {s.arity}")
            parts.append(typed_empty(given.types) if self.types is None else array_literal(given.rows, given.types))
        return parts

    def declared_empty(self, s: Storage) -> exp.Expression:
        return TABLES.empty(s)

    def build(self, wanted: list) -> Built:
        base = [(self.column[n], self.relation(n)) for n, s in self.df.relations.items() if s.kind == "base"]
        levels = [base or [("_", lit(0))]]
        recursive = []
        for st in self.df.strata:
            if st.recursive:
                cols, state = self.fold(st)
                recursive.append((st, f"{self.prefix}s{st.index}"))
                levels.append([(f"{self.prefix}s{st.index}", _computed_once(state))])
                levels.append(cols)
            else:
                levels.append([(self.column[n], _computed_once(self.once(n, st))) for n in st.relations])
        outputs = [(f"{self.prefix}o{i}", exp.column(self.column[n])) for i, n in enumerate(wanted)]
        for st, col in recursive:  # the fold's iterations and final sizes, not its tuples again
            state = exp.column(col)
            outputs.append((f"{self.prefix}z{st.index}", fn("named_struct", exp.Literal.string("i"), _field(col, "i"), *[
                x for j in range(len(st.relations)) for x in (
                    exp.Literal.string(f"d{j}"), fn("size", _field(col, f"d{j}")),
                    exp.Literal.string(f"f{j}"), fn("size", _field(col, f"f{j}")))]) if self.types is not None
                            else state))
        return Built(levels, outputs, list(wanted), recursive)

    def relation(self, name: str) -> exp.Expression:
        """A base relation: its facts and inputs."""
        s = self.df.relations[name]
        parts = self.seeds(name)
        if not parts:
            return self.declared_empty(s)
        return parts[0] if len(parts) == 1 and name not in self.inputs else combine(s, parts)

    def source(self, fold: Optional[dict] = None):
        """step -> the array an atom reads: a column, or in a fold the state's field."""
        def read(step):
            if fold is not None and step.relation in fold:
                j = fold[step.relation]
                return _field("acc", f"d{j}" if step.delta else f"f{j}")
            return exp.column(self.column[step.relation])
        return read

    def derivations(self, name: str, rules, source) -> list:
        return [rule_array(r, source, self.now) for r in rules if r.head == name]

    def once(self, name: str, st: Stratum) -> exp.Expression:
        s = self.df.relations[name]
        parts = self.seeds(name) + self.derivations(name, st.init_rules, self.source())
        return combine(s, parts) if parts else self.declared_empty(s)

    def fold(self, st: Stratum):
        """(the stratum's relation columns read off the fold's result, the fold)."""
        names = list(st.relations)
        index = {n: j for j, n in enumerate(names)}
        starts = []
        for n in names:
            parts = self.seeds(n) + self.derivations(n, st.init_rules, self.source())
            starts.append(combine(self.df.relations[n], parts) if parts else None)
        state_col = exp.column(f"{self.prefix}s{st.index}")
        if self.types is None:  # the probe: one naive round, for the types the rules give
            cols = []
            for j, n in enumerate(names):
                start = starts[j] if starts[j] is not None else self.declared_empty(self.df.relations[n])
                derived = self.derivations(n, st.delta_rules, self.probe_source(index, starts))
                kept = ([starts[j]] if starts[j] is not None else []) + derived
                cols.append((self.column[n], _concat(kept) if kept else start))
            return cols, lit(0)
        array_types = {n: f"array<{struct_type(self.types[n])}>" for n in names}

        def cast(e, n):
            return exp.Cast(this=e, to=data_type(array_types[n]))

        # each start is both the relation so far and the first delta: bound once, read twice
        start = _let(fn("named_struct", *[x for j, n in enumerate(names) for x in (
            exp.Literal.string(f"s{j}"), cast(starts[j] if starts[j] is not None else fn("array"), n))]), "s",
            fn("named_struct", *[x for j in range(len(names)) for x in (
                exp.Literal.string(f"f{j}"), _field("s", f"s{j}"), exp.Literal.string(f"d{j}"), _field("s", f"s{j}"))],
               exp.Literal.string("i"), lit(0)))
        source = self.source(index)
        # A round as `semantics.fixpoint` runs it: first every new delta, from the state
        # the round starts with (bound as n.n<j>, so each is computed once), then each
        # relation absorbs its delta; a relation no delta rule derives gains nothing.
        deltas, grown = [], []
        for j, n in enumerate(names):
            s = self.df.relations[n]
            full = _field("acc", f"f{j}")
            derived = self.derivations(n, st.delta_rules, source)
            if derived:
                cand = cast(TABLES.union(s, derived), n)
                deltas.append(cast(semantics.new_delta(TABLES, s, full, cand), n))
                grown += [exp.Literal.string(f"f{j}"), cast(semantics.absorb(TABLES, s, full, _field("n", f"n{j}")), n),
                          exp.Literal.string(f"d{j}"), _field("n", f"n{j}")]
            else:
                deltas.append(TABLES.cleared(s, full))
                grown += [exp.Literal.string(f"f{j}"), full, exp.Literal.string(f"d{j}"), _field("n", f"n{j}")]
        grown = fn("named_struct", *grown, exp.Literal.string("i"), exp.Add(this=_field("acc", "i"), expression=lit(1)))
        step = _let(fn("named_struct", *[x for j in range(len(names)) for x in (
            exp.Literal.string(f"n{j}"), deltas[j])]), "n", grown)
        quiet = _and([exp.EQ(this=fn("size", _field("acc", f"d{j}")), expression=lit(0)) for j in range(len(names))])
        body = exp.If(this=quiet, true=exp.column("acc"), false=step)
        state = fn("aggregate", fn("sequence", lit(1), lit(self.max_iterations)), start, _lambda_pair("acc", "i", body))
        cols = [(self.column[n], exp.Dot(this=state_col, expression=exp.to_identifier(f"f{j}")))
                for j, n in enumerate(names)]
        return cols, state

    def probe_source(self, index: dict, starts: list):
        def read(step):
            if step.relation in index:
                j = index[step.relation]
                if starts[j] is not None:
                    return starts[j]
                return self.declared_empty(self.df.relations[step.relation])
            return exp.column(self.column[step.relation])
        return read


# ---------------------------------------------------------------- running

_TYPES: dict = {}  # the program without data -> relation -> column types


def probe_types(spark, dataflow: Dataflow, inputs: dict, *, now: str) -> dict:
    """Column types of the relations of recursive strata, from Spark's analysis of a
    probe (no job). Types depend on the program and its inputs' types, not on the
    catalog's rows, so they are remembered per program with its facts' values
    replaced by their types."""
    recursive = [n for st in dataflow.strata if st.recursive for n in st.relations]
    if not recursive:
        return {}
    shape = replace(dataflow, facts=tuple((rel, tuple(type(v).__name__ for v in values))
                                          for rel, values in dataflow.facts))
    key = (shape.to_json(), tuple(sorted((n, i.types) for n, i in inputs.items())))
    if key not in _TYPES:
        probe = Program(dataflow, inputs, max_iterations=1, now="1970-01-01 00:00:00").build(recursive)
        fields = probe.frame(spark).selectExpr(*probe.output_columns()).schema.fields
        # a column no rule sets is null everywhere (void): its cast needs a real type
        _TYPES[key] = {n: [("string" if c.dataType.simpleString() == "void" else c.dataType.simpleString())
                           for c in fields[i].dataType.elementType.fields]
                        for i, n in enumerate(recursive)}
    return _TYPES[key]


@dataclass
class Request:
    """One program to evaluate: its dataflow, inputs (name -> ArrayInput) and the
    relations to read back."""
    dataflow: Dataflow
    inputs: dict
    wanted: list
    max_iterations: int = 1000


@dataclass
class Answer:
    tuples: dict  # relation -> set of tuples
    iterations: dict  # recursive stratum -> (iterations run, relation -> tuples)
    limit: Optional[tuple] = None  # (stratum, {relation: size of its last delta}) when it did not converge


def evaluate(spark, requests: list, now: str) -> tuple:
    """Evaluate several programs in one Spark action (their levels stacked on one row):
    (an `Answer` per request, (seconds building, seconds of the action)).
    Raises Unsupported before any Spark call."""
    import time

    from .io import plain as _plain

    started = time.perf_counter()
    for r in requests:
        why = unsupported(r.dataflow, r.inputs)
        if why:
            raise Unsupported(why)
    built = []
    for k, r in enumerate(requests):
        types = probe_types(spark, r.dataflow, r.inputs, now=now)
        program = Program(r.dataflow, r.inputs, max_iterations=r.max_iterations, now=now, types=types,
                          prefix=f"p{k}_")
        built.append(program.build(r.wanted))
    frame = None
    for b in built:
        frame = b.frame(spark, frame)
    frame = frame.selectExpr(*[c for b in built for c in b.output_columns()])
    built_at = time.perf_counter()
    row = frame.collect()[0]
    done = time.perf_counter()
    answers = []
    for k, b in enumerate(built):
        tuples = {name: {_plain(t) for t in row[f"p{k}_o{i}"]} for i, name in enumerate(b.wanted)}
        iterations, limit = {}, None
        for st, _ in b.recursive:
            state = row[f"p{k}_z{st.index}"]
            sizes = {n: state[f"d{j}"] for j, n in enumerate(st.relations)}
            iterations[st.index] = (state["i"], {n: state[f"f{j}"] for j, n in enumerate(st.relations)})
            if any(sizes.values()) and limit is None:
                limit = (st, sizes)
        answers.append(Answer(tuples, iterations, limit))
    return answers, (built_at - started, done - built_at)
