"""Static checks run between parsing and the catalog: nothing reaches the catalog unless
every check passes.

Each check is one function from a parsed program to diagnostics; `check_program` runs
them all and raises one `EvitaError` listing every problem found.

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program("r1 out(X, Z) :- in(X, Y).", "demo.olg")
>>> [d.code for d in diagnose(p)]
['unsafe-rule']
"""
from __future__ import annotations

import difflib
from typing import Iterator

from . import builtins
from .diagnostics import Diagnostic, EvitaError, plural
from .fact_types import check_fact_types
from .types import check_types
from .syntax import (
    Aggregate, Assign, Atom, Call, Const, Declaration, Fact, IODirective, Materialize, Plan,
    Program, Query, Rule, Select, Span, Var, Wildcard, term_vars,
)


def check_program(program: Program) -> Program:
    """Raise EvitaError with every diagnostic, or return the program unchanged."""
    found = list(diagnose(program))
    if found:
        raise EvitaError(found, source=program.text, source_file=program.path or None)
    return program


def diagnose(program: Program) -> list:
    out: list = []
    for check in CHECKS:
        out.extend(check(program))
    return out


# ---------------------------------------------------------------- safety

def check_safety(program: Program) -> Iterator[Diagnostic]:
    """Every head, negated, compared or assigned-from variable must be bound by a
    positive atom or by an assignment whose inputs are bound (seed 002 §2.1)."""
    for rule in program.rules:
        bound = _bound_vars(rule)
        for lit in rule.body:
            if isinstance(lit, Atom) and lit.negated:
                yield from _unbound(lit.args, bound, rule, "negated atom " + lit.relation,
                                    "a variable under notin/! must also appear in a positive atom of the body "
                                    "(use _ for a column you do not care about)")
            elif isinstance(lit, Select):
                yield from _unbound([lit.expr], bound, rule, "condition",
                                    "conditions only filter: bind the variable in a positive atom or with :=")
            elif isinstance(lit, Assign):
                yield from _unbound([lit.expr], bound, rule, f"assignment to {lit.var.name}",
                                    "the right side of := may only use variables bound elsewhere in the body")
        # In a named head the unnamed fields are left null (or, in a delete, match anything).
        for arg in () if rule.head.named else rule.head.args:
            if isinstance(arg, Wildcard):
                yield Diagnostic("unsafe-rule", f"rule {rule.name}: the head of a rule cannot contain _",
                                 arg.span, "_", "name the value the head should carry, or drop the column")
        # A variable assigned from unbound inputs is reported at its assignment, not again here.
        assigned = {lit.var.name for lit in rule.body if isinstance(lit, Assign)}
        yield from _unbound(rule.head.args, bound | assigned, rule, "head",
                            "bind every head variable in a positive body atom or with :=")


def _bound_vars(rule: Rule) -> set:
    bound = set()
    for lit in rule.body:
        if isinstance(lit, Atom) and not lit.negated:
            # Only plain variable arguments bind; computed arguments are matched, not solved.
            bound.update(a.name for a in lit.args if isinstance(a, Var))
    # Assignments bind in any order as long as their inputs are bound (Overlog := is a macro).
    assigns = [lit for lit in rule.body if isinstance(lit, Assign)]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if a.var.name not in bound and set(term_vars(a.expr)) <= bound:
                bound.add(a.var.name)
                changed = True
    return bound


def _unbound(terms, bound: set, rule: Rule, where: str, hint: str) -> Iterator[Diagnostic]:
    seen = set()
    for t in terms:
        for v in (n for n in _walk(t) if isinstance(n, Var)):
            if v.name not in bound and v.name not in seen:
                seen.add(v.name)
                yield Diagnostic("unsafe-rule",
                                 f"rule {rule.name}: variable {v.name} in the {where} is not bound",
                                 v.span, v.name, hint)


def _children(term) -> tuple:
    for name in ("args", "items"):
        if hasattr(term, name):
            return getattr(term, name)
    kids = []
    for name in ("left", "right", "arg", "test", "then", "other"):
        if hasattr(term, name):
            kids.append(getattr(term, name))
    return tuple(kids)


def _walk(term) -> Iterator:
    """Every node of a term, itself first."""
    yield term
    if isinstance(term, Aggregate):
        if term.arg is not None:
            yield from _walk(term.arg)
        return
    for child in _children(term):
        yield from _walk(child)


# ---------------------------------------------------------------- relations: arity, declarations

