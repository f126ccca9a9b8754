"""The integer expressions of `#if` and `#elif`, as a C preprocessor evaluates them.

A tokenizer and a precedence-climbing parser, evaluated as it parses, in 64-bit signed
arithmetic (C's `intmax_t`): every operation is O(1), so no expression can make the
compiler hang (Python's `eval` would compute `9**9**9**9`). What it takes, loosest first:

    ?:    ||    &&    |    ^    &    == !=    < <= > >=    << >>    + -    * / %
    unary ! ~ - +     integers (decimal, 0x hex, 0 octal, u/l suffixes)    names    ( )

A name left after macro expansion is 0, as in C (`defined(NAME)` is replaced before).
Division truncates toward zero and `%` takes the dividend's sign, as in C.

>>> [evaluate(t) for t in ("1 + 2 * 3", "(1 + 2) * 3", "7 / -2", "-7 % 3", "1 << 4 | 1", "!0 && ~0")]
[7, 9, -3, -1, 17, 1]
>>> evaluate("X ? 10 : 2 > 1 ? 20 : 30")
20
>>> evaluate("9**9")
Traceback (most recent call last):
...
evita.bootstrap.if_expr.BadExpression: `*` where a number, a name or `(` should be (C has no power operator)
"""
from __future__ import annotations

import re

_BITS = 64


class BadExpression(ValueError):
    """Not an integer expression: `offset` is where in the text the problem is, `token`
    the text found there ("" at the end)."""

    def __init__(self, message: str, offset: int, token: str):
        super().__init__(message)
        self.offset = offset
        self.token = token


_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*|([A-Za-z_]\w*)|"
                    r"(\|\||&&|==|!=|<=|>=|<<|>>|[-+*/%<>!~&|^?:()])|(\S))")

# binary operators by precedence, loosest first (C's order); `?:` is handled apart
_LEVELS = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%"))


def _wrap(v: int) -> int:
    """`v` as a 64-bit two's complement integer."""
    v &= (1 << _BITS) - 1
    return v - (1 << _BITS) if v >> (_BITS - 1) else v


def _tokens(text: str) -> list:
    """[(kind, value, offset)]: kind 'num', 'name', 'op'; an ('end', '', len) last."""
    out, pos = [], 0
    while True:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        start = m.start(m.lastindex)
        if m.group(1):
            digits = m.group(1)
            base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" else 10
            try:
                out.append(("num", _wrap(int(digits, base)), start))
            except ValueError:  # 08, 09: not octal
                raise BadExpression(f"{digits} is not an octal number (a leading 0 means octal)", start,
                                    digits) from None
        elif m.group(2):
            out.append(("name", m.group(2), start))
        elif m.group(3):
            out.append(("op", m.group(3), start))
        else:
            raise BadExpression(f"`{m.group(4)}` is not part of a C integer expression", start, m.group(4))
        pos = m.end()
    out.append(("end", "", len(text.rstrip())))
    return out


class _Parser:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.i = 0
        self.dead = 0  # > 0 inside an operand C does not evaluate (`0 && X`, the branch ?: leaves)

    def peek(self):
        return self.tokens[self.i]

    def take(self):
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, op: str):
        kind, value, offset = self.take()
        if (kind, value) != ("op", op):
            raise BadExpression(f"{_shown(value)} where `{op}` should be", offset, value)

    def conditional(self) -> int:
        cond = self.binary(0)
        if self.peek()[:2] != ("op", "?"):
            return cond
        self.take()
        yes = self.operand(self.conditional, live=bool(cond))
        self.expect(":")
        no = self.operand(self.conditional, live=not cond)
        return yes if cond else no

    def operand(self, parse, live: bool) -> int:
        """An operand parsed, its errors of arithmetic (division by zero) ignored
        when C would not evaluate it: `defined(N) && 100 / N > 1` with N undefined."""
        self.dead += not live
        try:
            return parse()
        finally:
            self.dead -= not live

    def binary(self, level: int) -> int:
        if level == len(_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in _LEVELS[level]:
            _, op, offset = self.take()
            live = not (op == "&&" and not left or op == "||" and left)
            right = self.operand(lambda: self.binary(level + 1), live)
            left = _apply(op, left, right, offset, checked=not self.dead)
        return left

    def unary(self) -> int:
        kind, value, offset = self.take()
        if kind == "num":
            return value
        if kind == "name":
            return 0  # a name no macro defines, as in C
        if (kind, value) == ("op", "("):
            inner = self.conditional()
            self.expect(")")
            return inner
        if kind == "op" and value in ("!", "~", "-", "+"):
            operand = self.unary()
            return {"!": lambda v: int(not v), "~": lambda v: _wrap(~v), "-": lambda v: _wrap(-v),
                    "+": lambda v: v}[value](operand)
        hint = " (C has no power operator)" if value == "*" else ""
        raise BadExpression(f"{_shown(value)} where a number, a name or `(` should be{hint}", offset, value)


def _shown(token: str) -> str:
    return f"`{token}`" if token else "the end of the expression"


def _apply(op: str, a: int, b: int, offset: int, checked: bool = True) -> int:
    """`a op b`; an undefined operation is an error where it is evaluated (`checked`),
    else 0 (an operand C skips)."""
    problem = ("division by zero" if op in ("/", "%") and b == 0 else
               f"a shift by {b} bits (0 to {_BITS - 1} are defined)" if op in ("<<", ">>") and not 0 <= b < _BITS
               else None)
    if problem:
        if checked:
            raise BadExpression(problem, offset, op)
        return 0
    if op == "/":
        q = abs(a) // abs(b)
        return _wrap(q if (a < 0) == (b < 0) else -q)
    if op == "%":
        return _wrap(a - b * _apply("/", a, b, offset))
    return {"||": lambda: int(bool(a or b)), "&&": lambda: int(bool(a and b)), "|": lambda: a | b,
            "^": lambda: a ^ b, "&": lambda: a & b, "==": lambda: int(a == b), "!=": lambda: int(a != b),
            "<": lambda: int(a < b), "<=": lambda: int(a <= b), ">": lambda: int(a > b),
            ">=": lambda: int(a >= b), "<<": lambda: _wrap(a << b), ">>": lambda: a >> b,
            "+": lambda: _wrap(a + b), "-": lambda: _wrap(a - b), "*": lambda: _wrap(a * b)}[op]()


def evaluate(text: str) -> int:
    """The value of a `#if` expression (macros already expanded); BadExpression when
    it is not one, with the offset of the offending token."""
    parser = _Parser(text)
    if parser.peek()[0] == "end":
        raise BadExpression("an empty expression", len(text.rstrip()), "")
    try:
        value = parser.conditional()
    except RecursionError:  # hundreds of nested parentheses or unary operators
        raise BadExpression("parentheses or unary operators nested too deeply", len(text) - len(text.lstrip()),
                            text.strip()[:1]) from None
    kind, _, offset = parser.peek()
    if kind != "end":
        token = text[offset:].split()[0]
        hint = " (C has no power operator)" if token == "*" else ""
        raise BadExpression(f"`{token}` after a complete expression{hint}", offset, token)
    return value
