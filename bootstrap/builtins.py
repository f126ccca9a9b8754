"""The built-in functions a program may call, with their arities.

Overlog spells them with an `f_` prefix (`f_cons`), Soufflé without (`cat`); both
spellings name the same function. The static checks use this registry to reject unknown
functions and wrong argument counts; the runtime maps each name to a Spark SQL expression
(no Python UDFs), and a test holds the two in step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Builtin:
    name: str
    min_args: int
    max_args: Optional[int]  # None: variadic
    doc: str

    def accepts(self, n: int) -> bool:
        return n >= self.min_args and (self.max_args is None or n <= self.max_args)

    @property
    def arity_text(self) -> str:
        if self.max_args == self.min_args:
            return str(self.min_args)
        if self.max_args is None:
            return f"{self.min_args} or more"
        return f"{self.min_args} to {self.max_args}"


_ALL = [
    # lists and sets (Spark arrays)
    Builtin("cons", 2, 2, "cons(X, L): L with X in front; [X, L] when L is not a list"),
    Builtin("append", 2, 2, "append(L, X): L with X at the end"),
    Builtin("concat", 2, 2, "concat(L1, L2): the two lists joined"),
    Builtin("contains", 2, 2, "contains(X, L): whether X is an element of the list L; with a string L "
            "(Soufflé's constraint `contains(sub, s)`), whether sub occurs in L"),
    Builtin("size", 1, 1, "size(L): number of elements of L"),
    Builtin("first", 1, 1, "first(L): the first element of L"),
    Builtin("last", 1, 1, "last(L): the last element of L"),
    Builtin("list", 0, None, "list(A, B, ...): a list of the arguments"),
    Builtin("set", 0, None, "set(A, B, ...): a duplicate-free sorted list of the arguments"),
    Builtin("union", 2, 2, "union(S1, S2): set union"),
    Builtin("intersect", 2, 2, "intersect(S1, S2): set intersection"),
    Builtin("remove", 2, 2, "remove(L, X): L without X"),
    # strings (Soufflé functors)
    Builtin("cat", 1, None, "cat(A, B, ...): string concatenation"),
    Builtin("strlen", 1, 1, "strlen(S): length of a string"),
    Builtin("substr", 3, 3, "substr(S, I, N): N characters of S from 0-based I; the rest of S when N < 0; "
            "the empty string when I < 0 or I > strlen(S) (Soufflé's warning case)"),
    Builtin("match", 2, 2, "match(R, S): whether the whole of S matches the regular expression R "
            "(Java's dialect)"),
    Builtin("ord", 1, 1, "ord(S): a stable number for a symbol (a hash, not Soufflé's order of appearance)"),
    Builtin("to_number", 1, 1, "to_number(X): the whole number a symbol spells, or a float truncated "
            "(null when a symbol spells none)"),
    Builtin("to_string", 1, 1, "to_string(N): the text of N (a float as C's %f, as Soufflé: 3.140000)"),
    Builtin("to_float", 1, 1, "to_float(X): X as a float (null when a symbol spells none)"),
    Builtin("to_unsigned", 1, 1, "to_unsigned(X): as to_number; unsigned is stored in the same bits as number"),
    Builtin("lower", 1, 1, "lower(S) (Evita's; Soufflé has none)"),
    Builtin("reprefix", 3, 3, "reprefix(S, Old, New): S with its prefix Old replaced by New "
            "(S itself when it does not start with Old; null stays null). Stages rebase ids with it"),
    Builtin("upper", 1, 1, "upper(S) (Evita's; Soufflé has none)"),
    # numbers
    Builtin("abs", 1, 1, "abs(N)"),
    Builtin("as", 2, 2, "as(X, T): X read as a value of type T (Soufflé's cast: no-op at run time, "
            "within one kind)"),
    Builtin("range", 2, 3, "range(A, B[, S]): Soufflé's multi-valued functor: a tuple per value A, A+S, "
            "A+2S, ... before B (B excluded); S is 1, or -1 when A > B; with S = 0, A alone unless A = B"),
    Builtin("min", 2, None, "min(A, B, ...): the least argument (a function, not the aggregate)"),
    Builtin("max", 2, None, "max(A, B, ...): the greatest argument"),
    Builtin("pow", 2, 2, "pow(A, B): A to the power B"),
    Builtin("floor", 1, 1, "floor(F)"),
    Builtin("ceil", 1, 1, "ceil(F)"),
    Builtin("log", 1, 1, "log(F): the natural logarithm (null for F <= 0); products become sums"),
    Builtin("exp", 1, 1, "exp(F): e to the power F"),
    # Soufflé's bitwise and logical functors, on whole numbers; Soufflé writes them infix
    # (`x band 1`, `bnot x`), and so may Evita. The shift distance counts modulo 64.
    Builtin("band", 2, 2, "bitwise and (`x band y`)"), Builtin("bor", 2, 2, "bitwise or (`x bor y`)"),
    Builtin("bxor", 2, 2, "bitwise xor (`x bxor y`)"), Builtin("bnot", 1, 1, "bitwise not (`bnot x`)"),
    Builtin("bshl", 2, 2, "shift left (`x bshl n`)"),
    Builtin("bshr", 2, 2, "arithmetic shift right, keeping the sign (`x bshr n`)"),
    Builtin("bshru", 2, 2, "logical shift right, filling with zeros (`x bshru n`)"),
    Builtin("land", 2, 2, "logical and: 1 when both are not 0, else 0 (`x land y`)"),
    Builtin("lor", 2, 2, "logical or: 1 when either is not 0, else 0 (`x lor y`)"),
    Builtin("lxor", 2, 2, "logical xor: 1 when exactly one is not 0, else 0 (`x lxor y`)"),
    Builtin("lnot", 1, 1, "logical not: 1 when 0, else 0 (`lnot x`)"),
    # Soufflé's records, as their canonical text (bootstrap/records.py); written by the lowering of records
    Builtin("record", 2, None, "record(T, K, A, B, ...): the record [A, B, ...] of type T; K has a letter per "
            "field (n number, f float, s symbol, r record). Written by the lowering of `[A, B]`"),
    Builtin("record_field", 3, 3, "record_field(R, I, KIND): field I (0-based) of the record R, a value of KIND "
            "(number, unsigned, float, symbol, record T). Written by the lowering of a record pattern"),
    # Soufflé's ADTs, as their canonical text {"B":[...]} (bootstrap/records.py); written by the lowering too
    Builtin("adt", 3, None, "adt(T, B, K, A, ...): the value $B(A, ...) of ADT type T; K as record's. Written by "
            "the lowering of `$B(A, ...)`"),
    Builtin("adt_branch", 1, 1, "adt_branch(V): the branch of the ADT value V. Written by the lowering of an ADT "
            "pattern"),
    Builtin("adt_field", 4, 4, "adt_field(V, B, I, KIND): field I (0-based) of the ADT value V of branch B, a value "
            "of KIND. Written by the lowering of an ADT pattern"),
    # identity, hashing, time
    Builtin("id", 1, None, "id(A, B, ...): a deterministic Skolem id built from the arguments"),
    Builtin("hash", 1, None, "hash(A, ...): a 64-bit hash of the arguments"),
    Builtin("sha1", 1, 1, "sha1(S): hex SHA-1 of the text of S (chord identifiers)"),
    Builtin("now", 0, 0, "now(): the timestamp of the current evaluation"),
    Builtin("tick", 0, 0, "tick(): the current timestep of the node evaluating the rule "
            "(Dedalus programs; evita simulate, evita run --steps)"),
    Builtin("rand", 0, 0, "rand(): a deterministic pseudo-random number per tuple"),
    Builtin("coin_flip", 1, 1, "coin_flip(P): true with probability P (deterministic per tuple)"),
    Builtin("if", 3, 3, "if(C, A, B): A when C holds, else B"),
]

BUILTINS = {b.name: b for b in _ALL}

# Overlog spellings that differ by more than the f_ prefix.
ALIASES = {"coinflip": "coin_flip", "coinFlip": "coin_flip", "len": "size", "tostr": "to_string",
           "randID": "rand", "idgen": "id"}


def canonical(name: str) -> str:
    """`f_cons` -> `cons`; `f_coinFlip` -> `coin_flip`."""
    bare = name[2:] if name.startswith("f_") else name
    return ALIASES.get(bare, bare)


def lookup(name: str) -> Optional[Builtin]:
    return BUILTINS.get(canonical(name))


def markdown() -> str:
    """The table of built-ins in docs/language.md (a test keeps the two in step)."""
    rows = ["| function | arguments | meaning |", "|---|---|---|"]
    for b in _ALL:
        rows.append(f"| `{b.name}` (`f_{b.name}`) | {b.arity_text} | {b.doc.replace('|', '/')} |")
    return "\n".join(rows)


def float_text(value: float) -> str:
    """A float's text as Soufflé's `to_string` gives it: C++'s std::to_string, that is C's
    `%f` (six decimals: 3.14 is "3.140000", 1e20 is "100000000000000000000.000000").
    The one text for the oracle, the columnar backend and folding; runtime/sql.py writes
    Spark SQL's `format_string('%f', ...)`, Java's `%f`, which agrees on finite values."""
    return "%f" % value


def whole_from_text(text: str):
    """The whole number a symbol spells, as Soufflé's to_number reads it (C's strtoll with
    base 0, and Soufflé's own `0b`): optional sign, then `0x`/`0X` hexadecimal, `0b`/`0B`
    binary, or decimal digits; blanks around are allowed. None when it spells none or the
    value is beyond 64 bits. The one reading for the oracle, the columnar backend and
    folding; runtime/sql.py writes the same in Spark SQL."""
    import re

    m = re.fullmatch(r"\s*([+-]?)(?:0([xX])([0-9a-fA-F]+)|0([bB])([01]+)|([0-9]+))\s*", text)
    if m is None:
        return None
    sign, _, hexa, _, binary, decimal = m.groups()
    value = int(hexa, 16) if hexa else int(binary, 2) if binary else int(decimal)
    value = -value if sign == "-" else value
    return value if -2 ** 63 <= value < 2 ** 63 else None