def _declared(program: Program) -> dict:
    """relation name -> (arity or None, statement) for every declaration."""
    out = {}
    for s in program.statements:
        if isinstance(s, Declaration):
            out.setdefault(s.relation, (len(s.columns), s))
        elif isinstance(s, Materialize):
            out.setdefault(s.relation, (None, s))
    return out


def _uses(program: Program) -> Iterator[tuple]:
    """(atom, role) for every atom in the program."""
    for s in program.statements:
        if isinstance(s, Rule):
            yield s.head, "head"
            for lit in s.body:
                if isinstance(lit, Atom):
                    yield lit, "body"
        elif isinstance(s, Fact):
            yield s.atom, "fact"
        elif isinstance(s, Query):
            yield s.atom, "query"


def _catalog_arity(name: str):
    if not name.startswith("sys::"):
        return None
    from evita.catalog import schema
    try:
        return len(schema.table(name).columns)
    except KeyError:
        return None


def check_arity(program: Program) -> Iterator[Diagnostic]:
    """A relation has one arity: its declaration's, or else the one it is first used with."""
    declared = _declared(program)
    first_use: dict = {}
    for atom, role in _uses(program):
        arity, decl = declared.get(atom.relation, (None, None))
        origin = f"declared with {plural(arity, 'column')} at {decl.span}" if arity is not None else None
        if arity is None and atom.relation.startswith("sys::"):
            arity = _catalog_arity(atom.relation)
            origin = f"the catalog table has {plural(arity, 'column')} (docs/catalog.md)" if arity is not None else None
        if arity is None:
            if atom.relation not in first_use:
                first_use[atom.relation] = atom
                continue
            first = first_use[atom.relation]
            arity, origin = first.arity, f"first used with {plural(first.arity, 'argument')} at {first.span}"
        if atom.arity != arity:
            yield Diagnostic("arity", f"{atom.relation} is used with {plural(atom.arity, 'argument')} but {origin}",
                             atom.span, atom.relation,
                             f"give {atom.relation} exactly {plural(arity, 'argument')} (use _ for columns you ignore)")
    for s in program.statements:
        if isinstance(s, Materialize):
            arity = _arity_of(program, s.relation)
            for k in s.keys:
                if arity is not None and not 0 <= k < arity:
                    yield Diagnostic("bad-key", f"materialize({s.relation}, ...) names key column {k + 1}, "
                                     f"but {s.relation} has {plural(arity, 'column')}", s.span, s.relation,
                                     f"keys(...) counts columns from 1 to {arity}")


def _arity_of(program: Program, relation: str):
    for atom, _ in _uses(program):
        if atom.relation == relation:
            return atom.arity
    return None


def check_declared(program: Program) -> Iterator[Diagnostic]:
    """Soufflé-style programs (any .decl) must declare every relation they use."""
    declared = _declared(program)
    if program.dialect != "souffle":
        targets = []
    else:
        targets = [(a.relation, a.span) for a, _ in _uses(program)]
    targets += [(s.relation, s.span) for s in program.statements if isinstance(s, IODirective)]
    reported = set()
    for name, span in targets:
        if name in declared or name.startswith("sys::") or name in reported:
            continue
        reported.add(name)
        close = difflib.get_close_matches(name, list(declared), n=1)
        hint = f"did you mean {close[0]}?" if close else f"add `.decl {name}(...)` with its column names and types"
        yield Diagnostic("undeclared-relation", f"relation {name} is not declared", span, name, hint)


def check_duplicates(program: Program) -> Iterator[Diagnostic]:
    labels: dict = {}
    for r in program.rules:
        if r.name in labels:
            yield Diagnostic("duplicate-rule", f"rule label {r.name} is already used at {labels[r.name]}",
                             r.span, r.name, "give every rule its own label")
        else:
            labels[r.name] = r.span
    decls: dict = {}
    for s in program.statements:
        if isinstance(s, Declaration):
            if s.relation in decls:
                yield Diagnostic("duplicate-declaration", f"relation {s.relation} is declared twice "
                                 f"(first at {decls[s.relation]})", s.span, s.relation,
                                 "keep one declaration")
            decls.setdefault(s.relation, s.span)


# ---------------------------------------------------------------- functions and aggregates

