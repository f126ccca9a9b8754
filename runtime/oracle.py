"""A tiny reference evaluator, used only as a test oracle for the Spark runtime.

Independent of the planner and the runtime on purpose: it reads the syntax tree,
stratifies by repeated relaxation, and evaluates each stratum naively (every rule over
everything, until nothing changes) with nested loops over Python tuples. Slow, short,
and easy to believe.

Semantics it pins down (the runtime must agree):
- set semantics; negation succeeds when no tuple matches (variables only in the negated
  atom are existential);
- head aggregates range over body valuations: each distinct combination of matching
  tuples counts once; count<*> counts them, set<X> is the sorted distinct list,
  list<X> the sorted list; all rules of an aggregated relation feed one grouping;
  seal<X> is no aggregate here: X's value (a sealed batch lands whole, and all at once);
- min/max inside recursion follow PreM: the constraint is applied after every step;
- `delete` rules remove their tuples after the fixpoint (deferred deletion);
- subsumption (a helper relation with `.plan relation D(role=dominated, made_for=R)`,
  `bootstrap/lowering/subsumption.py`): D's rules, over the database as it stands, name
  the tuples of R to remove, at the start of R's stratum and after every round; they all
  go at once;
- `choice-domain` (a `.decl`'s `choice`): a relation with one is evaluated with its SCC
  alone, after everything it reads; its start (its facts and inputs, and the rules of
  its SCC that read no relation of the SCC) and then each naive round offer candidates,
  walked in ascending order: one enters when no tuple held or entered before it agrees
  with it on a domain's columns. Naive rounds offer the same candidates a semi-naive
  round does, less ones already turned away, which stay turned away;
- `to_number`, `to_unsigned`, `to_float` of text that spells no number: the valuation
  derives nothing (Soufflé stops with an error);
- `x = range(a, b[, step])` binds x once per value (`bootstrap/ranges.py`);
- `/` is division as Spark does it (always fractional) in Overlog; in a Soufflé program
  `/` on two whole numbers truncates toward zero, and by zero derives nothing;
  `%` takes the dividend's sign;
- an unsigned value (one in a column of an unsigned kind, or made by `to_unsigned`, or
  computed from one) is held as its bit pattern at the program's width, and compared,
  divided and taken the least or greatest of as its value modulo 2^width (`_Unsigned`,
  a tag on the value itself: not the planner's types).
Primary-key replacement is not modelled (it depends on evaluation order).
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import replace

from evita.bootstrap import builtins as B
from evita.bootstrap import ranges
from evita.bootstrap import syntax as S


class Unstratifiable(Exception):
    pass


class NoValue(Exception):
    """A Soufflé whole-number division by zero: the valuation derives nothing."""


def evaluate(program: S.Program, inputs: dict | None = None, max_rounds: int = 10_000) -> dict:
    """relation -> set of tuples (lists as tuples)."""
    _DIALECT[0] = program.dialect
    _BITS[0] = program.number_bits
    _UNSIGNED_COLUMNS.clear()
    _UNSIGNED_COLUMNS.update(_unsigned_columns(program))
    db: dict = defaultdict(set)
    for f in program.facts:
        db[f.atom.relation].add(_held(f.atom.relation, tuple(_const(a) for a in f.atom.args)))
    for rel, rows in (inputs or {}).items():
        db[rel] |= {_held(rel, tuple(r)) for r in rows}
    rules = [r for r in program.rules if r.time != "next"]
    pruning = _pruning(program)
    dominating = [r for r in rules if r.head.relation in pruning]
    rules = [r for r in rules if r.head.relation not in pruning]
    # what a relation's subsumption reads comes before it: its rules, read as R's
    strata = _stratify(rules + [replace(r, head=replace(r.head, relation=pruning[r.head.relation]))
                                for r in dominating])
    deletions: dict = defaultdict(set)
    choice = _choice(program)
    for rel, domains in choice.items():  # filled by facts or inputs only: chosen among once
        if rel not in strata:
            db[rel] = _choose(domains, set(), db.get(rel, set()))
    for level in sorted(set(strata.values())):
        rs = [r for r in rules if strata[_head(r)] == level]
        pruned = {rel: [r for r in dominating if pruning[r.head.relation] == rel]
                  for rel in set(pruning.values()) if strata.get(rel) == level}
        if not any(_head(r) in choice for r in rs):
            _fixpoint(rs, db, deletions, max_rounds, pruned)
            continue
        for scc in _sccs(rs, dominating, pruning):  # candidates arrive as the SCCs complete
            _fixpoint([r for r in rs if _head(r) in scc], db, deletions, max_rounds,
                      {rel: rs_ for rel, rs_ in pruned.items() if rel in scc}, choice)
    for rel, gone in deletions.items():
        db[rel] -= gone
    return dict(db)


def _head(r: S.Rule) -> str:
    return r.head.relation + ("#delete" if r.delete else "")


def _aggs(r: S.Rule) -> list:
    # seal<X> aggregates nothing: a sealed column holds its value (the batch arrives whole,
    # and the oracle has no time: every message lands at once)
    return [(i, a) for i, a in enumerate(r.head.args) if isinstance(a, S.Aggregate) and a.func != "seal"]


def _stratify(rules: list) -> dict:
    heads = {_head(r) for r in rules}
    feeds = {h: set() for h in heads}  # h -> relations h reads
    for r in rules:
        feeds[_head(r)] |= {l.relation for l in r.body if isinstance(l, S.Atom) and l.relation in heads}
    reach = {h: set(f) for h, f in feeds.items()}
    for k in heads:  # transitive closure (Warshall)
        for i in heads:
            if k in reach[i]:
                reach[i] |= reach[k]

    def same_scc(a, b):
        return a == b and a in reach[a] or (b in reach[a] and a in reach[b])

    level = {h: 0 for h in heads}
    for _ in range(len(heads) + 2):
        changed = False
        for r in rules:
            h = _head(r)
            aggs = [a.func for _, a in _aggs(r)]
            for lit in r.body:
                if isinstance(lit, S.Atom) and lit.relation in heads:
                    # min/max may stay inside recursion (PreM); any other edge through an
                    # aggregate or a negation must go up a stratum
                    premappable = aggs and all(f in ("min", "max", "autoinc") for f in aggs) and same_scc(h, lit.relation)
                    strict = lit.negated or (aggs and not premappable)
                    need = level[lit.relation] + (1 if strict else 0)
                    if level[h] < need:
                        level[h] = need
                        changed = True
        if not changed:
            return level
    raise Unstratifiable("no stratification")


def _pruning(program: S.Program) -> dict:
    """Subsumption's helper relations -> the relation each prunes."""
    out = {}
    for p in program.of(S.Plan):
        params = dict(p.params)
        if p.kind == "relation" and params.get("role") == "dominated":
            out[p.name] = params["made_for"]
    return out


