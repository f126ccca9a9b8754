"""Soufflé's types: the primitive types, the types a program declares with `.type`, and
the checks that keep values of unrelated types apart.

Every type reaches one primitive: number, unsigned, float or symbol (its *kind*). Evita's
own column types (`any`, `bool`, and the JOL spellings `int`, `string`, ... of `define`)
are accepted too; `any` has no kind and is never checked. A subtype `.type A <: B` is a
part of B, an equivalence `.type A = B` is B under another name, a union `.type U = A | B`
holds A and B. The checks follow Soufflé:

* a type named in a `.decl` or on the right of a `.type` must exist (`unknown-type`);
* a union mixes no kinds, types form no cycle, no type is declared twice;
* in a rule, a variable holds one kind: a variable in a symbol column of one atom and a
  number column of another is a `type-mismatch`, as is a symbol constant in a number
  column or a comparison of a symbol with a number;
* a variable that only atoms bind may go into a head column of a declared type only if
  its type is a subtype of the column's (`.type Even <: number`: a plain number is not
  known to be Even).

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program('.type Node <: symbol\\n.decl e(a: Node, b: number)\\n.decl r(a: number)\\n'
...                   'r(x) :- e(x, _).', "t.dl")
>>> [d.message for d in check_types(p)]
['rule rule1: variable x holds a symbol in e (column 1, type Node) but a number in r (column 1, type number)']
"""
from __future__ import annotations

import difflib
from typing import Iterator, Optional

from .diagnostics import Diagnostic
from .casts import casts_in, is_cast, target_type
from .ranges import is_range
from .syntax import (
    BOOL, FLOAT, INT, PRIMITIVE_TYPES, STRING, Assign, Atom, BinOp, Call, Const, Declaration, Program,
    Rule, Select, TypeDecl, UnOp, Var, COMPARISONS, rule_terms, subterms,
)

# The column types every program knows, with the primitive each reaches (None: unchecked).
BUILTIN_TYPES = {"number": "number", "unsigned": "unsigned", "float": "float", "symbol": "symbol",
                 "any": None, "bool": "bool",
                 "int": "number", "integer": "number", "long": "number", "double": "float", "string": "symbol"}
_SHOWN = {"int": "a whole number", "number": "a number", "unsigned": "an unsigned number", "float": "a float", "symbol": "a symbol",
          "bool": "a boolean"}