def _terms_of(program: Program) -> Iterator[tuple]:
    """(term, context) for every top-level term: context is 'head', 'body', 'fact' or 'query'."""
    for atom, role in _uses(program):
        for a in atom.args:
            yield a, role
    for r in program.rules:
        for lit in r.body:
            if isinstance(lit, Select):
                yield lit.expr, "condition"
            elif isinstance(lit, Assign):
                yield lit.expr, "assignment"


def check_functions(program: Program) -> Iterator[Diagnostic]:
    for term, _ in _terms_of(program):
        for call in (n for n in _walk(term) if isinstance(n, Call)):
            fn = builtins.lookup(call.func)
            if fn is None:
                names = sorted(builtins.BUILTINS) + ["f_" + n for n in builtins.BUILTINS]
                close = difflib.get_close_matches(call.func, names, n=1)
                hint = f"did you mean {close[0]}?" if close else "see docs/language.md for the built-in functions"
                yield Diagnostic("unknown-function", f"unknown function {call.func}", call.span, call.func, hint)
            elif not fn.accepts(len(call.args)):
                yield Diagnostic("function-arity", f"{call.func} takes {fn.arity_text} arguments, "
                                 f"not {len(call.args)}", call.span, call.func, fn.doc)


def check_aggregates(program: Program) -> Iterator[Diagnostic]:
    """Aggregates belong at the top level of a rule head, once per column."""
    for term, role in _terms_of(program):
        for agg in _walk(term):
            if not isinstance(agg, Aggregate):
                continue
            if role != "head":
                yield Diagnostic("misused-aggregate", f"aggregate {agg.func}<...> may only appear in a rule head"
                                 f", not in a {role}", agg.span, agg.func,
                                 "aggregate in the head of a helper rule and join with its result")
            elif agg is not term:
                yield Diagnostic("misused-aggregate", f"aggregate {agg.func}<...> must be a whole head argument, "
                                 "not nested in an expression or another aggregate", agg.span, agg.func,
                                 "compute the aggregate in one rule and the expression over it in another")
            elif agg.arg is None and agg.func not in ("count", "autoinc"):
                yield Diagnostic("misused-aggregate", f"{agg.func}<*> has nothing to aggregate",
                                 agg.span, agg.func, "only count<*> and autoinc<*> take *; write e.g. min<C>")
            elif agg.arg is not None and agg.func == "autoinc":  # it numbers groups: no value goes in
                yield Diagnostic("misused-aggregate", "autoinc<...> numbers the groups and aggregates no value",
                                 agg.span, agg.func, "write autoinc<*>")
    for r in program.rules:  # seal<X, ...>: a batch of messages (docs/dedalus.md, "Sealed messages")
        aggs = [a for a in r.head.args if isinstance(a, Aggregate)]
        seals = [a for a in aggs if a.func == "seal"]
        if not seals:
            pass
        elif r.time != "async":
            yield Diagnostic("misused-seal", f"seal<...> in the head of {r.name or r.head.relation}, which is not "
                             "@async: a seal groups the facts of one message batch", seals[0].span, "seal",
                             "send the batch: add @async to the head, or drop seal<...> for a local relation")
        elif len(aggs) > len(seals):
            other = next(a for a in aggs if a.func != "seal")
            yield Diagnostic("misused-seal", f"{other.func}<...> beside seal<...> in the head of "
                             f"{r.name or r.head.relation}: a sealed batch carries its facts, not an aggregate of "
                             "them", other.span, other.func,
                             "aggregate in a helper rule and send its result as a column of the batch")
        elif any(a.arg is None or not isinstance(a.arg, Var) for a in seals):
            bad = next(a for a in seals if a.arg is None or not isinstance(a.arg, Var))
            yield Diagnostic("misused-seal", "seal<...> lists variables, the sealed columns", bad.span, "seal",
                             "bind each sealed value to a variable in the body: seal<X, Y>")
        if r.delete and any(isinstance(a, Aggregate) for a in r.head.args):
            yield Diagnostic("misused-aggregate", f"delete rule {r.name} cannot aggregate", r.head.span,
                             r.head.relation, "compute the aggregate in a helper rule, then delete with it")


def check_facts(program: Program) -> Iterator[Diagnostic]:
    for f in program.facts:
        for a in f.atom.args:
            if not isinstance(a, Const):
                yield Diagnostic("non-ground-fact", f"fact {f.atom.relation} has a non-constant argument",
                                 getattr(a, "span", f.span), f.atom.relation,
                                 "facts hold constants only; write a rule to compute values")