def _prune(pruned: dict, db: dict) -> None:
    """Remove the dominated tuples, every relation's judged before any goes."""
    gone = {rel: {row for r in rs for row in _rule_rows(r, db)} for rel, rs in pruned.items()}
    for rel, rows in gone.items():
        db[rel] = db.get(rel, set()) - rows


def _choice(program: S.Program) -> dict:
    """relation -> its choice domains (column positions), those over every column left out."""
    out = {}
    for d in program.of(S.Declaration):
        domains = [tuple(c) for c in d.choice if len(c) < len(d.columns)]
        if domains:
            out[d.relation] = domains
    return out


def _choose(domains: list, held: set, candidates) -> set:
    """`held` and, walking `candidates` in ascending order, each that agrees with no tuple
    held or taken before it on any domain's columns."""
    taken = [{tuple(t[i] for i in d) for t in held} for d in domains]
    out = set(held)
    for t in sorted(set(candidates) - held):
        keys = [tuple(t[i] for i in d) for d in domains]
        if not any(k in seen for k, seen in zip(keys, taken)):
            out.add(t)
            for k, seen in zip(keys, taken):
                seen.add(k)
    return out


def _sccs(rules: list, dominating: list, pruning: dict) -> list:
    """The heads of `rules` in strongly connected components, each after those it reads
    (a subsumption's rules read as their relation's)."""
    heads = {_head(r) for r in rules}
    reads = {h: set() for h in heads}
    for r in rules + dominating:
        h = pruning.get(r.head.relation, _head(r))
        if h in reads:
            reads[h] |= {l.relation for l in r.body if isinstance(l, S.Atom) and l.relation in heads}
    reach = {h: set(f) for h, f in reads.items()}
    for k in heads:  # transitive closure (Warshall)
        for i in heads:
            if k in reach[i]:
                reach[i] |= reach[k]
    out, done = [], set()
    while len(done) < len(heads):
        for h in sorted(heads - done):
            scc = {h} | {g for g in reach[h] if h in reach[g]}
            if reach[h] - scc <= done:
                out.append(scc)
                done |= scc
                break
    return out


