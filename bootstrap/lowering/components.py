"""Soufflé components: `.comp` templates, `.init` instances, inheritance, type parameters
and `.override`, expanded into plain statements before the catalog (which never sees a
component).

An instance `.init g = Graph<number>` is a copy of the component's statements, those of
its bases first, in which every relation and type the component declares (its bases' and
those of the instances nested in it included) is renamed `g.NAME`. Type parameters are
replaced by the instance's arguments in declarations (and in base and component names, as
Soufflé allows). A name the component does not declare is left as written: it refers to
the enclosing scope, so a component may add rules to a global relation. Rule labels get
the instance as a prefix too (`g_rule3`), so two instances never share a label.
`.override R` in a component drops the rules and facts its bases give R.

>>> from evita.bootstrap.parser import parse_program
>>> from evita.catalog.printer import format_program
>>> p = parse_program('.comp Pair<T> {\\n .decl r(x: T)\\n r(1).\\n .output r\\n}\\n'
...                   '.init g = Pair<number>\\n.init h = Pair<float>', "t.dl")
>>> print(format_program(p))
.decl g.r(x: number)
g.r(1).
.output g.r
.decl h.r(x: float)
h.r(1).
.output h.r
<BLANKLINE>
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from typing import Optional

from ..diagnostics import Diagnostic, EvitaError
from ..syntax import (
    Atom, CompDecl, CompInit, CompType, Declaration, Fact, IODirective, Materialize, Override, Plan,
    ListExpr, Query, Rule, TypeDecl, map_literal, map_subterms,
)

__all__ = ["expand_components"]


def expand_components(statements: list, source: str = "", path: str = "") -> list:
    """`statements` with every `.init` replaced by its instance and the `.comp`s gone.
    Raises `EvitaError` for an unknown component, a wrong number of type arguments,
    recursive inheritance or instantiation, an `.override` of a relation no base
    declares, and an instance name used twice in one scope."""
    if not any(isinstance(s, (CompDecl, CompInit, Override)) for s in statements):
        return statements
    expander = _Expander()
    out = expander.body(statements, _Scope.of(statements, None, expander), {}, ())
    if expander.diagnostics:  # a component expanded twice reports its mistakes once
        raise EvitaError(list(dict.fromkeys(expander.diagnostics)), source=source, source_file=path or None)
    return out


@dataclass
class _Scope:
    """The components visible where a statement stands: those declared beside it, then
    those of the enclosing scopes."""
    components: dict  # name -> CompDecl
    parent: Optional["_Scope"]

    @staticmethod
    def of(statements, parent, expander) -> "_Scope":
        found: dict = {}
        for s in statements:
            if isinstance(s, CompDecl):
                if s.type.name in found:
                    expander.error("duplicate-component", f"component {s.type.name} is declared twice (first at "
                                   f"{found[s.type.name].span})", s.type.span, s.type.name,
                                   "give each component its own name")
                    continue
                found[s.type.name] = s
        return _Scope(found, parent)

    def lookup(self, name: str):
        """(the component, the scope it was declared in), or (None, None)."""
        scope = self
        while scope is not None:
            if name in scope.components:
                return scope.components[name], scope
            scope = scope.parent
        return None, None

    def names(self) -> list:
        out: list = []
        scope = self
        while scope is not None:
            out += [n for n in scope.components if n not in out]
            scope = scope.parent
        return sorted(out)


class _Expander:
    def __init__(self):
        self.diagnostics: list = []

    def error(self, code, message, span, text="", hint=""):
        self.diagnostics.append(Diagnostic(code, message, span, text, hint))

    def body(self, statements, scope: _Scope, binding: dict, chain: tuple, overridden=frozenset(),
             instances: Optional[dict] = None) -> list:
        """The statements of one scope (the program, or one component's own body), in
        order: instances expanded in place, declarations with the type parameters bound,
        and the rules and facts of an overridden relation left out. `instances` holds the
        instance names already taken in the scope (a base's among them)."""
        out: list = []
        instances = {} if instances is None else instances
        # The helper relations of an overridden rule's aggregates (`L_agg1`, `L_agg1_all`,
        # `L_agg1_agg1` of a nested one, ..., see aggregates.py) go with it. The rules that make
        # an `eqrel` relation one stay: they are its kind, not rules the component gave it.
        def overridden_rule(s) -> bool:
            return isinstance(s, (Rule, Fact)) and _head(s).relation in overridden and \
                not (isinstance(s, Rule) and _EQREL_RULE.fullmatch(s.name))
        dropped = [s.name for s in statements if isinstance(s, Rule) and overridden_rule(s)]
        helpers = re.compile("|".join(re.escape(d) + r"(?:_agg[0-9]+(?:_dom|_all|_unit)?)+" for d in dropped)) \
            if dropped else None

        def helper(relation: str) -> bool:
            return helpers is not None and helpers.fullmatch(relation) is not None
        for s in statements:
            if isinstance(s, CompDecl):
                continue
            if isinstance(s, Override):
                if scope.parent is None:  # at the program's top level
                    self.error("override", f".override {s.relation} stands outside any component", s.span,
                               s.relation, "write .override inside a .comp that inherits the relation")
                continue
            if isinstance(s, CompInit):
                if s.instance in instances:
                    self.error("duplicate-instance", f"instance {s.instance} is already defined at "
                               f"{instances[s.instance].span}", s.name_span, s.instance,
                               "give each .init its own instance name")
                    continue
                instances[s.instance] = s
                out += self.instance(s, scope, binding, chain)
            elif overridden_rule(s) or isinstance(s, (Rule, Fact)) and helper(_head(s).relation):
                continue
            elif isinstance(s, Declaration) and helper(s.relation):
                continue
            elif isinstance(s, Declaration):
                out.append(replace(s, columns=tuple(replace(c, type=binding.get(c.type, c.type))
                                                    for c in s.columns)))
            elif isinstance(s, TypeDecl):
                out.append(replace(s, bases=tuple(binding.get(b, b) for b in s.bases)))
            else:
                out.append(s)
        return out

    def resolve(self, ref: CompType, scope: _Scope, binding: dict, chain: tuple, what: str):
        """The component `ref` names (a type parameter stands for its argument), with the
        scope it was declared in and the binding of its parameters; None if it is
        unknown, takes other arguments, or is already being expanded (a cycle)."""
        name = binding.get(ref.name, ref.name)
        decl, where = scope.lookup(name)
        if decl is None:
            known = scope.names()
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"declare it with .comp {name} {{ ... }}" + \
                (f"; the components visible here are {', '.join(known)}" if known else "")
            self.error("unknown-component", f"{what} names component {name}, which is not declared", ref.span,
                       ref.name, hint)
            return None
        if len(ref.args) != len(decl.type.args):
            expected = _spelled(decl.type)
            self.error("component-arity", f"component {name} takes {_count(len(decl.type.args))}, "
                       f"not {len(ref.args)}", ref.span, _spelled(ref),
                       f"give one type argument per parameter of .comp {expected} (at {decl.span})"
                       if decl.type.args else f"write {name} alone: .comp {name} at {decl.span} has no parameters")
            return None
        if name in chain:
            cycle = " -> ".join(chain[chain.index(name):] + (name,))
            self.error("recursive-component", f"component {name} contains itself ({cycle})", ref.span, ref.name,
                       "a component may not inherit from or instantiate itself, directly or through others")
            return None
        args = tuple(binding.get(a, a) for a in ref.args)
        return decl, where, dict(zip(decl.type.args, args))

    def instance(self, init: CompInit, scope: _Scope, binding: dict, chain: tuple) -> list:
        found = self.resolve(init.type, scope, binding, chain, f".init {init.instance}")
        if found is None:
            return []
        decl, where, inner = found
        return _renamed(self.content(decl, where, inner, chain + (decl.type.name,), frozenset()), init.instance)

    def content(self, decl: CompDecl, where: _Scope, binding: dict, chain: tuple, overridden,
                instances: Optional[dict] = None) -> list:
        """What an instance of `decl` holds before renaming: its bases' content (without
        the rules of relations overridden here or below), then its own body."""
        own = frozenset(s.relation for s in decl.body if isinstance(s, Override))
        instances = {} if instances is None else instances  # one namespace with the bases'
        out: list = []
        for base in decl.bases:
            found = self.resolve(base, where, binding, chain, f"component {decl.type.name}")
            if found is None:
                continue
            bdecl, bwhere, bbinding = found
            out += self.content(bdecl, bwhere, bbinding, chain + (bdecl.type.name,), overridden | own, instances)
        inherited = {s.relation: s for s in out if isinstance(s, Declaration)}
        for s in decl.body:
            if isinstance(s, Override):
                self._check_override(s, decl, inherited)
        scope = _Scope.of(decl.body, where, self)
        return out + self.body(decl.body, scope, binding, chain, overridden, instances)

    def _check_override(self, o: Override, decl: CompDecl, inherited: dict):
        d = inherited.get(o.relation)
        if d is None:
            bases = ", ".join(b.name for b in decl.bases)
            self.error("override", f"component {decl.type.name} overrides {o.relation}, which "
                       + (f"no base component ({bases}) declares" if bases else "it does not inherit: it has no base"),
                       o.span, o.relation, "override only a relation a base component declares; "
                       "a relation of its own is simply declared")
        elif "overridable" not in d.qualifiers:
            self.error("override", f"{o.relation} is not overridable", o.span, o.relation,
                       f"add the qualifier overridable to its declaration at {d.span}")


# The labels `equivalence_rules` (eqrel.py) gives the rules of an `eqrel` relation.
_EQREL_RULE = re.compile(r"eqrel_\w+_(?:reflexive|symmetric|transitive)")


def _head(s) -> Atom:
    return s.head if isinstance(s, Rule) else s.atom


def _spelled(t: CompType) -> str:
    return t.name + (f"<{', '.join(t.args)}>" if t.args else "")


def _count(n: int) -> str:
    return "no type arguments" if n == 0 else "1 type argument" if n == 1 else f"{n} type arguments"


def _renamed(statements: list, instance: str) -> list:
    """The statements of instance `instance`: each relation and type they declare, and
    each use of one, prefixed `instance.`; labels prefixed `instance_`."""
    relations = {s.relation for s in statements if isinstance(s, Declaration)}
    types = {s.name for s in statements if isinstance(s, TypeDecl)}
    # the ADT branches declared here: `$B` in the instance is `$instance.B` (Soufflé's
    # qualified constructor, as a type is `instance.T`), so two instances' branches differ
    branches = {f[1:] for s in statements if isinstance(s, TypeDecl) and s.kind == "adt"
                for f in s.fields if f.startswith("$")}

    def term(t):
        if isinstance(t, ListExpr) and t.branch in branches:
            t = replace(t, branch=f"{instance}.{t.branch}")
        return map_subterms(t, term)

    def terms(lit):
        return map_literal(lit, term) if branches else lit

    def rel(name: str) -> str:
        return f"{instance}.{name}" if name in relations else name

    def typ(name: str) -> str:
        return f"{instance}.{name}" if name in types else name

    def atom(a):
        return replace(terms(a), relation=rel(a.relation)) if isinstance(a, Atom) else terms(a)

    out: list = []
    for s in statements:
        if isinstance(s, Declaration):
            s = replace(s, relation=rel(s.relation),
                        columns=tuple(replace(c, type=typ(c.type)) for c in s.columns))
        elif isinstance(s, TypeDecl):
            s = replace(s, name=typ(s.name), bases=tuple(typ(b) for b in s.bases),
                        fields=tuple(f"${instance}.{f[1:]}" if s.kind == "adt" and f.startswith("$") else f
                                     for f in s.fields))
        elif isinstance(s, Rule):
            s = replace(s, name=f"{instance}_{s.name}", head=atom(s.head), body=tuple(atom(b) for b in s.body))
        elif isinstance(s, (Fact, Query)):
            s = replace(s, atom=atom(s.atom))
        elif isinstance(s, (IODirective, Materialize)):
            s = replace(s, relation=rel(s.relation))
        elif isinstance(s, Plan):
            s = replace(s, name=rel(s.name) if s.kind != "rule" else f"{instance}_{s.name}")
        out.append(s)
    return out

