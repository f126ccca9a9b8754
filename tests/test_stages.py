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


# tc.dl: on Spark every iteration of a stage's recursion is a job, and the lattice's
# question and the integrity checks are more (three minutes for the compile on Spark;
# shortest_path.olg's, which runs the most stages, five). The suite runs one recursive
# stage program both ways (`test_a_stage_on_spark_derives_what_it_derives_in_process`);
# the whole compile is the extended variant.
@pytest.mark.extended
def test_small_catalogs_compile_in_process_to_the_same_catalog_as_on_spark(spark, monkeypatch):
    """A stage over a small catalog runs in this process (`stage.in_process_first`,
    the columnar backend), with no Spark action; on Spark (the size limit set below any
    catalog) the compile ends in the same catalog."""
    program = parse_file(EXAMPLES / "tc.dl")
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


def test_a_stage_on_spark_derives_what_it_derives_in_process(spark):
    """The delta stage (a recursive catalog program: the relation graph's closure) over
    tc.dl.s catalog, on the engine's SQL loop on Spark and in this process, with
    the lattice's question beside it: the same insertions, deletions and next stages."""
    program = parse_file(EXAMPLES / "tc.dl")
    rows = encode(program)
    delta = st.find_stages()["delta"]
    from evita.bootstrap.scheduler import Lattice

    question = Lattice(st.find_stages()).question(["parse", "delta"], [], {})
    here = st.run_stage(spark, delta, rows, program.name, lattice=question, evaluator="in-process")
    on_spark = st.run_stage(spark, delta, rows, program.name, lattice=question, evaluator="engine")
    assert here.actions == 0 and on_spark.actions > 0
    assert here.inserts and here.inserts == on_spark.inserts
    assert here.deletes == on_spark.deletes and here.updates == on_spark.updates
    assert (here.copies, here.term_copies, here.next) == (on_spark.copies, on_spark.term_copies, on_spark.next)


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


# ---------------------------------------------------------------- the rewriting primitives (docs/stages.md)
# Toy stages written into tmp_path, run in this process (no Spark job): `run_stage` and
# `apply` as the scheduler calls them, then the catalog's integrity checks.

JOINS = """r1(1, 2). r2(2, 3). r3(3, 4). r4(4, 5).
.plan statistics r1(rows=1000, distinct0=1000, distinct1=1000)
.plan statistics r2(rows=1000, distinct0=1000, distinct1=1000)
.plan statistics r3(rows=1000, distinct0=1000, distinct1=1000)
.plan statistics r4(rows=1000, distinct0=1000, distinct1=1000)
q1 q(A, E) :- r1(A, B), r3(C, D), r2(B, C), r4(D, E), C > 0.
"""


def _toy(tmp_path, name: str, rules: str):
    path = tmp_path / f"{name}.dl"
    path.write_text(f'stage("{name}").\nprecedes("system_r", "{name}").\nprecedes("{name}", "planner").\n' + rules)
    return st.stage_file(path, str(tmp_path))


def _after(stage, rows, program_id="p"):
    """The catalog after `stage` alone, checked for integrity as the scheduler checks it."""
    from evita.bootstrap.scheduler import check_integrity

    new = st.apply(rows, st.run_stage(None, stage, rows, program_id, evaluator="in-process"))
    assert check_integrity(None, new, program_id, "in-process") == []
    return new


def _rule_text(rows, program_id="p"):
    return [format_program(decode(rows, program_id)).splitlines()[i] for i, line in
            enumerate(format_program(decode(rows, program_id)).splitlines()) if ":-" in line]


def _reordered():
    """JOINS after system_r: positions moved, ids kept (r2, id q1#3, at position 2)."""
    rows = encode(parse_program(JOINS, "p.dl", "p"))
    rows = st.apply(rows, st.run_stage(None, st.find_stages()["system_r"], rows, "p", evaluator="in-process"))
    terms = {d["id"]: d["pos"] for t in ("predicate", "selection") for d in rows.dicts(t)}
    assert terms == {"p:q1#0": 0, "p:q1#1": 1, "p:q1#3": 2, "p:q1#5": 3, "p:q1#2": 4, "p:q1#4": 5}
    return rows


