"""Rules and expressions -> Spark SQL, built as sqlglot expression trees.

A rule's pipeline becomes one SELECT: the first atom is the FROM, each later atom a JOIN
(ON its shared variables), each negated atom a LEFT ANTI JOIN, selections go to WHERE,
and assignments are inlined where their variable is used (so a join on an assigned
variable is still an equi-join). Relations are temp views with columns c0, c1, ...
Built-in functions map to Spark SQL functions (`BUILTIN_SQL`); lists and sets are
arrays. Nothing here concatenates SQL text: the tree is rendered by sqlglot.

>>> from evita.bootstrap.syntax import Var, Const, BinOp, Call
>>> Expr({"X": col("a0", 0)}).sql(BinOp("<", Var("X"), Const(1, "int")))
'(a0.c0 < 1)'
>>> Expr({"X": col("a0", 0)}).sql(BinOp("+", Var("X"), Const(1, "int")))[:48]  # wraps at 64 bits (`_wrapping`)
'(COALESCE(TRY_ADD(a0.c0, 1), CAST(PMOD((CAST(a0.'
>>> Expr({"L": col("a0", 1)}, arrays={"L"}).sql(Call("f_cons", (Const("a", "string"), Var("L"))))
"CONCAT(ARRAY('a'), a0.c1)"
"""
from __future__ import annotations

from functools import reduce
from typing import Callable, Optional

from sqlglot import exp

from ..bootstrap import builtins as B
from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError
from .dataflow import RulePlan, term_text

DIALECT = "spark"


def col(alias: str, i: int) -> exp.Column:
    return exp.column(f"c{i}", table=alias)


def fn(name: str, *args) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def array_literal(rows, types) -> exp.Expression:
    """Rows as an array of structs written into the statement: one JSON text parsed by
    Spark (`from_json`), columns c0, c1, ... of the Spark `types` given."""
    import json

    names = [f"c{i}" for i in range(len(types))]
    struct = "struct<" + ",".join(f"{n}:{t}" for n, t in zip(names, types)) + ">"
    return fn("from_json", exp.Literal.string(json.dumps([dict(zip(names, r)) for r in rows])),
              exp.Literal.string(f"array<{struct}>"))


def lit(value) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value) if value >= 0 else exp.Neg(this=exp.Literal.number(-value))
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            text = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build("double"))
        return exp.Cast(this=exp.Literal.number(repr(value)), to=exp.DataType.build("double")) \
            if value >= 0 else exp.Neg(this=lit(-value))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, (list, tuple)):
        return fn("array", *[lit(v) for v in value])
    raise TypeError(f"no SQL literal for {value!r}")


def _str(e):
    return exp.Cast(this=e, to=exp.DataType.build("string"))


# Soufflé's to_number reads a symbol as C's strtoll does with base 0 plus its own `0b`:
# `0x1F`/`-0xcafe` are hexadecimal, `0b101` binary, the rest decimal (bootstrap/builtins.py,
# `whole_from_text`, says the same for the other backends). Spark's cast reads decimal
# only, so the prefixed forms go through conv(). The text is tested as a string; a number
# or float argument falls to the plain cast.
_TO_NUMBER = """CASE
  WHEN CAST(__x AS STRING) RLIKE '^[+-]?0[xX][0-9a-fA-F]+$' THEN
    (CASE WHEN CAST(__x AS STRING) LIKE '-%' THEN -1 ELSE 1 END)
    * TRY_CAST(CONV(REGEXP_EXTRACT(CAST(__x AS STRING), '0[xX]([0-9a-fA-F]+)', 1), 16, 10) AS BIGINT)
  WHEN CAST(__x AS STRING) RLIKE '^[+-]?0[bB][01]+$' THEN
    (CASE WHEN CAST(__x AS STRING) LIKE '-%' THEN -1 ELSE 1 END)
    * TRY_CAST(CONV(REGEXP_EXTRACT(CAST(__x AS STRING), '0[bB]([01]+)', 1), 2, 10) AS BIGINT)
  ELSE TRY_CAST(__x AS BIGINT) END"""


# Soufflé's to_string of a float is C's %f (bootstrap/builtins.py, `float_text`); of the
# rest, the value's text. Only the branch of the argument's type runs.
_TO_STRING = """CASE WHEN __x IS NULL THEN NULL
  WHEN typeof(__x) = 'double' THEN format_string('%f', __x)
  ELSE CAST(__x AS STRING) END"""


def _to_string(e):
    return _filled(_TO_STRING, e)


def _filled(template: str, e):
    """The Spark SQL `template` with `e` in place of each `__x`, in parentheses."""
    import sqlglot

    tree = sqlglot.parse_one(template, read="spark")
    return exp.Paren(this=tree.transform(lambda n: e.copy() if isinstance(n, exp.Column) and n.name == "__x" else n))


