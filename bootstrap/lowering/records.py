"""Soufflé's records lowered to plain terms over their canonical text (bootstrap/records.py).

After this, no record syntax is left: every later step (the checks, the catalog, the
stages, the planner, every backend and the oracle) sees string columns, the builtins
`record(T, K, a1, ...)` and `record_field(R, i, KIND)`, and record constants (`Const` of
type "record", the canonical text). Run on the whole program (includes and components
expanded), since a record's type may be declared anywhere in it.

* A record constructor `[a, b]` in a head, an assignment or a comparison becomes
  `record("P", "ns", a, b)`; `nil` the constant `null`. Its type comes from where it
  stands: the column of the atom, or the variable it is compared with or assigned to.
* A pattern in a body atom, `p([x, [y, _]])`, becomes a fresh variable read by the atom,
  the condition that it is not nil, and for each field an assignment (`x :=
  record_field(_rec1, 0, "number")`) where the variable is bound nowhere else, else a
  comparison; a nested pattern recurses; a constant field is compared. `r = [x, y]`
  with r bound destructures r the same way.
* A fact's records are folded to their canonical text.
* Soufflé's ADTs the same way (docs/language.md, "Algebraic data types"): `$Add(a, b)`
  becomes `adt("E", "Add", "rr", a, b)`, a pattern `$Add(l, r)` a fresh variable, the
  test `adt_branch(_rec1) == "Add"` (where a record pattern tests `!= nil`) and one
  `adt_field(_rec1, "Add", i, KIND)` per field. A branch names its ADT (a branch name
  belongs to one type), so a constructor needs no type from where it stands.

Errors (type-mismatch): a constructor or pattern with a different number of fields than
its type or branch, a record or ADT value where the column holds a primitive or another
type, a constant of the wrong kind in a field, a record whose type nothing says, an
unknown branch (unknown-branch); each at the record, with the form to write.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_rule
>>> p = parse_program('.type P = [x: number, y: symbol]\\n.decl p(a: P)\\n.decl q(y: symbol, r: P)\\n'
...                   'q(y, [x + 1, y]) :- p([x, y]).', "t.dl")
>>> print(format_rule(p.rules[0]))
rule1 q(y, record("P", "ns", x + 1, y)) :-
    p(_rec1),
    _rec1 != nil,
    x := record_field(_rec1, 0, "number"),
    y := record_field(_rec1, 1, "symbol").
"""
from __future__ import annotations

import difflib
from dataclasses import replace

from .. import records as R
from ..diagnostics import Diagnostic
from ..syntax import (
    INT, RECORD, STRING, Assign, Atom, BinOp, Call, Column, Const, Declaration, Fact, ListExpr, Rule, Select, TypeDecl,
    UnOp, Var, Wildcard, map_subterms, term_vars,
)
from ..types import TypeSystem, adt_branches, adt_kind, is_adt_kind, shown

__all__ = ["lower_records", "has_records"]

NIL_WORD = "nil"


def is_nil(t) -> bool:
    return isinstance(t, Var) and t.name == NIL_WORD


def _has_record_syntax(t) -> bool:
    if isinstance(t, ListExpr) or is_nil(t):
        return True
    if isinstance(t, (Atom,)):
        return any(_has_record_syntax(a) for a in t.args)
    if isinstance(t, (Assign, Select)):
        return _has_record_syntax(t.expr)
    children = []
    map_subterms(t, lambda s: children.append(s) or s)
    return any(_has_record_syntax(c) for c in children)


def has_records(statements) -> bool:
    return any(isinstance(s, TypeDecl) and s.kind in ("record", "adt") for s in statements) or any(
        isinstance(s, Rule) and any(_has_record_syntax(x) for x in (s.head,) + tuple(s.body))
        or isinstance(s, Fact) and _has_record_syntax(s.atom) for s in statements)


def lower_records(statements: list, diagnostics: list) -> list:
    """The statements with records lowered; problems appended to `diagnostics`."""
    if not has_records(statements):
        return statements
    types = TypeSystem([s for s in statements if isinstance(s, TypeDecl)])
    declared: dict = {}
    for d in statements:
        if isinstance(d, Declaration):
            declared.setdefault(d.relation, d)
    out = []
    for s in statements:
        if isinstance(s, Rule):
            s, helpers = _negated_patterns(s, types, declared)
            for decl, helper in helpers:
                declared[decl.relation] = decl
                out += [decl, _RuleRecords(helper, types, declared, diagnostics).lowered()]
            s = _RuleRecords(s, types, declared, diagnostics).lowered()
        elif isinstance(s, Fact) and _has_record_syntax(s.atom):
            s = _fact(s, types, declared, diagnostics)
        out.append(s)
    return out


