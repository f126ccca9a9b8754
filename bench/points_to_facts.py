"""Facts of a synthetic, well-formed Java-like program for examples/analysis/points_to.dl.

    python bench/points_to_facts.py --classes 200 [--methods 4] [--instructions 12] [--seed 1] --out DIR

Deterministic for a seed. The program is a set of modules (packages) of ten application
classes and two interfaces each, over a small Java library (Object, String, Throwable,
Exception, RuntimeException, Thread, System, Cloneable, Serializable). In a module:

- a class hierarchy: each class extends an earlier class of its module, Object, Thread or
  Exception, and implements some of the module's interfaces; some classes are abstract;
- interfaces declare abstract methods and a default method of the module's signatures;
- each class has a constructor, an instance field or two, a static field, a static method
  and `--methods` instance methods of the module's signatures (so calls are polymorphic);
- each method body has about `--instructions` instructions: allocations (of the module's
  concrete classes, arrays, exceptions), local copies, casts, instance, static and array
  loads and stores, virtual, special and static calls with arguments and return values,
  string constants, throws, and exception handlers over ranges of them.

Modules call each other only through their classes' static methods (one static call in
five goes to another module), which carry objects across modules: points-to sets grow
with the program, faster than linearly (10 classes: 33,896 VarPointsTo rows; 30 classes:
225,142).
Main.main, the entry point, creates an object of each module's first concrete class and
calls into every module. Every fact satisfies the analysis's sanity checks.
"""
from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

O, S = "java.lang.Object", "java.lang.String"
LIBRARY_CLASSES = {O: None, S: O, "java.lang.Throwable": O, "java.lang.Exception": "java.lang.Throwable",
                   "java.lang.RuntimeException": "java.lang.Exception", "java.lang.Thread": O, "java.lang.System": O}
LIBRARY_INTERFACES = ["java.lang.Cloneable", "java.io.Serializable"]
ARRAYCOPY = "<java.lang.System: void arraycopy(java.lang.Object,int,java.lang.Object,int,int)>"
# id: (name, descriptor, declaring type, return type, arity, modifiers)
LIBRARY_METHODS = {
    "<java.lang.Object: void <init>()>": ("<init>", "void()", O, "void", 0, []),
    "<java.lang.Object: void finalize()>": ("finalize", "void()", O, "void", 0, []),
    "<java.lang.Object: java.lang.Object clone()>": ("clone", "java.lang.Object()", O, O, 0, ["native"]),
    "<java.lang.Thread: void start()>": ("start", "void()", "java.lang.Thread", "void", 0, ["native"]),
    "<java.lang.Thread: void run()>": ("run", "void()", "java.lang.Thread", "void", 0, []),
    ARRAYCOPY: ("arraycopy", "void(java.lang.Object,int,java.lang.Object,int,int)", "java.lang.System", "void", 5,
                ["static", "native"]),
}
MODULE_CLASSES, MODULE_INTERFACES, SIGNATURES = 10, 2, 6


class Facts:
    """The rows of each input relation, and the bookkeeping of one method body at a time."""

    def __init__(self):
        self.rows = defaultdict(list)

    def add(self, relation: str, *row) -> None:
        self.rows[relation].append("\t".join(map(str, row)))

    def write(self, out: Path, relations: list) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for relation in relations:
            (out / f"{relation}.facts").write_text("".join(r + "\n" for r in self.rows.get(relation, [])))


def method_id(t: str, ret: str, name: str, params: str) -> str:
    return f"<{t}: {ret} {name}({params})>"


