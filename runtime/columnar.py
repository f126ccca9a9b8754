"""A stratum's fixpoint over pandas columns, in one process.

Where Spark's cost per job would dominate, a stratum runs here instead of in the SQL
loop: every iteration is a few vectorized pandas operations (hash joins, anti-joins,
group-bys), milliseconds rather than a Spark job. Its callers:
- `runtime/rounds.py`: a stratum a stage put in tasks, one fixpoint per partition inside
  the partition's Spark task (decomposable), or rounds of them with an exchange between;
- `Engine.run_small` (`runtime/engine.py`): a stratum whose inputs are small, on the
  driver that already holds them.

The semantics are `runtime/semantics.py`'s, the one definition every strategy shares:
this module is its pandas backend (`PandasTables`) plus the evaluation of rule bodies.
`runtime/oracle.py` checks it against an independent tuple-at-a-time evaluator.

What is evaluated: atoms whose arguments are variables, wildcards and constants; filters
and assignments over arithmetic, comparisons, boolean operators, conditionals,
`abs`/`min`/`max`, lists (list literals, cons, append, concat, contains, size; lists
are tuples) and the text and number functions the stages use (`cat`, `strlen`,
`to_string`, `if`, `reprefix`, `to_float`, `floor`, `pow` (a double, as Spark's `power`), `log`, `exp`, and `hash`: Spark's
xxhash64, `runtime/xxhash.py`) with Spark's null and cast rules; count, sum, min, max,
mean, and set and list (sorted tuples, as Spark's sorted arrays). Anything else (other string functions,
set/list aggregates, a double's text, arithmetic on nulls) raises `Unsupported` and the
stratum runs in the SQL loop, which has Spark's SQL semantics for all of it. So does a
division or modulo by zero: the SQL loop reports it as Spark does. A comparison with a
null in a condition is not true, as in SQL.

A third caller: `bootstrap/stage.in_process_first`, the stages themselves over a small
catalog (a compile of a small program then starts no Spark job).

>>> import pandas as pd
>>> from evita.bootstrap.parser import parse_program
>>> from evita.bootstrap.planner import plan
>>> flow = plan(parse_program('''
...     .decl edge(x: number, y: number)
...     edge(1, 2). edge(2, 3). edge(3, 1).
...     r1 path(X, Y) :- edge(X, Y).
...     r2 path(X, Z) :- path(X, Y), edge(Y, Z).''', "doc.dl"))
>>> [st] = [s for s in flow.strata if s.recursive]
>>> edge = pd.DataFrame({"c0": [1, 2, 3], "c1": [2, 3, 1]})
>>> out = run_stratum(st, flow.relations, {"edge": edge})
>>> len(out.tables["path"]), [sizes for _, sizes in out.iterations]
(9, [{'path': 3}, {'path': 3}, {'path': 3}, {'path': 0}])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ..bootstrap import builtins as B
from ..bootstrap import syntax as S
from ..bootstrap import ranges
from . import semantics
from .dataflow import RulePlan, Storage, Stratum, term_text

# A stratum whose inputs hold at most this many rows runs here, on the driver
# (`Engine.run_small`); the measured crossover is in docs/performance.md.
SMALL_ROWS = 200_000

# Spark's type of a column -> the Arrow type a task's columns travel in (the types a task
# holds; others, lists, stay on Spark). Spark's `int` (a literal's type) is 32 bits as
# Spark hands a column over and takes it back; computed in a task (`held`) it is 64 bits,
# as numpy's arithmetic gives it, and a task that keeps tuples across rounds
# (runtime/rounds.py) holds it so, casting to 32 bits only when it gives them to Spark.
ARROW = {"bigint": "int64", "int": "int32", "double": "float64", "string": "string", "boolean": "bool_"}


def arrow_type(spark_type: str, held: bool = False):
    """The Arrow type of a Spark column type (in ARROW): as Spark has it, or `held` in a task."""
    import pyarrow as pa

    return pa.int64() if held and spark_type == "int" else getattr(pa, ARROW[spark_type])()

_OPS = ("+", "-", "*", "/", "//", "%", "udiv", "umod", "==", "!=", "<", "<=", ">", ">=", "&&", "||")
_BITWISE = ("band", "bor", "bxor", "bnot", "bshl", "bshr", "bshru", "land", "lor", "lxor", "lnot")
_TEXT_CALLS = ("cat", "strlen", "to_string", "if", "reprefix", "to_float", "to_number", "to_unsigned", "floor", "log", "pow",
               "exp", "hash", "upper", "lower", "record", "record_field",
               "adt", "adt_branch", "adt_field")
_CALLS = ("abs", "as", "min", "max", "cons", "append", "concat", "contains", "size", "list") + _BITWISE + _TEXT_CALLS
_LIST_CALLS = ("cons", "append", "concat", "contains", "size", "list")
_AGGREGATES = {"count": "count", "sum": "sum", "min": "min", "max": "max", "avg": "mean", "mean": "mean",
               # Spark's array_sort(array_distinct(collect_list)) and array_sort(collect_list)
               "set": lambda v: tuple(sorted(set(v.dropna()))), "list": lambda v: tuple(sorted(v.dropna())),
               "sum32": lambda v: int(_wrap32(v.sum())),  # a whole sum at 32 bits (bootstrap/lowering/width.py)
               # the least and greatest by unsigned order (bootstrap/lowering/unsigned.py)
               "umin": lambda v: _unsigned_extreme(v, min), "umax": lambda v: _unsigned_extreme(v, max),
               "autoinc": None}  # numbers the groups: `_numbered`


class Unsupported(Exception):
    """This stratum (or its data) needs the SQL loop; the message says why."""


NoFixpoint = semantics.NoFixpoint


# ---------------------------------------------------------------- what runs here

def _term_ok(t) -> bool:
    if isinstance(t, (S.Var, S.Wildcard)):
        return True
    if isinstance(t, S.Const):
        return t.type in (S.INT, S.FLOAT, S.STRING, S.BOOL, S.INFINITY, S.RECORD)
    if isinstance(t, S.BinOp):
        return t.op in _OPS and _term_ok(t.left) and _term_ok(t.right)
    if isinstance(t, S.UnOp):
        return _term_ok(t.arg)
    if isinstance(t, S.Cond):
        return _term_ok(t.test) and _term_ok(t.then) and _term_ok(t.other)
    if isinstance(t, S.Call):
        return B.canonical(t.func) in _CALLS and all(_term_ok(a) for a in t.args)
    if isinstance(t, S.ListExpr):
        return all(_term_ok(a) for a in t.items)
    return False


def unsupported(rules, storages) -> Optional[str]:
    """Why these rules cannot run here, or None when they can."""
    for r in rules:
        if r.delete:
            return f"rule {r.rule} deletes"
        for step in r.steps:
            for a in step.args:
                if not isinstance(a, (S.Var, S.Wildcard, S.Const)) or not _term_ok(a):
                    return f"rule {r.rule} has the term {term_text(a)} in an atom"
            if step.op == "generate":  # range(...): its arguments are terms like any other
                if not all(_term_ok(a) for a in step.expr.args):
                    return f"rule {r.rule} computes {term_text(step.expr)}"
            elif step.expr is not None and not _term_ok(step.expr):
                return f"rule {r.rule} computes {term_text(step.expr)}"
        for a in r.head_args:
            if isinstance(a, S.Aggregate):
                if a.func not in _AGGREGATES or (a.arg is not None and not _term_ok(a.arg)):
                    return f"rule {r.rule} aggregates with {a.func}"
            elif not _term_ok(a) and not (isinstance(a, S.Const) and a.type == S.NULL):  # a null: None
                return f"rule {r.rule} derives {term_text(a)}"
    for s in storages:
        if any(a.func not in _AGGREGATES for a in s.aggregates):
            return f"{s.name} aggregates with {s.aggregates[0].func}"
    return None


def checked(table):
    """A table collected from Spark, if the evaluator can read it: no nulls (pandas
    would join them; SQL does not); arrays become tuples. Raises Unsupported."""
    for c in table.columns:
        col = table[c]
        if col.isna().any():
            raise Unsupported(f"column {c} holds nulls")
        if col.dtype.kind == "O" and not all_text(col):
            if not all(isinstance(v, (list, tuple)) or hasattr(v, "tolist") for v in col):
                raise Unsupported(f"column {c} holds {col.dtype}")
            table[c] = col.map(_as_tuple)
        if col.dtype.kind not in "iufbO":
            raise Unsupported(f"column {c} holds {col.dtype}")
    return table


def _as_tuple(v):
    """A list value as the evaluator holds it (Spark hands arrays over as numpy arrays)."""
    items = v.tolist() if hasattr(v, "tolist") else v
    return tuple(_as_tuple(x) if isinstance(x, (list, tuple)) or hasattr(x, "tolist") else x for x in items)


def all_text(column) -> bool:
    import pandas as pd

    return pd.api.types.infer_dtype(column, skipna=False) in ("string", "empty")


# ---------------------------------------------------------------- one rule

def _columns(n: int) -> list:
    return [f"c{i}" for i in range(n)]


def _bind(args, df):
    """The atom's tuples as columns named by its variables; constants and repeated
    variables select, wildcards drop. Built from numpy arrays in one DataFrame call:
    the tables are small, and pandas' per-operation overhead is most of their cost."""
    import pandas as pd

    arrays: dict = {}

    def column(i: int):
        if i not in arrays:
            arrays[i] = df[f"c{i}"].to_numpy()
        return arrays[i]

    names: dict = {}
    mask = None
    for i, a in enumerate(args):
        if isinstance(a, S.Var):
            if a.name not in names:
                names[a.name] = i
                continue
            other = column(names[a.name])
            cond = (column(i) == other) & ~pd.isna(other)  # as SQL (and pandas): a null equals nothing
        elif isinstance(a, S.Const):
            cond = column(i) == _const(a)
        else:
            continue
        cond = pd.array(cond, dtype=bool).to_numpy() if getattr(cond, "dtype", None) != bool else cond
        mask = cond if mask is None else (mask & cond)
    rows = len(df) if mask is None else int(mask.sum())
    data = {}
    for name, i in names.items():
        v = column(i) if mask is None else column(i)[mask]
        # A catalog snapshot's column that holds nulls keeps Python values (object); where
        # the rows left hold none, it takes its values' type, so it joins typed columns.
        if v.dtype == object and len(v) and not pd.isna(v).any():
            v = _inferred(v)
        data[name] = v
    return _Bound(data, rows)