def _to_number(e):
    return _filled(_TO_NUMBER, e)


def _nonzero(e):
    return exp.Paren(this=exp.NEQ(this=exp.Paren(this=e), expression=lit(0)))


def _as_number(condition):
    return exp.Cast(this=exp.Paren(this=condition), to=exp.DataType.build("bigint"))


def _sorted_set(e):
    return fn("array_sort", fn("array_distinct", e))


def _is_array(t, arrays: set) -> bool:
    if isinstance(t, S.Var):
        return t.name in arrays
    if isinstance(t, S.ListExpr):
        return True
    if isinstance(t, S.Call):
        return B.canonical(t.func) in ("cons", "append", "concat", "list", "set", "union", "intersect", "remove")
    if isinstance(t, S.Cond):
        return _is_array(t.then, arrays)
    return False


def _substr(s, i, n):
    """Soufflé's substr is C++'s std::string::substr(i, n): a start beyond the end (or a
    negative one, which is a huge size_t) is out of range, where Soufflé warns and answers
    the empty string; a negative length (also huge) takes the rest of the string."""
    start = exp.Add(this=i.copy(), expression=lit(1))
    out_of_range = exp.Or(this=exp.LT(this=i.copy(), expression=lit(0)),
                          expression=exp.GT(this=i.copy(), expression=fn("length", s.copy())))
    return exp.Case(ifs=[exp.If(this=out_of_range, true=lit("")),
                         exp.If(this=exp.LT(this=n.copy(), expression=lit(0)), true=fn("substring", s.copy(), start))],
                    default=fn("substring", s.copy(), start.copy(), n.copy()))


def _whole_match(pattern, s):
    """Soufflé's match is std::regex_match: the whole string. RLIKE finds a match
    anywhere, so the pattern is anchored (Java's `$` also matches before a final newline)."""
    anchored = fn("concat", lit("^(?:"), pattern, lit(")$"))
    return exp.RegexpLike(this=s, expression=anchored)


def _string_contains(sub, s):
    """Soufflé's contains(sub, s): sub occurs in s (the empty string occurs in every s)."""
    return exp.GT(this=fn("instr", _str(s), _str(sub)), expression=lit(0))


def _range_values(a, b, s=None):
    """The array of range(a, b[, s])'s values (bootstrap/ranges.py): a + k*s for k = 0, 1,
    ... while before b. Spark's `sequence` includes its end and fails on a step pointing
    away from it, so the count is computed first and guarded: none when the step points
    away from b (or a = b), one (a) when the step is 0, none when an argument is null."""
    if s is None:
        s = exp.If(this=exp.LTE(this=a.copy(), expression=b.copy()), true=lit(1), false=lit(-1))
    s = exp.Paren(this=s)
    up = exp.And(this=exp.GT(this=s.copy(), expression=lit(0)), expression=exp.LT(this=a.copy(), expression=b.copy()))
    down = exp.And(this=exp.LT(this=s.copy(), expression=lit(0)), expression=exp.GT(this=a.copy(), expression=b.copy()))
    steps = fn("ceil", exp.Div(this=exp.Paren(this=exp.Sub(this=b.copy(), expression=a.copy())), expression=s.copy()))
    count = exp.Case(ifs=[exp.If(this=exp.Or(this=exp.Paren(this=up), expression=exp.Paren(this=down)), true=steps),
                          exp.If(this=exp.And(this=exp.EQ(this=s.copy(), expression=lit(0)),
                                              expression=exp.NEQ(this=a.copy(), expression=b.copy())), true=lit(1))],
                     default=lit(0))
    k, v = exp.column("range_k"), exp.column("range_v")
    value = exp.Add(this=a.copy(), expression=exp.Mul(this=k, expression=s.copy()))
    # a float's a + k*s may land on or past b; a whole number's never does
    before_b = exp.Or(this=exp.EQ(this=s.copy(), expression=lit(0)), expression=exp.Or(
        this=exp.And(this=exp.GT(this=s.copy(), expression=lit(0)), expression=exp.LT(this=v, expression=b.copy())),
        expression=exp.And(this=exp.LT(this=s.copy(), expression=lit(0)), expression=exp.GT(this=v.copy(), expression=b.copy()))))
    values = fn("filter", fn("transform", fn("sequence", lit(0), exp.Sub(this=exp.Paren(this=count.copy()), expression=lit(1))),
                             exp.Lambda(this=value, expressions=[exp.to_identifier("range_k")])),
                exp.Lambda(this=before_b, expressions=[exp.to_identifier("range_v")]))
    return exp.If(this=exp.GT(this=exp.Paren(this=count), expression=lit(0)), true=values, false=fn("array"))


