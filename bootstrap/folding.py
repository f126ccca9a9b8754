"""Constant folding: a ground expression evaluated in the front end.

Soufflé evaluates facts such as `rel(2^32-5).` and `expr(-(2^31)).`; the parser folds
their arguments here, so a fact reaches the catalog holding constants only. Whole numbers
have the program's width (`numbers.py`: 64 bits, or 32 with `--number-bits 32`): a
literal outside it is an error (Soufflé's "Number constant not in range"), a result wraps
around as Soufflé's does (two's complement). On whole numbers the operators follow
Soufflé (and C): `/` truncates, `%` takes the sign of the dividend (-7 % 3 is -1), `^`
is an exact power.

>>> from evita.bootstrap.parser import parse_program
>>> [f.atom.args[0].value for f in parse_program("r(2^32-5). r(-(2^31)). r(0x10 band 6). r(-7 % 3).").facts]
[4294967291, -2147483648, 0, -1]
>>> [f.atom.args[0].value for f in parse_program("r(2147483647 + 1). r(1 bshl 31).", number_bits=32).facts]
[-2147483648, -2147483648]
"""
from __future__ import annotations

import math
import re
from typing import Optional

from . import numbers
from .builtins import canonical, float_text, lookup
from .syntax import FLOAT, INT, STRING, BinOp, Call, Const, UnOp



class FoldError(Exception):
    """A ground expression with no value (division by zero, out of range); the message
    says why in the user's terms."""


def fold(term, bits: int = numbers.DEFAULT_BITS) -> Optional[Const]:
    """The constant a ground term denotes, or None when it is not ground or uses
    something folding does not know (the caller reports it as before). Raises FoldError.
    `bits`: the program's width of whole numbers (`numbers.py`)."""
    if isinstance(term, Const):
        if term.type == INT and not isinstance(term.value, bool) and not numbers.holds(term.value, bits):
            raise FoldError(f"{term.value} is out of the range of a {bits}-bit number")
        return term  # as written: an unsigned literal keeps its value (the planner holds its bit pattern)
    if isinstance(term, UnOp):
        arg = fold(term.arg, bits)
        if arg is None or arg.type not in (INT, FLOAT):
            return None
        if term.op == "-":
            return _number(-arg.value, term, bits)
        return None
    if isinstance(term, BinOp) and term.op in _ARITHMETIC:
        left, right = fold(term.left, bits), fold(term.right, bits)
        if term.op == "+" and left is not None and right is not None and left.type == right.type == STRING:
            return Const(left.value + right.value, STRING, term.span)  # Soufflé 2.4: `+` joins symbols
        if left is None or right is None or not _numeric(left, right):
            return None
        return _number(_ARITHMETIC[term.op](left.value, right.value, term), term, bits)
    if isinstance(term, Call) and canonical(term.func) == "as" and len(term.args) == 2:
        return fold(term.args[0], bits)  # a cast: the value itself (bootstrap/casts.py)
    if isinstance(term, Call):
        args = [fold(a, bits) for a in term.args]
        if any(a is None for a in args):
            return None
        return _call(canonical(term.func), args, term, bits)
    return None


def _numeric(*consts) -> bool:
    return all(c.type in (INT, FLOAT) for c in consts)


def _number(value, term, bits: int) -> Const:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):  # wraps around, as Soufflé's arithmetic does
        return Const(numbers.wrap(value, bits), INT, term.span)
    if not math.isfinite(value):
        raise FoldError(f"the value is {value}, which no number column holds")
    return Const(float(value), FLOAT, term.span)


def _divide(a, b, term):
    if b == 0:
        raise FoldError("division by zero")
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q  # truncated, as in C and Soufflé
    return a / b