def _inferred(values):
    """An object array as the typed array its values allow (`Series.infer_objects`'s
    conversion, called directly: pandas' Series around it costs more than the work on
    the few rows of a catalog atom)."""
    import numpy as np
    import pandas as pd
    from pandas._libs import lib

    out = lib.maybe_convert_objects(values, convert_non_numeric=True)
    return out if isinstance(out, np.ndarray) else pd.Series(values).infer_objects().to_numpy()


class _Bound:
    """A rule body's valuations so far: numpy columns named by their variables. Filters
    and assignments work on the arrays; only joins build pandas frames (`frame()`),
    whose fixed cost per operation is most of the work when deltas hold a few tuples."""

    def __init__(self, cols: dict, n: int):
        self.cols, self.n = cols, n

    @classmethod
    def of(cls, df) -> "_Bound":
        return cls({c: df[c].to_numpy() for c in df.columns}, len(df))

    @property
    def columns(self) -> list:
        return list(self.cols)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str):
        return self.cols[name]

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.cols) if self.cols else pd.DataFrame(index=range(self.n))

    def where(self, mask) -> "_Bound":
        return _Bound({k: v[mask] for k, v in self.cols.items()}, int(mask.sum()))

    def take(self, rows) -> "_Bound":
        return _Bound({k: v[rows] for k, v in self.cols.items()}, len(rows))

    def with_column(self, name: str, values) -> "_Bound":
        return _Bound({**self.cols, name: values}, self.n)


# Below this many row pairs a join compares every pair at once in numpy: on the tables of
# a catalog program or a one-tuple delta, a pandas merge costs a millisecond of overhead
# for microseconds of work.
ALL_PAIRS = 1 << 16
ALL_TEXT_PAIRS = 1 << 11  # for text keys, each pair a Python comparison


def _matches(left: _Bound, right: _Bound, keys: list):
    """The (left row, right row) matrix of pairs equal on `keys` as `merge` pairs them
    (whole meeting fractional as doubles, NaN meeting NaN, a null meeting nothing), or
    None where this does not apply (too many pairs, keys of different kinds)."""
    import numpy as np
    import pandas as pd

    pairs = len(left) * len(right)
    if pairs > ALL_PAIRS:
        return None
    hits = None
    for k in keys:
        a, b = left[k], right[k]
        if a.dtype != b.dtype and not (a.dtype.kind in "iuf" and b.dtype.kind in "iuf"):
            return None  # merge decides (and refuses text meeting numbers)
        if (a.dtype.kind == "O" or b.dtype.kind == "O") and pairs > ALL_TEXT_PAIRS:
            return None  # text compared pair by pair costs a Python call each: merge hashes
        same = a[:, None] == b[None, :]
        if a.dtype.kind == "O" or b.dtype.kind == "O":
            same = np.asarray(same, dtype=bool) & np.asarray(pd.notna(a), dtype=bool)[:, None] \
                & np.asarray(pd.notna(b), dtype=bool)[None, :]
        elif a.dtype.kind == "f" or b.dtype.kind == "f":
            same |= np.isnan(a.astype(float))[:, None] & np.isnan(b.astype(float))[None, :]
        hits = same if hits is None else hits & same
    return hits