# Each builtin: (args as sqlglot expressions, the terms, array-typed variables) -> expression.
BUILTIN_SQL: dict = {
    "cons": lambda a, t, arr: fn("concat", fn("array", a[0]), a[1]) if _is_array(t[1], arr)
    else fn("array", a[0], a[1]),
    "append": lambda a, t, arr: fn("concat", a[0], fn("array", a[1])),
    "concat": lambda a, t, arr: fn("concat", a[0], a[1]),
    "contains": lambda a, t, arr: fn("array_contains", a[1], a[0]),
    "size": lambda a, t, arr: fn("size", a[0]),
    "first": lambda a, t, arr: fn("element_at", a[0], lit(1)),
    "last": lambda a, t, arr: fn("element_at", a[0], lit(-1)),
    "list": lambda a, t, arr: fn("array", *a),
    "set": lambda a, t, arr: _sorted_set(fn("array", *a)),
    "union": lambda a, t, arr: fn("array_sort", fn("array_union", a[0], a[1])),
    "intersect": lambda a, t, arr: fn("array_sort", fn("array_intersect", a[0], a[1])),
    "remove": lambda a, t, arr: fn("array_remove", a[0], a[1]),
    "cat": lambda a, t, arr: fn("concat", *[_str(x) for x in a]),
    "strlen": lambda a, t, arr: fn("length", a[0]),
    "substr": lambda a, t, arr: _substr(*a),
    "match": lambda a, t, arr: _whole_match(a[0], a[1]),
    "ord": lambda a, t, arr: fn("xxhash64", _str(a[0])),
    # try_cast: a symbol that spells no number gives null (Spark's ANSI cast would fail
    # the whole job); a float is truncated toward zero, as Soufflé's ftoi.
    "to_number": lambda a, t, arr: _to_number(a[0]),
    "to_unsigned": lambda a, t, arr: _to_number(a[0]),
    "to_string": lambda a, t, arr: _to_string(a[0]),
    "to_float": lambda a, t, arr: exp.TryCast(this=a[0], to=exp.DataType.build("double"), safe=True),
    "lower": lambda a, t, arr: fn("lower", a[0]),
    "upper": lambda a, t, arr: fn("upper", a[0]),
    "reprefix": lambda a, t, arr: exp.If(
        this=fn("startswith", a[0], a[1]),
        true=fn("concat", a[2], fn("substring", a[0], exp.Add(this=fn("length", a[1]), expression=lit(1)))),
        false=a[0]),
    "abs": lambda a, t, arr: fn("abs", a[0]),
    "as": lambda a, t, arr: a[0],  # a cast: the value itself (bootstrap/casts.py)
    "range": lambda a, t, arr: _range_values(*a),  # an array: a generate step explodes it
    "min": lambda a, t, arr: fn("least", *a),
    "max": lambda a, t, arr: fn("greatest", *a),
    "pow": lambda a, t, arr: fn("power", a[0], a[1]),
    "floor": lambda a, t, arr: fn("floor", a[0]),
    "ceil": lambda a, t, arr: fn("ceil", a[0]),
    "log": lambda a, t, arr: fn("ln", a[0]),
    "exp": lambda a, t, arr: fn("exp", a[0]),
    "band": lambda a, t, arr: exp.BitwiseAnd(this=a[0], expression=a[1]),
    "bor": lambda a, t, arr: exp.BitwiseOr(this=a[0], expression=a[1]),
    "bxor": lambda a, t, arr: exp.BitwiseXor(this=a[0], expression=a[1]),
    "bnot": lambda a, t, arr: exp.BitwiseNot(this=a[0]),
    "bshl": lambda a, t, arr: fn("shiftleft", a[0], a[1]),
    "bshr": lambda a, t, arr: fn("shiftright", a[0], a[1]),
    "bshru": lambda a, t, arr: fn("shiftrightunsigned", a[0], a[1]),
    # Soufflé's logical functors answer the numbers 1 and 0, not booleans.
    "land": lambda a, t, arr: _as_number(exp.And(this=_nonzero(a[0]), expression=_nonzero(a[1]))),
    "lor": lambda a, t, arr: _as_number(exp.Or(this=_nonzero(a[0]), expression=_nonzero(a[1]))),
    "lxor": lambda a, t, arr: _as_number(exp.NEQ(this=_nonzero(a[0]), expression=_nonzero(a[1]))),
    "lnot": lambda a, t, arr: _as_number(exp.EQ(this=exp.Paren(this=a[0]), expression=lit(0))),
    # A Skolem id is a function of what it is made from: same arguments, same id.
    "id": lambda a, t, arr: fn("concat_ws", lit(":"), *[_str(x) for x in a]),
    "hash": lambda a, t, arr: fn("xxhash64", *a),
    "sha1": lambda a, t, arr: fn("sha1", _str(a[0])),
    "now": None,  # needs the evaluation's timestamp: see Expr.call
    "tick": None,  # the timestep: the simulator rewrites tick() away before SQL (see Expr.call)
    "rand": None,  # needs the tuple: see Expr.call
    "coin_flip": None,
    "if": lambda a, t, arr: exp.If(this=a[0], true=a[1], false=a[2]),
    "record": lambda a, t, arr: _record(a[2:], t[1].value),
    "record_field": lambda a, t, arr: _record_field(a[0], t[1].value, t[2].value),
    "adt": lambda a, t, arr: _adt(t[1].value, a[3:], t[2].value),
    "adt_branch": lambda a, t, arr: _adt_branch(a[0]),
    "adt_field": lambda a, t, arr: _record_field(a[0], t[2].value, t[3].value, t[1].value),
}