def _start(by_head: dict, db: dict, choice: dict) -> None:
    """A stratum's start, as the runtime has it: the rules that read none of its relations
    run once, before any round; a relation with a choice-domain chooses among them and
    its facts and inputs."""
    here = set(by_head)
    for h, rs in by_head.items():
        once = [r for r in rs if not any(isinstance(l, S.Atom) and l.relation in here for l in r.body)]
        rows = {row for r in once for row in _rule_rows(r, db)}
        if h in choice:
            db[h] = _choose(choice[h], set(), db.get(h, set()) | rows)
        elif not any(_aggs(r) for r in rs) and not h.endswith("#delete"):
            db[h] = db.get(h, set()) | rows


def _fixpoint(rules: list, db: dict, deletions: dict, max_rounds: int, pruned: dict | None = None,
              choice: dict | None = None):
    pruned = pruned or {}
    by_head = defaultdict(list)
    for r in rules:
        by_head[_head(r)].append(r)
    if choice:
        _start(by_head, db, choice)
    _prune(pruned, db)
    for _ in range(max_rounds):
        before = {rel: set(db.get(rel, set())) for rel in pruned}
        derived = {}
        for h, rs in by_head.items():
            rows: list = []
            agg = next((_aggs(r) for r in rs if _aggs(r)), [])
            for r in rs:
                rows.extend(_rule_rows(r, db))
            derived[h] = _aggregate(rows, agg, db.get(h, set()) if agg else None) if agg else set(rows)
        changed = False
        for h, rows in derived.items():
            if h.endswith("#delete"):
                if not rows <= deletions[h[:-7]]:
                    deletions[h[:-7]] |= rows
                    changed = True
                continue
            old = db.get(h, set())
            agg = next((_aggs(r) for r in by_head[h] if _aggs(r)), [])
            new = rows if agg else _choose(choice[h], old, rows) if choice and h in choice else old | rows
            if new != old:
                db[h] = new
                changed = changed or h not in pruned  # a pruned relation: judged after pruning
        _prune(pruned, db)
        changed = changed or any(db.get(rel, set()) != was for rel, was in before.items())
        if not changed:
            return
    raise RuntimeError("oracle: no fixpoint")


def _aggregate(rows: list, agg: list, old: set) -> set:
    """Group body valuations; for min/max the old tuples take part too (PreM keeps the best)."""
    positions = {i for i, _ in agg}
    funcs = dict((i, a.func) for i, a in agg)
    if "autoinc" in funcs.values():
        return _numbered(rows, next(iter(positions)), old)
    groups: dict = defaultdict(list)
    for row in rows:
        groups[tuple(v for i, v in enumerate(row) if i not in positions)].append(row)
    if all(f in ("min", "max") for f in funcs.values()):
        for row in old:
            groups[tuple(v for i, v in enumerate(row) if i not in positions)].append(row)
    out = set()
    for key, members in groups.items():
        it = iter(key)
        row = []
        for i in range(len(members[0])):
            if i in positions:
                vals = [m[i] for m in members]
                row.append(_agg(funcs[i], vals))
            else:
                row.append(next(it))
        out.add(tuple(row))
    return out