class _Lowering:
    """What rules and facts share: column types, the record a type is, errors."""

    def __init__(self, types: TypeSystem, declared: dict, diagnostics: list):
        self.types, self.declared, self.diagnostics = types, declared, diagnostics

    def column_type(self, atom: Atom, i: int):
        d = self.declared.get(atom.relation)
        return d.columns[i].type if d is not None and len(d.columns) == atom.arity else None

    def record(self, type_name):
        return self.types.record(type_name) if type_name else None

    def held(self, type_name):
        """The record or ADT declaration of `type_name`, or None."""
        return self.types.held_as_text(type_name) if type_name else None

    def error(self, node, message: str, hint: str, text: str = "", code: str = "type-mismatch"):
        span = getattr(node, "span", None)
        self.diagnostics.append(Diagnostic(code, message, span, text or _shown_term(node), hint))

    def branch(self, node: ListExpr, type_name, where: str):
        """(ADT, field names, field types) of the constructor or pattern `node`, checked:
        a known branch, of the type where it stands (when that is known), with as many
        fields as the branch; else None, an error reported."""
        found = self.types.branch(node.branch)
        expected = self.held(type_name)
        if found is None:
            names = [n for n, _, _ in adt_branches(expected)] if expected is not None and expected.kind == "adt" \
                else list(self.types.branches)
            close = difflib.get_close_matches(node.branch, names, n=1)
            hint = (f"did you mean ${close[0]}? " if close else "") + (
                f"the branches of {expected.name} are " + ", ".join("$" + n for n in names) if names and expected
                is not None and expected.kind == "adt" else "declare it: .type T = " + node.branch + " {x: number} | ...")
            self.error(node, f"unknown branch ${node.branch}", hint, "$" + node.branch, code="unknown-branch")
            return None
        adt, names, bases = found
        if type_name is not None and (expected is None or expected.name != adt.name):
            kind = self.types.kind(type_name)
            self.error(node, f"${node.branch}(...) is a value of ADT type {adt.name}, but {where} holds "
                       f"{shown(kind) if kind else type_name}", f"write {shown(kind) if kind else 'a value of its type'}"
                       f" there, or declare the column with type {adt.name}", "$" + node.branch)
            return None
        if len(node.items) != len(names):
            fields = ", ".join(f"{n}: {t}" for n, t in zip(names, bases))
            self.error(node, f"${node.branch} has {len(node.items)} field{'' if len(node.items) == 1 else 's'} here, "
                       f"but branch {node.branch} of {adt.name} has {len(names)}" + (f" ({fields})" if fields else ""),
                       f"write ${node.branch}" + (f"({', '.join(names)})" if names else " or $" + node.branch + "()"),
                       "$" + node.branch)
            return None
        return found

    def fields_fit(self, node: ListExpr, rec: TypeDecl) -> bool:
        """The record has as many fields as its type; else an error with the form to write."""
        if len(node.items) == len(rec.fields):
            return True
        form = ", ".join(f"{n}" for n in rec.fields)
        self.error(node, f"the record has {len(node.items)} field{'' if len(node.items) == 1 else 's'}, but type "
                   f"{rec.name} has {len(rec.fields)} ({_fields_text(rec)})", f"write [{form}]")
        return False

    def not_a_record(self, node, where: str, type_name: str):
        kind = self.types.kind(type_name)
        self.error(node, f"{_shown_term(node)} is a record, but {where} holds {shown(kind) if kind else type_name}",
                   f"write {shown(kind) if kind else 'a value of its type'} there, or declare the column with a "
                   "record type (.type P = [x: number, ...])")

    def constant_fits(self, item, field_type: str, rec, j: int) -> bool:
        """A constant in a field is of the field's kind."""
        kind = self.types.kind(field_type)
        got = {INT: "number", STRING: "symbol", "float": "float"}.get(item.type) if isinstance(item, Const) else None
        if isinstance(item, UnOp) and item.op == "-" and isinstance(item.arg, Const):
            got = {INT: "number", "float": "float"}.get(item.arg.type)
        if got is None or kind is None or got == kind or (got == "number" and kind in ("unsigned", "float")):
            return True
        self.error(item, f"field {rec.fields[j]} of {rec.name} holds {shown(kind)}, but {_shown_term(item)} is "
                   f"{shown(got)}", f"write {shown(kind)} there")
        return False

    def field_kind(self, field_type: str) -> str:
        """record_field's and adt_field's KIND of a field of `field_type`."""
        held = self.held(field_type)
        if held is None:
            return self.types.primitive(field_type)
        return adt_kind(held.name) if held.kind == "adt" else f"record {held.name}"