def _json_string(e):
    """A symbol as a JSON string, as Jackson writes it (bootstrap/records.py): the one
    element of a JSON array, its brackets taken off."""
    text = fn("to_json", fn("array", e))
    return fn("substring", text, lit(2), exp.Sub(this=fn("length", text.copy()), expression=lit(2)))


def _record(items, kinds: str):
    """record(T, K, ...): a record's canonical text (bootstrap/records.py), built by
    concatenation: numbers as their text (a double's is Java's), symbols as JSON
    strings, records as they are."""
    parts = [lit("[")]
    for i, (e, k) in enumerate(zip(items, kinds)):
        if i:
            parts.append(lit(","))
        parts.append(_json_string(e) if k == "s" else e if k == "r" else _str(e))
    parts.append(lit("]"))
    return fn("concat", *parts)


def _adt(branch: str, items, kinds: str):
    """adt(T, B, K, ...): an ADT value's canonical text, {"B":[...]} (bootstrap/records.py)."""
    return fn("concat", lit('{"' + branch + '":'), _record(items, kinds), lit("}"))


def _adt_branch(value):
    """adt_branch(V): the one key of V's canonical text, between its first two quotes."""
    return fn("substring_index", fn("substring", value, lit(3)), lit('"'), lit(1))


def _record_field(record, i: int, kind: str, branch: Optional[str] = None):
    """record_field(R, I, KIND): Spark's JSON path reads the field; a nested record's
    text is written back by the same library (Jackson) in the canonical form, nil
    (JSON null, which the path reads as SQL NULL) as `null`. With `branch`,
    adt_field(V, B, I, KIND): field I of the ADT value V's branch B."""
    path = f"$['{branch}'][{int(i)}]" if branch is not None else f"$[{int(i)}]"
    value = fn("get_json_object", record, lit(path))
    if kind.startswith(("record", "adt")):
        return fn("coalesce", value, lit("null"))
    if kind == "symbol":
        return value
    return exp.Cast(this=value, to=exp.DataType.build("double" if kind == "float" else "bigint"))

def _whole_division(this, expression):
    """Soufflé's `/` on whole numbers (bootstrap/division.py): Spark's DIV truncates
    toward zero as C does; by zero it is null (Spark's ANSI mode would fail the job)."""
    zero = exp.EQ(this=exp.Paren(this=expression.copy()), expression=lit(0))
    return exp.Case(ifs=[exp.If(this=zero, true=exp.Null())], default=exp.IntDiv(this=this, expression=expression))


def _wrapping(checked, operator):
    """`+`, `-`, `*` as the JVM computes them on longs: wrapping around at 64 bits, as
    Soufflé's 64-bit build does, where Spark's ANSI mode would fail the job with
    ARITHMETIC_OVERFLOW. `checked` (try_add, ...) gives null on overflow; then, and only
    then (coalesce evaluates in order), the exact result in DECIMAL(38, 0) (a product of
    two longs fits) is taken modulo 2^64. A double never overflows into the second; a null
    operand gives null in both."""
    def build(this, expression):
        exact = operator(this=exp.Cast(this=this.copy(), to=exp.DataType.build("decimal(38,0)")),
                         expression=exp.Cast(this=expression.copy(), to=exp.DataType.build("decimal(38,0)")))
        return fn("coalesce", fn(checked, this, expression), wrap64(exact))
    return build


def wrap64(exact) -> exp.Expression:
    """An exact whole number (a decimal) modulo 2^64, as a two's-complement bigint."""
    half = exp.Literal.number(1 << 63)
    shifted = exp.Add(this=exp.Paren(this=exact), expression=half)
    wrapped = exp.Sub(this=fn("pmod", shifted, exp.Literal.number(1 << 64)), expression=half.copy())
    return exp.Cast(this=wrapped, to=exp.DataType.build("bigint"))