def _numbered(rows: list, column: int, old: set) -> set:
    """autoinc<*>: the groups `old` lacks, numbered after its tuples in ascending order;
    old groups keep their numbers."""
    def key(row):
        return tuple(v for i, v in enumerate(row) if i != column)

    known = {key(row) for row in old}
    fresh = sorted({key(row) for row in rows} - known)
    out = set(old)
    for n, k in enumerate(fresh, start=len(old)):
        out.add(k[:column] + (n,) + k[column:])
    return out


def _agg(func, vals):
    present = [v for v in vals if v is not None]
    if func == "count":
        return len(present)
    if func == "sum":
        return _whole(sum(present)) if present else None
    if func == "min":
        return min(present) if present else None
    if func == "max":
        return max(present) if present else None
    if func == "avg":
        return float(sum(present)) / len(present) if present else None
    if func == "set":
        return tuple(sorted(set(present)))
    if func == "list":
        return tuple(sorted(present))
    raise ValueError(func)


def _rule_rows(rule: S.Rule, db: dict) -> list:
    """The head tuple for every valuation of the body (aggregated columns: the input value)."""
    out = []
    positive = [l for l in rule.body if isinstance(l, S.Atom) and not l.negated]
    others = [l for l in rule.body if not (isinstance(l, S.Atom) and not l.negated)]

    def rest(env, pending):
        # apply every literal that is ready; fail fast
        progress = True
        pending = list(pending)
        while progress:
            progress = False
            for l in list(pending):
                if isinstance(l, S.Assign) and ranges.is_range(l.expr):
                    continue  # several values: `search` branches on it
                if isinstance(l, S.Assign):
                    if set(S.term_vars(l.expr)) <= env.keys():
                        v = _eval(l.expr, env)
                        if l.var.name in env:
                            if env[l.var.name] != v:
                                return None, pending
                        else:
                            env[l.var.name] = v
                        pending.remove(l)
                        progress = True
                elif isinstance(l, S.Select):
                    if set(S.term_vars(l.expr)) <= env.keys():
                        if _eval(l.expr, env) is not True:
                            return None, pending
                        pending.remove(l)
                        progress = True
        return env, pending

    def search(i, env, pending):
        try:
            valuation(i, env, pending)
        except NoValue:
            return

    def valuation(i, env, pending):
        env, pending = rest(dict(env), pending)
        if env is None:
            return
        generator = next((l for l in pending if isinstance(l, S.Assign) and ranges.is_range(l.expr)
                          and set(S.term_vars(l.expr)) <= env.keys()), None)
        if generator is not None:  # x = range(...): the rest once per value
            left = [l for l in pending if l is not generator]
            name = generator.var.name
            for v in ranges.values(*[_eval(a, env) for a in generator.expr.args]):
                if name not in env:
                    search(i, {**env, name: v}, left)
                elif env[name] == v:
                    search(i, env, left)
            return
        if i == len(positive):
            for l in pending:  # negations; selections whose variables never got bound fail
                if isinstance(l, S.Atom):
                    if any(_match(l.args, t, dict(env)) is not None for t in db.get(l.relation, ())):
                        return
                else:
                    return
            out.append(_held(rule.head.relation, tuple(_head_value(a, env) for a in rule.head.args)))
            return
        atom = positive[i]
        for t in db.get(atom.relation, ()):
            e2 = _match(atom.args, t, dict(env))
            if e2 is not None:
                search(i + 1, e2, pending)

    search(0, {}, others)
    return out


def _head_value(a, env):
    if isinstance(a, S.Aggregate):
        return 1 if a.arg is None else _eval(a.arg, env)
    return _eval(a, env)


def _match(args, t, env):
    if len(args) != len(t):
        return None
    for a, v in zip(args, t):
        if isinstance(a, S.Wildcard):
            continue
        if isinstance(a, S.Var):
            if a.name in env:
                if env[a.name] is None or env[a.name] != v or v is None:
                    return None
            else:
                env[a.name] = v
        else:
            if not set(S.term_vars(a)) <= env.keys():
                return None
            w = _eval(a, env)
            if w is None or w != v:
                return None
    return env


