"""Soufflé's records as values: one canonical text per record, the same in every backend.

A record value is held as canonical JSON text in a string column (docs/language.md,
"Records"): `[1,"a",[2,null]]` is the record `[1, "a", [2, nil]]`, `null` is `nil`. The
text is self-contained (a recursive type needs no record table), so equality of records
is equality of texts, and joins, negation, group keys and recursion over record columns
work as over symbols. The form is fixed so that every backend builds the same text:

* no blanks; fields in order; whole numbers in decimal; floats as Java writes a double
  (`Double.toString`, which Spark's cast and its JSON functions use): `1.5`, `1.0E10`;
* symbols as JSON strings escaped as Jackson (Spark's JSON library) escapes them: `"`
  and `\\` with a backslash, `\\b \\t \\n \\f \\r` short, other characters below U+0020 as
  `\\u00XX` (capital hex), everything else as it is.

The backends build a record with the builtin `record(T, K, a1, ..., an)` (T the record
type, K one letter per field: n a whole number, f a float, s a symbol, r a record) and
take a field with `record_field(R, i, KIND)` (KIND the field's kind: number, unsigned,
float, symbol, or `record T`); `bootstrap/lowering/records.py` writes both. Spark SQL
reads a field with `get_json_object(R, '$[i]')`, pandas and the oracle with `json`.

Input and output use Soufflé's text form instead: `[1, a, [2, nil]]` (symbols unquoted
on output; on input a symbol may be quoted, `"a, b"`, or plain up to the next `,` or `]`).

An ADT value (`.type E = Num {n: number} | Add {l: E, r: E} | Nil {}`) is held the same
way, as a JSON object with one key, its branch, whose value is the array of its fields:
`$Add($Num(1), $Nil)` is `{"Add":[{"Num":[1]},{"Nil":[]}]}`. An object never is a record
(an array or null), so the text says what it is without its type: Soufflé's text form
and a program's constant are written from it alone. The backends build one with
`adt(T, B, K, a1, ...)`, test its branch with `adt_branch(V)` (the key) and take a
field with `adt_field(V, B, i, KIND)` (in Spark SQL `get_json_object(V, '$['B'][i]')`).

>>> text = record_text("nsr", [1, 'say "hi"', "null"])
>>> text
'[1,"say \\\\"hi\\\\"",null]'
>>> record_field(text, 1, "symbol"), record_field(text, 2, "record P")
('say "hi"', 'null')
>>> souffle_text('[1,"a b",[2,null]]')
'[1, a b, [2, nil]]'
>>> parse_souffle('[1, "x,y", [2, nil]]', "P", {"P": ("number", "symbol", "L"), "L": ("number", "L")})
'[1,"x,y",[2,null]]'
>>> e = adt_text("Add", "rr", ['{"Num":[1]}', '{"Nil":[]}'])
>>> e, adt_branch(e), adt_field(e, "Add", 0, "adt E"), souffle_text(e)
('{"Add":[{"Num":[1]},{"Nil":[]}]}', 'Add', '{"Num":[1]}', '$Add($Num(1), $Nil)')
>>> parse_souffle('$Add($Num(1), $Nil)', "E", {"E": (("Num", ("number",)), ("Add", ("E", "E")), ("Nil", ()))})
'{"Add":[{"Num":[1]},{"Nil":[]}]}'
"""
from __future__ import annotations

import json
import math
from typing import Optional

NIL = "null"  # the canonical text of nil
LETTERS = {"number": "n", "unsigned": "n", "float": "f", "symbol": "s"}  # a field's kind -> record()'s letter


def letter(kind: str) -> str:
    """record()'s letter for a field of `kind` (a record type's kind is `record T`)."""
    return LETTERS.get(kind, "r")


_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def quote(s: str) -> str:
    """A symbol as a JSON string, escaped as Jackson escapes it (module doc)."""
    out = []
    for ch in s:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def java_double(f: float) -> str:
    """A double's text as Java's Double.toString writes it (the shortest digits that
    read back, plain between 10^-3 and 10^7, else d.dddE±n)."""
    if f != f:
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0:
        return "-0.0" if math.copysign(1, f) < 0 else "0.0"
    a = abs(f)
    if 1e-3 <= a < 1e7:
        text = repr(f)
        return text if "e" not in text and "." in text else f"{f:.1f}"
    from decimal import Decimal

    _, digits, exponent = Decimal(repr(a)).normalize().as_tuple()  # repr: the shortest digits
    text = "".join(map(str, digits))
    return f"{'-' if f < 0 else ''}{text[0]}.{text[1:] or '0'}E{len(text) + exponent - 1}"