def wrap32(value) -> exp.Expression:
    """A whole number at 32 bits (bootstrap/lowering/width.py): its low 32 bits as two's
    complement, in a bigint. `value` is a result on 32-bit operands, far from 2^63."""
    half = lit(1 << 31)
    low = exp.BitwiseAnd(this=exp.Paren(this=exp.Add(this=exp.Paren(this=value), expression=half)),
                         expression=lit(0xFFFFFFFF))
    return exp.Paren(this=exp.Sub(this=exp.Paren(this=low), expression=half.copy()))


# Unsigned values (bootstrap/lowering/unsigned.py), held as their 64-bit pattern in a bigint.
# `ukey` flips bit 63 (bigint order on keys is unsigned order on values). `udiv` and
# `umod` read both patterns as their unsigned value, exact in DECIMAL(20,0) (up to
# 2^64 - 1, where Spark has no unsigned long), divide there, and hold the result's pattern
# again (`wrap64`): exact, where a double loses the low bits, and one SQL expression, where
# the JVM's Long.divideUnsigned is reachable only through reflect (a string, per row).
def ukey(value) -> exp.Expression:
    sign_bit = exp.Cast(this=lit(-(1 << 63)), to=exp.DataType.build("bigint"))
    return exp.Paren(this=exp.BitwiseXor(this=exp.Paren(this=value), expression=sign_bit))


def _as_unsigned(value) -> exp.Expression:
    exact = exp.Cast(this=value, to=exp.DataType.build("decimal(20,0)"))
    return fn("pmod", exact, exp.Literal.number(1 << 64))


def _unsigned_division(op: str):
    def build(this, expression):
        dividend, divisor = _as_unsigned(this), fn("nullif", _as_unsigned(expression), lit(0))  # by zero: null
        remainder = exp.Mod(this=dividend, expression=divisor)
        if op == "umod":
            return wrap64(remainder)
        exact_multiple = exp.Paren(this=exp.Sub(this=dividend.copy(), expression=remainder.copy()))
        return wrap64(exp.Div(this=exact_multiple, expression=divisor.copy()))  # exact: no rounding
    return build


_BINOPS = {
    "+": _wrapping("try_add", exp.Add), "-": _wrapping("try_subtract", exp.Sub),
    "*": _wrapping("try_multiply", exp.Mul), "/": exp.Div, "%": exp.Mod, "//": _whole_division,
    "udiv": _unsigned_division("udiv"), "umod": _unsigned_division("umod"),
    "==": exp.EQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE,
    "&&": exp.And, "||": exp.Or,
}


class Expr:
    """Compiles terms to sqlglot given where each variable lives."""

    def __init__(self, env: dict, arrays: set = frozenset(), now: str = "1970-01-01 00:00:00"):
        self.env = env  # variable -> sqlglot expression (a column, or an inlined assignment)
        self.arrays = set(arrays)
        self.now = now

    def sql(self, t) -> str:
        return self.compile(t).sql(DIALECT)

    def compile(self, t) -> exp.Expression:
        if isinstance(t, S.Var):
            if t.name not in self.env:
                raise _error("unbound-variable", f"variable {t.name} is not bound where it is used", t)
            return self.env[t.name].copy()
        if isinstance(t, S.Const):
            return lit(float("inf") if t.type == S.INFINITY else t.value)
        if isinstance(t, S.BinOp):
            if t.op not in _BINOPS:
                raise _error("unknown-operator", f"operator {t.op} has no Spark SQL form", t)
            return exp.Paren(this=_BINOPS[t.op](this=self.compile(t.left), expression=self.compile(t.right)))
        if isinstance(t, S.UnOp):
            inner = self.compile(t.arg)
            if t.op == "wrap32":
                return wrap32(inner)
            if t.op == "ukey":
                return ukey(inner)
            return exp.Neg(this=exp.Paren(this=inner)) if t.op == "-" else exp.Not(this=exp.Paren(this=inner))
        if isinstance(t, S.Cond):
            return exp.If(this=self.compile(t.test), true=self.compile(t.then), false=self.compile(t.other))
        if isinstance(t, S.ListExpr):
            return fn("array", *[self.compile(a) for a in t.items])
        if isinstance(t, S.Call):
            return self.call(t)
        if isinstance(t, S.Wildcard):
            raise _error("wildcard-in-expression", "`_` cannot be used inside an expression", t)
        raise _error("unsupported-term", f"cannot compile {term_text(t)} to SQL", t)

    def call(self, t: S.Call) -> exp.Expression:
        name = B.canonical(t.func)
        b = B.BUILTINS.get(name)
        if b is None or not b.accepts(len(t.args)):
            raise _error("unknown-function", f"unknown function {t.func}/{len(t.args)}", t)
        args = [self.compile(a) for a in t.args]
        if name == "now":
            return exp.Cast(this=lit(self.now), to=exp.DataType.build("timestamp"))
        if name == "tick":  # never a constant; only a run over timesteps knows it
            raise _error("tick-outside-time", "tick() has a value only in a run over timesteps "
                         "(evita simulate, evita run --steps)", t)
        if name in ("rand", "coin_flip"):
            # Deterministic per tuple: a hash of every bound variable, scaled to [0, 1).
            seed = fn("xxhash64", *[self.env[v].copy() for v in sorted(self.env)]) if self.env else lit(0)
            r = exp.Div(this=fn("pmod", seed, lit(1000003)), expression=lit(1000003.0))
            return r if name == "rand" else exp.LT(this=exp.Paren(this=r), expression=args[0])
        if name == "contains" and _is_souffle_contains(t, self.arrays):
            return _string_contains(*args)
        return BUILTIN_SQL[name](args, t.args, self.arrays)