def _const(t):
    if isinstance(t, S.Const):
        return math.inf if t.type == S.INFINITY else _whole(t.value)
    if isinstance(t, S.ListExpr):
        return tuple(_const(a) for a in t.items)
    if isinstance(t, S.UnOp) and t.op == "-":
        return -_const(t.arg)
    raise ValueError(t)


# Whether `/` is Soufflé's whole-number division: the program is Soufflé's (set by
# `evaluate`) and both values are whole numbers. Decided on the values, not the planner's
# types, so that the two are checked against each other.
_DIALECT = ["overlog"]


# The width of whole numbers (`Program.number_bits`, set by `evaluate`): every whole
# result wraps around at it, as Soufflé's does (two's complement), decided on the values.
_BITS = [64]


def _whole(v):
    """`v` wrapped at the program's width when it is a whole number."""
    if isinstance(v, int) and not isinstance(v, bool):
        bits = _BITS[0]
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >> (bits - 1) else v
    return v


class _Unsigned(int):
    """An unsigned value, held as its bit pattern (two's complement at the width, as every
    backend holds it, so equal to and hashed as that int); ordered, and divided, as the
    value modulo 2^width, as Soufflé's unsigned are."""

    def __lt__(self, other):
        return _unsigned_value(self) < _unsigned_value(other)

    def __le__(self, other):
        return _unsigned_value(self) <= _unsigned_value(other)

    def __gt__(self, other):
        return _unsigned_value(self) > _unsigned_value(other)

    def __ge__(self, other):
        return _unsigned_value(self) >= _unsigned_value(other)


def _unsigned_value(v) -> int:
    return int(v) % (1 << _BITS[0])


def _tagged(result, *operands):
    """A whole result computed from an unsigned operand is unsigned (Soufflé types it so)."""
    if isinstance(result, int) and not isinstance(result, bool) and any(isinstance(o, _Unsigned) for o in operands):
        return _Unsigned(result)
    return result


# relation -> positions of its columns of an unsigned kind (set by `evaluate`)
_UNSIGNED_COLUMNS: dict = {}


def _unsigned_columns(program: S.Program) -> dict:
    from evita.bootstrap.types import TypeSystem

    types = TypeSystem.of(program)
    out: dict = {}
    for d in program.of(S.Declaration):
        positions = {i for i, c in enumerate(d.columns) if types.kind(c.type) == "unsigned"}
        if positions:
            out.setdefault(d.relation, positions)
    return out


def _held(relation: str, row: tuple) -> tuple:
    """A tuple as stored: the whole values of unsigned columns tagged unsigned."""
    positions = _UNSIGNED_COLUMNS.get(relation)
    if not positions:
        return row
    return tuple(_tagged(v, _Unsigned(0)) if i in positions else v for i, v in enumerate(row))


def _souffle_whole(a, b) -> bool:
    return _DIALECT[0] == "souffle" and all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b))


def _eval(t, env):
    if isinstance(t, S.Var):
        return env[t.name]
    if isinstance(t, S.Const):
        return _const(t)
    if isinstance(t, S.ListExpr):
        return tuple(_eval(a, env) for a in t.items)
    if isinstance(t, S.UnOp):
        v = _eval(t.arg, env)
        return None if v is None else (_tagged(_whole(-v), v) if t.op == "-" else not v)
    if isinstance(t, S.Cond):
        return _eval(t.then, env) if _eval(t.test, env) else _eval(t.other, env)
    if isinstance(t, S.BinOp):
        a, b = _eval(t.left, env), _eval(t.right, env)
        if t.op == "&&":
            return bool(a) and bool(b)
        if t.op == "||":
            return bool(a) or bool(b)
        if a is None or b is None:
            return None
        if t.op in ("<", "<=", ">", ">=", "==", "!="):
            return _compared(t.op, a, b)
        return _tagged(_arithmetic(t, a, b), a, b)
    if isinstance(t, S.Call):
        return _call(t, env)
    raise NotImplementedError(f"oracle: term {t!r}")


