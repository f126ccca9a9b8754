"""What each stage did to a program: rules added, removed and changed, as program text,
and the declarations it added, dropped or changed (a new column, a new relation).

Versions are compared by rule id: a rule whose id is new was added, one whose id is gone
was removed, one whose id stayed but whose printed text differs was changed. The
physical decisions a stage wrote (`.plan` statements) count the same way, by what they
are about. Rules a stage made name the user's rule they came from (`rule.origin`), so a
diff also says "rule r2 (split by delta into r2_d1, r2_d2)".
"""
from __future__ import annotations

from dataclasses import dataclass

from evita.catalog.decode import decode
from evita.catalog.printer import format_rule


@dataclass
class StageDiff:
    version: int
    stage: str
    added: list  # rule text
    removed: list
    changed: list  # (old text, new text)
    origins: list = None  # "rule r2 (split by delta into r2_d1, r2_d2)", one per user rule rewritten
    declarations: list = None  # ("+" | "-" | "~", declaration text, the old text of a changed one or None)

    @property
    def counts(self) -> tuple:
        """Rules added, removed, changed (`.plan` statements are not rules)."""
        def rules(texts):
            return sum(1 for t in texts if not (t[0] if isinstance(t, tuple) else t).startswith(".plan"))
        return rules(self.added), rules(self.removed), rules(self.changed)


def rule_texts(rows, program_id: str, program=None) -> dict:
    """rule id (or `.plan` subject) -> printed rule (or `.plan` statement), for one version
    (`program`: the version decoded, when the caller has it)."""
    from evita.bootstrap.syntax import Plan
    from evita.catalog.printer import format_statement

    program = program if program is not None else decode(rows, program_id)
    ids = {r[rows_col(rows, "name")]: r[rows_col(rows, "id")] for r in rows.get("rule", [])}
    out = {ids.get(r.name, r.name): format_rule(r) for r in program.rules}
    out.update({f".plan {p.kind} {p.name}": format_statement(p) for p in program.of(Plan)})
    return out


def origins(rows, stage: str, added_ids) -> list:
    """For the rules a stage added, the user's rules they came from, in words."""
    rules = {r["id"]: r for r in rows.dicts("rule")}
    made: dict = {}
    for rid in added_ids:
        r = rules.get(rid)
        if r is not None and r["origin"]:
            made.setdefault(r["origin"], []).append(r["name"])
    return [f"rule {rules[o]['name'] if o in rules else o.split(':', 1)[-1]} (split by {stage} into "
            f"{', '.join(sorted(names))})" for o, names in sorted(made.items())]


def declaration_texts(rows, program_id: str, program=None) -> dict:
    """relation -> its printed declaration (`.decl`, `define`, `materialize`), for one version."""
    from evita.bootstrap.syntax import Declaration, Materialize
    from evita.catalog.printer import format_statement

    program = program if program is not None else decode(rows, program_id)
    return {d.relation: format_statement(d) for d in program.of(Declaration) + program.of(Materialize)}


def declaration_changes(before: dict, now: dict) -> list:
    """What a stage did to the declarations: relations it added or dropped, or whose
    columns or keys it changed (an arity change shows here, not among the rules)."""
    return ([("-", before[r], None) for r in sorted(before) if r not in now]
            + [("~", now[r], before[r]) for r in sorted(now) if r in before and before[r] != now[r]]
            + [("+", now[r], None) for r in sorted(now) if r not in before])


def rows_col(rows, column: str) -> int:
    from evita.catalog import schema

    return schema.table("rule").column_names.index(column)


def diff_versions(versions: list, program_id: str) -> list:
    """versions: [(number, stage, CatalogRows)] in order -> one StageDiff per stage after parse."""
    out = []
    before = declared = last = None
    for number, stage, rows in versions:
        if last is not None and same_program(last, rows):  # a skipped stage: nothing to decode again
            now, declares = before, declared
        else:
            program = decode(rows, program_id)
            now, declares = rule_texts(rows, program_id, program), declaration_texts(rows, program_id, program)
        last = rows
        if before is not None:
            added = [now[i] for i in sorted(now) if i not in before]
            removed = [before[i] for i in sorted(before) if i not in now]
            changed = [(before[i], now[i]) for i in sorted(now) if i in before and before[i] != now[i]]
            made = origins(rows, stage, [i for i in sorted(now) if i not in before])
            out.append(StageDiff(number, stage, added, removed, changed, made, declaration_changes(declared, declares)))
        before, declared = now, declares
    return out