class _Shape:
    """A record type's or an ADT branch's fields, as the lowering names them in messages."""

    def __init__(self, name: str, fields, bases):
        self.name, self.fields, self.bases = name, tuple(fields), tuple(bases)


def _branch_shape(node: ListExpr, found) -> _Shape:
    return _Shape(f"branch ${node.branch}", found[1], found[2])


class _RuleRecords(_Lowering):
    def __init__(self, rule: Rule, types: TypeSystem, declared: dict, diagnostics: list):
        super().__init__(types, declared, diagnostics)
        self.rule = rule
        self.var_types: dict = {}  # variable -> the record type it holds
        self.fresh = 0
        self.bound: set = set()

    # -- which variables hold records of which type
    def infer(self):
        atoms = [self.rule.head] + [lit for lit in self.rule.body if isinstance(lit, Atom)]
        for _ in range(3):  # through comparisons and assignments, in any order
            for atom in atoms:
                for i, a in enumerate(atom.args):
                    self.note(a, self.column_type(atom, i))
            for lit in self.rule.body:
                if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op in ("==", "!="):
                    self.note(lit.expr.left, self.type_of(lit.expr.right))
                    self.note(lit.expr.right, self.type_of(lit.expr.left))
                elif isinstance(lit, Assign):
                    self.note(lit.var, self.type_of(lit.expr))
                    self.note(lit.expr, self.var_types.get(lit.var.name))

    def note(self, term, type_name):
        if isinstance(term, ListExpr) and term.branch is not None:  # a branch names its type
            found = self.types.branch(term.branch)
            if found is not None and len(term.items) == len(found[2]):
                for item, field_type in zip(term.items, found[2]):
                    self.note(item, field_type)
            return
        rec = self.held(type_name)
        if rec is None:
            return
        if isinstance(term, Var) and not is_nil(term):
            self.var_types.setdefault(term.name, rec.name)
        elif isinstance(term, ListExpr) and rec.kind == "record" and len(term.items) == len(rec.bases):
            for item, field_type in zip(term.items, rec.bases):
                self.note(item, field_type)

    def type_of(self, term):
        if isinstance(term, Var):
            return self.var_types.get(term.name)
        if isinstance(term, ListExpr) and term.branch is not None and self.types.branch(term.branch):
            return self.types.branch(term.branch)[0].name
        return None

    # -- the rewrite
    def lowered(self) -> Rule:
        rule = self.rule
        if not any(_has_record_syntax(x) for x in (rule.head,) + tuple(rule.body)):
            return rule
        self.infer()
        for lit in rule.body:
            if isinstance(lit, Atom) and not lit.negated:
                self.bound.update(a.name for a in lit.args if isinstance(a, Var))
        body: list = []
        for lit in rule.body:
            body.extend(self.literal(lit))
        head = replace(rule.head, args=tuple(self.construct(a, self.column_type(rule.head, i),
                                                            f"{rule.head.relation} (column {i + 1})")
                                             for i, a in enumerate(rule.head.args)))
        return replace(rule, head=head, body=tuple(body))

    def literal(self, lit) -> list:
        if isinstance(lit, Atom) and not lit.negated:
            args, after = [], []
            for i, a in enumerate(lit.args):
                if isinstance(a, ListExpr) or is_nil(a):
                    column = self.column_type(lit, i)
                    where = f"{lit.relation} (column {i + 1}, type {column})"
                    if self.record(column) is None and column is not None and not _is_branch(a):
                        self.not_a_record(a, where, column)
                        args.append(a)
                        continue
                    v = self.new_var(a)
                    args.append(v)
                    after.extend(self.destructure(v, a, column, where))
                else:
                    args.append(self.construct(a, None, ""))
            return [replace(lit, args=tuple(args))] + after
        if isinstance(lit, Atom):  # negated: its records are values of bound variables
            return [replace(lit, args=tuple(self.construct(a, self.column_type(lit, i),
                                                           f"{lit.relation} (column {i + 1})")
                                            for i, a in enumerate(lit.args)))]
        if isinstance(lit, Assign):
            expr = self.construct(lit.expr, self.var_types.get(lit.var.name), f"the variable {lit.var.name}")
            if lit.var.name in self.bound:  # bound by a pattern before it (`x = [c, w], c = 1`): a comparison
                return [Select(BinOp("==", lit.var, expr, lit.span), lit.span)]
            self.bound.add(lit.var.name)
            return [replace(lit, expr=expr)]
        if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op == "==":
            for pattern, other in ((lit.expr.right, lit.expr.left), (lit.expr.left, lit.expr.right)):
                if isinstance(pattern, ListExpr) and isinstance(other, Var) and \
                        (self.unbound_in(pattern) or _has_wildcard(pattern)):
                    held = self.var_types.get(other.name)
                    if self.held(held) is not None:
                        return self.destructure(other, pattern, held, f"the variable {other.name}")
        if isinstance(lit, Select) and isinstance(lit.expr, BinOp) and lit.expr.op in ("==", "!="):
            left, right = lit.expr.left, lit.expr.right
            t = self.type_of(left) or self.type_of(right)
            expr = replace(lit.expr, left=self.construct(left, t, "the comparison"),
                           right=self.construct(right, t, "the comparison"))
            return [replace(lit, expr=expr)]
        if isinstance(lit, Select):
            return [replace(lit, expr=self.construct(lit.expr, None, ""))]
        return [lit]

    def unbound_in(self, pattern) -> bool:
        return any(v not in self.bound for v in term_vars(pattern) if v != NIL_WORD)

    def new_var(self, node) -> Var:
        self.fresh += 1
        return Var(f"_rec{self.fresh}", getattr(node, "span", None) or Var("").span)

    def destructure(self, value: Var, pattern, type_name, where: str) -> list:
        """The literals that match the record or ADT value held by `value` (of
        `type_name`, when known) against `pattern`."""
        span = pattern.span
        if is_nil(pattern):
            return [Select(BinOp("==", value, Const(R.NIL, RECORD, span), span), span)]
        if pattern.branch is not None:
            found = self.branch(pattern, type_name, where)
            if found is None:
                return []
            test = BinOp("==", Call("adt_branch", (value,), span), Const(pattern.branch, STRING, span), span)
            return [Select(test, span)] + self.match_fields(
                pattern, _branch_shape(pattern, found),
                lambda j, kind, at: Call("adt_field", (value, Const(pattern.branch, STRING, at), Const(j, INT, at),
                                                       Const(kind, STRING, at)), at))
        rec = self.record(type_name)
        if rec is None:
            self.error(pattern, f"the type of the record {_shown_term(pattern)} is not known",
                       "use it where a column or a variable of a record type says its type")
            return []
        if not self.fields_fit(pattern, rec):
            return []
        return [Select(BinOp("!=", value, Const(R.NIL, RECORD, span), span), span)] + self.match_fields(
            pattern, rec, lambda j, kind, at: Call("record_field", (value, Const(j, INT, at), Const(kind, STRING, at)),
                                                   at))

    def match_fields(self, pattern: ListExpr, shape, field_of) -> list:
        """The literals that match each field of `pattern` (of `shape`); `field_of(j,
        KIND, span)` reads field j."""
        out = []
        for j, (item, field_type) in enumerate(zip(pattern.items, shape.bases)):
            field = field_of(j, self.field_kind(field_type), item.span)
            if isinstance(item, Wildcard):
                continue
            if isinstance(item, ListExpr) or is_nil(item):
                if self.record(field_type) is None and not is_nil(item) and not _is_branch(item):
                    self.not_a_record(item, f"field {shape.fields[j]} of {shape.name}", field_type)
                    continue
                inner = self.new_var(item)
                out.append(Assign(inner, field, item.span))
                out.extend(self.destructure(inner, item, field_type, f"field {shape.fields[j]} of {shape.name}"))
            elif isinstance(item, Var) and item.name not in self.bound:
                self.bound.add(item.name)
                if self.held(field_type) is not None:
                    self.var_types.setdefault(item.name, self.held(field_type).name)
                out.append(Assign(item, field, item.span))
            else:
                if not self.constant_fits(item, field_type, shape, j):
                    continue
                out.append(Select(BinOp("==", self.construct(item, field_type, f"field {shape.fields[j]}"), field,
                                        item.span), item.span))
        return out

    def construct(self, term, type_name, where: str):
        """`term` with each record constructor a `record(...)` call and nil its constant;
        `type_name`: the type the term must have, when known."""
        if is_nil(term):
            if self.types.adt(type_name) is not None:
                self.error(term, f"nil is a record, but {where} holds {shown(adt_kind(self.types.adt(type_name).name))}",
                           "an ADT has no nil: write one of its branches, $B(...)", "nil")
            return Const(R.NIL, RECORD, term.span)
        if _is_branch(term):
            return self.construct_branch(term, type_name, where)
        if isinstance(term, ListExpr):
            rec = self.record(type_name)
            if rec is None:
                if type_name is not None:
                    self.not_a_record(term, where, type_name)
                else:
                    self.error(term, f"the type of the record {_shown_term(term)} is not known",
                               "use it where a column or a variable of a record type says its type")
                return term
            if not self.fields_fit(term, rec):
                return term
            items = self.built_fields(term, rec.bases, rec, rec.fields, "a record")
            if items is None:
                return term
            letters = "".join(R.letter(self.field_kind(f)) for f in rec.bases)
            return Call("record", (Const(rec.name, STRING, term.span), Const(letters, STRING, term.span), *items),
                        term.span)
        return map_subterms(term, lambda s: self.construct(s, None, ""))

    def built_fields(self, term: ListExpr, bases, shape, names, what: str):
        """The fields of a record or branch value that is built, each constructed for its
        field's type; None (an error reported) where one is `_`."""
        items = []
        for j, (item, field_type) in enumerate(zip(term.items, bases)):
            if isinstance(item, Wildcard):
                self.error(item, f"_ stands for no value in {what} that is built",
                           "name the field's value with a variable bound elsewhere in the rule", "_")
                return None
            self.constant_fits(item, field_type, shape, j)
            items.append(self.construct(item, field_type, f"field {names[j]} of {shape.name}"))
        return items

    def construct_branch(self, term: ListExpr, type_name, where: str):
        """`$B(a, ...)` as `adt(T, B, K, a, ...)`."""
        found = self.branch(term, type_name, where)
        if found is None:
            return term
        adt, names, bases = found
        shape = _branch_shape(term, found)
        items = self.built_fields(term, bases, shape, names, "an ADT value")
        if items is None:
            return term
        letters = "".join(R.letter(self.field_kind(f)) for f in bases)
        at = term.span
        return Call("adt", (Const(adt.name, STRING, at), Const(term.branch, STRING, at), Const(letters, STRING, at),
                            *items), at)


