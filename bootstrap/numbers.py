"""The width of whole numbers: one program-level setting, `number_bits` (64 or 32).

Soufflé's default build holds `number` and `unsigned` in 32 bits and wraps around on
overflow (two's complement); its 64-bit build (`-DSOUFFLE_DOMAIN_64BIT`) in 64 bits.
Evita's default is 64 bits (Spark's `bigint`); `--number-bits 32` gives the 32-bit
build's results. The setting is the program's (`Program.number_bits`, the catalog's
`program.number_bits`), read by:

- the parser's constant folding (`folding.py`) and range check (`checks.check_numbers`):
  a literal outside the range is an error, as Soufflé's "Number constant not in range";
  an expression's result wraps;
- the planner (`lowering/width.py`), which at 32 bits wraps each whole-number result
  with the operator `wrap32` and sums with the aggregate `sum32`; each backend defines
  the two once, beside its other operators;
- the oracle (`runtime/oracle.py`), which wraps by value, independently;
- input files (a value outside the range is a positioned error) and output files (an
  unsigned column is written as its value modulo 2^bits).

Every width stores whole numbers in 64-bit columns: at 32 bits their values are kept in
the 32-bit range. `unsigned` is held as the two's-complement bit pattern of its value
(as a C cast does), and written as unsigned.

>>> wrap(2147483648, 32), wrap(-1, 32, unsigned=True), wrap(1 << 63, 64)
(-2147483648, 4294967295, -9223372036854775808)
"""
from __future__ import annotations

DEFAULT_BITS = 64
WIDTHS = (32, 64)


def wrap(value: int, bits: int, unsigned: bool = False) -> int:
    """`value` modulo 2^bits, as two's complement (or as unsigned)."""
    value &= (1 << bits) - 1
    if not unsigned and value >> (bits - 1):
        value -= 1 << bits
    return value


def held(value, bits: int):
    """A constant as every backend holds it: a whole number (an unsigned literal up to
    2^32 - 1 included) as its two's-complement bit pattern at `bits`; anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return wrap(value, bits)
    return value


def signed_range(bits: int) -> tuple:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def literal_range(bits: int) -> tuple:
    """The literals a program may write: the signed range, and also an unsigned value up
    to 2^bits - 1 (at 32 bits 255.255.255.255, 0xFFFFFFFFu; at 64 bits
    18446744073709551615u), held as its bit pattern (`held`)."""
    low, _ = signed_range(bits)
    return low, (1 << bits) - 1


def holds(value: int, bits: int) -> bool:
    """Whether a literal fits the width (`literal_range`)."""
    low, high = literal_range(bits)
    return low <= value <= high


def range_text(bits: int) -> str:
    low, high = literal_range(bits)
    return f"from {low} to {high}"
