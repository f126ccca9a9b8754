"""The stage machinery and the delta stage, on real Spark.

- golden fixtures: the delta stage's output for every example, printed as program text
  (tests/fixtures/golden/delta/; regenerate with EVITA_UPDATE_GOLDEN=1);
- the lattice: order (as stage_lattice.dl states it), --skip, --only, an external stage
  with its own lattice facts;
- failures leave the catalog at the previous version; compiling twice is deterministic.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from evita.bootstrap import stage as st
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.scheduler import compile_program
from evita.bootstrap.stage import StageFailure
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program

from conftest import EXAMPLES, FIXTURES, after_stage, assert_golden, lattice_order

GOLDEN = FIXTURES / "golden" / "delta"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))


def delta_of(spark, path: Path):
    """The program after the delta stage alone (one Spark run per file, cached)."""
    return after_stage(spark, "delta", path)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_delta_golden(spark, path):
    _, after = delta_of(spark, path)
    assert_golden(format_program(after), GOLDEN / (path.name + ".golden"))


def test_delta_differentiates_the_recursion_of_figure_3_5(spark):
    _, after = delta_of(spark, EXAMPLES / "shortest_path.olg")
    rules = {r.name: r for r in after.rules}
    # Only r2 reads its own stratum (path); link, path and minCostPath are complete
    # before r1, r3 and r4 run, so they stay as written (they run once).
    assert sorted(rules) == ["r1", "r2_d2", "r3", "r4"]
    assert [getattr(l, "delta", False) for l in rules["r2_d2"].body][:2] == [False, True]
    assert not any(getattr(l, "delta", False) for r in ("r1", "r3", "r4") for l in rules[r].body)



def test_compile_runs_the_lattice_and_keeps_versions(spark):
    rows = encode(parse_file(EXAMPLES / "shortest_path.olg"))
    comp = compile_program(spark, rows, "shortest_path")
    order = lattice_order()
    assert len(order) > 1 and comp.stages_run == order
    assert [v.number for v in comp.versions] == list(range(len(order)))
    assert comp.versions[0].rows.compared() == rows.sorted().compared()  # version 0 untouched
    program_row = comp.final.dicts("program")[0]
    assert program_row["stage"] == order[-1]
    again = compile_program(spark, rows, "shortest_path")
    assert again.final.compared() == comp.final.compared()  # deterministic


def test_a_stage_whose_trigger_finds_nothing_is_skipped_without_a_spark_action(spark, tmp_path):
    # tc has no constant to propagate, no location, no bound call, no rule of three atoms, no seal: these stages
    # are skipped, each handing on the catalog it was given, at no Spark action.
    rows = encode(parse_file(EXAMPLES / "tc.dl"))
    comp = compile_program(spark, rows, "tc")
    skipped = [v.stage for v in comp.versions if v.skipped]
    assert skipped == ["const_prop", "localize", "decouple", "magic_sets", "stats", "system_r", "seal",
                       "egraph"], skipped
    for before, v in zip(comp.versions, comp.versions[1:]):
        if v.skipped:
            assert v.actions == 0
            assert {t: r for t, r in v.rows.compared().items() if t != "program"} == \
                   {t: r for t, r in before.rows.compared().items() if t != "program"}
    assert comp.stages_run == lattice_order() and comp.lattice_actions == 0  # the lattice asked in process
    every = compile_program(spark, rows, "tc", triggers=False)
    assert every.final.compared() == comp.final.compared()
    # An external stage's trigger, written in its .dl file: no Python.
    (tmp_path / "noisy.dl").write_text(
        'stage("noisy").\nprecedes("parse", "noisy").\nprecedes("noisy", "delta").\n'
        'when1 stage::applies(R) :- sys::rule{id: R, name: "never"}.\n'
        'e1 stage::error(R, "noisy", "ran") :- sys::rule{id: R}.\n')
    quiet = compile_program(spark, rows, "tc", stage_paths=[tmp_path])
    assert next(v for v in quiet.versions if v.stage == "noisy").skipped
    with pytest.raises(StageFailure, match="ran"):
        compile_program(spark, rows, "tc", stage_paths=[tmp_path], triggers=False)


def test_skip_and_only(spark):
    rows = encode(parse_file(EXAMPLES / "tc.dl"))
    stages = lattice_order()[1:]  # the lattice's own, after parse
    first, last = stages[0], stages[-1]
    skipped = compile_program(spark, rows, "tc", skip=[last]).stages_run
    assert last not in skipped and skipped == lattice_order(skip=[last]) == ["parse"] + stages[:-1]
    assert compile_program(spark, rows, "tc", skip=stages).stages_run == ["parse"]
    assert compile_program(spark, rows, "tc", only=[first]).stages_run == ["parse", first]


def test_external_stage_inserts_itself_with_its_own_lattice_facts(spark):
    text = """
    .decl edge(x: number, y: number)
    .decl path(x: number, y: number)
    .decl scratch(x: number)
    .output path
    edge(1, 2).
    r1 path(x, y) :- edge(x, y).
    r2 path(x, z) :- path(x, y), edge(y, z).
    r3 scratch(x) :- edge(x, x).
    """
    rows = encode(parse_program(text, "dead.dl", "dead"))
    comp = compile_program(spark, rows, "dead", stage_paths=[EXAMPLES / "stages"], skip=["magic_sets"])
    assert comp.stages_run == lattice_order([EXAMPLES / "stages"], skip=["magic_sets"])
    assert comp.stages_run.index("dead_rules") < comp.stages_run.index("delta")  # as its own facts say
    names = sorted(r.name for r in decode(comp.final, "dead").rules)
    assert names == ["r1", "r2_d1"]  # r3 is gone, the rest went through delta
    without = compile_program(spark, rows, "dead", skip=["magic_sets"])
    assert "r3" in {r.name for r in decode(without.final, "dead").rules}


def test_failing_stage_leaves_the_previous_version(spark, tmp_path):
    # Moves r2's atom to a rule that does not exist: the integrity checks (Datalog) catch it.
    (tmp_path / "sloppy.dl").write_text(
        'stage("sloppy").\nprecedes("parse", "sloppy").\nprecedes("sloppy", "delta").\n'
        'x1 sys::predicate{id: A, rule: "nowhere"} :- sys::rule{id: R, name: "r2"}, sys::predicate{rule: R, id: A, pos: 1}.\n')
    rows = encode(parse_file(EXAMPLES / "shortest_path.olg"))
    with pytest.raises(st.StageFailure) as info:
        compile_program(spark, rows, "shortest_path", stage_paths=[tmp_path], only=["sloppy"])
    failure = info.value
    assert failure.stage == "sloppy" and "integrity" in failure.reason
    assert "predicate without its rule or query" in failure.detail
    assert [v.stage for v in failure.versions] == ["parse"]
    assert failure.versions[-1].rows.compared() == rows.sorted().compared()


def test_unknown_stage_names_are_rejected(spark):
    from evita.bootstrap.diagnostics import EvitaError

    rows = encode(parse_file(EXAMPLES / "tc.dl"))
    with pytest.raises(EvitaError) as info:
        compile_program(spark, rows, "tc", skip=["deltaa"])
    assert "known stages" in info.value.render()


def test_apply_deletes_by_pattern_then_inserts_with_key_replacement():
    rows = encode(parse_program("r1 a(X) :- b(X).\nr2 c(X) :- a(X).\n", "p.olg", "p"))
    rule_cols = len(rows["rule"][0])
    out = st.StageOutput(inserts=type(rows)(), deletes={"rule": [("p:r1",) + (None,) * (rule_cols - 1)]})
    renamed = rows["rule"][1][:2] + ("renamed",) + rows["rule"][1][3:]
    out.inserts["rule"] = [renamed]
    new = st.apply(rows, out)
    assert [r[2] for r in new["rule"]] == ["renamed"]


def test_a_fact_chooses_between_alternative_stages(spark, tmp_path):
    # Two interchangeable stages (as System R and Cascades are in group join_order): a default/2 fact picks one,
    # --choose overrides it; the other counts as passed.
    for name in ("order_a", "order_b"):
        (tmp_path / f"{name}.dl").write_text(
            f'stage("{name}").\nalternative("toy_order", "{name}").\n'
            f'precedes("delta", "{name}").\nprecedes("{name}", "planner").\n'
            f'o1 noted(P) :- programEvent(P).\n')
    (tmp_path / "order_a.dl").write_text((tmp_path / "order_a.dl").read_text() +
                                         'default("toy_order", "order_a").\n')
    rows = encode(parse_file(EXAMPLES / "tc.dl"))
    skip = ["magic_sets"]  # not what this test is about
    default = compile_program(spark, rows, "tc", stage_paths=[tmp_path], skip=skip).stages_run
    assert "order_a" in default and "order_b" not in default
    assert default == lattice_order([tmp_path], skip=skip)
    chosen = compile_program(spark, rows, "tc", stage_paths=[tmp_path], skip=skip, choose={"toy_order": "order_b"})
    assert "order_b" in chosen.stages_run and "order_a" not in chosen.stages_run
    assert chosen.stages_run == lattice_order([tmp_path], skip=skip, choose={"toy_order": "order_b"})


# tc.dl: on Spark every iteration of a stage's recursion is a job (shortest_path.olg, whose
# compile runs the most stages, takes five minutes there; test_stage_cases holds each
# stage's rows in process, and the random-program tests the engine against the oracle)
@pytest.mark.parametrize("name", ["tc.dl"])
def test_small_catalogs_compile_in_process_to_the_same_catalog_as_on_spark(spark, name, monkeypatch):
    """A stage over a small catalog runs in this process (`stage.in_process_first`,
    the columnar backend), with no Spark action; on Spark (the size limit set below any
    catalog) the compile ends in the same catalog."""
    program = parse_file(EXAMPLES / name)
    rows = encode(program)
    here = compile_program(spark, rows, program.name)
    ran = [v for v in here.versions[1:] if not v.skipped]
    assert ran and all(v.actions == 0 for v in ran)
    monkeypatch.setattr(st, "IN_PROCESS_BYTES", -1)
    monkeypatch.setattr(st, "_answered", type(st._answered)())
    on_spark = compile_program(spark, rows, program.name)
    assert [v.stage for v in on_spark.versions] == [v.stage for v in here.versions]
    assert any(v.actions for v in on_spark.versions[1:])
    assert here.final.compared() == on_spark.final.compared()


def test_explain_shows_the_declarations_a_stage_added_dropped_or_changed():
    """A stage that changes a relation's columns (or adds or drops a relation) shows it in
    `explain` as a declaration line, apart from the rule counts."""
    from evita.bootstrap.explain import diff_versions

    def rows(text):
        return encode(parse_program(text, "p.dl", "p"))

    before = rows(".decl e(x: number)\n.decl p(x: number)\n.decl gone(x: number)\ne(1).\n"
                  "r1 p(X) :- e(X).\nr2 gone(X) :- e(X).\n")
    after = rows(".decl e(x: number)\n.decl p(x: number, y: number)\n.decl new(x: number)\ne(1).\n"
                 "r1 p(X, X) :- e(X).\nr3 new(X) :- e(X).\n")
    same = rows(".decl e(x: number)\n.decl p(x: number, y: number)\n.decl new(x: number)\ne(1).\n"
                "r1 p(X, X) :- e(X).\nr3 new(X) :- e(X).\n")
    (d, unchanged) = diff_versions([(0, "parse", before), (1, "toy", after), (2, "noop", same)], "p")
    assert d.declarations == [("-", ".decl gone(x: number)", None),
                              ("~", ".decl p(x: number, y: number)", ".decl p(x: number)"),
                              ("+", ".decl new(x: number)", None)]
    assert d.counts == (1, 1, 1)  # r3 added, r2 removed, r1 changed: the declarations are not rules
    assert unchanged.declarations == [] and unchanged.counts == (0, 0, 0)


# The view sys::scc (catalog/views.py): a and b mutually recursive, c reads itself, d only
# through @next (a later timestep: no cycle here), e reads the rest.
SCC_PROGRAM = """
materialize(src, infinity, infinity, keys(1)).
materialize(a, infinity, infinity, keys(1)).
materialize(b, infinity, infinity, keys(1)).
materialize(c, infinity, infinity, keys(1)).
materialize(d, infinity, infinity, keys(1)).
materialize(e, infinity, infinity, keys(1)).
src(1).
r1 a(X) :- src(X).
r2 a(X) :- b(X).
r3 b(X) :- a(X).
r4 c(X) :- c(X), a(X).
r5 c(X) :- src(X).
r6 d(X)@next :- d(X).
r7 e(X) :- c(X), d(X), notin b(X).
"""


def test_the_scc_view_gives_each_relation_its_component_once_per_catalog_version():
    from evita.catalog import views

    rows = encode(parse_program(SCC_PROGRAM, "scc.olg", "scc"))
    got = {r[1]: r[2:] for r in views.view_rows("sys::scc", rows)}  # relation -> (scc, recursive, size, depth)
    assert got == {"src": ("src", False, 1, 0), "a": ("a", True, 2, 1), "b": ("a", True, 2, 1),
                   "c": ("c", True, 1, 2), "d": ("d", False, 1, 0), "e": ("e", False, 1, 3)}
    # The view follows the rows it is asked of: without r2, a and b no longer recurse.
    rule_id = schema_index("rule", "id")
    cut = type(rows)(rows)
    cut["rule"] = [r for r in rows["rule"] if r[rule_id] != "scc:r2"]
    cut["predicate"] = [p for p in rows["predicate"] if p[schema_index("predicate", "rule")] != "scc:r2"]
    after = {r[1]: r[2:] for r in views.view_rows("scc", cut)}
    assert after["a"] == ("a", False, 1, 1) and after["b"] == ("b", False, 1, 2)


def schema_index(table: str, column: str) -> int:
    from evita.catalog import schema

    return schema.table(table).column_names.index(column)


def test_a_stage_reads_the_scc_view_the_same_in_process_and_on_spark(spark, tmp_path):
    (tmp_path / "mark.dl").write_text(
        'stage("mark").\nprecedes("parse", "mark").\n'
        'm1 sys::relation{id: T, cached: true} :- sys::scc{relation: H, recursive: true, size: N}, N > 1,\n'
        '                                         sys::relation{id: T, name: H}.\n'
        'm2 stage::error(T, "deep", cat(H, " at depth ", to_string(D))) :- sys::scc{relation: H, depth: D}, D > 5,\n'
        '                                         sys::relation{id: T, name: H}.\n')
    stage = st.stage_file(tmp_path / "mark.dl", str(tmp_path))
    rows = encode(parse_program(SCC_PROGRAM, "scc.olg", "scc"))
    here = st.run_stage(spark, stage, rows, "scc", evaluator="in-process")
    there = st.run_stage(spark, stage, rows, "scc", evaluator="engine")
    assert here.actions == 0 and there.actions > 0
    assert here.updates == there.updates
    cached = sorted(r[0][0] for r in here.updates["relation"])
    assert cached == ["scc.a", "scc.b"]


def test_a_stage_cannot_write_a_view(tmp_path):
    from evita.bootstrap.diagnostics import EvitaError

    (tmp_path / "bad.dl").write_text('stage("bad").\nb1 sys::scc{relation: "x", recursive: true} :- sys::rule{id: _}.\n')
    with pytest.raises(EvitaError) as info:
        st.stage_file(tmp_path / "bad.dl", str(tmp_path))
    text = info.value.render()
    assert "sys::scc is a view" in text and "bad.dl:2" in text