class TypeSystem:
    """The types of one program: builtin ones and its `.type` declarations."""

    def __init__(self, decls: list):
        self.decls: dict = {}
        self.problems: list = []
        for d in decls:
            if d.name in self.decls or d.name in BUILTIN_TYPES:
                first = self.decls.get(d.name)
                where = f"already declared at {first.span}" if first else "a builtin type"
                self.problems.append(Diagnostic("duplicate-declaration", f"type {d.name} is {where}", d.span,
                                                d.name, "give each type one declaration and its own name"))
                continue
            self.decls[d.name] = d
        self.branches: dict = {}  # ADT branch name -> (its ADT's declaration, field names, field types)
        for d in self.decls.values():
            for name, fields, bases in adt_branches(d):
                if name in self.branches:  # Soufflé: a branch name belongs to one ADT
                    first = self.branches[name][0]
                    self.problems.append(Diagnostic(
                        "duplicate-declaration", f"branch {name} of {d.name} is already a branch of {first.name} "
                        f"(declared at {first.span})", d.span, name,
                        "give each branch its own name (Soufflé's rule), or declare the type in a component"))
                    continue
                self.branches[name] = (d, fields, bases)
        self._kinds: dict = {}
        for d in self.decls.values():
            self._check_declaration(d)

    @classmethod
    def of(cls, program: Program) -> "TypeSystem":
        return cls(program.of(TypeDecl))

    def known(self, name: str) -> bool:
        return name in BUILTIN_TYPES or name in self.decls

    def kind(self, name: str) -> Optional[str]:
        """The primitive a type reaches (number, unsigned, float, symbol, bool), or None
        for `any`, an unknown type or a broken declaration."""
        if name in BUILTIN_TYPES:
            return BUILTIN_TYPES[name]
        return self._kind(name, ())

    def primitive(self, name: str) -> str:
        """The column type the runtime stores: the primitive, or `any`; a record is its
        canonical text, a symbol (bootstrap/records.py)."""
        kind = self.kind(name) or "any"
        return "symbol" if is_record_kind(kind) else kind

    def record(self, name: str) -> Optional[TypeDecl]:
        """The record declaration a type stands for (through `.type A = P`), or None."""
        seen = set()
        while name in self.decls and name not in seen:
            seen.add(name)
            d = self.decls[name]
            if d.kind == "record":
                return d
            if d.kind != "equivalence":
                return None
            name = d.bases[0]
        return None

    def adt(self, name: str) -> Optional[TypeDecl]:
        """The ADT declaration a type stands for (through `.type A = E`), or None."""
        seen = set()
        while name in self.decls and name not in seen:
            seen.add(name)
            d = self.decls[name]
            if d.kind == "adt":
                return d
            if d.kind != "equivalence":
                return None
            name = d.bases[0]
        return None

    def held_as_text(self, name: str) -> Optional[TypeDecl]:
        """The record or ADT declaration a type stands for: its values are canonical
        texts (bootstrap/records.py); else None."""
        return self.record(name) or self.adt(name)

    def branch(self, name: str):
        """(ADT declaration, field names, field types) of the ADT branch `name`, or None."""
        return self.branches.get(name)

    def record_table(self) -> dict:
        """record type -> the kinds of its fields (a field of a record or ADT type: that
        type's name), ADT type -> its branches' (name, kinds) pairs: what reading
        Soufflé's text form of a record or an ADT value needs (records.parse_souffle)."""
        def kind(base):
            held = self.held_as_text(base)
            return held.name if held else self.primitive(base)

        out = {}
        for d in self.decls.values():
            if d.kind == "record":
                out[d.name] = tuple(kind(b) for b in d.bases)
            elif d.kind == "adt":
                out[d.name] = tuple((name, tuple(kind(b) for b in bases)) for name, _, bases in adt_branches(d))
        return out

    def _kind(self, name: str, seen: tuple) -> Optional[str]:
        if name in BUILTIN_TYPES:
            return BUILTIN_TYPES[name]
        if name not in self.decls or name in seen:
            return None
        if self.decls[name].kind == "record":
            return record_kind(name)
        if self.decls[name].kind == "adt":
            return adt_kind(name)
        if name not in self._kinds:
            kinds = {self._kind(b, seen + (name,)) for b in self.decls[name].bases}
            self._kinds[name] = kinds.pop() if len(kinds) == 1 else None
        return self._kinds[name]

    def supertypes(self, name: str) -> set:
        """Every type a value of `name` also belongs to (itself included)."""
        name = _canonical(name)
        out, todo = {name}, [name]
        while todo:
            t = todo.pop()
            for d in self.decls.values():
                if d.name == t:
                    ups = d.bases if d.kind in ("subtype", "equivalence") else ()
                elif t in d.bases and d.kind in ("union", "equivalence"):
                    ups = (d.name,)
                else:
                    continue
                for u in map(_canonical, ups):
                    if u not in out:
                        out.add(u)
                        todo.append(u)
        return out

    def is_subtype(self, a: str, b: str, seen: tuple = ()) -> bool:
        """Every value of `a` is a value of `b`: `a` reaches `b` upwards, or `a` is a
        union whose members all are subtypes of `b` (Soufflé's rule)."""
        if _canonical(b) in self.supertypes(a):
            return True
        d = self.decls.get(a)
        return d is not None and d.kind == "union" and a not in seen and \
            all(self.is_subtype(m, b, seen + (a,)) for m in d.bases)

    def _check_declaration(self, d: TypeDecl):
        for base in d.bases:
            if base and not self.known(base):  # "": an ADT's branch marker (syntax.TypeDecl)
                self.problems.append(unknown_type(base, d.span, list(self.decls)))
        if d.name in PRIMITIVE_TYPES:
            return
        if d.kind == "record":  # a record may hold itself (`.type List = [head: number, tail: List]`)
            if len(set(d.fields)) != len(d.fields):
                twice = next(f for f in d.fields if d.fields.count(f) > 1)
                self.problems.append(Diagnostic("duplicate-declaration", f"record type {d.name} names the field "
                                                f"{twice} twice", d.span, twice, "give each field its own name"))
            return
        if d.kind == "adt":  # an ADT may hold itself too (`.type E = Num {n: number} | Add {l: E, r: E}`)
            for name, fields, _ in adt_branches(d):
                twice = next((f for f in fields if fields.count(f) > 1), None)
                if twice is not None:
                    self.problems.append(Diagnostic("duplicate-declaration", f"branch {name} of {d.name} names the "
                                                    f"field {twice} twice", d.span, twice,
                                                    "give each field its own name"))
            return
        if self._cycle(d.name):
            self.problems.append(Diagnostic("type-cycle", f"type {d.name} is defined in terms of itself", d.span,
                                            d.name, "every type must reach number, unsigned, float or symbol"))
            return
        kinds = {b: self.kind(b) for b in d.bases if self.known(b)}
        if len({k for k in kinds.values() if k}) > 1:
            parts = ", ".join(f"{b} is {shown(k)}" for b, k in kinds.items())
            self.problems.append(Diagnostic("type-mismatch", f"union type {d.name} mixes kinds: {parts}", d.span,
                                            d.name, "a union holds types of one primitive kind"))

    def _cycle(self, name: str) -> bool:
        todo, seen = list(self.decls[name].bases), set()
        while todo:
            t = todo.pop()
            if t == name:
                return True
            if t in self.decls and t not in seen and self.decls[t].kind not in ("record", "adt"):
                seen.add(t)
                todo.extend(self.decls[t].bases)
        return False


