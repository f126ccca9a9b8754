"""The statement lowering: raw clauses (`raw.py`) -> the statements of `syntax.py`.

The rewrites that are syntax rather than optimization (docs/language.md, "Lowering"),
each in a module of this package and driven from here:

* unlabelled rules get the label `rule{N}`;
* a disjunctive body becomes one rule per alternative (`disjunction.py`);
* a Soufflé body aggregate becomes helper rules (`aggregates.py`), `autoinc()` a
  numbering helper (`autoinc.py`);
* Soufflé `X = E` becomes `X := E` or `==` (`equalities.py`); casts and `range` are
  normalized (`casts.py`, `ranges.py`);
* named-field atoms `rel{col: T}` become positional atoms (`Atom(named=True)`);
* qualifiers: `input`/`output` become directives, `eqrel` three rules (`eqrel.py`);
* Soufflé's `contains`/`match` written as atoms become conditions; a fact's constant
  expressions are folded.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> print(format_program(parse_program('.decl e(x: number) output\\ne(2 * 3).\\n'
...                                    'e(y) :- e(x), y = x + 1, y < 9.', "t.dl")))
.decl e(x: number)
.output e
e(6).
rule1 e(y) :- e(x), y := x + 1, y < 9.
<BLANKLINE>
"""
from __future__ import annotations

import re
from dataclasses import replace

from lark import Token

from ...catalog.schema import table, unknown_table
from .. import casts, ranges
from ..dedalus_checks import _term_calls, tick_in_fact
from ..diagnostics import Diagnostic
from ..folding import FoldError, fold
from ..syntax import (
    NULL, STRING, Aggregate, Atom, BodyAggregate, Call, CompDecl, Component, Const, Declaration, Fact, IODirective,
    ListExpr, Materialize, NamedAtom, Query, Rule, Select, Span, UnOp, Var, Wildcard,
)
from .aggregates import AggregateLowering, aggregate_terms
from .autoinc import AutoincLowering, is_autoinc
from .disjunction import expand
from .eqrel import equivalence_rules
from .equalities import eq_to_eqeq, lower_equalities
from .raw import Clause, RawCall, RawComponent, flatten, location
from .subsumption import SubsumptionLowering

__all__ = ["Lowering"]

# Soufflé terms the lowering rejects: word -> (what it is, the hint).
_NOT_YET_TERMS: dict = {}  # (`nil` is the empty record: bootstrap/lowering/records.py)


def _record_shaped(a) -> bool:
    """A Soufflé record in a fact: `[...]` of record-shaped or constant fields, or nil."""
    if isinstance(a, Var):
        return a.name == "nil"
    if isinstance(a, ListExpr):
        return all(isinstance(i, Const) or _record_shaped(i) for i in a.items)
    return False


def _raw_nodes(node):
    """Every node under a raw clause (atoms, terms, groups, aggregate bodies), depth first."""
    if isinstance(node, (str, int, float, bool, type(None), Span, Token)):
        return
    yield node
    if isinstance(node, (list, tuple)):
        children = node
    elif hasattr(node, "__dataclass_fields__"):
        children = [getattr(node, f) for f in node.__dataclass_fields__]
    else:
        return
    for child in children:
        yield from _raw_nodes(child)


# Python's messages for regular expressions that Java rejects as well.
_MALFORMED_IN_JAVA_TOO = ("missing )", "unbalanced parenthesis", "unterminated character set", "nothing to repeat",
                          "multiple repeat", "min repeat greater than max repeat")


# Soufflé's binary string constraints, written like atoms: name -> the hint for misuse.
_STRING_CONSTRAINTS = {"contains": "contains(sub, s): whether s contains the string sub",
                       "match": "match(regex, s): whether the whole of s matches regex"}


