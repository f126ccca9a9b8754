"""The physical dataflow as catalog rows (tables `flow_op`, `flow_input`; docs/egraph.md).

The planner's `Dataflow` is a set of pipelines; here it becomes a graph of operators in
the vocabulary of seed 004 (Hydroflow): `source` reads a relation, `chain` unions its
inputs, `join` / `antijoin` / `filter` / `map` are a rule's steps, and four operators say
how a stream relates to time: `persist` (every tuple so far), `delta` (this tick's new
tuples), `old` (every tuple before this tick) and `prev` (the previous tick's tuples).
A relation read by several rules is one operator with several consumers, so shared
subflows (the seed's "diamonds") stay shared.

The rows are a function of the dataflow, so `evita plan --flow` prints them and the
`egraph` stage reads them (`sys::flow_op`, `sys::flow_input`). `.plan op NAME(...)`
statements state the same rows in text, for stage cases and the header example.

`run_flow` evaluates such a graph over ticks, the reference semantics the differential
check of the egraph stage runs on (original against extracted dataflow).
"""
from __future__ import annotations

from itertools import product

# operator -> (stateful across ticks, persisted: emits earlier ticks' tuples, the tick it reads)
OPERATORS = {
    "source": (False, False, "now"),
    "chain": (False, False, "now"),
    "join": (False, False, "now"),
    "antijoin": (False, False, "now"),
    "filter": (False, False, "now"),
    "map": (False, False, "now"),
    "iter_delta": (False, False, "now"),
    "recur": (False, False, "now"),
    "persist": (True, True, "all"),
    "delta": (True, False, "now"),
    "old": (True, True, "before"),
    "prev": (True, False, "previous"),
}
MAX_INPUTS = 2  # every operator has at most two inputs: an n-way union is a chain of chains
PLAN_OP_KEYS = ("op", "in0", "in1", "detail", "relation", "rule", "graph")


def properties(op: str) -> dict:
    stateful, persisted, tick = OPERATORS.get(op, (False, False, "now"))
    return {"stateful": stateful, "persisted": persisted, "tick": tick}


def op_row(program: str, name: str, op: str, detail=None, relation=None, rule=None, graph="planned") -> dict:
    return {"program": program, "id": f"{program}:{name}", "name": name, "op": op, "detail": detail or "",
            "relation": relation, "rule": rule, "graph": graph, **properties(op)}


# ------------------------------------------------------------------ the planner's dataflow -> rows

def flow_rows(dataflow, program=None) -> dict:
    """`{"flow_op": [...], "flow_input": [...]}` for a planned `Dataflow`. `program` (the
    decoded `S.Program` the dataflow was planned from) adds the tick operators of a
    Dedalus program: a relation that carries itself into the next timestep unchanged
    (`r(X)@next :- r(X).`) is the `persist` of what its other rules derive, and any other
    `@next` rule feeds its relation through `prev`."""
    from . import syntax as S
    from .planner import _Planner

    pid = dataflow.program
    b = _Builder(pid)
    persisted, next_rules = set(), []
    if program is not None:
        for r in program.rules:
            if r.time == "next" and _is_identity(r):
                persisted.add(r.head.relation)
            elif r.time == "next":
                next_rules.append(r)
    outputs: dict = {}  # relation -> operator names feeding it
    for st in dataflow.strata:
        for rp in (*st.init_rules, *st.delta_rules):
            here = set(st.relations) if st.recursive else set()
            outputs.setdefault(rp.head, []).append(b.pipeline(rp, dataflow, here))
    if next_rules:
        planner = _Planner(program)
        relations = dataflow.relations
        for r in next_rules:
            if r.head.relation not in relations or any(isinstance(l, S.Atom) and l.relation not in relations
                                                       for l in r.body):
                continue
            rp = planner.rule_plan(r, None, relations)
            last = b.pipeline(rp, dataflow, set(), writes=False)  # its prev writes the relation
            outputs.setdefault(r.head.relation, []).append(b.add(f"{rp.name}_next", "prev", inputs=(last,),
                                                                 rule=rp.name))
    stated = {rel for rel, _ in dataflow.facts}
    for name, storage in dataflow.relations.items():
        feeds = outputs.get(name, [])
        # facts, inputs, or a relation no rule writes: read as stored (a persisted relation's
        # stored tuples are its persist, not a source of it)
        if storage.input or name in stated or (storage.kind == "base" and name not in persisted):
            feeds = [b.add(f"src_{name}", "source", relation=name)] + feeds  # facts, inputs: read as stored
        union = b.union(name, feeds, written=name not in persisted)
        if name in persisted and union is not None:
            union = b.add(f"persist_{name}", "persist", inputs=(union,), relation=name)
        if union is not None:
            b.alias(name, union)
    b.resolve()
    return {"flow_op": b.ops, "flow_input": b.inputs}