def record_kind(name: str) -> str:
    """The kind of the values of record type `name`: records of one type compare only
    with records of that type."""
    return "record " + name


def adt_kind(name: str) -> str:
    """The kind of the values of ADT type `name` (held as text, as records are)."""
    return "adt " + name


def is_record_kind(kind) -> bool:
    """A kind whose values are canonical texts: a record's or an ADT's."""
    return isinstance(kind, str) and kind.startswith(("record ", "adt "))


def is_adt_kind(kind) -> bool:
    return isinstance(kind, str) and kind.startswith("adt ")


def adt_branches(d: TypeDecl) -> tuple:
    """An ADT declaration's branches, (name, field names, field types) each, from the
    flattened form syntax.TypeDecl holds; () for another declaration."""
    if d.kind != "adt":
        return ()
    out = []
    for field, base in zip(d.fields, d.bases):
        if field.startswith("$"):
            out.append((field[1:], [], []))
        else:
            out[-1][1].append(field)
            out[-1][2].append(base)
    return tuple((name, tuple(fields), tuple(bases)) for name, fields, bases in out)


def shown(kind: str) -> str:
    """A kind in words: "a number", "a record of type P", "a value of ADT type E"."""
    if is_adt_kind(kind):
        return f"a value of ADT type {kind.split(' ', 1)[1]}"
    if is_record_kind(kind):
        return f"a record of type {kind.split(' ', 1)[1]}"
    return _SHOWN.get(kind, kind)


def _canonical(name: str) -> str:
    """`int` and the other JOL spellings are their primitive."""
    return BUILTIN_TYPES.get(name) or name


def unknown_type(name: str, span, declared: list) -> Diagnostic:
    close = difflib.get_close_matches(name, list(PRIMITIVE_TYPES) + declared, n=1)
    hint = (f"did you mean {close[0]}? " if close else "") + \
        "the types are number, unsigned, float, symbol and those a .type declares"
    return Diagnostic("unknown-type", f"unknown type {name}", span, name, hint)