def _joined(left: _Bound, right: _Bound, keys: list):
    """`left` joined with `right` on `keys` (`_matches`), or None where merge must do it."""
    import numpy as np

    hits = _matches(left, right, keys)
    if hits is None:
        return None
    li, ri = np.nonzero(hits)
    out = left.take(li)
    for k in keys:  # a whole key meeting a fractional one is double on both sides, as after _as_doubles
        if out.cols[k].dtype != right[k].dtype:
            out.cols[k] = out.cols[k].astype("float64")
    for k, v in right.cols.items():
        if k not in keys:
            out.cols[k] = v[ri]
    return out


def _without_null_keys(df, keys: list):
    """Rows whose join keys are all set: SQL joins no null (pandas would). Only catalog
    snapshots hold nulls (`checked` keeps them out of data), in object columns."""
    if not len(df):
        return df
    nullable = [k for k in keys if df[k].dtype == object and df[k].hasnans]
    if not nullable:
        return df
    keep = df[nullable].notna().all(axis=1).to_numpy()
    return df if keep.all() else df[keep].reset_index(drop=True)


class _Lookups:
    """Hash indexes on the tables a recursive stratum reads from lower strata, built
    once and probed every round: a round's delta of a few valuations then costs a few
    dict look-ups, not a join (pandas' merge hashes both sides, a millisecond or more,
    on each call). Held by one `run_stratum`; `constant`: the relations whose tables
    stay the same objects through it."""

    def __init__(self, constant):
        self.constant = frozenset(constant)
        self.kept: dict = {}  # (id(table), id(step)[, keys]) -> (table, what was built from it)

    def _get(self, table, key, build):
        hit = self.kept.get(key)
        if hit is None or hit[0] is not table:
            hit = self.kept[key] = (table, build())
        return hit[1]

    def bound(self, step, table) -> "_Bound":
        return self._get(table, (id(table), id(step)), lambda: _bind(step.args, table))

    def index(self, step, table, atom: "_Bound", keys: list) -> Optional[dict]:
        """key values -> the atom's row numbers in order; None where a dict cannot say what
        merge would (a NaN key, which merge matches with NaN)."""
        return self._get(table, (id(table), id(step), tuple(keys)), lambda: _index(atom, keys))


# A valuation set at most this large probes an index (`_Lookups`) instead of joining: a
# probe costs a dict look-up per valuation, a merge a millisecond or more whatever its size.
PROBED = 4096


def _index(atom: "_Bound", keys: list) -> Optional[dict]:
    import numpy as np
    import pandas as pd

    columns = []
    for k in keys:
        v = atom[k]
        if v.dtype.kind == "f" and np.isnan(v).any():
            return None
        columns.append(v.tolist())
    nulls = np.zeros(len(atom), dtype=bool)
    for k in keys:
        if atom[k].dtype.kind == "O":
            nulls |= np.asarray(pd.isna(atom[k]), dtype=bool)
    out: dict = {}
    for i, key in enumerate(zip(*columns)):
        if not nulls[i]:  # a null key matches nothing, as in SQL
            out.setdefault(key, []).append(i)
    return out


def _probe_kinds_agree(bound: "_Bound", atom: "_Bound", keys: list) -> bool:
    """Each key whole or fractional on both sides, or text on both (as `_matches` asks)."""
    import numpy as np

    for k in keys:
        a, b = bound[k].dtype, atom[k].dtype
        if a != b and not (a.kind in "iuf" and b.kind in "iuf"):
            return False
        if a.kind == "f" and np.isnan(bound[k]).any():
            return False
    return True


def _probed(bound: "_Bound", atom: "_Bound", keys: list, index: dict, anti: bool):
    """The join (or, `anti`, the valuations matching nothing) of `bound` with the atom
    whose `index` on `keys` is given: rows in `_joined`'s order (left, then right)."""
    import numpy as np
    import pandas as pd

    probes = [bound[k].tolist() for k in keys]
    nulls = np.zeros(len(bound), dtype=bool)
    for k in keys:
        if bound[k].dtype.kind == "O":
            nulls |= np.asarray(pd.isna(bound[k]), dtype=bool)
    empty = ()
    hits = [empty if nulls[i] else index.get(key, empty) for i, key in enumerate(zip(*probes))]
    if anti:
        return bound.where(np.fromiter((not h for h in hits), dtype=bool, count=len(hits)))
    li = np.repeat(np.arange(len(bound)), [len(h) for h in hits])
    ri = np.fromiter((j for h in hits for j in h), dtype=np.int64, count=len(li))
    out = bound.take(li)
    for k in keys:  # a whole key meeting a fractional one is double on both sides, as `_joined` gives it
        if out.cols[k].dtype != atom[k].dtype:
            out.cols[k] = out.cols[k].astype("float64")
    for k, v in atom.cols.items():
        if k not in keys:
            out.cols[k] = v[ri]
    return out


def evaluate_rule(rule: RulePlan, read: Callable, lookups: Optional[_Lookups] = None):
    """The rule's head tuples (columns c0..; an aggregated column holds the aggregate's
    input, 1 for count<*>). `read(step)` gives the table an atom step reads.
    `lookups`: indexes kept across the rounds of a stratum (`_Lookups`)."""
    import pandas as pd

    import numpy as np

    # A positive atom with no tuples derives nothing, wherever it sits in the body: the
    # atoms before it need not be joined (in a timestep, most rules wait on a message).
    if any(step.op in ("scan", "join") and not len(read(step)) for step in rule.steps):
        return pd.DataFrame({c: [] for c in _columns(len(rule.head_args))})
    bound = _Bound({}, 1)  # no atom yet: one valuation binding nothing
    for step in rule.steps:
        if step.op in ("scan", "join", "antijoin"):
            table = read(step)
            if not len(table):  # an empty antijoin removes nothing (an empty positive atom returned above)
                continue
            fixed = lookups is not None and step.relation in lookups.constant
            atom = lookups.bound(step, table) if fixed else _bind(step.args, table)
            keys = [v for v in atom.columns if v in bound.cols]
            index = None
            if fixed and keys and len(bound) <= PROBED and bound.cols and _probe_kinds_agree(bound, atom, keys):
                index = lookups.index(step, table, atom, keys)
            if index is not None and step.op in ("join", "antijoin"):
                bound = _probed(bound, atom, keys, index, anti=step.op == "antijoin")
            elif step.op == "antijoin":
                if not keys:
                    bound = bound.where(np.zeros(len(bound), dtype=bool)) if len(atom) else bound
                elif (hits := _matches(bound, atom, keys)) is not None:
                    bound = bound.where(~hits.any(axis=1))
                else:  # a null key matches nothing, so its row stays
                    left, right = _as_doubles(bound.frame()[keys],
                                              _without_null_keys(atom.frame()[keys], keys).drop_duplicates())
                    hit = left.merge(right, on=keys, how="left", indicator=True)
                    bound = bound.where((hit["_merge"] == "left_only").to_numpy())
            elif not atom.cols:  # binds nothing (a proposition, constants, wildcards): each of its
                # tuples is one more valuation per row, as a cross join gives them (count<*> counts them)
                bound = bound.take(np.repeat(np.arange(len(bound)), len(atom)))
            elif not bound.cols:  # nothing bound yet (one valuation, or none)
                bound = atom if len(bound) else atom.where(np.zeros(len(atom), dtype=bool))
            elif keys:
                joined = _joined(bound, atom, keys)
                if joined is None:
                    left, right = _as_doubles(_without_null_keys(bound.frame(), keys),
                                              _without_null_keys(atom.frame(), keys), keys)
                    joined = _Bound.of(left.merge(right, on=keys, how="inner"))
                bound = joined
            else:
                bound = _Bound.of(bound.frame().merge(atom.frame(), how="cross"))
        elif step.op == "filter":  # a condition on a null is not true: the row goes
            bound = bound.where(_truth(_vector(step.expr, bound, condition=True), len(bound)))
        elif step.op == "assign":
            bound = bound.with_column(step.var, _full(_vector(step.expr, bound), len(bound)))
        elif step.op == "generate":
            bound = _Bound.of(_generated(bound.frame(), step))
        if not len(bound):  # later terms would bind nothing, and the head reads them
            return pd.DataFrame({c: [] for c in _columns(len(rule.head_args))})
    out = {}
    for i, a in enumerate(rule.head_args):
        if isinstance(a, S.Aggregate):
            a = S.Const(1, S.INT) if a.arg is None else a.arg
        out[f"c{i}"] = _full(_vector(a, bound), len(bound))
    # a nullary head (a proposition) derives one empty tuple per valuation: the frame's rows
    return pd.DataFrame(out) if out else pd.DataFrame(index=range(len(bound)))