def _item(value, kind_letter: str) -> Optional[str]:
    if value is None:
        return None
    if kind_letter == "s":
        return quote(str(value))
    if kind_letter == "r":
        return str(value)
    if kind_letter == "f" or isinstance(value, float):
        return java_double(float(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(int(value))


def record_text(kinds: str, items) -> Optional[str]:
    """The canonical text of a record whose fields hold `items` (Python values; a record
    field holds its canonical text), `kinds` one letter per field; None when a field
    is None (SQL's null in, null out)."""
    parts = [_item(v, k) for v, k in zip(items, kinds)]
    return None if any(p is None for p in parts) else "[" + ",".join(parts) + "]"


def canonical(value) -> str:
    """The canonical text of a parsed JSON value (a list, an ADT's object, None, a
    number, a string)."""
    if value is None:
        return NIL
    if isinstance(value, dict):
        return "{" + ",".join(quote(k) + ":" + canonical(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def record_field(text, i: int, kind: str):
    """Field `i` (0-based) of the record `text` as a value of `kind`; None for a null
    or nil record (a pattern never matches nil: the lowering tests that first)."""
    if text is None or text == NIL:
        return None
    try:
        value = json.loads(text)[i]
    except (ValueError, IndexError, TypeError):
        return None
    if is_text_kind(kind):
        return canonical(value)
    if value is None:
        return None
    if kind == "symbol":
        return value if isinstance(value, str) else canonical(value)
    if kind == "float":
        return float(value)
    return int(value)


def adt_text(branch: str, kinds: str, items) -> Optional[str]:
    """The canonical text of the ADT value of `branch` whose fields hold `items` (as
    record_text's); None when a field is None."""
    fields = record_text(kinds, items)
    return None if fields is None else "{" + quote(branch) + ":" + fields + "}"


def adt_branch(text) -> Optional[str]:
    """The branch of the ADT value `text`: its one key (a branch name needs no escape)."""
    if text is None or not text.startswith('{"'):
        return None
    end = text.find('"', 2)
    return text[2:end] if end > 0 else None


def adt_field(text, branch: str, i: int, kind: str):
    """Field `i` (0-based) of the ADT value `text` as a value of `kind`, when it is of
    `branch`; else None (the lowering tests the branch first)."""
    if adt_branch(text) != branch:
        return None
    try:
        fields = json.loads(text)[branch]
    except (ValueError, KeyError, TypeError):
        return None
    return record_field(canonical(fields), i, kind)


def is_text_kind(kind: str) -> bool:
    """A field kind held as canonical text: a record's (`record T`) or an ADT's (`adt T`)."""
    return kind.startswith(("record", "adt"))


def souffle_text(text) -> Optional[str]:
    """A record's canonical text as Soufflé writes it to a file: `[1, a, [2, nil]]`."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return _shown(value)


def _shown(value) -> str:
    if value is None:
        return "nil"
    if isinstance(value, dict):  # an ADT value: $B, or $B(a, b) (Soufflé's WriteStream)
        (branch, fields), = value.items()
        return f"${branch}" + (f"({', '.join(_shown(v) for v in fields)})" if fields else "")
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value))
    return str(value)


def surface(text: str) -> str:
    """A record's canonical text as a program writes it (`[1, "a", nil]`): what the
    printer writes for a record constant, so a printed program parses back."""
    value = json.loads(text)

    def shown(v):
        if v is None:
            return "nil"
        if isinstance(v, dict):
            (branch, fields), = v.items()
            return f"${branch}(" + ", ".join(shown(x) for x in fields) + ")"
        if isinstance(v, list):
            return "[" + ", ".join(shown(x) for x in v) + "]"
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, float):
            return repr(v)
        return str(v)

    return shown(value)


# ---------------------------------------------------------------- Soufflé's text form, read

class RecordSyntaxError(ValueError):
    """A record text that does not parse: `offset` is where, `expected` what was."""

    def __init__(self, expected: str, offset: int):
        super().__init__(expected)
        self.expected, self.offset = expected, offset


def parse_souffle(text: str, type_name: str, table: dict) -> str:
    """Soufflé's text of a record of type `type_name` (`[1, a, [2, nil]]`), or of an ADT
    value (`$Add($Num(1), $Nil)`), as canonical text. `table`: record type -> its fields'
    kinds (number, unsigned, float, symbol, or another record or ADT type's name); ADT
    type -> its branches, (name, kinds) pairs. Raises RecordSyntaxError."""
    reader = _Reader(text, table)
    out = reader.value(type_name)
    reader.blanks()
    if reader.pos != len(text):
        raise RecordSyntaxError("the end of the record", reader.pos)
    return out


def is_adt_entry(entry: tuple) -> bool:
    """A table entry of parse_souffle is an ADT's: (branch, kinds) pairs, not kinds."""
    return bool(entry) and isinstance(entry[0], tuple)


class _Reader:
    def __init__(self, text: str, table: dict):
        self.text, self.table, self.pos = text, table, 0

    def blanks(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, ch: str):
        self.blanks()
        if not self.text.startswith(ch, self.pos):
            raise RecordSyntaxError(f"'{ch}'", self.pos)
        self.pos += 1

    def value(self, type_name: str) -> str:
        """A record or an ADT value of `type_name`."""
        return self.adt(type_name) if is_adt_entry(self.table[type_name]) else self.record(type_name)

    def adt(self, type_name: str) -> str:
        """`$B(a, b)`, or `$B` for a branch without fields (`$B()` is read too)."""
        branches = dict(self.table[type_name])
        self.expect("$")
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_?."):
            self.pos += 1
        name = self.text[start:self.pos]
        if name not in branches:
            raise RecordSyntaxError("a branch of " + type_name + " (" + ", ".join("$" + b for b in branches) + ")",
                                    start)
        kinds = branches[name]
        self.blanks()
        if not kinds and not self.text.startswith("(", self.pos):
            return adt_text(name, "", [])
        self.expect("(")
        parts = []
        for i, kind in enumerate(kinds):
            if i:
                self.expect(",")
            self.blanks()
            parts.append(self.field(kind, ",)"))
        self.expect(")")
        return "{" + quote(name) + ":[" + ",".join(parts) + "]}"

    def record(self, type_name: str) -> str:
        self.blanks()
        if self.text.startswith("nil", self.pos):
            self.pos += 3
            return NIL
        fields = self.table[type_name]
        self.expect("[")
        parts = []
        for i, kind in enumerate(fields):
            if i:
                self.expect(",")
            self.blanks()
            parts.append(self.field(kind, ",]"))
        self.expect("]")
        return "[" + ",".join(parts) + "]"

    def field(self, kind: str, stops: str) -> str:
        """A field of `kind`; a plain symbol or number ends at one of `stops`."""
        if kind in self.table:
            return self.value(kind)
        if kind == "symbol":
            return quote(self.symbol(stops))
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in stops and not self.text[self.pos].isspace():
            self.pos += 1
        word = self.text[start:self.pos]
        try:
            if kind == "float":
                return java_double(float(word))
            value = int(word, 0) if word[:2].lower() in ("0x", "0b") else int(word)
            return str(value)
        except ValueError:
            raise RecordSyntaxError("a float" if kind == "float" else "a whole number", start) from None

    def symbol(self, stops: str) -> str:
        if self.text.startswith('"', self.pos):  # quoted, backslash escapes what follows it
            out, i = [], self.pos + 1
            while i < len(self.text) and self.text[i] != '"':
                if self.text[i] == "\\" and i + 1 < len(self.text):
                    i += 1
                out.append(self.text[i])
                i += 1
            if i >= len(self.text):
                raise RecordSyntaxError("'\"' to end the symbol", self.pos)
            self.pos = i + 1
            return "".join(out)
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in stops:
            self.pos += 1
        if self.pos >= len(self.text):
            raise RecordSyntaxError(" or ".join(f"'{c}'" for c in stops) + " after the symbol", start)
        return self.text[start:self.pos]
