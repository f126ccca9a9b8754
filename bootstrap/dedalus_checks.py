"""Well-formedness of Dedalus programs: where a rule derives, who may derive a relation,
and what time a rule may read.

A *Dedalus program* has a rule with `@next` or `@async`, or a `component` block
(/docs/language.md, "Dedalus well-formedness"). `check_dedalus` reads such a program
once and reports every violation at the offending atom or term; a program without time
is only checked for `tick()`, which means nothing there. The errors, one example each:

`async-unlocated`: a message must name where it goes.

    c1 vote(Tx, "yes")@async :- request(@P, Tx).          // vote has no @ argument

`remote-head`: a rule without `@async` derives where its body is read; anything else is
a message. (A body reading two locations is the localize stage's business: no error.)

    c2 vote(@C, Tx) :- request(@P, Tx, C).                // reads at @P, derives at @C

`cross-component`: a relation a rule derives belongs to that rule's component; another
component reaches it only with `@async`.

    component a @ "a:1" { a1 seen(@N, X) :- in(@N, X). }
    component b @ "b:1" { b1 seen(@N, X) :- got(@N, X). } // seen is a's

`time-as-data`: the wall clock (`now()`) makes runs unreproducible, `tick()` is the
timestep of a Dedalus program only, and never a fact's value or a head's location.

    t1 stamp(@N, T)@next :- ev(@N), T := now().           // use tick()
    start(tick()).                                        // a fact has no timestep

`unknown-address`: a program with components locates facts and derivations at
addresses some component has (a fact in a component, at one of that component's).
An `@async` head nobody reads may go anywhere: it leaves the system (a client reply).

    component kv @ "kv:1" { put(@"kv:2", "a", 1). }       // kv:2 is no address

>>> from evita.bootstrap.parser import parse_program
>>> p = parse_program('component a @ "a:1" { r1 out(@N, X)@async :- in(@N, X).\\n'
...                   'r2 seen(@"b:1", X) :- in(@N, X). }', "d.olg")
>>> [(str(d.span), d.code) for d in check_dedalus(p)]
[('d.olg:2:10', 'remote-head'), ('d.olg:2:10', 'unknown-address')]
"""
from __future__ import annotations

from typing import Iterator, Optional

from .builtins import canonical
from .diagnostics import Diagnostic
from .syntax import Assign, Atom, Call, Component, Const, Fact, Program, Query, Rule, Select


def is_dedalus(program: Program) -> bool:
    """A program with time: an `@next` or `@async` rule, or a component."""
    return any(isinstance(s, Component) or (isinstance(s, Rule) and s.time in ("next", "async"))
               for s in program.statements)


def check_dedalus(program: Program) -> list:
    """Every Dedalus well-formedness violation of `program` (the module docstring)."""
    if not is_dedalus(program):
        return [_tick_without_time(call) for call in _calls(program, "tick")]
    components = {c.name: c for c in program.of(Component)}
    addresses = {a for c in components.values() for a in c.addresses}
    read = {lit.relation for r in program.rules for lit in r.body if isinstance(lit, Atom)}
    out: list = []
    derived: dict = {}  # relation -> the rules and facts in components that derive it, in order
    for s in program.statements:
        if isinstance(s, Rule):
            out += _rule(s, components, addresses, read)
            out += _derivation(s.head.relation, s.component, s, derived)
            out += [_wall_clock(c) for c in _rule_calls(s, "now")]
        elif isinstance(s, Fact):
            out += _fact(s, components, addresses)
            out += _derivation(s.atom.relation, s.component, s, derived)
            out += [_wall_clock(c) for c in _term_calls(s.atom.args, "now")]
            out += [tick_in_fact(c, s.atom.relation) for c in _term_calls(s.atom.args, "tick")]
        elif isinstance(s, Query):
            out += [_wall_clock(c) for c in _term_calls(s.atom.args, "now")]
    return out


# ---------------------------------------------------------------- rules: where they derive

def _rule(r: Rule, components: dict, addresses: set, read: set) -> Iterator[Diagnostic]:
    head = r.head
    where = _location(head)
    if r.time == "async" and where is None:
        yield Diagnostic("async-unlocated", f"rule {r.name}: the @async head {head.relation} names no destination",
                         head.span, head.relation,
                         f"name the destination with @: {head.relation}(@Dest, ...)@async")
    ticks = _term_calls([where], "tick") if where is not None else []
    for call in ticks:  # reported once, not again as a remote head
        yield _time_in(call, f"as the @ location of {head.relation}",
                       "tick() is a timestep, not an address: locate the head at a node")
    if r.time != "async" and where is not None and not ticks:
        sources = [_location(lit) for lit in r.body
                   if isinstance(lit, Atom) and not lit.negated and lit.location is not None]
        if sources and all(src == sources[0] for src in sources) and where != sources[0]:
            suffix = "@next" if r.time == "next" else ""
            yield Diagnostic("remote-head", f"rule {r.name}: {head.relation}{suffix} derives at @{_text(where)} "
                             f"from @{_text(sources[0])}: that is a message; write @async",
                             _span(where, head), _text(where),
                             f"a rule without @async derives where its body is read (@{_text(sources[0])}); "
                             f"send with {head.relation}(@{_text(where)}, ...)@async")
    if components and isinstance(where, Const) and where.value not in addresses:
        if r.time == "async" and head.relation not in read:
            return  # a message that leaves the system: a reply to a client
        hint = (f"locate it at one of {_list(addresses)}; only an @async message no rule reads "
                "may leave the system" if r.time != "async" else
                f"rules read {head.relation}, so its messages must reach a component: "
                f"name one of {_list(addresses)}")
        yield Diagnostic("unknown-address", f"rule {r.name}: {head.relation} is located at {_text(where)}, "
                         f"which no component has as an address", _span(where, head), _text(where), hint)