class Lowering(AutoincLowering, AggregateLowering, SubsumptionLowering):
    """The lowering of one file's statements: `run` gives them lowered."""

    def __init__(self, path: str, diagnostics: list):
        self.path = path
        self.diagnostics = list(diagnostics)
        self.columns: dict = {}  # relation -> column names, or None if declared without names
        self.component_columns: dict = {}  # the same, for the relations a `.comp` declares
        self.rule_count = 0
        self.label_prefix = ""  # for the labels of unlabelled rules (`rule7`): an included file's name
        self.aggregate_helpers: list = []  # (helper relation, its column names) for declare_helpers
        self.subsumed: dict = {}  # helper relation of dominated tuples -> the relation it prunes
        self.comp_depth = 0  # inside how many Soufflé `.comp` bodies
        self.directives: set = set()  # (direction, relation) of the .input/.output written
        self.souffle = False  # a `.decl` anywhere: Soufflé's constraints `contains`/`match` are words
        self.number_bits = 64  # the program's width of whole numbers (bootstrap/numbers.py)

    def error(self, code, message, span, text="", hint=""):
        self.diagnostics.append(Diagnostic(code, message, span, text, hint))

    # -- driver
    def run(self, items) -> list:
        items = flatten(list(items))  # `.decl A, B(...)` is one Declaration per relation
        self._collect_declarations(items)
        out: list = []
        for item in items:
            self._statement(item, None, out)
        return out

    def _collect_declarations(self, items):
        for item in items:
            if isinstance(item, RawComponent):
                self._collect_declarations(item.statements)
            elif isinstance(item, CompDecl):
                self._collect_declarations(item.body)
                # `g.edge{x: 1}` outside the component: the columns of its `edge` (None
                # when components declare an `edge` with other columns)
                for d in item.body:
                    if isinstance(d, Declaration) and d.style == "decl":
                        names = [c.name for c in d.columns]
                        known = self.component_columns.setdefault(d.relation, names)
                        if known != names:
                            self.component_columns[d.relation] = _AMBIGUOUS
            elif isinstance(item, Declaration):
                self.souffle = self.souffle or item.style == "decl"
                names = [c.name for c in item.columns] if item.style == "decl" else None
                self.columns.setdefault(item.relation, names)
            elif isinstance(item, Materialize):
                self.columns.setdefault(item.relation, None)
            elif isinstance(item, IODirective):
                self.directives.add((item.direction, item.relation))

    def _statement(self, item, component, out):
        if isinstance(item, RawComponent):
            if component is not None:
                self.error("syntax", f"component {item.name} is inside component {component}",
                           item.span, item.name, "components do not nest")
            out.append(Component(item.name, item.addresses, item.span))
            for s in item.statements:
                self._statement(s, item.name, out)
        elif isinstance(item, CompDecl):
            body: list = []
            self.comp_depth += 1
            for s in item.body:
                self._statement(s, component, body)
            self.comp_depth -= 1
            if self.souffle:  # helper relations of its aggregates belong to each instance
                body = self.declare_helpers(body)
            out.append(replace(item, body=tuple(body)))
        elif isinstance(item, Clause):
            if not self._has_unsupported_term(item) and not self._misplaced_autoinc(item, component):
                self._clause(item, component, out)
        elif isinstance(item, Declaration) and item.qualifiers:
            self._qualified(item, out)
        else:
            out.append(item)

    def _has_unsupported_term(self, c: Clause) -> bool:
        """Report the first Soufflé term not supported yet in `c` (`nil`,
        `autoinc()`), once: the clause is then dropped, so no follow-up errors."""
        if not self.souffle:
            return False
        node = next((n for n in _raw_nodes(c) if self._unsupported_term(n)), None)
        if node is None:
            return False
        word = node.func if isinstance(node, Call) else node.name
        what, hint = _NOT_YET_TERMS[word]
        self.error("syntax", f"{what} is not supported yet", node.span, word, hint)
        return True

    def _misplaced_autoinc(self, c: Clause, component) -> bool:
        """Report `autoinc()` anywhere but as an argument of a rule's or a fact's head,
        outside Dedalus components (docs/language.md, "autoinc()"), once; the clause is
        then dropped."""
        if not self.souffle:
            return False
        calls = [n for n in _raw_nodes(c) if is_autoinc(n, self.columns)]
        if not calls:
            return False
        allowed = set()
        if isinstance(c.head, RawCall) and (c.body is not None or not c.words):  # a rule or a fact
            allowed = {id(a) for a in c.head.args}
        for call in calls:
            if call.args:
                why, hint = "autoinc() takes no arguments", "write autoinc()"
            elif component is not None:  # a Dedalus component: its rules run at every timestep
                why, hint = ("autoinc() in a Dedalus component is not supported",
                             "number the relation in a rule outside the component")
            elif id(call) not in allowed:
                why, hint = ("autoinc() is supported only as an argument of a rule's head",
                             "write r(x, autoinc()) :- ..., not n = autoinc() or autoinc() + 1")
            else:
                continue
            self.error("syntax", why, call.span, "autoinc", hint)
            return True
        return False

    def _is_range_call(self, node) -> bool:
        if isinstance(node, (Call, RawCall)):
            name = node.func if isinstance(node, Call) else node.name
            return name == ranges.NAME and name not in self.columns
        return False

    def _unsupported_term(self, node) -> bool:
        return False

    # -- qualifiers
    def _qualified(self, d: Declaration, out):
        """`input`/`output` become directives (their old spelling); `eqrel` becomes the
        rules of an equivalence relation; the rest are hints that stay on the declaration."""
        for q, why in (("eqrel", "is an eqrel"), ("inline", "is inlined")):
            if d.choice and q in d.qualifiers:  # its tuples are a closure, or no tuples at all: none to choose
                self.error("choice-domain", f"{d.relation} {why} and has a choice-domain", d.span, d.relation,
                           f"drop {q} or the choice-domain: choose in a relation of its own")
        if "btree_sum" in d.qualifiers:  # Soufflé adds values up as they arrive: no set semantics
            self.error("syntax", "the qualifier btree_sum is not supported yet", d.span, d.relation,
                       "aggregate in a rule of another relation: s(x, y, t) :- t = sum c : { r(x, y, c) }")
        kept = tuple(q for q in d.qualifiers if q not in _LOWERED_QUALIFIERS + ("btree_sum",))
        out.append(replace(d, qualifiers=kept))
        for direction in ("input", "output"):
            if direction in d.qualifiers and (direction, d.relation) not in self.directives:
                out.append(IODirective(direction, d.relation, (), d.span))
        if "eqrel" in d.qualifiers:
            if len(d.columns) != 2:
                self.error("eqrel", f"eqrel relation {d.relation} has {len(d.columns)} column{'' if len(d.columns) == 1 else 's'}", d.span,
                           d.relation, "an equivalence relation is binary: .decl R(a: T, b: T) eqrel")
            else:
                out.extend(equivalence_rules(d))

    # -- clauses
    def _clause(self, c: Clause, component, out):
        if c.dominating is not None:
            self._subsumption(c, component, out)
            return
        words = [w.value for w in c.words]
        if c.body is None and words != ["query"] and isinstance(c.head, RawCall) \
                and any(aggregate_terms(a) for a in c.head.args):
            c = replace(c, body=[])  # `total(sum x : v(x)).`: a rule; its aggregates make its body
        elif c.body is None and words != ["query"] and isinstance(c.head, RawCall) \
                and any(self._is_range_call(n) for n in _raw_nodes(c.head.args)):
            c = replace(c, body=[])  # `n(range(0, 3)).`: a rule whose range makes its body
        elif c.body is None and not words and self.souffle and isinstance(c.head, RawCall) \
                and any(is_autoinc(a, self.columns) for a in c.head.args):
            c = replace(c, body=[])  # `r(1, autoinc()).`: a rule with one binding (`_autoinc`)
        if c.body is None:
            if words == ["query"]:
                out.append(Query(self._head(c, "a query"), c.span))
            else:
                if words:
                    self.error("syntax", f"a fact cannot be preceded by '{' '.join(words)}'", c.span,
                               " ".join(words), "add ':-' and a body to make a rule, or write `query ATOM.`")
                if c.time is not None:
                    self.error("syntax", f"a fact cannot have a time suffix @{c.time.value}",
                               _tok_span(self.path, c.time), c.time.value,
                               "write a rule with a body to derive facts @next")
                atom = self._folded(self._head(c, "a fact"))
                self._check_ground(atom)
                out.append(Fact(atom, component, c.span))
            return
        self.rule_count += 1
        label, delete = self._label(c.words)
        time = None
        if c.time is not None:
            if c.time.value in ("next", "async"):
                time = c.time.value
            else:
                self.error("syntax", f"unknown time suffix @{c.time.value}", _tok_span(self.path, c.time),
                           c.time.value, "a head may end with @next or @async")
        head = self._head(c, "a rule head")
        alternatives = expand(c.body)
        for k, body in enumerate(alternatives):
            name = label if k == 0 else f"{label}_or{k + 1}"
            rule = Rule(name, head, tuple(body), delete, time, component, c.span)
            self._rule(rule, out)

    def _label(self, words):
        values = [w.value for w in words]
        label, delete = None, False
        if values and values[-1] == "delete":
            delete = True
            values = values[:-1]
        if len(values) > 1:
            extra = words[1]
            self.error("syntax", f"unexpected word '{extra.value}' before the rule head",
                       _tok_span(self.path, extra), extra.value,
                       "a rule may start with a label and 'delete', then its head atom")
        if values:
            label = values[0]
        return label or f"{self.label_prefix}rule{self.rule_count}", delete

    def _head(self, c: Clause, what: str) -> Atom:
        head = c.head
        if isinstance(head, NamedAtom):
            return self.resolve_atom(head)
        at = location(head.at, what, self.error)
        if what != "a rule head":
            for a in head.args:
                if isinstance(a, Aggregate):
                    self.error("syntax", f"aggregates belong in rule heads, not in {what}", a.span,
                               "", "write a rule whose head computes the aggregate")
        args = tuple(eq_to_eqeq(a) for a in head.args)
        return Atom(head.name, args, at, span=head.span)

    def _folded(self, atom: Atom) -> Atom:
        """A fact's constant expressions (`rel(2^32-5).`) evaluated, as Soufflé does."""
        return replace(atom, args=tuple(self._folded_term(a, atom) for a in atom.args))

    def _folded_term(self, a, atom: Atom):
        if self.souffle and isinstance(a, ListExpr):  # a record: its fields folded (lowering/records.py)
            return replace(a, items=tuple(self._folded_term(item, atom) for item in a.items))
        try:
            value = fold(a, self.number_bits)
        except FoldError as e:
            self.error("constant-expression", f"fact {atom.relation}: {e}", a.span, "",
                       f"write a value a {self.number_bits}-bit number holds, without dividing by zero")
            value = Const(None, NULL, a.span)  # reported: the fact goes no further
        return value if value is not None else a

    def _check_ground(self, atom: Atom):
        if atom.named and any(isinstance(a, Wildcard) for a in atom.args):
            self.error("non-ground-fact", f"fact {atom.relation} leaves fields without a value",
                       atom.span, atom.relation, "a fact names every field with a constant")
            return
        for a in atom.args:
            ticks = _tick_calls(a)
            if ticks:  # a fact holds at every timestep: reported as Dedalus time, at the tick()
                for call in ticks:
                    self.diagnostics.append(tick_in_fact(call, atom.relation))
                continue
            if self.souffle and _record_shaped(a):
                continue  # a record: folded, and its fields checked, with the program's types (lowering/records.py)
            if not isinstance(a, Const):
                what = "the variable " + a.name if isinstance(a, Var) else \
                    "the wildcard _" if isinstance(a, Wildcard) else "an expression"
                self.error("non-ground-fact", f"fact {atom.relation} holds {what}; facts hold constants only",
                           a.span, getattr(a, "name", ""),
                           "write constants (\"text\", 42, true), or make it a rule with ':-' and a body")


    # -- rules
    def _rule(self, rule: Rule, out):
        """`rule` lowered onto `out`: autoinc() first, then aggregates (their helper rules
        come before it), then `_finish_rule`."""
        if self.souffle and any(isinstance(a, Call) and a.func == "autoinc" and a.func not in self.columns
                                for a in rule.head.args):
            rule = self._autoinc(rule, out)
        self._lower_aggregates(rule, out)

    def _finish_rule(self, rule: Rule, out):
        """`=` as `:=` or `==`, casts normalized, `range` hoisted."""
        rule = casts.normalized(replace(rule, body=tuple(lower_equalities(list(rule.body)))), self.diagnostics.append)
        out.append(ranges.hoisted(rule))

    # -- named fields
    def resolve_literal(self, lit):
        if isinstance(lit, NamedAtom):
            return self.resolve_atom(lit)
        if isinstance(lit, BodyAggregate):
            return replace(lit, body=tuple(self.resolve_literal(b) for b in lit.body))
        if isinstance(lit, Atom) and self._is_string_constraint(lit):
            return self._string_constraint(lit)
        return lit

    def _is_string_constraint(self, atom: Atom) -> bool:
        # In Soufflé `contains` and `match` are keywords, never relations; a program that
        # declares a relation of that name keeps it (Overlog spells its built-ins f_...).
        return self.souffle and atom.relation in _STRING_CONSTRAINTS and atom.relation not in self.columns

    def _string_constraint(self, atom: Atom) -> Select:
        """`contains(sub, s)` / `match(regex, s)` as a body literal: a condition."""
        if len(atom.args) != 2:
            self.error("function-arity", f"{atom.relation} takes 2 arguments, not {len(atom.args)}", atom.span,
                       atom.relation, _STRING_CONSTRAINTS[atom.relation])
        pattern = atom.args[0] if atom.args else None
        if atom.relation == "match" and isinstance(pattern, Const) and pattern.type == STRING:
            self._check_regex(pattern)
        call = Call(atom.relation, tuple(eq_to_eqeq(a) for a in atom.args), atom.span)
        return Select(UnOp("!", call, atom.span) if atom.negated else call, atom.span)

    def _check_regex(self, pattern: Const):
        # Python's `re` stands in for Java's regex parser, but only for the mistakes both
        # reject (unbalanced groups and sets, dangling quantifiers): Java also accepts
        # escapes and groups Python does not (`\p{L}`, `\z`, `(?<name>...)`).
        try:
            re.compile(pattern.value)
        except re.error as e:
            if not e.msg.startswith(_MALFORMED_IN_JAVA_TOO):
                return
            self.error("bad-regex", f"match: {pattern.value!r} is not a regular expression ({e.msg})",
                       pattern.span, f'"{pattern.value}"', "escape a special character with a backslash, "
                       "or balance the brackets")

    def resolve_atom(self, atom: NamedAtom) -> Atom:
        columns = self._columns_of(atom)
        if columns is None:
            return Atom(atom.relation, (), negated=atom.negated, delta=atom.delta, named=True, span=atom.span)
        args: list = [None] * len(columns)
        for name, term, span in atom.fields:
            if name not in columns:
                self.error("unknown-field", f"{atom.relation} has no field '{name}'", span, name,
                           f"its fields are: {', '.join(columns)}")
                continue
            i = columns.index(name)
            if args[i] is not None:
                self.error("syntax", f"field '{name}' of {atom.relation} is named twice", span, name,
                           "name each field at most once")
            args[i] = eq_to_eqeq(term)
        args = [a if a is not None else Wildcard(atom.span) for a in args]
        return Atom(atom.relation, tuple(args), None, atom.negated, atom.delta, True, atom.span)

    def _columns_of(self, atom: NamedAtom):
        rel = atom.relation
        instance_of = rel.rsplit(".", 1)[-1] if "." in rel else None  # g.edge: edge of a component
        if rel in self.columns or instance_of in self.component_columns:
            names = self.columns[rel] if rel in self.columns else self.component_columns[instance_of]
            if names is _AMBIGUOUS:
                self.error("unknown-field", f"the fields of {rel} cannot be named: components declare "
                           f"{instance_of} with different columns", atom.span, rel, "use positional arguments")
                return None
            if names is None:
                self.error("unknown-field", f"{rel} is declared without column names, so its fields "
                           "cannot be named", atom.span, rel,
                           "use positional arguments, or declare it with .decl and named columns")
            return names
        if rel.startswith("stage::move::"):  # a stage primitive: the key of a catalog table, then the new key
            from evita.catalog.edit import move_columns
            try:
                return move_columns(rel[len("stage::move::"):])
            except KeyError:
                d = unknown_table("sys::" + rel[len("stage::move::"):], atom.span)
                self.error(d.code, f"{rel}: {d.message}", atom.span, rel, d.hint.replace("sys::", "stage::move::"))
                return None
        if rel.startswith("sys::"):
            try:  # the catalog declares the sys:: relations
                return table(rel).column_names
            except KeyError:
                d = unknown_table(rel, atom.span)
                self.error(d.code, d.message, atom.span, rel, d.hint)
                return None
        self.error("undeclared-relation", f"{rel} is not declared, so its fields cannot be named",
                   atom.span, rel, "declare it with .decl NAME(col: type, ...) or use positional arguments")
        return None


_LOWERED_QUALIFIERS = ("eqrel", "input", "output")
_AMBIGUOUS = ["<ambiguous>"]  # the columns of a component relation declared differently by two components


def _tok_span(path: str, tok: Token) -> Span:
    return Span(path, tok.line, tok.column, tok.end_line, tok.end_column)


def _tick_calls(term) -> list:
    """The tick() calls in a term (`dedalus_checks.py`)."""
    return _term_calls([term], "tick")