def test_copy_term_after_system_r_reordered_the_rule(tmp_path):
    # Issue 35, item 5: the copy-and-delete way of closing a gap, after system_r. r3 (id q1#2) moves to
    # position 3, whose id q1#3 r2 holds at position 2: the copy once overwrote r2 ("term count differs").
    stage = _toy(tmp_path, "drop_checks", """
p1 term(R, I, T) :- sys::predicate{rule: R, pos: I, id: T}.
p2 term(R, I, T) :- sys::selection{rule: R, pos: I, id: T}.
p4 kept(R, I, T) :- term(R, I, T), sys::rule{id: R}, notin sys::selection{rule: R, pos: I}.
p5 rank(T, R, I, count<J>) :- kept(R, I, T), kept(R, J, _), J <= I.
p6 place(T, R, I, N - 1) :- rank(T, R, I, N).
p7 size(R, count<I>) :- kept(R, I, _).
e1 stage::copy_term(T, R, P) :- place(T, R, I, P), P != I.
e2 delete sys::predicate{id: T} :- place(T, _, I, P), P != I.
e3 delete sys::selection{rule: R} :- sys::selection{rule: R}.
e4 sys::rule{id: R, term_count: N} :- size(R, N).
""")
    after = _after(stage, _reordered())
    assert _rule_text(after) == ["q1 q(A, E) :- r1(A, B), r2(B, C), r3(C, D), r4(D, E)."]
    ids = {d["id"]: d["pos"] for d in after.dicts("predicate")}
    assert ids == {"p:q1#0": 0, "p:q1#1": 1, "p:q1#3": 2, "p:q1#3~1": 3, "p:q1#4": 4}  # r2 kept its id
    # The same with the primitive: one rule, no bookkeeping, every id kept.
    removing = _toy(tmp_path, "drop_checks2", "e1 stage::remove_term(S) :- sys::selection{id: S}.\n")
    again = _after(removing, _reordered())
    assert _rule_text(again) == _rule_text(after)
    assert {d["id"]: d["pos"] for d in again.dicts("predicate")} == \
           {"p:q1#0": 0, "p:q1#1": 1, "p:q1#3": 2, "p:q1#2": 3, "p:q1#4": 4}
    assert again.dicts("rule")[0]["term_count"] == 5


def test_remove_term_closes_the_gap_and_keeps_the_ids(tmp_path):
    rows = encode(parse_program('b(1). c(1).\nr1 a(X, Y) :- b(X), X > 0, Y := 2, c(X), X < 5.\n', "p.dl", "p"))
    stage = _toy(tmp_path, "drop", 'e1 stage::remove_term(T) :- sys::selection{id: T}.\n'
                                   'e2 stage::remove_term(T) :- sys::assignment{id: T, var: "Y"}, sys::rule{id: R}.\n'
                                   'e3 sys::argument{predicate: H, pos: 1, kind: "const", var: null, value: "2", '
                                   'type: "int"} :- sys::rule{head: H}.\n')
    after = _after(stage, rows)
    assert _rule_text(after) == ["r1 a(X, 2) :- b(X), c(X)."]
    assert {d["id"]: d["pos"] for d in after.dicts("predicate")} == {"p:r1#0": 0, "p:r1#1": 1, "p:r1#4": 2}
    assert after.dicts("rule")[0]["term_count"] == 3
    assert after["selection"] == [] and {d["term"] for d in after.dicts("expression")} <= {"p:r1#0", "p:r1#1",
                                                                                          "p:r1#4"}