def _is_souffle_contains(t: S.Call, arrays: set) -> bool:
    # Overlog writes its list membership f_contains(X, L); Soufflé writes contains(sub, s)
    # on strings. The bare spelling on a value not known to be a list is Soufflé's.
    return not t.func.startswith("f_") and not _is_array(t.args[1], arrays)


def _error(code, message, t) -> EvitaError:
    span = getattr(t, "span", S.NOWHERE)
    return EvitaError([Diagnostic(code, message, span, term_text(t))])


# ---------------------------------------------------------------- rules

def rule_select(rule: RulePlan, view_of: Callable, array_cols: Callable,
                now: str = "1970-01-01 00:00:00", output: Optional[list] = None,
                one_partition: bool = False) -> exp.Select:
    """One SELECT for a rule. `view_of(step)` names the temp view a step reads;
    `array_cols(relation)` gives the array-typed column positions of a relation.
    The output columns are c0..c{n-1}, the head's arguments; an aggregated column holds
    the aggregate's input (1 for count<*>), and the caller groups.

    `one_partition`: the views hold one partition each, and the rule is written so
    that every join's result is one partition too (inner joins as left joins, or
    `one_partition_joins`), so Spark plans it without an exchange."""
    env: dict = {}
    arrays: set = set()
    where: list = []
    tables: list = []  # (alias, view, on-conditions, kind, method)
    for k, step in enumerate(rule.steps):
        if step.op in ("scan", "join", "antijoin"):
            alias = f"a{k}"
            conds: list = []
            local: dict = {}
            arr = array_cols(step.relation)
            for i, arg in enumerate(step.args):
                c = col(alias, i)
                if isinstance(arg, S.Wildcard):
                    continue
                if isinstance(arg, S.Var):
                    if arg.name in env:
                        conds.append(exp.EQ(this=c, expression=env[arg.name].copy()))
                    elif arg.name in local:
                        conds.append(exp.EQ(this=c, expression=local[arg.name].copy()))
                    else:
                        local[arg.name] = c
                        if i in arr:
                            arrays.add(arg.name)
                else:
                    expr = Expr({**env, **local}, arrays, now).compile(arg)
                    conds.append(exp.EQ(this=c, expression=expr))
            if step.op != "antijoin":
                env.update(local)
            kind = {"scan": "from", "join": "inner", "antijoin": "left anti"}[step.op]
            tables.append((alias, view_of(step), conds, kind, step.method))
        elif step.op == "filter":
            where.append(Expr(env, arrays, now).compile(step.expr))
        elif step.op == "assign":
            compiled = Expr(env, arrays, now).compile(step.expr)
            env[step.var] = exp.Paren(this=compiled)
            if _is_array(step.expr, arrays):
                arrays.add(step.var)
        elif step.op == "generate":
            # Spark puts a generator (explode) in a SELECT list, after every join of its
            # FROM: what the rule has bound so far becomes a subquery that also explodes
            # the values, and the atoms after it join that subquery.
            values = Expr(env, arrays, now).compile(step.expr)
            names = list(env)
            columns = [exp.alias_(env[v].copy(), f"v{i}", copy=False) for i, v in enumerate(names)]
            columns.append(exp.alias_(fn("explode", values), f"v{len(names)}", copy=False))
            alias = f"g{k}"
            inner = subquery(_assemble(columns, tables, where, one_partition), alias)
            env = {v: exp.column(f"v{i}", table=alias) for i, v in enumerate(names)}
            env[step.var] = exp.column(f"v{len(names)}", table=alias)
            tables, where = [(alias, inner, [], "from", "")], []
    projections = []
    ex = Expr(env, arrays, now)
    for i, arg in enumerate(rule.head_args):
        if isinstance(arg, S.Aggregate):
            value = lit(1) if arg.arg is None else ex.compile(arg.arg)
        else:
            value = ex.compile(arg)
        projections.append(exp.alias_(value, f"c{i}", copy=False))
    if not rule.head_args:  # a proposition: Spark's unit column (io.UNIT); SQL has no empty SELECT
        projections.append(exp.alias_(exp.true(), "c0", copy=False))
    return _assemble(projections, tables, where, one_partition)