def _as_doubles(left, right, keys=None):
    """`left` and `right` with each join key that is whole on one side and fractional on
    the other as doubles on both, as Spark compares a bigint with a double."""
    widen = [k for k in (keys if keys is not None else list(left.columns))
             if left[k].dtype != right[k].dtype and {left[k].dtype.kind, right[k].dtype.kind} <= set("iuf")]
    if not widen:
        return left, right
    doubles = {k: "float64" for k in widen}
    return left.astype(doubles), right.astype(doubles)


def _generated(bound, step):
    """`bound` with one row per value of the step's range for each of its rows."""
    import pandas as pd

    n = len(bound)
    args = [_full(_vector(a, bound), n) for a in step.expr.args]
    values = [ranges.values(*[a[i].item() if hasattr(a[i], "item") else a[i] for a in args]) for i in range(n)]
    counts = [len(v) for v in values]
    out = bound.loc[bound.index.repeat(counts)].reset_index(drop=True)
    flat = [x for v in values for x in v]
    return out.assign(**{step.var: pd.Series(flat, dtype=None if flat else "int64")})


def _const(c: S.Const):
    return float("inf") if c.type == S.INFINITY else c.value


def _full(v, n: int):
    import numpy as np

    if isinstance(v, np.ndarray) and v.ndim:
        return v
    if isinstance(v, np.ndarray):  # a 0-d array: numpy's answer on constants alone (`0u - 1u`)
        v = v.item()
    return np.full(n, v, dtype=object if isinstance(v, str) else None)


def _text_extreme(pick, args: list, n: int):
    """`min`/`max` of symbols per row, as Spark's least and greatest: nulls are skipped."""
    rows = zip(*[a.tolist() if hasattr(a, "tolist") and getattr(a, "ndim", 0) else [a] * n for a in args])
    return _nullable([pick((v for v in row if v is not None), default=None) for row in rows])


def _truth(v, n: int):
    import numpy as np

    return np.asarray(_full(v, n), dtype=bool)


def _vector(t, b, condition: bool = False):
    """A term over the bound columns: a numpy array, or a scalar for a constant.
    `condition`: the term is a filter's condition, or an operand of its && and ||,
    where a comparison with a null may count as false (SQL's null filters the row
    out); anywhere else a null compared raises Unsupported."""
    import numpy as np

    if isinstance(t, S.Var):
        column = b[t.name]
        return column if isinstance(column, np.ndarray) else column.to_numpy()
    if isinstance(t, S.Const):
        return _const(t)
    if isinstance(t, S.UnOp):
        v = _vector(t.arg, b)
        if t.op == "wrap32":
            return _wrap32(_whole(v))
        if t.op == "ukey":
            return _ukey(v)
        return -v if t.op == "-" else ~np.asarray(v, dtype=bool)
    if isinstance(t, S.Cond):
        n = len(b)
        return np.where(_truth(_vector(t.test, b), n), _full(_vector(t.then, b), n), _full(_vector(t.other, b), n))
    if isinstance(t, S.ListExpr):
        return _per_row(lambda *items: tuple(items), [_vector(a, b) for a in t.items], len(b))
    if isinstance(t, S.Call) and B.canonical(t.func) in _LIST_CALLS:
        return _per_row(_LIST_FUNCTIONS[B.canonical(t.func)], [_vector(a, b) for a in t.args], len(b))
    if isinstance(t, S.Call) and B.canonical(t.func) in _BITWISE:
        return _bitwise(B.canonical(t.func), [_whole(_vector(a, b)) for a in t.args])
    if isinstance(t, S.Call) and B.canonical(t.func) in _TEXT_CALLS:
        return _text_call(B.canonical(t.func), [_vector(a, b) for a in t.args], len(b))
    if isinstance(t, S.Call):
        args = [_vector(a, b) for a in t.args]
        if B.canonical(t.func) == "abs":
            return np.abs(args[0])
        if B.canonical(t.func) == "as":  # a cast: the value itself
            return args[0]
        if any(isinstance(a, str) or (isinstance(a, np.ndarray) and a.dtype.kind in "OU") for a in args):
            return _text_extreme(min if B.canonical(t.func) == "min" else max, args, len(b))
        combine = np.minimum if B.canonical(t.func) == "min" else np.maximum
        out = args[0]
        for a in args[1:]:
            out = combine(out, a)
        return out
    op = t.op
    inner = condition and op in ("&&", "||")
    left, right = _vector(t.left, b, inner), _vector(t.right, b, inner)
    if op in ("/", "//", "%", "udiv", "umod"):
        if np.any(np.asarray(right) == 0):
            raise Unsupported(f"{op} by zero")
        if op in ("udiv", "umod"):
            return _unsigned_division(op, _whole(left), _whole(right))
        if op == "//":  # Soufflé's `/` on whole numbers (bootstrap/division.py): C's, toward zero
            left, right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
            quotient = np.abs(left) // np.abs(right)
            return np.where((left < 0) != (right < 0), -quotient, quotient)
        return np.true_divide(left, right) if op == "/" else np.fmod(left, right)
    if op in ("+", "-", "*") and (_is_text(left) or _is_text(right)):
        raise Unsupported(f"{op} on text")
    function = {"+": np.add, "-": np.subtract, "*": np.multiply, "&&": np.logical_and, "||": np.logical_or,
                "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                ">": np.greater, ">=": np.greater_equal}[op]
    if op in ("<", "<=", ">", ">=") and (_has_null(left) or _has_null(right)):
        if not condition:
            raise Unsupported(f"{op} on a null outside a condition")
        import pandas as pd

        n = len(b)
        lv, rv = _full(left, n), _full(right, n)
        known = np.asarray(pd.notna(lv), dtype=bool) & np.asarray(pd.notna(rv), dtype=bool)
        out = np.zeros(n, dtype=bool)  # SQL: a comparison with a null is not true
        if known.any():
            out[known] = function(lv[known], rv[known])
        return out
    out = function(left, right)
    if op in ("==", "!=") and (_has_null(left) or _has_null(right)):
        if not condition:
            raise Unsupported(f"{op} on a null outside a condition")
        import pandas as pd

        out = np.asarray(out, dtype=bool) & np.asarray(pd.notna(left)) & np.asarray(pd.notna(right))
    return out


def _has_null(v) -> bool:
    import numpy as np

    if v is None:
        return True
    if not (isinstance(v, np.ndarray) and v.dtype == object):
        return False
    import pandas as pd

    return bool(pd.isna(v).any())


def _whole(v):
    """A numpy int64 array or scalar; anything else (floats, text) is the SQL loop's."""
    import numpy as np

    a = np.asarray(v)
    if not np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.bool_):
        raise Unsupported("a bitwise functor on values that are not whole numbers")
    return a.astype(np.int64)