def test_a_misused_primitive_is_reported_at_the_stage_rule(tmp_path):
    rows = encode(parse_program('b(1).\nr1 a(X) :- b(X).\n', "p.dl", "p"))
    head = _toy(tmp_path, "bad_head", '\nh1 stage::remove_term(H) :- sys::rule{head: H}.\n')
    with pytest.raises(StageFailure) as info:
        _after(head, rows)
    assert "names the head of rule p:r1" in info.value.reason and info.value.rule == "h1"
    assert f"{tmp_path / 'bad_head.dl'}:5:" in info.value.detail and "delete sys::rule" in info.value.detail
    ghost = _toy(tmp_path, "ghost", 'g1 stage::remove_term("p:r9#1") :- sys::rule{id: R}.\n')
    with pytest.raises(StageFailure, match="no term has that id"):
        _after(ghost, rows)
    taken = _toy(tmp_path, "taken", 'm1 stage::move::argument{predicate: A, pos: 0, to_pos: 1} :- '
                                    'sys::predicate{id: A, relation: "b"}.\n')
    with pytest.raises(StageFailure, match="which another row holds") as info:
        _after(taken, encode(parse_program('b(1, 2).\nr1 a(X) :- b(X, Y).\n', "p.dl", "p")))
    assert "taken.dl:4:" in info.value.detail and "derived by rule m1" in info.value.detail
    keyless = _toy(tmp_path, "keyless", 'm1 stage::move::argument{predicate: A, to_pos: 1} :- '
                                        'sys::argument{predicate: A}.\n')
    with pytest.raises(StageFailure, match="whole key"):
        _after(keyless, rows)
    from evita.bootstrap.diagnostics import EvitaError
    (tmp_path / "typo.dl").write_text('stage("typo").\nm1 stage::move::argumnt{predicate: A, pos: 0, to_pos: 1} :- '
                                      'sys::argument{predicate: A}.\n')
    with pytest.raises(EvitaError, match="did you mean stage::move::argument"):
        st.stage_file(tmp_path / "typo.dl", str(tmp_path))


def test_move_carries_every_field_to_the_new_key(tmp_path):
    # Issue 35, item 6: swapping two arguments names only the keys; kind, var, value, type (and any column
    # the catalog gains later) come along.
    rows = encode(parse_program('.decl b(x: symbol, y: number)\n.decl a(y: number)\nb("k", 1).\n'
                                'r1 a(Y) :- b("k", Y).\n', "p.dl", "p"))
    swap = _toy(tmp_path, "swap", 'm1 stage::move::argument{predicate: A, pos: I, to_pos: 1 - I} :- '
                                  'sys::predicate{id: A, relation: "b", pos: 1}, sys::argument{predicate: A, pos: I}.\n'
                                  'm2 sys::relation{id: "p.b", arity: 2} :- programEvent(_).\n')
    after = st.apply(rows, st.run_stage(None, swap, rows, "p", evaluator="in-process"))
    assert _rule_text(after) == ['r1 a(Y) :- b(Y, "k").']
    before = {d["pos"]: d for d in rows.dicts("argument") if d["predicate"] == "p:r1#1"}
    moved = {d["pos"]: d for d in after.dicts("argument") if d["predicate"] == "p:r1#1"}
    assert moved[1] == {**before[0], "pos": 1} and moved[0] == {**before[1], "pos": 0}
    # A row keyed by id moves with what it owns (ids rebased) and what names it (rule.head).
    rename = _toy(tmp_path, "rename", 'm1 stage::move::predicate{id: H, to_id: cat(H, "_h")} :- '
                                      'sys::rule{head: H}.\n')
    renamed = _after(rename, encode(parse_program('b(1).\nr1 a(X + 1) :- b(X).\n', "p.dl", "p")))
    assert renamed.dicts("rule")[0]["head"] == "p:r1#0_h"
    assert {d["predicate"] for d in renamed.dicts("argument")} == {"p:r1#0_h", "p:r1#1"}
    assert all(d["id"].startswith("p:r1#0_h.") for d in renamed.dicts("expression") if d["term"] == "p:r1#0_h")
    assert _rule_text(renamed) == ["r1 a(X + 1) :- b(X)."]