def same_program(a, b) -> bool:
    """Whether two versions hold the same program: the same rows in every table but the
    versions and the program's `stage` mark. A stage that changed nothing hands on the
    rows it was given, so this is mostly identity."""
    from evita.catalog import schema

    for t in schema.TABLES:
        rows_a, rows_b = a.get(t.name, []), b.get(t.name, [])
        if rows_a is rows_b or t.name == "version":
            continue
        if t.name == "program":
            mark = t.column_names.index("stage")
            rows_a, rows_b = ([r[:mark] + r[mark + 1:] for r in rows] for rows in (rows_a, rows_b))
        if rows_a != rows_b:
            return False
    return True


# ---------------------------------------------------------------- a stage's own picture

@dataclass
class StageGraph:
    """What a stage's explain view derived: `explain::node(Id, Label, Kind)` and
    `explain::edge(From, To, Label)` (for magic_sets, the adorned rule/goal graph)."""
    stage: str
    nodes: list  # (id, label, kind), sorted
    edges: list  # (from, to, label), sorted

    def label(self, node_id: str) -> str:
        return next((label for i, label, _ in self.nodes if i == node_id), node_id)


def explain_view(stage):
    """`explain/NAME.dl` beside a stage file: extra rules run with the stage's own when
    explaining it (none for most stages)."""
    view = stage.path.parent / "explain" / f"{stage.name}.dl"
    return view if view.is_file() else None


def stage_graph(spark, stage, rows, program_id: str, evaluator: str = "auto"):
    """Run `stage` with its explain view over `rows` (the catalog the stage read) and
    return the graph its view derives, or None when the stage has no view. A small
    catalog is evaluated in this process (no Spark job: `spark` may be a session on
    demand that never starts); `evaluator` as in `stage.evaluate` ("engine": on Spark)."""
    from dataclasses import replace

    from . import compile_cache
    from .activity import doing
    from .checks import check_program
    from .compile_cache import stage_fingerprint
    from .parser import parse_file
    from .stage import evaluate

    view = explain_view(stage)
    if view is None:
        return None

    def run():
        with doing(f"stage {stage.name}: its explain view"):
            extra = parse_file(view)
            program = check_program(replace(stage.program, statements=stage.program.statements + extra.statements))
            ev = evaluate(spark, program, rows, program_id, ["explain::node", "explain::edge"],
                          origin=f"{stage.name} (explain)", evaluator=evaluator)
        return StageGraph(stage.name, sorted(ev.tuples["explain::node"]), sorted(ev.tuples["explain::edge"]))

    # A graph is a function of the stage, its view and the catalog it read: `evita explain
    # P --stage S` again (its compile read from the compile cache) reads the graph back too.
    return compile_cache.remembered("explained", (stage_fingerprint(stage), view.read_text(), program_id, evaluator),
                                    rows, run)


# Graphviz styles by node kind; unknown kinds get the default ellipse.
DOT_STYLE = {
    "rule": 'shape=box, style="rounded"',
    "query": 'shape=diamond',
    "rewritten": 'style=filled, fillcolor="#c8e6c9"',
    "kept": 'style=filled, fillcolor="#e0e0e0"',
    "base": 'shape=cylinder',
    "free": '',
    "set": '',  # join order: a set of atoms costed
    "chosen": 'style="bold,filled", fillcolor="#c8e6c9"',  # on the chosen order
}


def to_dot(graph: StageGraph) -> str:
    """Graphviz DOT text of a stage graph (`dot -Tsvg`).

    >>> g = StageGraph("magic_sets", [("p", "p^bf", "rewritten"), ("p:r1", "r1", "rule")], [("p", "p:r1", "")])
    >>> print(to_dot(g))
    digraph "magic_sets" {
      rankdir=LR;
      "p" [label="p^bf", style=filled, fillcolor="#c8e6c9"];
      "p:r1" [label="r1", shape=box, style="rounded"];
      "p" -> "p:r1";
    }
    """
    def q(s) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"digraph {q(graph.stage)} {{", "  rankdir=LR;"]
    for node_id, label, kind in graph.nodes:
        style = DOT_STYLE.get(kind, "")
        lines.append(f"  {q(node_id)} [label={q(label)}{', ' + style if style else ''}];")
    for a, b, label in graph.edges:
        lines.append(f"  {q(a)} -> {q(b)}{f' [label={q(label)}]' if label else ''};")
    lines.append("}")
    return "\n".join(lines)