def _compared(op: str, a, b) -> bool:
    """`_Unsigned`'s own order when either side is unsigned (Python tries a subclass's
    reflected comparison first)."""
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _arithmetic(t: S.BinOp, a, b):
    unsigned = isinstance(a, _Unsigned) or isinstance(b, _Unsigned)
    if t.op in ("/", "%") and unsigned and _souffle_whole(a, b):  # the values modulo 2^width, divided
        if b == 0:
            if t.op == "/":
                raise NoValue(t)
            return None
        x, y = _unsigned_value(a), _unsigned_value(b)
        return _whole(x // y if t.op == "/" else x % y)
    if t.op == "+":
        return _whole(a + b)
    if t.op == "-":
        return _whole(a - b)
    if t.op == "*":
        return _whole(a * b)
    if t.op == "/" and _souffle_whole(a, b):  # C's division, toward zero; by zero: no tuple
        if b == 0:
            raise NoValue(t)
        return _whole((abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1))
    if t.op == "/":
        return None if b == 0 else a / b
    if t.op == "%":
        if b == 0:
            return None
        if isinstance(a, int) and isinstance(b, int):  # Java's sign, exactly (a 64-bit hash is no float)
            return (abs(a) % abs(b)) * (1 if a >= 0 else -1)
        return math.fmod(a, b)
    raise NotImplementedError(f"oracle: operator {t.op}")


def _call(t: S.Call, env):
    name = B.canonical(t.func)
    args = [_eval(a, env) for a in t.args]
    if name == "as":  # Soufflé's cast: the value itself (`5u` is `as(5, unsigned)`: an unsigned one)
        return _tagged(_whole(args[0]), _Unsigned(0)) if args[1] == "unsigned" else args[0]
    if name == "cons":
        return (args[0],) + tuple(args[1]) if isinstance(args[1], tuple) else (args[0], args[1])
    if name == "contains":
        return args[0] in args[1]
    if name == "size":
        return len(args[0])
    if name == "append":
        return tuple(args[0]) + (args[1],)
    if name == "concat":
        return tuple(args[0]) + tuple(args[1])
    if name == "list":
        return tuple(args)
    if name == "cat":  # null in, null out, as in Spark
        return None if any(a is None for a in args) else "".join(_text(a) for a in args)
    if name == "to_string":  # Soufflé: std::to_string, C's %f for a float
        if isinstance(args[0], float) and math.isfinite(args[0]):
            return "%f" % args[0]
        return None if args[0] is None else _text(args[0])
    if name == "strlen":
        return None if args[0] is None else len(args[0])
    if name == "substr":
        return None if args[0] is None else _substr(*args)
    if name == "match":  # Python's re for Java's: the same on the patterns the tests use
        return None if None in args else re.fullmatch(args[0], args[1]) is not None
    if name == "to_unsigned":
        return _tagged(_whole(_to_number(args[0])), _Unsigned(0))
    if name == "to_number":
        return _whole(_to_number(args[0]))
    if name == "to_float":
        return _to_float(args[0])
    if name == "reprefix":
        s, old, new = args
        return s if s is None or not s.startswith(old) else new + s[len(old):]
    if name == "if":
        return args[1] if args[0] else args[2]
    if name == "id":
        return ":".join(_text(a) for a in args)
    if name == "abs":
        return _tagged(_whole(abs(args[0])), *args)
    if name in ("upper", "lower"):
        return None if args[0] is None else getattr(str(args[0]), name)()
    if name == "hash":  # Spark's xxhash64, seed 42 (runtime/xxhash.py)
        from evita.runtime.xxhash import xxhash64

        return xxhash64(*args)
    if name == "log":
        return None if args[0] is None or args[0] <= 0 else math.log(args[0])
    if name == "exp":
        return None if args[0] is None else math.exp(args[0])
    if name in _BITWISE:
        return None if any(a is None for a in args) else _tagged(_BITWISE[name](*args, _BITS[0]), *args)
    if name == "pow":  # Spark's power: always a float
        return None if any(a is None for a in args) else float(args[0]) ** args[1]
    if name == "record":  # a record's canonical text (bootstrap/records.py), with Python's json
        return _record(args[1], args[2:])
    if name == "record_field":
        return _record_field(*args)
    if name == "adt":  # an ADT value's canonical text, {"B":[...]}
        fields = _record(args[2], args[3:])
        return None if fields is None else "{" + json.dumps(args[1]) + ":" + fields + "}"
    if name == "adt_branch":
        return None if args[0] is None else next(iter(json.loads(args[0])))
    if name == "adt_field":
        value, branch, i, kind = args
        if value is None or next(iter(json.loads(value))) != branch:
            return None
        return _record_field(_canonical_json(json.loads(value)[branch]), i, kind)
    if name == "min":  # an unsigned argument orders as unsigned (`_Unsigned`)
        return _tagged(min(args), *args)
    if name == "max":
        return _tagged(max(args), *args)
    raise NotImplementedError(f"oracle: builtin {name}")


def _record(kinds: str, items):
    if any(v is None for v in items):
        return None
    parts = []
    for v, k in zip(items, kinds):
        if k == "r":
            parts.append(v)
        elif k == "s":
            parts.append(json.dumps(v, ensure_ascii=False))
        elif isinstance(v, float):
            parts.append(_java_double(v))
        else:
            parts.append(str(v))
    return "[" + ",".join(parts) + "]"


def _record_field(text, i, kind):
    if text is None or text == "null":
        return None
    value = json.loads(text)[i]
    if kind.startswith(("record", "adt")):
        return _canonical_json(value)
    if value is None:
        return None
    return value if kind == "symbol" else float(value) if kind == "float" else _whole(int(value))


def _canonical_json(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_canonical_json(v) for v in value) + "]"
    if isinstance(value, dict):  # an ADT value: its one branch and its fields
        return "{" + ",".join(json.dumps(k) + ":" + _canonical_json(v) for k, v in value.items()) + "}"
    if isinstance(value, float):
        return _java_double(value)
    return json.dumps(value, ensure_ascii=False)


def _java_double(f: float) -> str:
    from evita.bootstrap.records import java_double

    return java_double(f)


def _substr(s: str, i: int, n: int) -> str:
    """C++'s std::string::substr, as Soufflé calls it: out of range gives ""."""
    if i < 0 or i > len(s):
        return ""
    return s[i:] if n < 0 else s[i:i + n]


def _to_number(v):
    """Soufflé's to_number: text must spell a whole number, or the valuation derives
    nothing (Soufflé stops with an error); floats truncate."""
    if isinstance(v, str):
        from ..bootstrap.builtins import whole_from_text

        n = whole_from_text(v)
        if n is None:
            raise NoValue(v)
        return n
    return None if v is None else int(v)


def _to_float(v):
    """As `_to_number`, for a float."""
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise NoValue(v) from None
    return None if v is None else float(v)


# Soufflé's bitwise and logical functors over whole numbers of `w` bits (the program's
# width); shift distances count modulo the width (the JVM's rule at 64, so Spark's).
_BITWISE = {
    "band": lambda a, b, w: a & b, "bor": lambda a, b, w: a | b, "bxor": lambda a, b, w: a ^ b,
    "bnot": lambda a, w: ~a,
    "bshl": lambda a, b, w: _whole(a << (b % w)), "bshr": lambda a, b, w: a >> (b % w),
    "bshru": lambda a, b, w: _whole((a % (1 << w)) >> (b % w)),
    "land": lambda a, b, w: 1 if a and b else 0, "lor": lambda a, b, w: 1 if a or b else 0,
    "lxor": lambda a, b, w: 1 if bool(a) != bool(b) else 0, "lnot": lambda a, w: 0 if a else 1,
}


def _text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