def _fact(f: Fact, components: dict, addresses: set) -> Iterator[Diagnostic]:
    where = _location(f.atom)
    if not components or not isinstance(where, Const):
        return
    own = components.get(f.component)
    if own is not None and where.value not in own.addresses:
        also = " (an address of another component)" if where.value in addresses else ""
        yield Diagnostic("unknown-address", f"fact {f.atom.relation} in component {own.name} is located at "
                         f"{_text(where)}, which is not an address of {own.name}{also}",
                         _span(where, f.atom), _text(where),
                         f"locate it at one of {own.name}'s addresses ({_list(own.addresses)}), "
                         "or write it in the component of its address" if own.addresses else
                         f"give component {own.name} an address: component {own.name} @ {_text(where)} {{ ... }}")
    elif own is None and where.value not in addresses:
        yield Diagnostic("unknown-address", f"fact {f.atom.relation} is located at {_text(where)}, "
                         "which no component has as an address", _span(where, f.atom), _text(where),
                         f"locate it at one of {_list(addresses)}" if addresses else
                         "give a component that address: component NAME @ [...] { ... }")


# ---------------------------------------------------------------- relations: one component each

def _derivation(relation: str, component: Optional[str], s, derived: dict) -> Iterator[Diagnostic]:
    """A relation a rule without @async derives belongs to that rule's component: no
    other component derives it, and other components send into it with @async only.
    Reported at the later of the two statements. Facts of one relation in several
    components are each component's own configuration (decoupling copies them to each
    new address: research/decouple_partition.md, "EDB"), not a clash."""
    if component is None:
        return
    earlier = derived.setdefault(relation, [])
    clash = next((e for e in earlier if e.component != component and (_local_rule(s) or _local_rule(e))), None)
    earlier.append(s)
    if clash is None:
        return
    yield Diagnostic("cross-component", f"{_how(s)} {relation} in component {component}, but {_how(clash)} it "
                     f"in component {clash.component} (at {_atom(clash).span}): a component sends into another "
                     "component's relation only with @async", _atom(s).span, relation,
                     f"derive {relation} in one component and send it from the others with "
                     f"{relation}(@Dest, ...)@async, or give each component's relation its own name")


def _atom(s) -> Atom:
    return s.head if isinstance(s, Rule) else s.atom


def _local_rule(s) -> bool:
    return isinstance(s, Rule) and s.time != "async"


def _how(s) -> str:
    if isinstance(s, Fact):
        return "a fact gives"
    if s.time == "async":
        return f"rule {s.name} sends (@async)"
    return f"rule {s.name} derives" + (" (@next)" if s.time == "next" else "")


# ---------------------------------------------------------------- time as data

def _wall_clock(call: Call) -> Diagnostic:
    return Diagnostic("time-as-data", f"{call.func}() reads the wall clock: runs of a Dedalus program "
                      "would not be reproducible", call.span, call.func,
                      "use tick(), the current timestep of the node")


def _tick_without_time(call: Call) -> Diagnostic:
    return Diagnostic("time-as-data", f"{call.func}() is the timestep of a Dedalus program, but this program "
                      "has no @next, @async or component", call.span, call.func,
                      "give the program time (rules with @next or @async) or compute without tick()")


def tick_in_fact(call: Call, relation: str) -> Diagnostic:
    """tick() in a fact (the parser reports it so, instead of a non-ground fact)."""
    return _time_in(call, f"in fact {relation}", "a fact holds at every timestep and has no timestep of its "
                    "own: derive the value in a rule, e.g. r(T) :- ..., T := tick().")


def _time_in(call: Call, where: str, hint: str) -> Diagnostic:
    return Diagnostic("time-as-data", f"{call.func}() cannot be used {where}", call.span, call.func, hint)


def _calls(program: Program, name: str) -> list:
    out: list = []
    for s in program.statements:
        if isinstance(s, Rule):
            out += _rule_calls(s, name)
        elif isinstance(s, (Fact, Query)):
            out += _term_calls(s.atom.args, name)
    return out


def _rule_calls(r: Rule, name: str) -> list:
    terms = list(r.head.args)
    for lit in r.body:
        if isinstance(lit, Atom):
            terms += lit.args
        elif isinstance(lit, Select):
            terms.append(lit.expr)
        elif isinstance(lit, Assign):
            terms.append(lit.expr)
    return _term_calls(terms, name)


def _term_calls(terms, name: str) -> list:
    """The calls of the built-in `name` (any spelling: now, f_now) in `terms`."""
    return [t for term in terms for t in _walk(term) if isinstance(t, Call) and canonical(t.func) == name]


def _walk(term) -> Iterator:
    yield term
    for attr in ("args", "items"):
        for child in getattr(term, attr, ()) or ():
            yield from _walk(child)
    for attr in ("left", "right", "arg", "test", "then", "other"):
        child = getattr(term, attr, None)
        if child is not None:
            yield from _walk(child)


# ---------------------------------------------------------------- helpers

def _location(atom: Atom):
    return atom.args[atom.location] if atom.location is not None and atom.location < len(atom.args) else None


def _span(term, atom: Atom):
    span = getattr(term, "span", None)
    return span if span is not None and span.line else atom.span


def _text(term) -> str:
    from evita.catalog.printer import format_expr

    try:
        return format_expr(term)
    except TypeError:
        return "?"


def _list(values) -> str:
    return ", ".join(f'"{v}"' for v in sorted(values, key=str)) or "none"