def _source(view, alias: str):
    """A step's source in FROM or JOIN: a view by name, or a generator's subquery."""
    return view if isinstance(view, exp.Subquery) else table(view, alias)


def _aliased(view, alias: str):
    return view if isinstance(view, exp.Subquery) else exp.alias_(exp.to_table(view), alias, table=True)


def _assemble(projections: list, tables: list, where: list, one_partition: bool) -> exp.Select:
    """SELECT projections FROM the tables (the first one, then JOINs) WHERE the conditions."""
    # The trees are built here and used once: no copies (sqlglot's builders copy by default).
    tables, where = _leading_negations(tables, where)
    if not tables:  # a rule with no atoms: one row
        select = exp.select(*projections, copy=False)
    elif one_partition and len(tables) > 1:
        markers = _matched_markers(tables)
        if markers is None:  # a join without an equality on earlier atoms
            return one_partition_joins(tables, projections, where)
        # Inner joins as LEFT JOIN + "matched": a left outer join keeps its left input's
        # partitioning (an inner join reports a collection of both), so a chain of them
        # over single-partition views stays in one partition. An equality column of the
        # right atom is null exactly on the rows the inner join would not have.
        alias, view, conds, _, _ = tables[0]
        select = exp.select(*projections, copy=False).from_(_source(view, alias), copy=False)
        where = markers + conds + where
        for alias, view, conds, kind, _ in tables[1:]:
            select = select.join(_source(view, alias), on=exp.and_(*conds, copy=False) if conds else exp.true(),
                                 join_type="left" if kind == "inner" else kind, copy=False)
    else:
        alias, view, conds, _, _ = tables[0]
        select = exp.select(*projections, copy=False).from_(_source(view, alias), copy=False)
        where = conds + where
        hints = []
        for alias, view, conds, kind, method in tables[1:]:
            on = exp.and_(*conds, copy=False) if conds else exp.true()
            select = select.join(_source(view, alias), on=on, join_type=None if kind == "inner" else kind, copy=False)
            if method:
                hints.append(fn({"broadcast": "BROADCAST", "merge": "MERGE",
                                 "shuffle_hash": "SHUFFLE_HASH"}.get(method, method.upper()),
                                exp.to_identifier(alias)))
        if hints:
            select.set("hint", exp.Hint(expressions=hints))
    if where:
        select = select.where(exp.and_(*where, copy=False), copy=False)
    return select


def _leading_negations(tables: list, where: list) -> tuple:
    """A negated atom before every positive one (its arguments constants, or a nullary
    atom: nothing is bound yet) has no left side to anti-join: it becomes the condition
    NOT EXISTS (SELECT 1 FROM it WHERE its constants), and the rule's FROM the next atom."""
    conditions = []
    while tables and tables[0][3] == "left anti":
        alias, view, conds, _, _ = tables.pop(0)
        probe = exp.select(lit(1), copy=False).from_(_source(view, alias), copy=False)
        if conds:
            probe = probe.where(exp.and_(*conds, copy=False), copy=False)
        conditions.append(exp.Not(this=exp.Exists(this=probe)))
    return tables, conditions + where


def table(name: str, alias: Optional[str] = None) -> exp.Table:
    """A table (view or CTE) by name, optionally aliased; built without parsing."""
    t = exp.Table(this=exp.to_identifier(name))
    if alias:
        t.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return t