def check_numbers(program: Program) -> Iterator[Diagnostic]:
    """Whole numbers have the program's width (bootstrap/numbers.py): a literal beyond it
    is an error, as Soufflé's "Number constant not in range" (on Spark it would fail far
    from the text that wrote it)."""
    from . import numbers

    bits = program.number_bits
    for term, _ in _terms_of(program):
        for c in _walk(term):
            if isinstance(c, Const) and c.type == "int" and not isinstance(c.value, bool) \
                    and not numbers.holds(c.value, bits):
                yield Diagnostic("number-range", f"{c.value} is out of the range of a {bits}-bit number", c.span,
                                 str(c.value), f"numbers are {bits}-bit: {numbers.range_text(bits)}"
                                 + ("" if bits == 64 else "; --number-bits 64 holds more"))


def check_plans(program: Program) -> Iterator[Diagnostic]:
    """`.plan` statements name a known relation or rule and known decisions."""
    import re

    from .syntax import DISTRIBUTIONS, JOIN_METHODS, PLAN_KEYS, ROLES, WHOLE, Plan, statistic_key

    relations = {atom.relation for atom, _ in _uses(program)} | set(_declared(program))
    rules = {r.name: r for r in program.rules}
    allowed = {"distribution": DISTRIBUTIONS, "cached": ("true", "false"), "strategy": ("local", "rounds", "distributed"),
               "prem": ("asserted",),
               "role": ROLES}
    for p in program.of(Plan):
        def bad(message, hint):
            return Diagnostic("bad-plan", message, p.span, p.name, hint)
        if p.kind not in PLAN_KEYS:
            yield bad(f".plan {p.kind} is not a kind of plan",
                      "write .plan relation NAME(...), .plan rule LABEL(...), .plan statistics NAME(...) or "
                      ".plan op NAME(op=...)")
        elif p.kind in ("relation", "statistics") and p.name not in relations:
            yield bad(f".plan names relation {p.name}, which the program does not use", "check the name")
        elif p.kind == "rule" and p.name not in rules:
            yield bad(f".plan names rule {p.name}, which the program does not have", "check the rule label")
        elif p.kind == "op":
            yield from _check_plan_op(p, bad, program)
            continue
        for key, value in p.params:
            value = str(value)
            if p.kind == "relation" and key not in PLAN_KEYS["relation"]:
                yield bad(f"unknown .plan relation key {key}", f"keys: {', '.join(PLAN_KEYS['relation'])}")
            elif p.kind == "relation" and key in allowed and value not in allowed[key]:
                yield bad(f"{key}={value} is not one of {', '.join(allowed[key])}", "write one of those")
            elif p.kind == "relation" and key == "partition" and not all(c.isdigit() for c in value.split(",")):
                yield bad(f"partition={value} is not a list of column positions", 'write e.g. partition="0,2"')
            elif p.kind == "relation" and key == "local_iterations" and not (value.isdigit() and int(value) > 0):
                yield bad(f"local_iterations={value} is not a positive whole number",
                          "write e.g. local_iterations=16: the iterations a partition runs between exchanges")
            elif p.kind == "statistics":
                if statistic_key(key) is None:
                    yield bad(f"unknown .plan statistics key {key}",
                              "keys: rows, and per column K distinctK, minK, maxK, nullsK (e.g. distinct0=10)")
                elif not re.fullmatch(r"-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", value):
                    yield bad(f"{key}={value} is not a number", "write a number, e.g. rows=1000")
            elif p.kind == "rule":
                pos = key[4:]
                rule = rules.get(p.name)
                copy = key.startswith("copy")
                if not (key.startswith(("join", "copy")) and pos.isdigit()):
                    yield bad(f"unknown .plan rule key {key}", "write joinK=METHOD for the atom at body position K, "
                              f"or copyK=COLUMN|{WHOLE} for what a partition in rounds holds of it")
                elif copy and not (value.isdigit() or value == WHOLE):
                    yield bad(f"{key}={value} is neither a column position nor {WHOLE}",
                              f"write e.g. {key}=0 (its copies partitioned on column #0) or {key}={WHOLE}")
                elif not copy and value not in JOIN_METHODS:
                    yield bad(f"{value} is not a join method", f"methods: {', '.join(JOIN_METHODS)}")
                elif rule is not None and not (0 < int(pos) <= len(rule.body)
                                               and isinstance(rule.body[int(pos) - 1], Atom)):
                    yield bad(f"rule {p.name} has no atom at body position {pos}", "count body terms from 1")