def test_remove_column_drops_it_from_the_relation_its_atoms_and_facts(tmp_path):
    text = ('.decl b(x: number, y: number, z: number)\n.decl a(x: number)\n.output a\nb(1, 2, 3). b(4, 5, 6).\n'
            'r1 a(X) :- b(X, Y + 1, Z).\n')
    rows = encode(parse_program(text, "p.dl", "p"))
    stage = _toy(tmp_path, "narrow", 'c1 stage::remove_column(B, 1) :- sys::relation{id: B, name: "b"}.\n')
    after = _after(stage, rows)
    printed = format_program(decode(after, "p"))
    assert ".decl b(x: number, z: number)" in printed and "r1 a(X) :- b(X, Z)." in printed
    assert "b(1, 3)." in printed and "b(4, 6)." in printed
    assert not [d for d in after.dicts("expression") if d["name"] == "Y"]  # the argument's expression went too
    bad = _toy(tmp_path, "too_far", 'c1 stage::remove_column(B, 3) :- sys::relation{id: B, name: "b"}.\n')
    with pytest.raises(StageFailure, match="b has columns 0..2"):
        _after(bad, rows)
    # Several columns of one relation in one stage: each position as the stage read it
    # (the removals once ran in ascending order, so column 2 was out of range after 1 went).
    two = _toy(tmp_path, "narrower", 'c1 stage::remove_column(B, C) :- sys::relation{id: B, name: "b"}, '
                                     'sys::relation_column{relation: B, pos: C}, C > 0.\n')
    printed = format_program(decode(_after(two, rows), "p"))
    assert ".decl b(x: number)" in printed and "r1 a(X) :- b(X)." in printed and "b(4)." in printed


def test_the_occurrence_view_lists_every_variable_occurrence():
    """`stages/include/occurrences.dl`: (rule, variable, term, column, head or body), as its header says."""
    from evita.bootstrap.checks import check_program

    view = check_program(parse_file(st.package_root() / "stages" / "include" / "occurrences.dl"))
    rows = encode(parse_program("b(1, 2).\nr1 a(X, S + 1) :- b(X, Y), S := Y * 2, X != Y.\n"
                                "r2 c(count<X>) :- b(X, _).\n", "p.dl", "p"))
    got = st.evaluate(None, view, rows, "p", ["occurrence"], origin="occurrences", evaluator="in-process")
    shown = sorted((r.split(":")[1], v, t.split(":")[1], c, w) for r, v, t, c, w in got.tuples["occurrence"])
    assert shown == sorted([("r1", "X", "r1#0", 0, "head"), ("r1", "S", "r1#0", 1, "head"),
                            ("r1", "X", "r1#1", 0, "body"), ("r1", "Y", "r1#1", 1, "body"),
                            ("r1", "S", "r1#2", -1, "body"), ("r1", "Y", "r1#2", -1, "body"),
                            ("r1", "X", "r1#3", -1, "body"), ("r1", "Y", "r1#3", -1, "body"),
                            ("r2", "X", "r2#0", 0, "head"), ("r2", "X", "r2#1", 0, "body")])


def test_the_primitives_come_back_the_same_from_spark(spark, tmp_path):
    """remove_term, remove_column and move derived on the engine's SQL loop on Spark: the same edits as in process."""
    stage = _toy(tmp_path, "all_three", 'e1 stage::remove_term(S) :- sys::selection{id: S}.\n'
                                        'e2 stage::remove_column(B, 1) :- sys::relation{id: B, name: "r3"}.\n'
                                        'e3 stage::move::argument{predicate: A, pos: 0, to_pos: 2} :- '
                                        'sys::predicate{id: A, relation: "r4"}.\n')
    rows = _reordered()
    here = st.run_stage(spark, stage, rows, "p", evaluator="in-process")
    there = st.run_stage(spark, stage, rows, "p", evaluator="engine")
    assert there.actions > 0 and here.term_removals == [("p:q1#5",)]
    assert (here.term_removals, here.column_removals, here.moves) == \
           (there.term_removals, there.column_removals, there.moves)
    assert st.apply(rows, here).compared() == st.apply(rows, there).compared()


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