def _wrap32(v):
    """A whole number at 32 bits (bootstrap/lowering/width.py): its low 32 bits, as two's
    complement, held in 64 (numpy's cast keeps the low bits, as C's does)."""
    import numpy as np

    return np.asarray(v, dtype=np.int64).astype(np.int32).astype(np.int64)


def _ukey(v):
    """The order key of unsigned values (bootstrap/lowering/unsigned.py): bit 63 flipped,
    so that signed order on keys is unsigned order on the values."""
    import numpy as np

    return _whole(v) ^ np.int64(-(1 << 63))


def _unsigned_extreme(v, pick):
    """`min`/`max` of a column of unsigned values, by unsigned order: the extreme of the
    keys, mapped back (`_ukey` is its own inverse)."""
    import numpy as np

    values = v.dropna()
    if not len(values):
        return None
    keys = _ukey(values.to_numpy())
    return int(_ukey(np.int64(keys.min() if pick is min else keys.max())))


def _unsigned_division(op: str, left, right):
    """`udiv`/`umod` (bootstrap/lowering/unsigned.py): the 64-bit patterns divided as
    unsigned (numpy's uint64 view), the result's pattern held signed again."""
    import numpy as np

    left, right = np.asarray(left).astype(np.uint64), np.asarray(right).astype(np.uint64)
    out = left // right if op == "udiv" else left % right
    return np.asarray(out).astype(np.int64)


def _bitwise(name: str, args: list):
    """Soufflé's bitwise and logical functors as Spark computes them: 64-bit two's
    complement, shift distances modulo 64 (the JVM's rule), logical results 1 and 0."""
    import numpy as np

    a = args[0]
    if name == "bnot":
        return np.invert(a)
    if name == "lnot":
        return (a == 0).astype(np.int64)
    c = args[1]
    if name in ("bshl", "bshru"):
        shift = (c & 63).astype(np.uint64)
        moved = a.astype(np.uint64) << shift if name == "bshl" else a.astype(np.uint64) >> shift
        return moved.astype(np.int64)
    return {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
            "bshr": lambda x, y: np.right_shift(x, y & 63),
            "land": lambda x, y: ((x != 0) & (y != 0)).astype(np.int64),
            "lor": lambda x, y: ((x != 0) | (y != 0)).astype(np.int64),
            "lxor": lambda x, y: ((x != 0) != (y != 0)).astype(np.int64)}[name](a, c)


# ---------------------------------------------------------------- text, as Spark SQL computes it

def _spark_text(v):
    """CAST(v AS STRING) for one value: null stays null, booleans are true/false, whole
    numbers their digits. A fractional double's text is Java's (`Double.toString`), which
    Python's repr does not always match: Unsupported, the SQL loop writes it."""
    import numpy as np

    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f:
            return None  # pandas' missing value in a float column
        if f.is_integer() and abs(f) < 1e7:
            return f"{f:.1f}"
        raise Unsupported(f"the text of the double {f!r} is Java's")
    raise Unsupported(f"the text of {type(v).__name__} values")


def _to_string(v):
    """Soufflé's to_string: a finite float as C's %f (`builtins.float_text`), else the text
    `_spark_text` gives (NaN is pandas' missing value there)."""
    import math

    import numpy as np

    if isinstance(v, (float, np.floating)) and math.isfinite(v):
        return B.float_text(float(v))
    return _spark_text(v)


def _to_float(v):
    """TRY_CAST(v AS DOUBLE): numbers convert; text only in the plain decimal notation
    both agree on, else Unsupported (Spark's parser decides)."""
    import re

    import numpy as np

    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        raise Unsupported("to_float of a boolean")
    if isinstance(v, (int, np.integer, float, np.floating)):
        return float(v)
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v):
        return float(v)
    raise Unsupported(f"to_float of {v!r}: Spark's parser decides")


def _to_number(v):
    """TRY_CAST(v AS BIGINT) for whole numbers, the text of one, and a finite float in
    BIGINT's range (truncated toward zero, as Spark casts a double); anything else (NaN,
    an infinity, other text) Unsupported: Spark's cast decides."""
    import math
    import re

    import numpy as np

    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (float, np.floating)) and math.isfinite(v) and -2.0 ** 63 <= v < 2.0 ** 63:
        return int(math.trunc(v))
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]{1,18}", v):
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"[+-]?0[xXbB][0-9a-fA-F]+", v):  # Soufflé's hex and binary
        from ..bootstrap.builtins import whole_from_text

        return whole_from_text(v)
    raise Unsupported(f"to_number of {v!r}: Spark's cast decides")


def _power(a, b):
    """Spark's `power`: a double always; what Java's Math.pow and Python's differ on (an
    overflow, 0 to a negative power) is Unsupported: Spark computes it."""
    import math

    if a is None or b is None:
        return None
    try:
        value = math.pow(float(a), float(b))
    except (OverflowError, ValueError):
        raise Unsupported(f"pow({a!r}, {b!r}): Spark's power decides") from None
    if math.isnan(value):
        raise Unsupported(f"pow({a!r}, {b!r}) is NaN: Spark's power decides")
    return value