def _negated_patterns(rule: Rule, types: TypeSystem, declared: dict):
    """(rule, [(declaration, rule)]): a negated atom whose record or ADT pattern holds `_`
    (`!p([x, _])`, `!p($B(_))`) says that no tuple of p matches the pattern; it becomes
    `!H(x, ...)`, H a helper relation of the pattern's variables derived by `H(x, ...)
    :- p([x, _])` (the positive pattern, lowered as any). Its variables are bound
    elsewhere in the rule, as a negated atom's must be."""
    body, helpers = [], []
    for lit in rule.body:
        d = declared.get(lit.relation) if isinstance(lit, Atom) else None
        if not (isinstance(lit, Atom) and lit.negated and d is not None and len(d.columns) == lit.arity
                and any(isinstance(a, ListExpr) and _has_wildcard(a) for a in lit.args)):
            body.append(lit)
            continue
        typed: dict = {}
        for a, column in zip(lit.args, d.columns):
            _variable_types(a, column.type, types, typed)
        name, span = f"{rule.name}_neg{len(helpers) + 1}", lit.span
        args = tuple(Var(v, span) for v in typed)
        helper = Rule(name, Atom(name, args, span=span), (replace(lit, negated=False),), span=span)
        helpers.append((Declaration(name, tuple(Column(v, t) for v, t in typed.items()), None, "decl", span), helper))
        body.append(replace(lit, relation=name, args=args))
    return (replace(rule, body=tuple(body)) if helpers else rule), helpers


