"""A stage author's mistakes fail loudly (issue 35, items 1-4): an edited trigger or
lattice fact is a new compile, not a stale cached one; an ordering fact naming a stage
that is not loaded is a positioned warning and blocks nothing; a stage file without
`stage/1`, or naming another stage, is an error; a misspelled `sys::` table suggests
the nearest one. Each is found before any Spark job."""
from __future__ import annotations

import time

import pytest

from evita.bootstrap.checks import check_program
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.parser import parse_file
from evita.bootstrap.scheduler import Lattice, compile_program
from evita.bootstrap.stage import find_stages
from evita.catalog.encode import encode

from conftest import EXAMPLES, lattice_order

# A stage that marks nothing, but has a trigger and lattice facts an author edits.
MARKER = """// marker: runs on programs with a rule (its trigger), changes nothing.
stage("marker").
precedes("{before}", "marker").
precedes("marker", "delta").
stage::applies(R) :- sys::rule{{id: R, head_relation: "{head}"}}.
n1 seen(R) :- sys::rule{{id: R}}.
"""


def _stage_dir(tmp_path, name="marker", text=None, **fields):
    folder = tmp_path / "stages"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.dl").write_text(text if text is not None else MARKER.format(**fields))
    return folder


def _tc():
    program = check_program(parse_file(EXAMPLES / "tc.dl"))
    return program, encode(program)


def _error(call) -> list:
    started = time.perf_counter()
    with pytest.raises(EvitaError) as e:
        call()
    assert time.perf_counter() - started < 1.0, "a stage author's mistake is reported within a second"
    return e.value.diagnostics