def _check_plan_op(p, bad, program) -> Iterator[Diagnostic]:
    """`.plan op NAME(op=OP, in0=A, in1=B, ...)`: a known operator whose inputs are operators."""
    from .flow import OPERATORS
    from .syntax import PLAN_KEYS, Plan

    params = dict((k, str(v)) for k, v in p.params)
    names = {q.name for q in program.of(Plan) if q.kind == "op"}
    for key in params:
        if key not in PLAN_KEYS["op"]:
            yield bad(f"unknown .plan op key {key}", f"keys: {', '.join(PLAN_KEYS['op'])}")
    if params.get("op") not in OPERATORS:
        yield bad(f".plan op {p.name} has operator {params.get('op')!r}, which is not one",
                  f"operators: {', '.join(OPERATORS)}")
    for key in ("in0", "in1"):
        if key in params and params[key] not in names:
            yield bad(f".plan op {p.name} reads {params[key]}, which no .plan op names", "check the name")
    if params.get("graph", "planned") not in ("planned", "extracted"):
        yield bad(f"graph={params['graph']} is not planned or extracted", "write one of those")


def qualifier_notes(program: Program) -> list:
    """Notes (`--verbose`) on the `.decl` qualifiers that are hints without effect here."""
    out = []
    for d in program.of(Declaration):
        hints = [q for q in d.qualifiers if q != "inline"]
        if hints:
            out.append(Diagnostic("qualifier", f"{d.relation}: {', '.join(hints)} accepted as "
                                  f"{'hints' if len(hints) > 1 else 'a hint'} without effect", d.span,
                                  d.relation, "Evita chooses storage and magic sets itself (docs/language.md)",
                                  severity="note"))
    from .parser import DEPRECATED_TYPE, PRAGMA, SOUFFLE_PLAN

    text = program.text or ""
    for pattern, code, hint in (
            (PRAGMA, "pragma", "pragmas set Soufflé's own command-line options; Evita's are its command's "
                               "(evita run --help)"),
            (SOUFFLE_PLAN, "plan", "Evita's join order is the system_r stage's choice (evita explain --stage "
                                   "system_r shows it)"),
            (DEPRECATED_TYPE, "type", "Soufflé's deprecated spelling (it warns too); write the `<: symbol`")):
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            said = m.group().split("//")[0].strip()
            what = (f"{said} read as `{said} <: symbol`" if code == "type" else f"{said} accepted without effect")
            out.append(Diagnostic(code, what, Span(program.path, line, col), said, hint, severity="note"))
    return sorted(out, key=lambda d: (d.span.line, d.span.col)) if text else out


def check_strata(program: Program) -> list:
    """Stratified negation and aggregation, one aggregate shape per relation (`strata.py`)."""
    from . import strata

    return strata.diagnose(program)


def check_dedalus(program: Program) -> list:
    """Dedalus time: where rules derive, one component per relation, tick() and now()
    (`dedalus_checks.py`)."""
    from .dedalus_checks import check_dedalus as dedalus

    return dedalus(program)


def check_choice(program: Program) -> Iterator[Diagnostic]:
    """A relation with a choice-domain keeps the tuples it chose (docs/language.md,
    "choice-domain"): it cannot also drop them by subsumption, nor hold what a head
    aggregate computes (one tuple per group, replaced as it improves)."""
    subsumed = {dict(p.params).get("made_for") for p in program.of(Plan)
                if p.kind == "relation" and dict(p.params).get("role") == "dominated"}
    aggregated = {r.head.relation for r in program.rules if any(isinstance(a, Aggregate) for a in r.head.args)}
    for d in program.of(Declaration):
        if not d.choice:
            continue
        if d.relation in subsumed:
            yield Diagnostic("choice-domain", f"{d.relation} has a choice-domain and a subsumptive rule: a chosen "
                             "tuple is never replaced, a dominated one is removed", d.span, d.relation,
                             "keep one of them: choose with the choice-domain, or prune with <=")
        if d.relation in aggregated:
            yield Diagnostic("choice-domain", f"{d.relation} has a choice-domain and a rule with an aggregate in its "
                             "head", d.span, d.relation,
                             "aggregate into another relation and choose from it: r(x, y) :- counted(x, y).")


CHECKS = (check_duplicates, check_declared, check_arity, check_safety, check_functions,
          check_aggregates, check_facts, check_numbers, check_types, check_fact_types, check_plans, check_strata,
          check_dedalus, check_choice)