def _variable_types(term, type_name, types: TypeSystem, typed: dict):
    """Each variable of a pattern of `type_name` with the type of where it stands."""
    if isinstance(term, Var) and not is_nil(term):
        typed.setdefault(term.name, type_name or "any")
    elif isinstance(term, ListExpr):
        found = types.branch(term.branch) if term.branch is not None else None
        rec = types.record(type_name) if type_name and term.branch is None else None
        bases = found[2] if found is not None else rec.bases if rec is not None else ()
        for item, base in zip(term.items, bases):
            _variable_types(item, base, types, typed)


def _has_wildcard(t) -> bool:
    """`_` somewhere in a pattern: it matches, it is never built."""
    return isinstance(t, Wildcard) or isinstance(t, ListExpr) and any(_has_wildcard(i) for i in t.items)


def _is_branch(t) -> bool:
    return isinstance(t, ListExpr) and t.branch is not None


def _fact(f: Fact, types: TypeSystem, declared: dict, diagnostics: list) -> Fact:
    """A fact with its records folded to their canonical text."""
    low = _Lowering(types, declared, diagnostics)
    args = []
    for i, a in enumerate(f.atom.args):
        column = low.column_type(f.atom, i)
        folded = _folded(a, column, low, f"{f.atom.relation} (column {i + 1})")
        args.append(a if folded is None else folded)
    return replace(f, atom=replace(f.atom, args=tuple(args)))