def test_an_edited_trigger_or_lattice_fact_is_a_new_compile(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("EVITA_COMPILE_CACHE", "1")
    monkeypatch.setenv("EVITA_CACHE", str(tmp_path / "cache"))
    program, rows = _tc()
    folder = _stage_dir(tmp_path, before="parse", head="path")
    first = compile_program(spark, rows, program.name, stage_paths=[folder])
    assert not first.cached and "marker" in first.stages_run
    marker = next(v for v in first.versions if v.stage == "marker")
    assert not marker.skipped  # tc has a rule for path: the trigger fires
    assert compile_program(spark, encode(program), program.name, stage_paths=[folder]).cached

    # the trigger now finds nothing: the stage is skipped, not replayed as it ran before
    _stage_dir(tmp_path, before="parse", head="nothing_derives_this")
    second = compile_program(spark, encode(program), program.name, stage_paths=[folder])
    assert not second.cached
    assert next(v for v in second.versions if v.stage == "marker").skipped

    # only a lattice fact moves: the order changes, and so does the compile
    _stage_dir(tmp_path, before="stats", head="nothing_derives_this")
    third = compile_program(spark, encode(program), program.name, stage_paths=[folder])
    assert not third.cached
    assert third.stages_run == lattice_order([folder])
    assert third.stages_run.index("marker") > third.stages_run.index("stats")
    assert second.stages_run.index("marker") < second.stages_run.index("stats")


def test_an_edited_include_of_a_stage_is_a_new_compile(spark, tmp_path, monkeypatch):
    """The stage file is unchanged; only the file it #includes, which holds the trigger,
    changes. Both caches (the parsed stage on disk and in this process, and the compile)
    see it."""
    monkeypatch.setenv("EVITA_COMPILE_CACHE", "1")
    monkeypatch.setenv("EVITA_CACHE", str(tmp_path / "cache"))
    program, rows = _tc()
    trigger = 'stage::applies(R) :- sys::rule{{id: R, head_relation: "{head}"}}.\n'
    folder = _stage_dir(tmp_path, text=MARKER.format(before="parse", head="path").replace(
        trigger.format(head="path"), '#include "lib/trigger.dl"\n'))
    (folder / "lib").mkdir()
    (folder / "lib" / "trigger.dl").write_text(trigger.format(head="path"))
    first = compile_program(spark, rows, program.name, stage_paths=[folder])
    assert not next(v for v in first.versions if v.stage == "marker").skipped

    (folder / "lib" / "trigger.dl").write_text(trigger.format(head="nothing_derives_this"))
    second = compile_program(spark, encode(program), program.name, stage_paths=[folder])
    assert not second.cached
    assert next(v for v in second.versions if v.stage == "marker").skipped


def test_an_unknown_stage_in_precedes_warns_and_blocks_nothing(spark, tmp_path):
    program, rows = _tc()
    folder = _stage_dir(tmp_path, before="const_porp", head="path")
    lattice = Lattice(find_stages([folder]))
    [warning] = lattice.warnings
    assert warning.severity == "warning" and warning.code == "unknown-stage"
    assert warning.span.file.endswith("marker.dl") and warning.span.line == 3
    assert "const_porp" in warning.message and "'const_prop'" in warning.hint
    comp = compile_program(spark, rows, program.name, stage_paths=[folder])
    assert [w.message for w in comp.warnings] == [warning.message]
    # every stage after it still runs: the typo orders nothing
    assert {"marker", "delta", "system_r", "partition"} <= set(comp.stages_run)
    assert comp.stages_run == lattice_order([folder])


def test_precedes_if_loaded_orders_only_stages_that_are_there(tmp_path):
    text = MARKER.format(before="parse", head="path") + 'precedes_if_loaded("dead_rules", "marker").\n'
    folder = _stage_dir(tmp_path, text=text)
    alone = Lattice(find_stages([folder]))
    assert alone.warnings == [] and ("dead_rules", "marker") not in alone.orders()
    with_it = Lattice(find_stages([folder, EXAMPLES / "stages"]))
    assert ("dead_rules", "marker") in with_it.orders()
    order = lattice_order([folder, EXAMPLES / "stages"])
    assert order.index("dead_rules") < order.index("marker")


def test_a_stage_file_without_stage_fact_is_an_error(tmp_path):
    folder = _stage_dir(tmp_path, name="nameless", text='n1 seen(R) :- sys::rule{id: R}.\n')
    [d] = _error(lambda: Lattice(find_stages([folder])))
    assert d.code == "stage-unnamed" and d.span.file.endswith("nameless.dl")
    assert 'stage("nameless")' in d.hint


def test_a_stage_fact_naming_another_stage_is_an_error(tmp_path):
    folder = _stage_dir(tmp_path, name="bad", text='stage("bad2").\nprecedes("parse", "bad2").\n'
                                                 'n1 seen(R) :- sys::rule{id: R}.\n')
    [d] = _error(lambda: find_stages([folder]))
    assert d.code == "stage-name" and d.span.line == 1
    assert "bad2.dl" in d.hint and 'stage("bad")' in d.hint


@pytest.mark.parametrize("body", ["sys::rules{id: R}", "sys::rules(R, _)", "!sys::predicat{rule: R}, sys::rule{id: R}"])
def test_a_misspelled_catalog_table_suggests_the_nearest(tmp_path, body):
    text = f'stage("typo").\nprecedes("parse", "typo").\nn1 seen(R) :- {body}.\n'
    folder = _stage_dir(tmp_path, name="typo", text=text)
    [d] = _error(lambda: find_stages([folder]))
    assert d.code == "unknown-catalog-table" and d.span.line == 3
    assert "did you mean sys::rule" in d.hint or "did you mean sys::predicate" in d.hint


def test_a_cycle_in_the_order_is_an_error(tmp_path):
    # marker follows system_r, which follows delta, which marker precedes
    folder = _stage_dir(tmp_path, before="system_r", head="path")
    [d] = _error(lambda: Lattice(find_stages([folder])))
    assert d.code == "stage-cycle" and "marker" in d.message and "system_r" in d.message
    assert "marker.dl" in d.hint


# ---------------------------------------------------------------- evita test-stage (issue 35, item 4)

DEAD_CASES = """// case: a rule whose head nobody reads is removed
.decl edge(x: number, y: number)
.decl path(x: number, y: number)
.decl scratch(x: number)
.output path
edge(1, 2).
r1 path(x, y) :- edge(x, y).
r2 scratch(x) :- edge(x, x).
// expect:
.decl edge(x: number, y: number)
.decl path(x: number, y: number)
.decl scratch(x: number)
.output path
edge(1, 2).
r1 path(x, y) :- edge(x, y).

// case: no-op: every rule feeds the output
.decl edge(x: number, y: number)
.decl path(x: number, y: number)
.output path
edge(1, 2).
r1 path(x, y) :- edge(x, y).
"""


def test_test_stage_runs_an_outside_stage_and_fails_on_a_wrong_case(tmp_path, capsys):
    """A stage outside the repository, its cases in cases/NAME.dl beside it: every check
    passes (exit 0); an expected block that keeps a dead rule fails with the diff (exit 1)."""
    from evita.bootstrap.cli import main

    text = (EXAMPLES / "stages" / "dead_rules.dl").read_text().replace('stage("dead_rules")', 'stage("my_dead")')
    folder = _stage_dir(tmp_path, "my_dead", text)
    (folder / "cases").mkdir()
    (folder / "cases" / "my_dead.dl").write_text(DEAD_CASES)
    args = ["test-stage", str(folder / "my_dead.dl"), "--examples", str(EXAMPLES / "tc.dl")]
    assert main(args) == 0
    out = capsys.readouterr().out
    for check in ("case: a rule whose head nobody reads is removed", "a no-op case", "header example 1",
                  "same answers: example tc.dl", "same answers: case: no-op: every rule feeds the output"):
        assert f"ok   {check}" in out
    assert "0 failed" in out
    wrong = DEAD_CASES.replace("r1 path(x, y) :- edge(x, y).\n\n", "r1 path(x, y) :- edge(x, y).\n"
                                                                 "r2 scratch(x) :- edge(x, x).\n\n", 1)
    (folder / "cases" / "my_dead.dl").write_text(wrong)
    assert main(args + ["-k", "case:"]) == 1
    out = capsys.readouterr().out
    assert "FAIL case: a rule whose head nobody reads is removed" in out
    assert "-r2 scratch(x) :- edge(x, x)." in out and "1 failed" in out