def _remainder(a, b, term):
    if b == 0:
        raise FoldError("modulo by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _divide(a, b, term)  # the sign of the dividend: -7 % 3 is -1
    return math.fmod(a, b)


def power(a, b):
    """Soufflé's `^` on whole numbers is exact (a negative exponent gives a float)."""
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        return a ** b
    return float(a) ** b


_ARITHMETIC = {
    "+": lambda a, b, t: a + b,
    "-": lambda a, b, t: a - b,
    "*": lambda a, b, t: a * b,
    "/": _divide,
    "%": _remainder,
}


# Bitwise and logical functors on whole numbers of `bits` bits (the last argument). The
# shift distance is taken modulo the width, as the JVM (and so Spark) does at 64 bits and
# x86 does at 32; a logical shift right shifts the width's bit pattern.
BITWISE = {
    "band": lambda a, b, bits: a & b,
    "bor": lambda a, b, bits: a | b,
    "bxor": lambda a, b, bits: a ^ b,
    "bshl": lambda a, b, bits: numbers.wrap(a << (b & (bits - 1)), bits),
    "bshr": lambda a, b, bits: a >> (b & (bits - 1)),
    "bshru": lambda a, b, bits: numbers.wrap((a & ((1 << bits) - 1)) >> (b & (bits - 1)), bits),
    "land": lambda a, b, bits: int(a != 0 and b != 0),
    "lor": lambda a, b, bits: int(a != 0 or b != 0),
    "lxor": lambda a, b, bits: int((a != 0) != (b != 0)),
    "bnot": lambda a, bits: ~a,
    "lnot": lambda a, bits: int(a == 0),
}


def _call(name: str, args: list, term, bits: int) -> Optional[Const]:
    fn = lookup(name)
    if fn is None or not fn.accepts(len(args)):
        return None  # the static checks report it
    if name in BITWISE:
        if not all(a.type == INT for a in args):
            raise FoldError(f"{name} takes whole numbers")
        return _number(BITWISE[name](*(a.value for a in args), bits), term, bits)
    if name == "pow" and len(args) == 2 and _numeric(*args):
        try:
            return _number(power(args[0].value, args[1].value), term, bits)
        except OverflowError:  # a float power beyond a double: Soufflé's is inf
            raise FoldError("the power is beyond a 64-bit float (inf), which Evita does not hold") from None
    if name == "cat" and all(a.type in (STRING, INT) for a in args):  # a number as its text, as in rules
        return Const("".join(str(a.value) for a in args), STRING, term.span)
    folded = _FUNCTORS.get(name)
    if folded is not None:
        value = folded(*args)
        if value is not None:
            return value if isinstance(value, Const) else _constant(value, term, bits)
    return None


def _constant(value, term, bits: int) -> Const:
    if isinstance(value, str):
        return Const(value, STRING, term.span)
    return _number(value, term, bits)


_WHOLE = re.compile(r"\s*[+-]?\d+\s*")


def _to_number(a: Const):
    """Soufflé's to_number (and to_unsigned, stored as a signed number here): a float
    truncates toward 0; a symbol must spell a whole number (else the fact has no value)."""
    if a.type == INT:
        return a.value
    if a.type == FLOAT:
        return int(a.value)
    if a.type == STRING and _WHOLE.fullmatch(a.value):
        return int(a.value)
    if a.type == STRING:
        from .builtins import whole_from_text

        value = whole_from_text(a.value)  # Soufflé's 0x... and 0b...
        if value is not None:
            return value
    raise FoldError(f"to_number: {a.value!r} is not a whole number")


def _to_float(a: Const):
    if a.type in (INT, FLOAT):
        return Const(float(a.value), FLOAT)
    try:
        return Const(float(a.value), FLOAT)
    except ValueError:
        raise FoldError(f"to_float: {a.value!r} is not a number") from None


def _substr(s: Const, i: Const, n: Const):
    """As the rules compute it (runtime/sql.py `_substr`, C++'s std::string::substr)."""
    if s.type != STRING or i.type != INT or n.type != INT:
        return None
    if i.value < 0 or i.value > len(s.value):
        return ""
    return s.value[i.value:] if n.value < 0 else s.value[i.value:i.value + n.value]


def _extreme(pick):
    def fold_it(*args):
        kinds = {a.type for a in args}
        if kinds <= {INT, FLOAT} or kinds == {STRING}:
            return Const(pick(a.value for a in args), FLOAT if FLOAT in kinds else next(iter(kinds)))
        return None
    return fold_it


# Functors a fact may hold (Soufflé folds them): the value the rules would compute.
_FUNCTORS = {
    "to_number": _to_number,
    "to_unsigned": _to_number,
    "to_float": _to_float,
    "to_string": lambda a: (str(a.value) if a.type in (INT, STRING) else
                            float_text(a.value) if a.type == FLOAT and math.isfinite(a.value) else None),
    "strlen": lambda a: len(a.value) if a.type == STRING else None,
    "substr": _substr,
    "abs": lambda a: abs(a.value) if a.type == INT else (Const(abs(a.value), FLOAT) if a.type == FLOAT else None),
    "min": _extreme(min),
    "max": _extreme(max),
}