def _is_identity(r) -> bool:
    from . import syntax as S

    if len(r.body) != 1 or not isinstance(r.body[0], S.Atom) or r.body[0].negated:
        return False
    a = r.body[0]
    names = [x.name if isinstance(x, S.Var) else None for x in r.head.args]
    return (a.relation == r.head.relation and None not in names and len(set(names)) == len(names)
            and names == [x.name if isinstance(x, S.Var) else None for x in a.args])


class _Builder:
    """Operators named after where they come from; a relation's readers point at the
    relation by name until every relation's last operator is known (`resolve`)."""

    def __init__(self, pid):
        self.pid = pid
        self.ops: list = []
        self.inputs: list = []
        self.names: set = set()
        self.aliases: dict = {}  # relation -> operator name that holds it

    def add(self, name, op, inputs=(), detail=None, relation=None, rule=None) -> str:
        assert name not in self.names, name
        self.names.add(name)
        self.ops.append(op_row(self.pid, name, op, detail, relation, rule))
        for seq, i in enumerate(inputs):
            self.inputs.append({"program": self.pid, "op": f"{self.pid}:{name}", "seq": seq, "input": i})
        return name

    def alias(self, relation, op_name):
        self.aliases[relation] = op_name

    def union(self, relation, feeds, written=True):
        """A relation with several producers: a chain of chains (binary, left-deep);
        `written`: the last chain is what the relation holds."""
        if not feeds:
            return None
        acc = feeds[0]
        for k, f in enumerate(feeds[1:], 1):
            last = k == len(feeds) - 1
            acc = self.add(f"rel_{relation}" + ("" if last else f"_{k}"), "chain", inputs=(acc, f),
                           relation=relation if last and written else None)
        return acc

    def pipeline(self, rp, dataflow, recursive: set, writes: bool = True) -> str:
        """A rule's steps as operators. In a recursive stratum a read of the stratum's own
        relations closes a cycle: `iter_delta` (its last iteration's new tuples) or
        `recur` (all of it so far); these are the graph's back edges within a tick."""
        from .syntax import Aggregate
        from ..runtime.dataflow import term_text

        prev = None
        for i, step in enumerate(rp.steps, 1):
            name = f"{rp.name}_{i}"
            if step.op in ("scan", "join", "antijoin"):
                read = ("@rel", step.relation)
                if step.delta:
                    read = self.add(f"{name}_delta", "iter_delta", inputs=(read,), rule=rp.name)
                elif step.relation in recursive:
                    read = self.add(f"{name}_recur", "recur", inputs=(read,), rule=rp.name)
                if prev is None:
                    prev = read
                    continue
                op = "join" if step.op == "join" else "antijoin"
                prev = self.add(name, op, inputs=(prev, read), detail=",".join(step.keys), rule=rp.name)
            else:
                detail = term_text(step.expr) + (f" as {step.var}" if step.var else "")
                prev = self.add(name, "filter" if step.op == "filter" else "map",
                                inputs=(prev,) if prev is not None else (), detail=detail, rule=rp.name)
        head = ", ".join(term_text(a) if not isinstance(a, Aggregate) else f"{a.func}<{term_text(a.arg)}>"
                         if a.arg is not None else f"{a.func}<*>" for a in rp.head_args)
        return self.add(f"{rp.name}_head", "map", inputs=(prev,) if prev is not None else (),
                        detail=f"{rp.head}({head})", relation=rp.head if writes else None, rule=rp.name)

    def resolve(self):
        """Replace `("@rel", R)` inputs by the operator holding R, and ids everywhere."""
        for row in self.inputs:
            i = row["input"]
            if isinstance(i, tuple):
                rel = i[1]
                if rel not in self.aliases:  # read, never derived nor stored: an empty source
                    self.alias(rel, self.add(f"src_{rel}", "source", relation=rel))
                i = self.aliases[rel]
            row["input"] = f"{self.pid}:{i}"