def _folded(term, type_name, low: _Lowering, where: str):
    """The record constant `term` stands for, or None (an error was reported, or the
    term is no record)."""
    if not isinstance(term, ListExpr) and not is_nil(term):
        return None
    if _is_branch(term):
        return _folded_branch(term, type_name, low, where)
    rec = low.record(type_name)
    if is_nil(term) and (rec is not None or type_name is None):
        return Const(R.NIL, RECORD, term.span)
    if rec is None:
        if type_name is not None:
            low.not_a_record(term, where, type_name)
        return None
    if not low.fields_fit(term, rec):
        return None
    folded = _folded_fields(term, rec, low)
    return None if folded is None else Const(R.record_text(*folded), RECORD, term.span)


def _folded_branch(term: ListExpr, type_name, low: _Lowering, where: str):
    """The ADT constant `$B(...)` of a fact, or None (an error was reported)."""
    found = low.branch(term, type_name, where)
    if found is None:
        return None
    folded = _folded_fields(term, _branch_shape(term, found), low)
    return None if folded is None else Const(R.adt_text(term.branch, *folded), RECORD, term.span)


def _folded_fields(term: ListExpr, shape, low: _Lowering):
    """(letters, values) of the constant fields of a record or a branch (`shape`), or
    None (an error was reported)."""
    values, letters = [], ""
    for j, (item, field_type) in enumerate(zip(term.items, shape.bases)):
        where = f"field {shape.fields[j]} of {shape.name}"
        sub = low.held(field_type)
        if sub is not None:
            inner = _folded(item, field_type, low, where)
            if inner is None:
                if not isinstance(item, ListExpr) and not is_nil(item):
                    what = "a value of ADT type" if sub.kind == "adt" else "a record of type"
                    low.error(item, f"{where} holds {what} {sub.name}, but {_shown_term(item)} is not one",
                              "write $B(...) there" if sub.kind == "adt" else "write [...] or nil there")
                return None
            values.append(inner.value)
            letters += "r"
            continue
        if isinstance(item, (ListExpr,)) or is_nil(item):
            low.not_a_record(item, where, field_type)
            return None
        if not low.constant_fits(item, field_type, shape, j):
            return None
        value = _constant(item)
        if value is None:
            low.error(item, "a fact's record holds constants only", "write a number or a \"symbol\" there")
            return None
        values.append(value)
        letters += R.letter(low.types.primitive(field_type))
    return letters, values


def _constant(t):
    if isinstance(t, Const) and t.type in (INT, STRING, "float"):
        return t.value
    if isinstance(t, UnOp) and t.op == "-" and isinstance(t.arg, Const) and t.arg.type in (INT, "float"):
        return -t.arg.value
    return None


def _fields_text(rec: TypeDecl) -> str:
    return ", ".join(f"{n}: {t}" for n, t in zip(rec.fields, rec.bases))


def _shown_term(node) -> str:
    from ...catalog.printer import format_expr

    try:
        return format_expr(node)
    except (TypeError, ValueError):
        return ""