def _floor(v):
    import math

    import numpy as np

    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (float, np.floating)) and math.isfinite(v):
        return int(math.floor(v))  # Spark's floor of a double is a bigint
    raise Unsupported(f"floor of {v!r}")


def _ln(v):
    """Spark's ln: null for a null or a number at most 0."""
    import math

    if v is None or v <= 0:
        return None
    return math.log(v)


def _exp(v):
    import math

    if v is None:
        return None
    try:
        return math.exp(v)
    except OverflowError:
        raise Unsupported(f"exp({v!r}) overflows") from None


def _cat(*parts):
    texts = [_spark_text(p) for p in parts]
    return None if any(t is None for t in texts) else "".join(texts)


def _reprefix(s, old, new):
    """IF(startswith(s, old), concat(new, substring(s, length(old) + 1)), s): a null
    condition takes the else branch."""
    if s is None or old is None or not str(s).startswith(str(old)):
        return s
    return None if new is None else str(new) + str(s)[len(old):]


def _xxhash64(*values):
    from .xxhash import xxhash64

    return xxhash64(*values)


def _record(type_name, kinds, *items):
    """record(T, K, ...): the canonical text of a record (bootstrap/records.py)."""
    from ..bootstrap.records import record_text

    return record_text(kinds, [None if v is None else v.item() if hasattr(v, "item") else v for v in items])


def _record_field(text, i, kind):
    from ..bootstrap.records import record_field

    return record_field(text, int(i), kind)


def _adt(type_name, branch, kinds, *items):
    """adt(T, B, K, ...): the canonical text of an ADT value (bootstrap/records.py)."""
    from ..bootstrap.records import adt_text

    return adt_text(branch, kinds, [None if v is None else v.item() if hasattr(v, "item") else v for v in items])


def _adt_field(text, branch, i, kind):
    from ..bootstrap.records import adt_field

    return adt_field(text, branch, int(i), kind)


def _adt_branch(text):
    from ..bootstrap.records import adt_branch

    return adt_branch(text)


_TEXT_FUNCTIONS = {
    "record": _record,
    "record_field": _record_field,
    "adt": _adt,
    "adt_branch": _adt_branch,
    "adt_field": _adt_field,
    "cat": _cat,
    "strlen": lambda s: None if s is None else len(_spark_text(s)),
    "to_string": _to_string,
    "reprefix": _reprefix,
    "to_float": _to_float,
    "to_number": _to_number,
    "to_unsigned": _to_number,  # held in the same signed column (runtime/sql.py casts both to bigint)
    "floor": _floor,
    "pow": _power,
    "log": _ln,
    "exp": _exp,
    "hash": _xxhash64,
    "upper": lambda s: None if s is None else _spark_text(s).upper(),
    "lower": lambda s: None if s is None else _spark_text(s).lower(),
}


def _text_call(name: str, args: list, n: int):
    """A text function per tuple (no vector kernel has Spark's null and cast rules);
    `if` is vectorized: a null condition is false, as SQL's IF."""
    import numpy as np
    import pandas as pd

    if name == "if":
        test = _full(args[0], n)
        truth = np.asarray(pd.notna(test), dtype=bool) & np.asarray(np.where(pd.notna(test), test, False), dtype=bool)
        return _nullable(list(np.where(truth, _full(args[1], n), _full(args[2], n))))
    columns = [a.tolist() if isinstance(a, np.ndarray) else [a] * n for a in args]
    values = [_TEXT_FUNCTIONS[name](*row) for row in zip(*columns)] if columns else []
    return _nullable(values)


def _nullable(values: list):
    """A column of Python values: int64, float64 or bool when no value is null and all
    are of the one kind, else object (nulls stay None)."""
    import numpy as np

    out = np.empty(len(values), dtype=object)
    out[:] = values
    kinds = {type(v) for v in values}
    if values and kinds <= {int, np.int64} and None not in values:
        return out.astype(np.int64)
    if values and kinds <= {float, np.float64}:
        return out.astype(np.float64)
    if values and kinds <= {bool, np.bool_}:
        return out.astype(bool)
    return out


# Lists are tuples in object columns. No library has these as vector kernels, so they
# are the one place where a Python function runs per tuple.
_LIST_FUNCTIONS = {
    "cons": lambda x, rest: (x,) + rest if isinstance(rest, tuple) else (x, rest),
    "append": lambda items, x: tuple(items) + (x,),
    "concat": lambda a, c: tuple(a) + tuple(c),
    "contains": lambda x, items: x in items,
    "size": lambda items: len(items),
    "list": lambda *items: tuple(items),
}


def _per_row(function, args: list, n: int):
    import numpy as np

    # Python values (tolist), not numpy scalars: the tuples become Spark arrays later.
    columns = [a.tolist() if isinstance(a, np.ndarray) else [a] * n for a in args]
    out = np.empty(n, dtype=object)
    out[:] = [function(*values) for values in zip(*columns)] if columns else [function() for _ in range(n)]
    if n and isinstance(out[0], (bool, np.bool_)):
        return out.astype(bool)
    if n and isinstance(out[0], int) and not isinstance(out[0], bool):
        return out.astype(np.int64)
    return out


def _is_text(v) -> bool:
    import numpy as np

    return isinstance(v, str) or (isinstance(v, np.ndarray) and v.dtype == object)


# ---------------------------------------------------------------- relations: the core's operations on pandas