# ---------------------------------------------------------------- checks

def check_types(program: Program) -> Iterator[Diagnostic]:
    types = TypeSystem.of(program)
    yield from types.problems
    declared: dict = {}
    for d in program.of(Declaration):
        declared.setdefault(d.relation, d)
        for c in d.columns:
            if not types.known(c.type):
                yield unknown_type(c.type, c.span if c.span.line else d.span, list(types.decls))
    for rule in program.rules:
        yield from _RuleTypes(rule, types, declared).check()


class _RuleTypes:
    """The kind of every variable of one rule, from the columns and constants around it."""

    def __init__(self, rule: Rule, types: TypeSystem, declared: dict):
        self.rule, self.types, self.declared = rule, types, declared
        self.held: dict = {}  # variable -> (kind, type, where) of its first typed use
        self.body_types: dict = {}  # variable -> types of the positive body columns it sits in
        self.assigned = {lit.var.name for lit in rule.body if isinstance(lit, Assign)}
        self.reported: set = set()
        self.found: list = []

    def check(self) -> list:
        atoms = [lit for lit in self.rule.body if isinstance(lit, Atom)]
        for atom in sorted(atoms, key=lambda a: a.negated):  # positive atoms say first
            self.atom(atom, body=not atom.negated)
        for lit in self.rule.body:
            if isinstance(lit, Assign) and is_range(lit.expr):
                self.bind(lit.var, self.range_kind(lit.expr), None, "the range assigned to " + lit.var.name)
            elif isinstance(lit, Assign):
                self.bind(lit.var, self.expr_kind(lit.expr), None, "the assignment to " + lit.var.name)
            elif isinstance(lit, Select):
                self.condition(lit.expr)
        self.atom(self.rule.head, body=False)
        self.head_subtypes()
        for call in casts_in(self.rule):
            self.cast(call)
        for t in rule_terms(self.rule):
            self.record_fields(t)
        return self.found

    def record_fields(self, t):
        """Each field of a record constructor (`record(T, K, a1, ...)`, as
        bootstrap/lowering/records.py writes `[a1, ...]`) holds its field's kind: a
        variable is checked here, once its kind is known; a constant was checked there."""
        for s in subterms(t):
            self.record_fields(s)
        if isinstance(t, Call) and t.func == "adt" and len(t.args) >= 3 and isinstance(t.args[1], Const):
            branch = self.types.branch(str(t.args[1].value))
            if branch is not None:
                self.fields_hold(t.args[3:], branch[1], branch[2], f"field {{}} of branch ${t.args[1].value}")
            return
        if not (isinstance(t, Call) and t.func == "record" and len(t.args) >= 2 and isinstance(t.args[0], Const)):
            return
        record = self.types.record(str(t.args[0].value))
        if record is None:
            return
        self.fields_hold(t.args[2:], record.fields, record.bases, f"field {{}} of record type {record.name}")

    def fields_hold(self, args, names, bases, where: str):
        """Each variable among `args` holds its field's kind (`where` names field {})."""
        for arg, name, base in zip(args, names, bases):
            kind = self.types.kind(base)
            got = self.expr_kind(arg)
            if isinstance(arg, Var) and got is not None and kind is not None and not _fits(got, kind, arg):
                self.mismatch(arg, f"{arg.name} is {shown(got)}, but {where.format(name)} "
                              f"holds {shown(kind)}", f"write {shown(kind)} there, or declare the field as "
                              f"{shown(got)}")

    # -- atoms
    def columns(self, atom: Atom):
        d = self.declared.get(atom.relation)
        if d is None or len(d.columns) != atom.arity:
            return None  # undeclared or the wrong arity: other checks say so
        return d.columns

    def atom(self, atom: Atom, body: bool):
        cols = self.columns(atom)
        if cols is None:
            return
        for i, (arg, col) in enumerate(zip(atom.args, cols)):
            kind = self.types.kind(col.type)
            where = f"{atom.relation} (column {i + 1}, type {col.type})"
            if isinstance(arg, Var):
                self.bind(arg, kind, col.type, where)
                if body:
                    self.body_types.setdefault(arg.name, []).append((col.type, where))
            elif kind is not None:
                got = self.expr_kind(arg)
                if got is not None and not _fits(got, kind, arg):
                    self.mismatch(arg, f"{_text(arg)} is {shown(got)}, but {where} holds "
                                  f"{shown(kind)}", f"write {shown(kind)} there")

    def bind(self, var: Var, kind, type_name, where: str):
        if kind is None:
            return
        if var.name not in self.held:
            self.held[var.name] = (kind, type_name, where)
            return
        first_kind, _, first_where = self.held[var.name]
        if first_kind == "int" and _fits(first_kind, kind, None):  # a whole number, now known to be `kind`
            self.held[var.name] = (kind, type_name, where)
            return
        if not _fits(kind, first_kind, None) and var.name not in self.reported:
            self.reported.add(var.name)
            self.mismatch(var, f"variable {var.name} holds {shown(first_kind)} in {first_where} "
                          f"but {shown(kind)} in {where}",
                          "a variable holds values of one type: use two variables, or declare the columns alike")

    def head_subtypes(self):
        """Soufflé: a value from a column of type S may fill a head column of type T only
        if S is a subtype of T."""
        cols = self.columns(self.rule.head)
        if cols is None:
            return
        for i, (arg, col) in enumerate(zip(self.rule.head.args, cols)):
            if not isinstance(arg, Var) or arg.name in self.assigned or arg.name in self.reported \
                    or self.types.kind(col.type) is None:
                continue
            sources = self.body_types.get(arg.name, [])
            if not sources or any(self.types.kind(t) is None for t, _ in sources):
                continue
            if not any(self.types.is_subtype(t, col.type) for t, _ in sources):
                t, where = sources[0]
                self.mismatch(arg, f"variable {arg.name} has type {t} (from {where}), but column {i + 1} of "
                              f"{self.rule.head.relation} has type {col.type}, and {t} is not a subtype of "
                              f"{col.type}",
                              f"declare the column as {t}, or {t} as a subtype of {col.type}, or cast the value: "
                              f"as({arg.name}, {col.type})")

    # -- expressions
    def condition(self, expr):
        if isinstance(expr, BinOp) and expr.op in COMPARISONS:
            left, right = self.expr_kind(expr.left), self.expr_kind(expr.right)
            if expr.op not in ("==", "!=") and (is_adt_kind(left) or is_adt_kind(right)):
                self.mismatch(expr, f"the condition orders {shown(left if is_adt_kind(left) else right)} with "
                              f"{expr.op}, which is not supported yet", "ADT values compare with = and != only "
                              "(Soufflé's order of ADT values is its internal one, which it does not document)")
                return
            if expr.op not in ("==", "!=") and (is_record_kind(left) or is_record_kind(right)):
                self.mismatch(expr, f"the condition orders {shown(left if is_record_kind(left) else right)} "
                              f"with {expr.op}", "records compare only with = and != (Soufflé's rule)")
                return
            if left and right and not (_fits(left, right, expr.left) or _fits(right, left, expr.right)):
                self.mismatch(expr, f"the condition compares {shown(left)} with "
                              f"{shown(right)}", "compare values of one type")

    def expr_kind(self, t) -> Optional[str]:
        """The kind of a term, where it is plain; None when not known."""
        if isinstance(t, Var):
            held = self.held.get(t.name)
            return held[0] if held else None
        if isinstance(t, Const):
            return {INT: "int", FLOAT: "float", STRING: "symbol", BOOL: "bool"}.get(t.type)
        if is_cast(t):
            name = target_type(t)
            return self.types.kind(name) if name is not None and self.types.known(name) else None
        if isinstance(t, Call) and t.func == "record" and t.args and isinstance(t.args[0], Const):
            return record_kind(str(t.args[0].value))  # written by bootstrap/lowering/records.py
        if isinstance(t, Call) and t.func == "record_field" and len(t.args) == 3 and isinstance(t.args[2], Const):
            return str(t.args[2].value)
        if isinstance(t, Call) and t.func == "adt" and t.args and isinstance(t.args[0], Const):
            return adt_kind(str(t.args[0].value))  # written by bootstrap/lowering/records.py
        if isinstance(t, Call) and t.func == "adt_field" and len(t.args) == 4 and isinstance(t.args[3], Const):
            return str(t.args[3].value)
        if isinstance(t, Call):
            return _CALL_KINDS.get(t.func[2:] if t.func.startswith("f_") else t.func)
        if isinstance(t, UnOp) and t.op == "-":
            return self.expr_kind(t.arg)
        return None

    def cast(self, call):
        """`as(x, T)`: T is a known type, of x's kind (Evita does not reinterpret bits)."""
        name = target_type(call)
        if name is None:
            return
        if not self.types.known(name):
            self.found.append(unknown_type(name, call.args[1].span if call.args[1].span.line else call.span,
                                           list(self.types.decls)))
            return
        got, kind = self.expr_kind(call.args[0]), self.types.kind(name)
        if got is not None and kind is not None and not _fits(got, kind, call.args[0]):
            convert = {"float": "to_float", "number": "to_number", "unsigned": "to_unsigned", "symbol": "to_string"}
            self.mismatch(call, f"as casts {_text(call.args[0]) or 'a value'}, {shown(got)}, to {name}, "
                          f"{shown(kind)}: a cast stays within its kind",
                          f"convert with {convert.get(kind, 'a conversion functor')}(...) instead")

    def range_kind(self, call) -> Optional[str]:
        """The kind of range(a, b[, step])'s values: its arguments', which must be
        numbers of one kind (whole-number constants fit any)."""
        kinds = [(a, self.expr_kind(a)) for a in call.args]
        for a, kind in kinds:
            if kind not in (None, "int", "number", "unsigned", "float"):
                self.mismatch(a if getattr(a, "span", None) else call, f"range takes numbers, but {_text(a) or 'its argument'} "
                              f"is {shown(kind)}", "range(a, b[, step]) counts over numbers, unsigned "
                              "numbers or floats")
                return None
        known = {kind for _, kind in kinds if kind not in (None, "int")}
        if len(known) > 1:
            self.mismatch(call, "range's arguments mix " + " and ".join(_SHOWN[k] for k in sorted(known)),
                          "give range arguments of one type; convert with to_float or to_number")
            return None
        if known:
            return known.pop()
        return "int" if all(kind == "int" for _, kind in kinds) else None

    def mismatch(self, node, message: str, hint: str):
        span = getattr(node, "span", None)
        span = span if span is not None and span.line else self.rule.span
        self.found.append(Diagnostic("type-mismatch", f"rule {self.rule.name}: {message}", span, _text(node), hint))


# Functors whose result has one kind whatever their arguments.
_CALL_KINDS = {"cat": "symbol", "substr": "symbol", "to_string": "symbol", "lower": "symbol", "upper": "symbol",
               "strlen": "number", "ord": "number", "to_number": "number", "to_float": "float",
               "to_unsigned": "unsigned", "tick": "number", "adt_branch": "symbol"}


def _fits(got: str, kind: str, term) -> bool:
    """A value of kind `got` may stand where `kind` is expected. Whole-number constants
    fit every numeric kind (Soufflé types them by where they stand); "int" is such a
    constant."""
    if got == kind:
        return True
    if got == "int":
        if kind == "unsigned":
            return not (isinstance(term, Const) and term.value < 0)
        return kind in ("number", "unsigned", "float")
    return False


def _text(node) -> str:
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Const):
        return f'"{node.value}"' if node.type == STRING else str(node.value)
    return ""