# ------------------------------------------------------------------ text

def flow_text(rows, program_id: str, graph: str = "planned") -> str:
    """The operators of one graph, one per line, inputs by name, in dependency order."""
    ops = {r["id"]: r for r in rows.dicts("flow_op") if r["program"] == program_id
           and (r["graph"] or "planned") == graph} if hasattr(rows, "dicts") else \
        {r["id"]: r for r in rows["flow_op"] if (r["graph"] or "planned") == graph}
    inputs: dict = {}
    for r in (rows.dicts("flow_input") if hasattr(rows, "dicts") else rows["flow_input"]):
        if r["op"] in ops:
            inputs.setdefault(r["op"], []).append((r["seq"], r["input"]))
    name = {i: r["name"] for i, r in ops.items()}
    consumers: dict = {}
    for o, ins in inputs.items():
        for _, i in ins:
            consumers.setdefault(i, []).append(o)
    out, done = [], set()

    def emit(i):
        if i in done or i not in ops:
            return
        done.add(i)
        for _, j in sorted(inputs.get(i, ())):
            emit(j)
        r = ops[i]
        args = ", ".join(name.get(j, j) for _, j in sorted(inputs.get(i, ())))
        extra = [f"{r['detail']}"] if r["detail"] else []
        extra += [f"-> {r['relation']}"] if r["relation"] and r["op"] != "source" else []
        extra += [f"reads {r['relation']}"] if r["op"] == "source" else []
        props = [p for p, on in (("stateful", r["stateful"]), ("persisted", r["persisted"])) if on]
        props += [f"tick {r['tick']}"] if r["tick"] and r["tick"] != "now" else []
        shared = len(consumers.get(i, ()))
        props += [f"{shared} consumers"] if shared > 1 else []
        out.append(f"  {r['name']} = {r['op']}({args})" + (f"  [{'; '.join(extra)}]" if extra else "")
                   + (f"  // {', '.join(props)}" if props else ""))

    for i in sorted(ops, key=lambda i: ops[i]["name"]):
        emit(i)
    return "\n".join(out)


# ------------------------------------------------------------------ reference semantics over ticks