class PandasTables(semantics.Tables):
    """`runtime/semantics.py`'s operations over pandas frames with columns c0, c1, ...
    A set relation's tuples seen so far also sit in a hash table of 64-bit keys, so a
    round's new tuples are found without joining against everything derived so far."""

    def __init__(self):
        self.seen: dict = {}  # set relation -> _KeySet of what it holds

    def empty(self, s: Storage):
        import pandas as pd

        return pd.DataFrame({c: [] for c in _columns(s.arity)})

    def union(self, s: Storage, parts: list):
        import pandas as pd

        frames = [f for f in parts if len(f)]
        if not frames:
            return self.empty(s)
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    def distinct(self, s: Storage, t):
        if len(t) < 2:  # distinct already (most relations of a timestep hold a tuple or none)
            return t.reset_index(drop=True)
        if not len(t.columns):  # a true proposition holds the empty tuple once
            return t.iloc[:1].reset_index(drop=True)
        return t.drop_duplicates(ignore_index=True)

    def aggregate(self, s: Storage, t):
        return _grouped(s, t) if len(t) else self.empty(s)

    def greatest_per_key(self, s: Storage, t):
        return _one_per_key(s, t)

    def least_in_groups(self, s: Storage, t, domains: tuple):
        if len(t) < 2:
            return t.reset_index(drop=True)
        ordered = t.sort_values(list(t.columns), kind="stable")
        least = True  # the first of its group in ascending order, in every domain
        for domain in domains:
            least = least & ~ordered.duplicated([f"c{i}" for i in domain])
        return ordered[least].reset_index(drop=True)

    def number(self, s: Storage, t, old=None):
        return _numbered(s, t, 0 if old is None else len(old), old)

    def minus(self, s: Storage, t, other, columns=None):
        t, other = _aligned(t, other)
        return _anti(t, other, list(t.columns) if columns is None else [f"c{i}" for i in columns])

    def count(self, tables: dict) -> dict:
        return {n: len(t) for n, t in tables.items()}

    def cleared(self, s: Storage, t):
        return t if not len(t) else t.iloc[0:0]  # asked per relation and round: most deltas are empty

    def new_tuples(self, s: Storage, full, cand):
        cand, full = _aligned(cand, full)
        seen = self.seen.get(s.name)
        if seen is None:
            seen = self.seen[s.name] = _KeySet()
            seen.add_new(full)
        return seen.add_new(cand)

    def improved(self, s: Storage, new, full):
        new, full = _aligned(new, full)
        a = s.aggregates[0]
        groups = [f"c{i}" for i in s.group_columns]
        value = f"c{a.column}"
        ordered = new
        if a.func in ("umin", "umax"):  # unsigned order: compare the keys (bootstrap/lowering/unsigned.py)
            ordered = new.assign(**{value: _ukey(new[value].to_numpy())})
            full = full.assign(**{value: _ukey(full[value].to_numpy())})
        # a nullable column, so that a group the old tuples lack does not turn the values to floats
        old = full[groups + [value]].rename(columns={value: "_old"})
        if old["_old"].dtype.kind == "i":
            old = old.astype({"_old": "Int64"})
        joined = ordered.merge(old, on=groups, how="left") if groups else ordered.assign(
            _old=old["_old"].iloc[0] if len(old) else None)
        better = joined[value] < joined["_old"] if a.func in ("min", "umin") else joined[value] > joined["_old"]
        better = better.fillna(False) if hasattr(better, "fillna") else better
        return new[(joined["_old"].isna() | better).to_numpy()].reset_index(drop=True)

    def replace(self, s: Storage, full, delta, columns: tuple):
        import pandas as pd

        if not len(delta):
            return full
        kept = self.minus(s, full, delta, columns)
        return pd.concat([kept, delta], ignore_index=True) if len(kept) else delta

    def extend(self, s: Storage, full, delta):
        import pandas as pd

        if not len(delta):
            return full
        return pd.concat([full, delta], ignore_index=True) if len(full) else delta


def combine(s: Storage, frames: list):
    """Rule outputs and seeds -> the relation's tuples (`semantics.combine` on pandas)."""
    return semantics.combine(PandasTables(), s, frames)


def _numbered(s: Storage, df, offset: int, old=None):
    """autoinc<*> (the engine's `numbered`): the distinct groups of `df` that `old` does
    not hold, numbered offset, offset + 1, ... in ascending order of their columns."""
    import numpy as np
    import pandas as pd

    keys = [f"c{i}" for i in s.group_columns]
    column = f"c{s.aggregates[0].column}"
    if not keys:  # one group, the empty tuple
        fresh = pd.DataFrame(index=range(1 if len(df) and (old is None or not len(old)) else 0))
    else:
        fresh = df[keys].drop_duplicates()
        if old is not None:
            fresh = _anti(fresh, old, keys)
        fresh = fresh.sort_values(keys, kind="stable").reset_index(drop=True)
    fresh[column] = np.arange(offset, offset + len(fresh), dtype=np.int64)
    return fresh[_columns(s.arity)]


def _grouped(s: Storage, df):
    import pandas as pd

    cols = _columns(s.arity)
    aggs = {f"c{a.column}": _AGGREGATES[a.func] for a in s.aggregates}
    groups = [f"c{i}" for i in s.group_columns]
    if not groups:  # one group; no valuations give no tuple
        return pd.DataFrame({c: [df[c].agg(f)] for c, f in aggs.items()})[cols]
    return df.groupby(groups, sort=False, dropna=False).agg(aggs).reset_index()[cols]


def _one_per_key(s: Storage, df):
    keys = [f"c{i}" for i in s.keys]
    rest = [f"c{i}" for i in range(s.arity) if i not in s.keys]
    if rest:
        df = df.sort_values(rest, ascending=False, kind="stable")
    return df.drop_duplicates(keys, ignore_index=True)


def _anti(df, other, cols: list):
    """Rows of `df` whose `cols` match no row of `other`."""
    if not len(df) or not len(other):
        return df
    if not cols:
        return df.iloc[0:0]
    hit = df[cols].merge(other[cols].drop_duplicates(), on=cols, how="left", indicator=True)
    return df[(hit["_merge"] == "left_only").to_numpy()].reset_index(drop=True)


def _aligned(df, model):
    """`df` and `model` with the same column dtypes: whole numbers meeting fractional
    ones become float64 on both sides, as a Spark column holding both is double. An
    empty side takes the other's types. Text meeting numbers raises Unsupported."""
    if not len(model):
        return df, model.astype(dict(df.dtypes)) if len(df) and len(model.columns) else model
    if not len(df):
        return df.astype(dict(model.dtypes)) if len(df.columns) else df, model
    types = dict(zip(df.columns, df.dtypes.tolist()))
    if types == dict(zip(model.columns, model.dtypes.tolist())):  # the usual case, asked once
        return df, model
    widen = {}
    for c in df.columns:
        a, b = types[c], model[c].dtype
        if a == b:
            continue
        if a.kind in "iuf" and b.kind in "iuf":
            widen[c] = "float64"
        else:
            raise Unsupported(f"column {c} mixes {a} and {b}")
    if not widen:
        return df, model
    return df.astype(widen), model.astype(widen)


class _KeySet:
    """Tuples seen so far: as 64-bit keys in a pandas hash table, or, for a relation with
    a text column, as the tuples themselves in a Python set (exact; hashing text
    vectorized costs a millisecond a call in pandas, most of a round of a catalog
    program's fixpoint, whose deltas hold a few tuples). The kind is chosen by the
    first table added, the relation's full tuples."""

    def __init__(self):
        from pandas._libs import hashtable

        self.table = hashtable.Int64HashTable()
        self.tuples: Optional[set] = None

    def add_new(self, df):
        import numpy as np
        import pandas as pd

        if not len(df):
            return df
        if self.tuples is None and not len(self.table) and any(t.kind == "O" for t in df.dtypes):
            self.tuples = set()
        if self.tuples is not None:
            return self._add_new_tuples(df)
        keys = _keys(df)
        if len(keys) == 1:  # a delta of one tuple (a long chain of rounds): no frame work
            fresh = self.table.lookup(keys) < 0
        else:
            fresh = ~pd.Series(keys).duplicated().to_numpy()
            fresh &= self.table.lookup(keys) < 0
        self.table.map_locations(np.ascontiguousarray(keys[fresh]))
        return df if fresh.all() else df[fresh].reset_index(drop=True)


    def _add_new_tuples(self, df):
        import numpy as np

        seen, fresh = self.tuples, np.zeros(len(df), dtype=bool)
        for i, row in enumerate(_row_tuples(df)):
            if row not in seen:
                seen.add(row)
                fresh[i] = True
        return df if fresh.all() else df[fresh].reset_index(drop=True)


