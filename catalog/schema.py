"""The one declaration of every catalog table: columns, types, keys and meaning.

Everything else derives from this module: the Spark tables (`catalog.store`), the rows
the parser emits (`catalog.encode`), named-field atoms in stages (`sys::rule{id: R}`),
and `docs/catalog.md` (`python -m evita.catalog.schema`).

Ids are strings built from the program and a position (`sp:r2`, `sp:r2#1`), never
counters, so compiling a program twice produces the same rows. Columns marked `source`
record where text came from (file, line, column): they are kept for diagnostics and are
ignored when two catalogs are compared, since printing a program moves its lines.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from evita.bootstrap.diagnostics import Diagnostic
from evita.bootstrap.syntax import Span

DATABASE = "evita"
STRING, INT, BOOL, DOUBLE = "string", "int", "boolean", "double"


@dataclass(frozen=True)
class Col:
    name: str
    type: str
    doc: str
    nullable: bool = True
    source: bool = False  # provenance only: ignored by catalog comparison
    owner: tuple = ()  # tables whose `id` this column names: the row belongs to that row
    refers: tuple = ()  # tables whose `id` this column names without owning: it follows a moved row


def owned(name, doc, *owners) -> Col:
    """A column naming the row this one belongs to: deleting the owner deletes the row
    (stage primitive), and a row whose owner is missing violates integrity."""
    return Col(name, STRING, doc, owner=tuple(owners))


def ref(name, doc, *tables) -> Col:
    """A column naming another row by its `id`, without belonging to it: when a stage
    moves that row to a new id (`stage::move::T`, `catalog/edit.py`), the column follows."""
    return Col(name, STRING, doc, refers=tuple(tables))


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple
    key: tuple
    figure: str = ""  # which entity of seed 002 Fig 3.1-3.2 it holds
    order: tuple = field(default=())  # row order for printing and comparison

    @property
    def column_names(self) -> list:
        return [c.name for c in self.columns]

    def col(self, name: str) -> Col:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def owner_columns(self) -> list:
        return [c for c in self.columns if c.owner]

    @property
    def id_columns(self) -> list:
        """Columns naming rows by id: owners and references (what a moved id renames)."""
        return [c for c in self.columns if c.owner or c.refers]

    @property
    def compared_columns(self) -> list:
        return [c.name for c in self.columns if not c.source]

    def ddl(self) -> str:
        cols = ", ".join(f"`{c.name}` {c.type.upper()}" for c in self.columns)
        return f"{cols}"


def _t(name, doc, columns, key, figure="", order=None):
    cols = tuple(Col(*c) if isinstance(c, tuple) else c for c in columns)
    return Table(name, doc, cols, tuple(key), figure, tuple(order or key))


_LINE = Col("line", INT, "source line (1-based)", source=True)
_COL = Col("col", INT, "source column (1-based)", source=True)

TABLES = (
    _t("program", "One row per loaded program.", [
        ("id", STRING, "program id: the program's name"),
        ("name", STRING, "name, from the file stem unless given"),
        ("dialect", STRING, "'overlog' or 'souffle' (how undeclared relations are treated)"),
        ("number_bits", INT, "the width of whole numbers, 64 or 32 (`--number-bits`): arithmetic wraps "
                             "around at it, as Soufflé's does"),
        ("stage", STRING, "last compiler stage that completed ('parse' after loading)"),
        Col("path", STRING, "file the program was read from", source=True),
        Col("text", STRING, "the source text as loaded", source=True),
    ], ["id"], "program"),
    _t("component", "Dedalus components: named groups of rules deployed at addresses.", [
        ("program", STRING, "program id"),
        ("name", STRING, "component name"),
        ("pos", INT, "statement ordinal in the program"),
        _LINE, _COL,
    ], ["program", "name"], order=["program", "pos"]),
    _t("component_address", "The addresses a component is deployed at, one row each.", [
        ("program", STRING, "program id"),
        ("component", STRING, "component name"),
        ("seq", INT, "0-based position in the address list"),
        ("address", STRING, "address (a constant)"),
    ], ["program", "component", "seq"]),
    _t("relation", "Every relation a program mentions, declared or not (Fig 3.2 `table`).", [
        ("id", STRING, "relation id: program.name"),
        ("program", STRING, "program id"),
        ("name", STRING, "relation name as written (may contain ::)"),
        ("arity", INT, "number of columns"),
        ("declared", BOOL, "declared by .decl, define or materialize"),
        ("style", STRING, "how it was declared: decl, define, materialize, or null"),
        ("materialized", BOOL, "stored across timesteps (materialize, .decl); else an event"),
        ("lifetime", STRING, "materialize lifetime: 'infinity' or seconds"),
        ("size", STRING, "materialize size bound: 'infinity' or a count"),
        ("input", BOOL, "read from outside (.input)"),
        ("output", BOOL, "written out (.output)"),
        ("distribution", STRING, "how a stage placed it on Spark: 'partitioned' (on its partition_column "
                                 "rows), 'replicated' (each partition of a partitioned recursion holds a copy: where "
                                 "the copies go is predicate.copy), 'broadcast' (the joins that read it broadcast "
                                 "it, where a stage did not choose the atom's method) or "
                                 "'located' (partitioned on its @ location column: a location is a partition, "
                                 "and a tuple derived elsewhere is shipped there); null leaves it to Spark"),
        ("cached", BOOL, "a stage asked to keep it in memory once computed (read several times)"),
        ("role", STRING, "for a relation a stage made for a component it rewrote, what the relation is there: "
                         "'batch' (decouple::asymmetric: the batching of half made_for, per sender, not per key), "
                         "'seal' (its sealing of those batches, in half 1), 'held' (an output of the half held "
                         "until its batch is acked); null for the user's relations"),
        ("made_for", STRING, "the component named by role (the asymmetric half), null without a role"),
        ("pos", INT, "ordinal of its declaration statement, null if implicit"),
        _LINE, _COL,
    ], ["id"], "table", order=["program", "name"]),
    _t("relation_column", "Declared columns of a relation, one row each.", [
        ("program", STRING, "program id"),
        owned("relation", "relation id", "relation"),
        ("pos", INT, "0-based column position"),
        ("name", STRING, "column name (c0, c1, ... when undeclared)"),
        ("type", STRING, "number, unsigned, float, symbol, any, or a type a `.type` declares (table type_decl)"),
    ], ["relation", "pos"]),
    _t("relation_qualifier", "Soufflé qualifiers written after a `.decl` (btree, brie, inline, magic, ...), "
       "one row each. Hints: they change no result. The parser lowers `eqrel`, `input` and `output` "
       "into rules and directives, so they never appear here.", [
        ("program", STRING, "program id"),
        owned("relation", "relation id", "relation"),
        ("seq", INT, "0-based position among the relation's qualifiers"),
        ("qualifier", STRING, "the qualifier as written"),
    ], ["relation", "seq"]),
    _t("type_decl", "Soufflé `.type` declarations: the user's types a column may be declared with.", [
        ("program", STRING, "program id"),
        ("name", STRING, "type name"),
        ("kind", STRING, "'subtype' (`.type A <: B`), 'equivalence' (`.type A = B`), 'union' "
                         "(`.type A = B | C`), 'record' (`.type P = [x: A, y: B]`) or 'adt' (`.type E = A {x: T} | B {}`)"),
        ("pos", INT, "statement ordinal in the program"),
        _LINE, _COL,
    ], ["program", "name"], order=["program", "pos"]),
    _t("type_base", "The types a `.type` declaration names on its right, one row each (several for a union).", [
        ("program", STRING, "program id"),
        ("type", STRING, "the declared type's name"),
        ("seq", INT, "0-based position on the right of the declaration"),
        ("base", STRING, "a primitive type (number, unsigned, float, symbol) or another declared type"),
        ("field", STRING, "a record type's field name at this position ('' for other types); an ADT's "
                          "branch `B` is a row with field '$B' and base '', its fields' rows follow it"),
    ], ["program", "type", "seq"]),
    _t("index", "Indexes of a relation; the primary key is the index of kind 'primary'.", [
        ("program", STRING, "program id"),
        ("id", STRING, "index id: relation id + ':primary', or + ':choice0', ':choice1', ... for choice domains"),
        owned("relation", "relation id", "relation"),
        ("kind", STRING, "'primary', or 'choice': a Soufflé choice-domain, a functional dependency from its "
                         "columns to the rest (a second tuple agreeing on them never enters)"),
    ], ["id"], "index"),
    _t("index_column", "Key columns of an index, one row each.", [
        ("program", STRING, "program id"),
        owned("index", "index id", "index"),
        ("seq", INT, "0-based order within the key"),
        ("col", INT, "0-based column position in the relation"),
    ], ["index", "seq"]),
    _t("partition_column", "Columns a partitioned relation is hash-partitioned on, one row each.", [
        ("program", STRING, "program id"),
        owned("relation", "relation id", "relation"),
        ("seq", INT, "0-based order within the partitioning key"),
        ("col", INT, "0-based column position in the relation"),
    ], ["relation", "seq"]),
    _t("stratum", "How a stage chose to evaluate the recursive stratum deriving a relation.", [
        ("program", STRING, "program id"),
        owned("relation", "relation id of a relation the stratum derives", "relation"),
        ("strategy", STRING, "'local': partitioned, each partition runs to its own fixpoint inside one task; "
                             "'rounds': partitioned, each Spark job a round of up to local_iterations "
                             "iterations per partition, then one exchange of new tuples; "
                             "'distributed': the per-iteration loop on Spark"),
        ("reason", STRING, "why, in words (shown by evita plan)"),
        ("local_iterations", INT, "'rounds': the most iterations a partition runs before it exchanges "
                                  "(the staleness bound: a neighbour's tuples arrive at most this late)"),
    ], ["relation"]),
    _t("rule", "Rules of a program (Fig 3.2 `rule`).", [
        ("id", STRING, "rule id: program:name"),
        ("program", STRING, "program id"),
        ("name", STRING, "rule label as written, or rule<N> if unlabelled"),
        ("pos", INT, "statement ordinal in the program"),
        ref("head", "predicate id of the head (position 0)", "predicate"),
        ("head_relation", STRING, "relation name of the head"),
        ("is_delete", BOOL, "a `delete` rule"),
        ("time", STRING, "Dedalus head time: null, 'next' or 'async'"),
        ("component", STRING, "component name, if inside one"),
        ("term_count", INT, "number of terms: head + body literals"),
        ("origin", STRING, "for a rule a stage made: the id of the user's rule it came from (null as written)"),
        _LINE, _COL,
    ], ["id"], "rule", order=["program", "pos"]),
    _t("predicate", "Atoms: heads (pos 0) and body subgoals (Fig 3.2 `predicate`).", [
        ("program", STRING, "program id"),
        ("id", STRING, "predicate id: rule id#pos"),
        owned("rule", "owning rule id (or query id)", "rule", "query"),
        ("pos", INT, "term position in the rule; 0 is the head"),
        ("relation", STRING, "relation name"),
        ("negated", BOOL, "`notin` / `!`"),
        ("delta", BOOL, "driven by the relation's delta (ECA event); set by the delta stage"),
        ("arity", INT, "number of arguments"),
        ("location", INT, "argument position of the @ location specifier, or null"),
        ("named", BOOL, "written with named fields"),
        ("method", STRING, "join method chosen by a stage: broadcast, shuffle_hash, merge, nested; "
                           "null lets Spark choose"),
        ("copy", STRING, "in a rule of a stratum in rounds, an atom of a lower relation: what each partition "
                         "holds of that relation, chosen by a stage (stages/partition.dl): the 0-based column "
                         "its copy is hash-partitioned on (the one holding the partition variable of the "
                         "rule's driving delta), or 'whole' (all of it in every partition); null elsewhere"),
        _LINE, _COL,
    ], ["id"], "predicate", order=["rule", "pos"]),
    _t("argument", "Arguments of atoms, one row per position: variable, constant or expression.", [
        ("program", STRING, "program id"),
        owned("predicate", "predicate id", "predicate"),
        ("pos", INT, "0-based argument position"),
        ("kind", STRING, "var, const, wildcard, expr or agg"),
        ("var", STRING, "variable name (kind var; agg over a variable)"),
        ("value", STRING, "constant text (kind const)"),
        ("type", STRING, "constant type: int float string bool null infinity"),
        ref("expr", "expression id (kind expr; agg over an expression)", "expression"),
        ("agg", STRING, "aggregate function (kind agg): count sum min max avg set list"),
    ], ["predicate", "pos"]),
    _t("selection", "Boolean conditions in rule bodies (Fig 3.2 `select`).", [
        ("program", STRING, "program id"),
        ("id", STRING, "selection id: rule id#pos"),
        owned("rule", "rule id", "rule"),
        ("pos", INT, "term position in the rule"),
        ref("expr", "root expression id", "expression"),
        _LINE, _COL,
    ], ["id"], "select", order=["rule", "pos"]),
    _t("assignment", "`X := expr` terms (Fig 3.2 `assign`).", [
        ("program", STRING, "program id"),
        ("id", STRING, "assignment id: rule id#pos"),
        owned("rule", "rule id", "rule"),
        ("pos", INT, "term position in the rule"),
        ("var", STRING, "assigned variable"),
        ref("expr", "root expression id", "expression"),
        _LINE, _COL,
    ], ["id"], "assign", order=["rule", "pos"]),
    _t("expression", "Expression trees, one row per node.", [
        ("program", STRING, "program id"),
        ("id", STRING, "node id: owner id + '.' + child path"),
        ref("rule", "rule id owning the expression", "rule"),
        owned("term", "the predicate, selection or assignment whose tree holds the node",
              "predicate", "selection", "assignment"),
        ref("parent", "parent node id, null at the root", "expression"),
        ("seq", INT, "0-based position among the parent's children"),
        ("kind", STRING, "var, const, wildcard, call, op, cond or list"),
        ("name", STRING, "variable, function or operator name"),
        ("value", STRING, "constant text (kind const)"),
        ("type", STRING, "constant type (kind const)"),
    ], ["id"]),
    _t("fact", "Ground tuples written in the program (Fig 3.2 `fact`).", [
        ("id", STRING, "fact id: program:fact<pos>"),
        ("program", STRING, "program id"),
        ("pos", INT, "statement ordinal"),
        ("relation", STRING, "relation name"),
        ("arity", INT, "number of values"),
        ("location", INT, "position of the @ argument, or null"),
        ("component", STRING, "component, if inside one"),
        _LINE, _COL,
    ], ["id"], "fact", order=["program", "pos"]),
    _t("fact_value", "Values of facts, one row per position.", [
        ("program", STRING, "program id"),
        owned("fact", "fact id", "fact"),
        ("pos", INT, "0-based position"),
        ("value", STRING, "constant text"),
        ("type", STRING, "int float string bool null infinity"),
    ], ["fact", "pos"]),
    _t("query", "`query` statements; the atom is a predicate row whose rule is the query id.", [
        ("id", STRING, "query id: program:query<pos>"),
        ("program", STRING, "program id"),
        ("pos", INT, "statement ordinal"),
        ref("predicate", "predicate id of the queried atom", "predicate"),
        _LINE, _COL,
    ], ["id"], order=["program", "pos"]),
    _t("io", "Soufflé `.input` / `.output` / `.printsize` / `.limitsize` directives; a relation may have several "
       "(`.output` to two files).", [
        ("program", STRING, "program id"),
        ("relation", STRING, "relation name"),
        ("direction", STRING, "'input', 'output', 'printsize' or 'limitsize'"),
        ("pos", INT, "statement ordinal"),
        _LINE, _COL,
    ], ["program", "pos"], order=["program", "pos"]),
    _t("io_param", "Parameters of I/O directives (`filename=\"x\"`), one row each.", [
        ("program", STRING, "program id"),
        ("relation", STRING, "relation name"),
        ("direction", STRING, "'input', 'output', 'printsize' or 'limitsize'"),
        ("key", STRING, "parameter name"),
        ("value", STRING, "parameter value"),
        ("seq", INT, "0-based position in the parameter list"),
        ("pos", INT, "statement ordinal of the directive (`io.pos`)"),
    ], ["program", "pos", "key"], order=["program", "pos", "seq"]),
    _t("version", "Catalog versions of a program: version 0 is the parse, then one per stage that ran. "
       "The rows of every version are in database evita_history (columns `version`, `status`). A compile "
       "that fails leaves the versions of the last good one and adds its own with status 'failed'.", [
        ("program", STRING, "program id"),
        ("version", INT, "0 for the parse, then 1, 2, ... in the order the stages ran"),
        ("stage", STRING, "stage that produced this version"),
        ("rules_added", INT, "rules present now but not in the version before"),
        ("rules_removed", INT, "rules of the version before that are gone"),
        ("rules_changed", INT, "rules whose id stayed but whose text changed"),
        Col("seconds", DOUBLE, "wall time of the stage, integrity checks included", source=True),
        Col("actions", INT, "Spark actions the stage started", source=True),
        ("status", STRING, "'ok': the last good compile; 'failed': the last compile that failed, kept apart"),
        ("message", STRING, "why the stage failed (its row closes a failed compile), or why it was skipped "
                            "(its trigger found nothing to do); null otherwise"),
    ], ["program", "status", "version"]),
    _t("stage", "Compiler stages known to the scheduler.", [
        ("name", STRING, "stage name"),
        ("kind", STRING, "'bootstrap' (Python) or 'datalog' (.dl file)"),
        ("path", STRING, "file the stage comes from", True, True),
    ], ["name"]),
    _t("stage_lattice", "Precedence among stages: `before` runs before `after`.", [
        ("before", STRING, "stage name"),
        ("after", STRING, "stage name"),
    ], ["before", "after"]),
    _t("flow_op", "The physical dataflow as rows: one operator each (docs/egraph.md). Written by the planner "
       "(graph 'planned', `evita plan --flow`), by `.plan op` statements, and by the egraph stage (graph "
       "'extracted': its cheapest equal dataflow, which nothing executes yet). A relation read by several "
       "operators is one operator with several consumers (rows of flow_input), so the graph is a DAG.", [
        ("program", STRING, "program id"),
        ("id", STRING, "operator id: program:name"),
        ("name", STRING, "operator name: the rule label and step (r2_1), rel_R for relation R, or as written"),
        ("op", STRING, "source (a relation's stored tuples), chain (union of its inputs), join (detail: the key "
                       "variables; none: a cross product), antijoin, filter, map (detail: the expression or head), "
                       "iter_delta (a relation's semi-naive delta in a recursive stratum), recur (a recursive "
                       "stratum's relation read in full inside its fixpoint), and over ticks: "
                       "persist (every tuple so far), delta (this tick's new tuples), old (every tuple before this "
                       "tick), prev (the previous tick's tuples)"),
        ("detail", STRING, "what parameterizes the operator: join keys, a filter or map expression; '' if nothing"),
        ("relation", STRING, "for source: the relation read; for the last operator of a rule: the relation written"),
        ("rule", STRING, "label of the rule the operator belongs to, null for relation operators"),
        ("graph", STRING, "'planned' (the planner's or as written) or 'extracted' (the egraph stage's choice)"),
        ("stateful", BOOL, "keeps state across ticks (persist, delta, old, prev)"),
        ("persisted", BOOL, "emits tuples of earlier ticks (persist, old)"),
        ("tick", STRING, "the tick it reads: 'now', 'before' (every earlier tick: old), 'previous' (prev), or "
                         "'all' (persist)"),
    ], ["id"], order=["program", "id"]),
    _t("flow_input", "Inputs of dataflow operators, one row per input, in order (a DAG: an operator may feed "
       "several).", [
        ("program", STRING, "program id"),
        owned("op", "the consuming operator's id", "flow_op"),
        ("seq", INT, "0-based input position (join: 0 the left side, 1 the right)"),
        ref("input", "the producing operator's id", "flow_op"),
    ], ["op", "seq"]),
    _t("statistic", "Statistics for cost-based stages: one metric of a relation or column. Filled from inputs "
       "measured by evita run and evita analyze, from facts by stages/stats.dl, and from .plan statistics.", [
        ("program", STRING, "program id"),
        ("relation", STRING, "relation name"),
        ("col", INT, "column position, or null for the whole relation"),
        ("metric", STRING, "cardinality (rows, col null), distinct (HyperLogLog++ for measured inputs), min, max "
                            "(numbers only), nulls"),
        ("value", DOUBLE, "the measurement"),
    ], ["program", "relation", "col", "metric"]),
)

BY_NAME = {t.name: t for t in TABLES}

# Views: tables no stage writes and no Spark database holds, derived from the stored
# tables of the catalog version a stage reads (`catalog/views.py` computes them). A stage
# reads them as `sys::NAME` like any table; they answer in linear time what a stage would
# otherwise compute as a fixpoint of its own, once per catalog version for every stage.
VIEWS = (
    _t("scc", "View (read-only, derived): the relation graph's strongly connected components, one row per "
       "relation a rule or declaration names. B feeds H when a rule with head H reads B in its body (negated or "
       "not); a @next or @async rule feeds a later timestep, not this one, so it adds no edge. Computed from "
       "`rule`, `predicate` and `relation` for the catalog version a stage reads (Tarjan's algorithm, linear "
       "in the rules), never stored.", [
        ("program", STRING, "program id"),
        ("relation", STRING, "relation name (as in rule.head_relation, predicate.relation)"),
        ("scc", STRING, "the component: the least relation name among its members (two relations are "
                        "mutually recursive exactly when their scc is the same and recursive)"),
        ("recursive", BOOL, "the relation feeds itself: its component has two members or more, or a rule "
                            "of it reads it"),
        ("size", INT, "number of relations in the component"),
        ("depth", INT, "0 when the component reads no other component; else 1 + the greatest depth of the "
                       "components its rules read (the longest chain of components feeding it)"),
    ], ["program", "relation"], order=["program", "depth", "scc", "relation"]),
    _t("term_text", "View (read-only, derived): the canonical text of every term (an atom: head, body or "
       "query; a condition; an assignment) and of every expression node (the subtree under it), printed as "
       "`evita print` prints it (`catalog/printer.py`, from the rows the decoder reads): a stage compares "
       "atoms and expressions by comparing texts. Ids, positions and source lines never reach the text; "
       "an atom written with named fields prints positionally. Computed from `predicate`, `argument`, "
       "`selection`, `assignment` and `expression` for the catalog version a stage reads, never stored.", [
        ("program", STRING, "program id"),
        ("id", STRING, "the term's id (predicate.id, selection.id, assignment.id) or the expression node's "
                       "(expression.id)"),
        ("rule", STRING, "the rule owning it (a query's atom: the query's id)"),
        ("kind", STRING, "atom, selection, assignment or expression"),
        ("text", STRING, "the text, variables by name: `notin b(X, _)`, `X + 1 > Y`, `S := Y * 2`; equal "
                         "texts in one rule are the same term (an atom's `notin`, `delta` and `@` included)"),
        ("shape", STRING, "the text with the variables numbered in the order they first occur in it "
                          "($0, $1, ...): `b($0, $0)` for b(X, X) and b(Y, Y), `b($0, $1)` for b(X, Y); equal "
                          "shapes are the same term up to renaming its variables"),
    ], ["program", "id"], order=["program", "rule", "id"]),
)
VIEW_NAMES = {t.name: t for t in VIEWS}


def table(name: str) -> Table:
    """The declaration of a catalog table or view, by bare (`rule`) or qualified
    (`sys::rule`) name."""
    bare = name.split("::", 1)[1] if name.startswith("sys::") else name
    try:
        return BY_NAME[bare] if bare in BY_NAME else VIEW_NAMES[bare]
    except KeyError:
        raise KeyError(f"no catalog table {name!r}; known: {', '.join([*BY_NAME, *VIEW_NAMES])}") from None


def is_view(name: str) -> bool:
    """A derived, read-only table (`VIEWS`), by bare or qualified name."""
    return (name.split("::", 1)[1] if name.startswith("sys::") else name) in VIEW_NAMES


def unknown_table(relation: str, span: Span) -> Diagnostic:
    """`sys::rules` is no catalog table: the diagnostic names the nearest ones (for the
    stage checks and for named fields in the parser, which both read the catalog)."""
    name = relation[len("sys::"):]
    near = difflib.get_close_matches(name, [*BY_NAME, *VIEW_NAMES], n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join('sys::' + n for n in near)}?" if near else
            f"the catalog tables: {', '.join(sorted([*BY_NAME, *VIEW_NAMES]))} (docs/catalog.md)")
    return Diagnostic("unknown-catalog-table", f"{relation} is not a catalog table", span, relation, hint)


def ownership_checks() -> str:
    """Integrity checks from the ownership the columns declare, as Datalog: a row whose
    owner is missing is a violation (`catalog/integrity.dl` holds the other checks).

    >>> print(ownership_checks().splitlines()[0])
    violation("relation_column without its relation", O) :- sys::relation_column{relation: O}, notin owner_relation_column_relation(O).
    """
    out = []
    for t in TABLES:
        for c in t.owner_columns:
            key = "O" if t.key[0] == c.name else "K"
            fields = f"{c.name}: O" + ("" if key == "O" else f", {t.key[0]}: K")
            out.append(f"violation(\"{t.name} without its {' or '.join(c.owner)}\", {key}) :- "
                       f"sys::{t.name}{{{fields}}}, notin owner_{t.name}_{c.name}(O).")
            out += [f"owner_{t.name}_{c.name}(O) :- sys::{o}{{id: O}}." for o in c.owner]
    return "\n".join(out) + "\n"


def markdown() -> str:
    """`docs/catalog.md`, generated from the declarations above."""
    out = [
        "# The Metacompiler Catalog",
        "",
        "Generated from `catalog/schema.py` by `python -m evita.catalog.schema`; do not edit.",
        "",
        f"Every table lives in the Spark database `{DATABASE}` (`{DATABASE}.rule`, ...).",
        "Stages refer to them as `sys::NAME`, positionally or with named fields",
        "(`sys::rule{id: R, program: P}`). Key columns are in **bold**; columns marked",
        "*source* record provenance and are ignored when catalogs are compared.",
        "The last tables, marked *view*, are read-only: the scheduler derives them from the",
        "stored tables of the catalog version a stage reads (`catalog/views.py`), for every",
        "stage, its trigger and the integrity checks; no stage writes them and no Spark",
        "database holds them.",
        "",
    ]
    for t in TABLES + VIEWS:
        fig = f" (seed 002 Fig 3.2: `{t.figure}`)" if t.figure else ""
        fig += " *(view)*" if t.name in VIEW_NAMES else ""
        out += [f"## `{t.name}`{fig}", "", t.doc, "", "| column | type | meaning |", "|---|---|---|"]
        for c in t.columns:
            name = f"**{c.name}**" if c.name in t.key else c.name
            note = " *(source)*" if c.source else ""
            out.append(f"| {name} | {c.type} | {c.doc}{note} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())


def spark_struct(name: str):
    """The Spark schema of a catalog table."""
    from pyspark.sql import types as T

    kinds = {STRING: T.StringType(), INT: T.IntegerType(), BOOL: T.BooleanType(), DOUBLE: T.DoubleType()}
    return T.StructType([T.StructField(c.name, kinds[c.type], True) for c in table(name).columns])