class Generator:
    def __init__(self, classes: int, methods: int, instructions: int, seed: int):
        self.rng = random.Random(seed)
        self.facts = Facts()
        self.modules = max(1, classes // MODULE_CLASSES)
        self.methods, self.instructions = methods, instructions
        self.method_info = {}  # id -> (name, descriptor, type, modifiers)
        self.superclass, self.abstract, self.kind = {}, set(), {}  # kind: "plain" | "thread" | "exception"

    # ------------------------------------------------------------ declarations

    def library(self) -> None:
        for t, s in LIBRARY_CLASSES.items():
            self.facts.add("ClassType", t)
            if s:
                self.facts.add("DirectSuperclass", t, s)
        for t in LIBRARY_INTERFACES:
            self.facts.add("InterfaceType", t)
        for t in (S, "java.lang.Throwable"):
            self.facts.add("DirectSuperinterface", t, "java.io.Serializable")
        for t in ("int", "double"):
            self.facts.add("PrimitiveType", t)
        self.array(f"{O}[]", O)
        self.array(f"{S}[]", S)
        for m, (n, d, t, r, a, mods) in LIBRARY_METHODS.items():
            self.declare_method(m, n, d, t, r, a, mods)

    def array(self, t: str, component: str) -> None:
        self.facts.add("ArrayType", t)
        self.facts.add("ComponentType", t, component)

    def declare_method(self, m, name, descriptor, t, ret, arity, modifiers) -> None:
        self.facts.add("MethodDecl", m, name, descriptor, t, ret, arity)
        for mod in modifiers:
            self.facts.add("MethodModifier", mod, m)
        self.method_info[m] = (name, descriptor, t, modifiers)
        if "static" not in modifiers:
            this = f"{m}/this"
            self.facts.add("VarDecl", this, t, m)
            self.facts.add("ThisVar", m, this)

    def module(self, k: int) -> dict:
        """Declare module k's types, fields and methods; its bodies come after."""
        rng = self.rng
        classes = [f"p{k}.C{j}" for j in range(MODULE_CLASSES)]
        interfaces = [f"p{k}.I{j}" for j in range(MODULE_INTERFACES)]
        sigs = [f"m{k}_{j}" for j in range(SIGNATURES)]
        for i in interfaces:
            self.facts.add("InterfaceType", i)
            self.facts.add("ApplicationClass", i)
            for j, sig in enumerate(sigs[:3]):
                mods = [] if j == 0 else ["abstract"]  # one default method per interface
                self.declare_method(method_id(i, O, sig, O), sig, f"{O}({O})", i, O, 1, mods)
                self.add_formals(method_id(i, O, sig, O), i, 1)
        for j, c in enumerate(classes):
            self.facts.add("ClassType", c)
            self.facts.add("ApplicationClass", c)
            if j == 0:
                sup, kind = O, "plain"
            else:
                roll = rng.random()
                if roll < 0.1:
                    sup, kind = "java.lang.Thread", "thread"
                elif roll < 0.2:
                    sup, kind = "java.lang.Exception", "exception"
                elif roll < 0.3:
                    sup, kind = O, "plain"
                else:
                    sup = rng.choice(classes[:j])
                    kind = self.kind[sup]
            self.superclass[c], self.kind[c] = sup, kind
            self.facts.add("DirectSuperclass", c, sup)
            for i in interfaces:
                if rng.random() < 0.4:
                    self.facts.add("DirectSuperinterface", c, i)
            if j > 0 and rng.random() < 0.15:
                self.abstract.add(c)
                self.facts.add("ClassModifier", "abstract", c)
            self.facts.add("FieldDecl", f"<{c}: {O} f>", c, "f", O)
            self.facts.add("FieldDecl", f"<{c}: {O} g>", c, "g", O)
            self.facts.add("FieldDecl", f"<{c}: {O} S>", c, "S", O)
            self.facts.add("FieldModifier", "static", f"<{c}: {O} S>")
            self.declare_method(method_id(c, "void", "<init>", ""), "<init>", "void()", c, "void", 0, [])
            self.declare_method(method_id(c, O, "s", O), "s", f"{O}({O})", c, O, 1, ["static"])
            self.add_formals(method_id(c, O, "s", O), c, 1)
            for sig in rng.sample(sigs, min(self.methods, len(sigs))):
                m = method_id(c, O, sig, O)
                self.declare_method(m, sig, f"{O}({O})", c, O, 1, [])
                self.add_formals(m, c, 1)
            if kind == "thread":
                self.declare_method(method_id(c, "void", "run", ""), "run", "void()", c, "void", 0, [])
            if rng.random() < 0.1:
                self.declare_method(method_id(c, "void", "<clinit>", ""), "<clinit>", "void()", c, "void", 0, ["static"])
            if rng.random() < 0.05:
                self.declare_method(method_id(c, "void", "finalize", ""), "finalize", "void()", c, "void", 0, [])
        array = f"p{k}.C0[]"
        self.array(array, classes[0])
        concrete = [c for c in classes if c not in self.abstract]
        return {"k": k, "classes": classes, "interfaces": interfaces, "sigs": sigs, "array": array,
                "concrete": concrete, "exceptions": [c for c in concrete if self.kind[c] == "exception"]}

    def add_formals(self, m: str, t: str, arity: int) -> None:
        for p in range(arity):
            v = f"{m}/p{p}"
            self.facts.add("VarDecl", v, O, m)
            self.facts.add("FormalParam", p, m, v)

    # ------------------------------------------------------------ bodies

    def bodies(self, mod: dict, modules: list) -> None:
        for m, (name, _, t, mods) in list(self.method_info.items()):
            if t in mod["classes"] and "abstract" not in mods and "native" not in mods:
                Body(self, m, t, mod, modules).write(name)
            elif t in mod["interfaces"] and "abstract" not in mods:
                Body(self, m, t, mod, modules).write(name)

    def main(self, modules: list) -> None:
        m = method_id("Main", "void", "main", f"{S}[]")
        self.facts.add("ClassType", "Main")
        self.facts.add("ApplicationClass", "Main")
        self.facts.add("DirectSuperclass", "Main", O)
        self.declare_method(m, "main", f"void({S}[])", "Main", "void", 1, ["static"])
        self.add_formals(m, "Main", 1)
        self.facts.add("EntryPoint", m)
        body = Body(self, m, "Main", modules[0], modules)
        for mod in modules:
            c = mod["concrete"][0]
            v = body.alloc(c)
            body.call_virtual(v, self.rng.choice(mod["sigs"]))
            body.call_static(method_id(self.rng.choice(mod["classes"]), O, "s", O), v)
        body.finish()


class Body:
    """One method's instructions, numbered in order, and its local variables."""

    def __init__(self, gen: Generator, m: str, t: str, mod: dict, modules: list):
        self.gen, self.m, self.t, self.mod, self.modules = gen, m, t, mod, modules
        self.rng, self.facts = gen.rng, gen.facts
        self.index, self.locals = 0, []
        self.params = [f"{m}/p{p}" for p in range(self.arity())]
        self.this = None if "static" in gen.method_info[m][3] else f"{m}/this"

    def arity(self) -> int:
        return 1 if self.gen.method_info[self.m][1].endswith(f"({O})") else 0

    def next(self) -> tuple:
        i = f"{self.m}/{self.index}"
        self.index += 1
        return i, self.index - 1

    def local(self, t: str = O) -> str:
        v = f"{self.m}/v{len(self.locals)}"
        self.facts.add("VarDecl", v, t, self.m)
        self.locals.append(v)
        return v

    def some_var(self) -> str:
        """A variable of this method, most often a recent local: values flow locally, as
        in real code, so points-to sets stay the size real programs' are."""
        ins = self.params + ([self.this] if self.this else [])
        if self.locals and (not ins or self.rng.random() < 0.8):
            return self.rng.choice(self.locals[-4:])
        return self.rng.choice(ins) if ins else self.alloc(self.rng.choice(self.mod["concrete"]))

    def alloc(self, c: str) -> str:
        v = self.local()
        i, x = self.next()
        h = f"{self.m}/new {c}/{x}"
        self.facts.add("HeapAllocation", h, c)
        self.facts.add("AssignHeapAllocation", i, x, h, v, self.m)
        if c.endswith("[]"):
            return v
        i, x = self.next()
        self.facts.add("SpecialMethodInvocation", i, x, method_id(c, "void", "<init>", ""), v, self.m)
        return v

    def call_virtual(self, base: str, sig: str) -> str:
        i, x = self.next()
        self.facts.add("VirtualMethodInvocation", i, x, sig, f"{O}({O})", base, self.m)
        self.facts.add("ActualParam", 0, i, self.some_var())
        to = self.local()
        self.facts.add("AssignReturnValue", i, to)
        return to

    def call_static(self, target: str, arg: str) -> str:
        i, x = self.next()
        self.facts.add("StaticMethodInvocation", i, x, target, self.m)
        self.facts.add("ActualParam", 0, i, arg)
        to = self.local()
        self.facts.add("AssignReturnValue", i, to)
        return to

    def write(self, name: str) -> None:
        """About `instructions` random instructions, a handler over some, a return."""
        gen, rng, mod = self.gen, self.rng, self.mod
        if name == "<init>":
            sup = gen.superclass.get(self.t)
            i, x = self.next()
            target = method_id(sup, "void", "<init>", "") if sup in gen.superclass else "<java.lang.Object: void <init>()>"
            self.facts.add("SpecialMethodInvocation", i, x, target, self.this, self.m)
        own = self.field_owners()
        begin = self.index
        for _ in range(gen.instructions):
            self.instruction(rng.random(), own)
        if mod["exceptions"] and rng.random() < 0.3:
            e = self.alloc(rng.choice(mod["exceptions"]))
            i, x = self.next()
            self.facts.add("Throw", i, x, e, self.m)
        end = self.index
        if end > begin and rng.random() < 0.4:
            catch = rng.choice(mod["exceptions"] + ["java.lang.Exception", "java.lang.RuntimeException"])
            v = self.local(catch)
            self.facts.add("ExceptionHandler", f"{self.m}/handler", self.m, catch, v, begin, end, 0)
        self.finish()

    def field_owners(self) -> list:
        """The application classes whose instance fields `this` has: its class and the
        superclasses up the chain (none for an interface's default method)."""
        owners, t = [], self.t
        while t in self.gen.superclass:
            owners.append(t)
            t = self.gen.superclass[t]
        return owners

    def instruction(self, roll: float, own: list) -> None:
        gen, rng, mod, m = self.gen, self.rng, self.mod, self.m
        c = rng.choice(mod["classes"])
        if roll < 0.14:
            self.alloc(rng.choice(mod["concrete"]))
        elif roll < 0.22:
            to = self.local()
            i, x = self.next()
            self.facts.add("AssignLocal", i, x, self.some_var(), to, m)
        elif roll < 0.28:
            to = self.local(c)
            i, x = self.next()
            self.facts.add("AssignCast", i, x, self.some_var(), to, c, m)
        elif roll < 0.36 and self.this and own:
            i, x = self.next()
            self.facts.add("StoreInstanceField", i, x, self.some_var(), self.this, f"<{rng.choice(own)}: {O} {rng.choice('fg')}>", m)
        elif roll < 0.44 and self.this and own:
            to = self.local()
            i, x = self.next()
            self.facts.add("LoadInstanceField", i, x, to, self.this, f"<{rng.choice(own)}: {O} {rng.choice('fg')}>", m)
        elif roll < 0.46:
            i, x = self.next()
            self.facts.add("StoreStaticField", i, x, self.some_var(), f"<{c}: {O} S>", m)
        elif roll < 0.52:
            to = self.local()
            i, x = self.next()
            self.facts.add("LoadStaticField", i, x, to, f"<{c}: {O} S>", m)
        elif roll < 0.58:
            arr = self.alloc(rng.choice([mod["array"], f"{O}[]"]))
            i, x = self.next()
            self.facts.add("StoreArrayIndex", i, x, self.some_var(), arr, m)
            to = self.local()
            i, x = self.next()
            self.facts.add("LoadArrayIndex", i, x, to, arr, m)
            if rng.random() < 0.3:
                dst = self.alloc(f"{O}[]")
                i, x = self.next()
                self.facts.add("StaticMethodInvocation", i, x, ARRAYCOPY, m)
                self.facts.add("ActualParam", 0, i, arr)
                self.facts.add("ActualParam", 2, i, dst)
        elif roll < 0.62:
            to = self.local(S)
            i, x = self.next()
            self.facts.add("AssignStringConstant", i, x, f"str{rng.randrange(50)}", to, m)
        elif roll < 0.86:
            self.call_virtual(self.some_var(), rng.choice(mod["sigs"]))
        elif roll < 0.93:
            other = mod if rng.random() < 0.8 else rng.choice(self.modules)
            self.call_static(method_id(rng.choice(other["classes"]), O, "s", O), self.some_var())
        else:
            t = [c for c in mod["concrete"] if gen.kind[c] == "thread"]
            if t:
                i, x = self.next()
                self.facts.add("VirtualMethodInvocation", i, x, "start", "void()", self.alloc(rng.choice(t)), m)

    def finish(self) -> None:
        """A method returning Object returns one of its variables."""
        if self.gen.method_info[self.m][1].startswith("void") or not (self.locals or self.params):
            return
        i, x = self.next()
        self.facts.add("Return", i, x, self.some_var(), self.m)


def input_relations(program: Path) -> list:
    names = []
    for line in program.read_text().splitlines():
        if line.startswith(".input "):
            names += [n.strip() for n in line[len(".input "):].split(",")]
    return names


def generate(classes: int, out: Path, methods: int = 4, instructions: int = 12, seed: int = 1) -> dict:
    """Write the facts to `out`; rows per relation."""
    gen = Generator(classes, methods, instructions, seed)
    gen.library()
    modules = [gen.module(k) for k in range(gen.modules)]
    for mod in modules:
        gen.bodies(mod, modules)
    gen.main(modules)
    program = Path(__file__).resolve().parent.parent / "examples" / "analysis" / "points_to.dl"
    gen.facts.write(out, input_relations(program))
    return {r: len(rows) for r, rows in gen.facts.rows.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classes", type=int, default=100, help="application classes (modules of ten)")
    ap.add_argument("--methods", type=int, default=4, help="instance methods per class")
    ap.add_argument("--instructions", type=int, default=12, help="instructions per method body, about")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True, help="the facts folder to write")
    args = ap.parse_args()
    counts = generate(args.classes, Path(args.out), args.methods, args.instructions, args.seed)
    print(f"{args.out}: {sum(counts.values())} facts, "
          + ", ".join(f"{r} {n}" for r, n in sorted(counts.items()) if r in ("MethodDecl", "VirtualMethodInvocation",
                                                                            "AssignHeapAllocation", "VarDecl")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