_NAN = ("NaN",)  # a float column's NaN in a tuple: NaN equals nothing, this equals itself


def _row_tuples(df):
    """The rows of `df` as Python tuples (a proposition's: empty tuples)."""
    import numpy as np

    if df.shape[1] == 0:
        return [()] * len(df)
    columns = []
    for c in df.columns:
        values = df[c].to_numpy()
        if values.dtype.kind == "f" and np.isnan(values).any():
            columns.append([_NAN if v != v else v for v in values.tolist()])
        else:
            columns.append(values.tolist())
    return zip(*columns)


def _keys(df):
    """One 64-bit key per tuple: exact for one integer column or two that fit in 32 bits
    each; otherwise a 64-bit hash of the row, where two different tuples collide with
    probability about n^2 / 2^65 (1e-7 for 2.5M tuples)."""
    import numpy as np
    import pandas as pd

    if df.shape[1] == 0:  # the empty tuple: one key, whatever the rows
        return np.zeros(len(df), dtype=np.int64)
    columns = [df[c].to_numpy() for c in df.columns] if df.shape[1] <= 2 else None
    ints = columns is not None and all(c.dtype.kind in "iu" for c in columns)
    if ints and len(columns) == 1:
        return columns[0].astype(np.int64, copy=False)
    if ints and len(columns) == 2:
        a = columns[0].astype(np.int64, copy=False)
        b = columns[1].astype(np.int64, copy=False)
        lim = 1 << 31
        if len(a) == 0 or (a.min() >= -lim and a.max() < lim and b.min() >= -lim and b.max() < lim):
            return (a << 32) | (b & 0xFFFFFFFF)
    return _row_hashes([df[c].to_numpy() for c in df.columns])


def _row_hashes(columns: list):
    """A 64-bit hash of each row: pandas' hash of each column's values (`hash_array`,
    as `hash_pandas_object` hashes them), combined by multiply and xor. Called per round
    on a few tuples, where `hash_pandas_object`'s frame work costs a millisecond."""
    import numpy as np
    from pandas.util import hash_array

    out = np.zeros(len(columns[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for values in columns:
            out = (out * np.uint64(0x100000001B3)) ^ hash_array(values)
    return out.view(np.int64)


# ---------------------------------------------------------------- a stratum

@dataclass
class Outcome:
    tables: dict  # relation -> DataFrame (c0, c1, ...)
    iterations: list = field(default_factory=list)  # (seconds, {relation: delta size}); 0 is the start
    stopped: Optional[str] = None  # why a size limit ended the recursion early


def run_stratum(st: Stratum, storages: dict, tables: dict, *, max_iterations: Optional[int] = None,
                start: Optional[dict] = None, on_iteration=None) -> Outcome:
    """Evaluate one stratum. `tables`: every relation it reads from lower strata (and
    its seeds: facts and inputs of its own relations, by name). `start`: the starting
    tuples of its recursive relations when the caller computed them (a partition of a
    decomposable stratum); otherwise its init rules give them. `on_iteration(i, sizes)`:
    called as each round of a recursive stratum ends (0: the start), for the progress
    line of a long run on the driver. Raises NoFixpoint at the iteration limit."""
    import time

    t0 = time.perf_counter()
    ops = PandasTables()
    if start is None:
        start = {}
        for name in st.relations:
            outputs = [evaluate_rule(r, lambda step: tables[step.relation]) for r in st.init_rules
                       if r.head == name]
            start[name] = semantics.combine(ops, storages[name],
                                            [tables[name]] + outputs if name in tables else outputs)
    start = {n: t.reset_index(drop=True) for n, t in start.items()}
    sizes = {n: len(t) for n, t in start.items()}
    out = Outcome(start, [(time.perf_counter() - t0, sizes)])
    if not st.recursive:
        return out
    if on_iteration is not None:
        on_iteration(0, sizes)

    lookups = _Lookups(n for n in tables if n not in st.relations)

    def derive(name, read):
        def reading(step):
            return read(step) if step.relation in st.relations else tables[step.relation]
        outputs = [d for d in (evaluate_rule(r, reading, lookups) for r in st.delta_rules if r.head == name) if len(d)]
        return ops.union(storages[name], outputs) if outputs else None

    report = None if on_iteration is None else (lambda i, sizes, seconds: on_iteration(i, sizes))
    done = semantics.fixpoint(st, storages, ops, start, sizes, derive, max_iterations=max_iterations,
                              on_round=report)
    out.tables, out.stopped = done.full, done.stopped
    out.iterations += done.rounds
    return out


# ---------------------------------------------------------------- a whole program

def run_dataflow(flow, inputs: dict, *, max_iterations: int = 1000) -> dict:
    """Every relation of a small program, stratum by stratum, in this process: no Spark
    job. The scheduler asks the small catalog programs this way (a stage's trigger, the
    lattice's question) when no Spark action is there to carry them. `inputs`: name ->
    table of the relations read from outside; facts come from the dataflow. Raises
    Unsupported when a rule needs Spark's SQL semantics (the caller runs it there) and
    NoFixpoint at the iteration limit."""
    tables = base_tables(flow, inputs)
    for st in flow.strata:
        why = unsupported(st.init_rules + st.delta_rules, [flow.relations[n] for n in st.relations])
        if why:
            raise Unsupported(why)
        tables.update(run_stratum(st, flow.relations, tables, max_iterations=max_iterations).tables)
    return tables


def base_tables(flow, inputs: dict) -> dict:
    """The tables a program starts from: per relation its inputs and its facts, and every
    relation no stratum derives (empty if nothing gives it rows). Raises Unsupported for
    a deletion and for the facts of a keyed relation that rules derive too (the engine's
    order of facts and rules decides there)."""
    from .io import facts_table

    facts: dict = {}
    for relation, values in flow.facts:
        facts.setdefault(relation, []).append(values)
    tables = {}
    for name, s in flow.relations.items():
        if s.kind == "deletion":
            raise Unsupported(f"{name} is a deletion target")
        parts = [inputs[name]] if name in inputs else []
        if name in facts:
            if s.keys is not None and s.kind != "base":  # its rules' tuples replace them too: the engine's order
                raise Unsupported(f"{name} has keyed facts")
            table = facts_table(semantics.facts_kept(s, facts[name]), s)
            if table is None:
                raise Unsupported(f"the facts of {name} hold nulls or lists")
            parts.append(table)
        if parts or s.stratum is None:
            tables[name] = combine(s, parts)
    return tables