# The view sys::term_text (catalog/views.py): r1 and r2 are one rule written two ways (named
# fields, other variable names, another label), r3 holds the same atom twice and two that
# differ by a variable.
TEXT_PROGRAM = """
.decl e(x: number, y: number)
.decl p(x: number, y: number)
.output p
e(1, 2).
r1 p(x, y) :- e(x, y), x + 1 < y * 2, z := x + 1.
r2 p(a, b) :- e{x: a, y: b}, a + 1 < b * 2, c := a + 1.
r3 p(x, y) :- e(x, y), !e(y, x), e(x, y), e(x, z), !e(y, x).
"""


def test_the_term_text_view_prints_every_term_and_expression_whatever_its_ids():
    from evita.catalog import views

    rows = encode(parse_program(TEXT_PROGRAM, "t.dl", "t"))
    got = {r[1].split(":", 1)[1]: (r[3], r[4], r[5]) for r in views.view_rows("sys::term_text", rows)}
    assert got["r1#1"] == ("atom", "e(x, y)", "e($0, $1)")
    assert got["r2#1"] == ("atom", "e(a, b)", "e($0, $1)")  # written with named fields: printed positionally
    assert got["r1#2"] == ("selection", "x + 1 < y * 2", "$0 + 1 < $1 * 2")
    assert got["r1#3"] == ("assignment", "z := x + 1", "$0 := $1 + 1")
    assert got["r1#0"] == ("atom", "p(x, y)", "p($0, $1)")
    # the same structure: the same shape in both rules, the same text for the same names
    assert all(got[f"r1#{i}"][2] == got[f"r2#{i}"][2] for i in range(4))
    assert got["r1#2.e.0"] == ("expression", "x + 1", "$0 + 1") and got["r1#2.e.0"][1] == got["r1#3.e"][1]
    # within one rule: the same atom is the same text; a variable or `notin` makes another atom
    texts = [got[f"r3#{i}"][1] for i in range(1, 6)]
    assert texts == ["e(x, y)", "notin e(y, x)", "e(x, y)", "e(x, z)", "notin e(y, x)"]
    assert got["r3#4"][2] == got["r3#1"][2]  # e(x, z) is e(x, y) up to renaming
    # ids never reach the text: after system_r moved terms, each keeps its text
    reordered = {r[1]: r[4] for r in views.view_rows("term_text", _reordered())}
    assert reordered["p:q1#3"] == "r2(B, C)" and reordered["p:q1#2"] == "r3(C, D)"


def test_a_stage_reads_the_term_text_view_the_same_in_process_and_on_spark(spark, tmp_path):
    stage = _toy(tmp_path, "twice", 'd1 stage::remove_term(A) :- sys::term_text{id: A, rule: R, kind: "atom", '
                                    'text: X}, sys::predicate{id: A, pos: I},\n'
                                    '   sys::term_text{id: B, rule: R, text: X}, sys::predicate{id: B, pos: J}, '
                                    '0 < J, J < I.\n')
    rows = encode(parse_program(TEXT_PROGRAM, "t.dl", "t"))
    here = st.run_stage(spark, stage, rows, "t", evaluator="in-process")
    there = st.run_stage(spark, stage, rows, "t", evaluator="engine")
    assert here.actions == 0 and there.actions > 0
    assert sorted(here.term_removals) == sorted(there.term_removals) == [("t:r3#3",), ("t:r3#5",)]
    assert "r3 p(x, y) :- e(x, y), notin e(y, x), e(x, z)." in _rule_text(st.apply(rows, here), "t")


def test_a_stage_cannot_write_a_view(tmp_path):
    from evita.bootstrap.diagnostics import EvitaError

    for view, fields in (("scc", 'relation: "x", recursive: true'), ("term_text", 'id: "x", text: "y"')):
        (tmp_path / "bad.dl").write_text(f'stage("bad").\nb1 sys::{view}{{{fields}}} :- sys::rule{{id: _}}.\n')
        with pytest.raises(EvitaError) as info:
            st.stage_file(tmp_path / "bad.dl", str(tmp_path))
        text = info.value.render()
        assert f"sys::{view} is a view" in text and "bad.dl:2" in text