def subquery(select: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def select_all(source) -> exp.Select:
    """`SELECT * FROM source` (a table name or a subquery)."""
    return exp.select(exp.Star(), copy=False).from_(table(source) if isinstance(source, str) else source, copy=False)


def union_all(parts: list) -> exp.Expression:
    """The parts' UNION ALL, built without copying them (a fold with sqlglot's default
    copies would copy the growing union once per part)."""
    return reduce(lambda a, b: exp.union(a, b, distinct=False, copy=False), parts)


def _matched_markers(tables: list) -> Optional[list]:
    """For each inner join, `a<k>.c<i> IS NOT NULL` for a column of the joined atom that
    an ON equality compares with earlier atoms; None if a join has no such equality
    (Spark would plan it as a nested loop or a cartesian product)."""
    markers = []
    earlier = {tables[0][0]}
    for alias, _, conds, kind, _ in tables[1:]:
        if kind == "inner":
            for c in conds:
                left, right = c.this, c.expression
                other = {col.table for col in right.find_all(exp.Column)}
                if isinstance(left, exp.Column) and left.table == alias and other and other <= earlier:
                    markers.append(exp.Not(this=exp.Is(this=left.copy(), expression=exp.Null())))
                    break
            else:
                return None
            earlier.add(alias)
    return markers


def coalesced(select: exp.Expression, alias: str = "u") -> exp.Select:
    """`SELECT /*+ COALESCE(1) */ * FROM (select)`: the rows in one partition, without
    a shuffle (CoalesceExec(1) reports SinglePartition)."""
    out = exp.select(exp.Star(), copy=False).from_(subquery(select, alias), copy=False)
    out.set("hint", exp.Hint(expressions=[fn("COALESCE", lit(1))]))
    return out


def one_partition_joins(tables: list, projections: list, where: list) -> exp.Select:
    """A rule's joins nested one per level, each level coalesced to one partition.

    Spark plans a join of two single-partition inputs without an exchange, but an inner
    join's own output does not report SinglePartition, so the next join above it would
    shuffle both sides (one Spark stage each). For rules whose joins cannot be written as
    left joins (an atom shares no variable with the earlier ones), every join here is a
    subquery with the COALESCE(1) hint, which keeps the whole rule in one Spark stage. Level k exposes the columns
    of atoms 0..k that anything above reads, renamed `a<i>_c<j>`; expressions refer to
    them through the level's alias."""
    exprs = projections + where + [c for t in tables for c in t[2]]
    needed: dict = {}
    for e in exprs:
        for c in e.find_all(exp.Column):
            needed.setdefault(c.table, set()).add(c.name)

    def columns(alias):
        cols = sorted(needed.get(alias, ()), key=lambda n: int(n[1:]))
        return [exp.alias_(exp.column(c, table=alias), f"{alias}_{c}") for c in cols]

    def moved(e, visible: set, level: str):
        def swap(node):
            if isinstance(node, exp.Column) and node.table in visible:
                return exp.column(f"{node.table}_{node.name}", table=level)
            return node
        return e.copy().transform(swap)

    alias, view, conds, _, _ = tables[0]
    first = columns(alias) or [exp.alias_(lit(1), "_one")]
    inner = exp.select(*first).from_(_aliased(view, alias))
    if conds:
        inner = inner.where(exp.and_(*conds))
    visible = {alias}
    for k, (alias, view, conds, kind, _) in enumerate(tables[1:], start=1):
        level = f"j{k}"
        on = exp.and_(*[moved(c, visible, level) for c in conds]) if conds else exp.true()
        cols = [exp.Column(this=exp.Star(), table=exp.to_identifier(level))]
        if kind != "left anti":
            cols += columns(alias)
        inner = exp.select(*cols).from_(exp.Subquery(this=inner, alias=exp.TableAlias(
            this=exp.to_identifier(level)))).join(_aliased(view, alias), on=on,
                                                  join_type=None if kind == "inner" else kind)
        inner.set("hint", exp.Hint(expressions=[fn("COALESCE", lit(1))]))
        if kind != "left anti":
            visible.add(alias)
    level = "j"
    select = exp.select(*[moved(p, visible, level) for p in projections]).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(level))))
    if where:
        select = select.where(exp.and_(*[moved(w, visible, level) for w in where]))
    return select


_LIST_FUNCTIONS = ("cons", "append", "concat", "list", "set", "union", "intersect", "remove")


def list_free(dataflow, inputs: dict) -> bool:
    """No relation of the run can hold a list: no list facts, literals, list functions
    or set/list aggregates, no array inputs, no declared type the runtime does not know."""
    from pyspark.sql.types import ArrayType

    from .io import DECLARED

    def term_ok(t) -> bool:
        if isinstance(t, S.ListExpr) or (isinstance(t, S.Const) and isinstance(t.value, (list, tuple))):
            return False
        if isinstance(t, S.Call):
            return B.canonical(t.func) not in _LIST_FUNCTIONS and all(term_ok(a) for a in t.args)
        if isinstance(t, S.Aggregate):
            return t.func not in ("set", "list") and (t.arg is None or term_ok(t.arg))
        if isinstance(t, S.BinOp):
            return term_ok(t.left) and term_ok(t.right)
        if isinstance(t, S.UnOp):
            return term_ok(t.arg)
        if isinstance(t, S.Cond):
            return term_ok(t.test) and term_ok(t.then) and term_ok(t.other)
        return True

    if any(isinstance(v, (list, tuple)) for _, values in dataflow.facts for v in values):
        return False
    for s in dataflow.relations.values():
        if any(t != "any" and t not in DECLARED for t in s.types):
            return False
        if any(a.func in ("set", "list") for a in s.aggregates):
            return False
    for given in inputs.values():  # a DataFrame has a schema; a query input (engine.SqlInput) holds no lists
        schema = getattr(given, "schema", None)
        if schema is not None and any(isinstance(f.dataType, ArrayType) for f in schema.fields):
            return False
    for st in dataflow.strata:
        for r in st.init_rules + st.delta_rules:
            terms = list(r.head_args) + [a for step in r.steps for a in step.args]
            terms += [step.expr for step in r.steps if step.expr is not None]
            if not all(term_ok(t) for t in terms):
                return False
    return True