def run_flow(ops: dict, inputs: dict, roots, ticks: int, sources: dict) -> list:
    """Evaluate a dataflow of the tick operators over `ticks` ticks.

    `ops`: name -> (op, (input names...)), with op one of source, chain, cross (a join
    with no key), persist, delta, old, prev; `sources`: relation name -> list, per tick,
    of the set of values arriving then; a source's operator name maps to its relation
    through `inputs` (name -> relation). Values of a cross are pairs. Returns, per tick,
    {root: frozenset of values}. Sets, not bags: `delta` is this tick's values minus
    every earlier tick's (so `delta(persist a) = a` holds when a's values never repeat).
    """
    state_all: dict = {}  # name -> union of every earlier tick's output (persist, old, delta)
    last: dict = {}  # name -> previous tick's output (prev)
    result = []
    for t in range(ticks):
        now: dict = {}

        def val(n):
            if n in now:
                return now[n]
            op, args = ops[n]
            if op == "source":
                v = frozenset(sources[inputs[n]][t]) if t < len(sources[inputs[n]]) else frozenset()
            elif op in ("map", "filter", "iter_delta", "recur"):  # values pass through (see `differential`)
                v = val(args[0]) if args else frozenset()
            elif op == "chain":
                v = frozenset().union(*(val(a) for a in args))
            elif op in ("cross", "join"):
                v = frozenset((x, y) for x, y in product(val(args[0]), val(args[1])))
            elif op == "persist":
                v = state_all.get(("persist", args[0]), frozenset()) | val(args[0])
            elif op == "old":
                v = state_all.get(("persist", args[0]), frozenset())
            elif op == "delta":
                v = val(args[0]) - state_all.get(("persist", args[0]), frozenset())
            elif op == "prev":
                v = last.get(args[0], frozenset())
            else:
                raise ValueError(f"run_flow: operator {op} has no tick semantics here")
            now[n] = v
            return v

        out = {r: val(r) for r in roots}
        for n, (op, args) in ops.items():  # every operator's state, evaluated or not
            val(n)
        for n, (op, args) in ops.items():
            if op in ("persist", "old", "delta"):
                key = ("persist", args[0])
                state_all[key] = state_all.get(key, frozenset()) | now[args[0]]
        for n in ops:
            last[n] = now[n]
        result.append(out)
    return result


def graph_of(rows, program_id: str, graph: str) -> tuple:
    """(ops, source relation by op, op writing each relation) of one graph in `rows`,
    in the form `run_flow` takes: name -> (op, (input names...))."""
    ops = {r["id"]: r for r in rows.dicts("flow_op") if r["program"] == program_id
           and (r["graph"] or "planned") == graph}
    ins: dict = {}
    for r in rows.dicts("flow_input"):
        if r["op"] in ops:
            ins.setdefault(r["op"], []).append((r["seq"], r["input"]))
    table = {i: (r["op"], tuple(j for _, j in sorted(ins.get(i, ())))) for i, r in ops.items()}
    sources = {i: r["relation"] for i, r in ops.items() if r["op"] == "source"}
    writes = {r["relation"]: i for i, r in ops.items() if r["relation"] and r["op"] != "source"}
    return table, sources, writes


def differential(rows, program_id: str, seeds=range(200), ticks: int = 6) -> list:
    """The planned and the extracted graph over random inputs, tick by tick: a list of
    the differences found (empty: the same values at every tick for every relation both
    write, over every seed). Inputs are fresh values each tick (what `delta(persist a) =
    a` assumes: a value does not arrive twice). Maps and filters pass values through,
    joins are cross products: the rewrites never look inside either, so an equality
    that holds for these holds for any."""
    import random

    planned, p_src, p_out = graph_of(rows, program_id, "planned")
    extracted, x_src, x_out = graph_of(rows, program_id, "extracted")
    relations = sorted(set(p_src.values()) | set(x_src.values()))
    shared = sorted(set(p_out) & set(x_out))
    problems = []
    for seed in seeds:
        rnd = random.Random(seed)
        fresh = iter(range(10 ** 9))
        inputs = {rel: [{next(fresh) for _ in range(rnd.randint(0, 3))} for _ in range(ticks)] for rel in relations}
        a = run_flow(planned, p_src, [p_out[r] for r in shared], ticks, inputs)
        b = run_flow(extracted, x_src, [x_out[r] for r in shared], ticks, inputs)
        for t in range(ticks):
            for rel in shared:
                if a[t][p_out[rel]] != b[t][x_out[rel]]:
                    problems.append(f"seed {seed}, tick {t}, {rel}: planned {sorted(a[t][p_out[rel]])} "
                                    f"!= extracted {sorted(b[t][x_out[rel]])}")
        if problems:
            break
    return problems
