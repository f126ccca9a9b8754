"""Sealed messages (TR App. B.4.1; docs/dedalus.md, "Sealed messages"; stages/seal.dl),
checked by running: a replica answers pings with its whole store, sealed, while the store
still grows (tests/fixtures/seal/batch.olg), simulated over 200 seeds with delays
uniform:1-5. The oracle: every seed quiesces, and the leader's view of a ping appears in
one step and is the replica's store at the step that answered it; without the seal the
same program breaks that (the check can fail); the sugar runs as its hand-written
equivalent (batch_by_hand.olg) does, output for output, step for step. Misuses fail with a
diagnostic at the rule.
"""
from __future__ import annotations

import pytest

from evita.runtime.simulate import Simulation

from conftest import FIXTURES, shown_outputs

BATCH = FIXTURES / "seal" / "batch.olg"
BY_HAND = FIXTURES / "seal" / "batch_by_hand.olg"
SEEDS = range(200)
DELAY = "uniform:1-5"
STEPS = 40  # every seed quiesces well before (asserted)
_RUNS: dict = {}


def _tick(spark, path, skip=()):
    """The program through the lattice (not stored), lowered to its tick program."""
    from evita.bootstrap.cli import parse_and_check
    from evita.bootstrap.scheduler import compile_program
    from evita.catalog.decode import decode
    from evita.catalog.encode import encode
    from evita.runtime.dedalus import lower

    program = parse_and_check(str(path))
    comp = compile_program(spark, encode(program), program.name, stage_paths=[], skip=list(skip), only=None,
                           choose={}, max_iterations=1000)
    return lower(decode(comp.final, program.name))


def _run(spark, path):
    if str(path) not in _RUNS:
        _RUNS[str(path)] = Simulation(_tick(spark, path), SEEDS, DELAY).run(STEPS)
    return _RUNS[str(path)]


def _batches(run) -> tuple:
    """({(seed, ping): (step, {(Id, V)})} of the replica's snap, the same of the leader's
    view, the seeds where one ping's view spans several steps)."""
    snap, view, split = {}, {}, set()
    t = run.trace[run.trace["kind"] == "output"]
    for r in t.itertuples(index=False):
        _, ping, ident, value = r.tuple
        into = snap if r.relation == "snap" else view if r.relation == "view" else None
        if into is None:
            continue
        step, rows = into.setdefault((int(r.seed), ping), (int(r.step), set()))
        if step != int(r.step):
            split.add((r.relation, int(r.seed), ping))
        rows.add((ident, value))
    return snap, view, split


def test_the_leader_sees_each_batch_whole_in_one_step(spark):
    run = _run(spark, BATCH)
    assert not run.late, run.late
    snap, view, split = _batches(run)
    assert not split, sorted(split)[:5]
    assert {k: rows for k, (_, rows) in view.items()} == {k: rows for k, (_, rows) in snap.items()}
    assert all(step_v > snap[k][0] for k, (step_v, _) in view.items())  # a message lands later
    sizes = {len(rows) for _, rows in snap.values()}
    assert len(sizes) > 1 and max(sizes) > 1, sizes  # batches of several sizes: a partial one could show


def test_without_the_seal_the_leader_sees_partial_batches(spark, tmp_path):
    """The same program with the seal dropped (each fact a message of its own): the oracle
    above sees a view spread over steps, so it can fail."""
    text = BATCH.read_text()
    assert "seal<Id, V>" in text
    path = tmp_path / "unsealed.olg"
    path.write_text(text.replace("seal<Id, V>", "Id, V"))
    run = Simulation(_tick(spark, path), SEEDS, DELAY).run(STEPS)
    _, _, split = _batches(run)
    assert any(rel == "view" for rel, _, _ in split)


def test_the_sugar_runs_as_the_hand_written_seal(spark):
    sugar, by_hand = _run(spark, BATCH), _run(spark, BY_HAND)
    assert not by_hand.late
    assert shown_outputs(sugar) == shown_outputs(by_hand)
    assert sugar.quiesced == by_hand.quiesced


def test_a_seal_the_seal_stage_left_out_cannot_run(spark):
    from evita.bootstrap.diagnostics import EvitaError

    with pytest.raises(EvitaError) as e:
        _tick(spark, BATCH, skip=("seal",))
    shown = e.value.render()
    assert "batch.olg:20:5: error[sealed-message]: rule q4 still seals answer" in shown, shown
    assert "keep the seal stage" in shown, shown


BAD = [  # (replace this, by that, code, line, column, words)
    ("q4 answer(@Ld, P, seal<Id, V>)@async :-", "q4 answer(@Ld, P, seal<Id, V>)@next :-", "misused-seal", 20, 23,
     "which is not @async"),
    ("q4 answer(@Ld, P, seal<Id, V>)@async :-", "q4 answer(@Ld, count<P>, seal<Id, V>)@async :-", "misused-seal", 20,
     20, "count<...> beside seal<...>"),
    ("q4 answer(@Ld, P, seal<Id, V>)@async :-", "q4 answer(@Ld, seal<P>, seal<Id, V>)@async :-", "misused-seal", 20,
     29, "a head seals one batch"),
    ("q4 answer(@Ld, P, seal<Id, V>)@async :-", "q4 answer(@Ld, P, seal<Id + 1, V>)@async :-", "misused-seal", 20, 23,
     "seal<...> lists variables"),
]


@pytest.mark.parametrize("old,new,code,line,col,words", BAD, ids=[w[:24] for *_, w in BAD])
def test_a_misused_seal_fails_at_its_text(tmp_path, old, new, code, line, col, words):
    from evita.bootstrap.cli import parse_and_check
    from evita.bootstrap.diagnostics import EvitaError

    text = BATCH.read_text()
    assert old in text
    path = tmp_path / "bad.olg"
    path.write_text(text.replace(old, new))
    with pytest.raises(EvitaError) as e:
        parse_and_check(str(path))
    shown = [d for d in e.value.diagnostics if d.code == code]
    assert shown and words in shown[0].message, e.value.diagnostics
    assert (shown[0].span.line, shown[0].span.col) == (line, col), shown[0].span
    assert str(e.value).count(f"{path}:{line}:{col}") >= 1


REFUSED = [  # (replace this, by that, code, words): the stage's refusals, at the rule
    ("q4 answer(@Ld, P, seal<Id, V>)@async :-", "q4 answer(P, @Ld, seal<Id, V>)@async :-", "not supported yet",
     "with its location at column 1"),
    ("    l1 view(@L, P, Id, V) :- answer(@L, P, Id, V).\n", "", "sealed-message",
     "no component reads the sealed message answer"),
    ("    q3 snap(", '    q5 answer(@"leader:1", 0, 0, "x")@async :- ping(@R, _).\n    q3 snap(', "sealed-message",
     "which another rule derives too"),
    ("    q3 snap(", "    q5 answer_seq(@R, 1) :- ping(@R, _).\n    q3 snap(", "sealed-message",
     "would add relation answer_seq"),
    ("query snap(", 'seal::partitions("q9", 2).\nquery snap(', "sealed-message",
     'seal::partitions("q9", N) names no rule sealing a message'),
]


@pytest.mark.parametrize("old,new,code,words", REFUSED, ids=[w[:24] for *_, w in REFUSED])
def test_a_seal_the_stage_refuses_fails_at_the_rule(spark, tmp_path, old, new, code, words):
    from evita.bootstrap.parser import parse_program

    from conftest import stage_alone

    text = BATCH.read_text()
    assert old in text
    with pytest.raises(Exception) as e:
        stage_alone(spark, "seal", parse_program(text.replace(old, new), str(tmp_path / "refused.olg")))
    shown = str(e.value)
    assert f"error[{code}]" in shown and words in shown, shown
    at = "seal::partitions(" if "partitions" in words else "q4 answer("
    assert f"| {' ' * 4 * (at[0] == 'q')}{at}" in shown, shown  # the source line shown is the statement's


@pytest.mark.extended  # the stage's SQL loop on Spark (35 s): the suite runs a stage on Spark in test_stages.py
@pytest.mark.parametrize("path", [BATCH, FIXTURES / "partition" / "sealed.olg"], ids=["step", "commit"])
def test_the_stage_derives_the_same_in_process_as_on_spark(spark, path):
    """Compiling a small program runs the stage in process (columnar backend), a catalog
    past the memory budget on the engine's SQL loop on Spark: both must desugar alike, a
    batch tagged by the sender's step (batch.olg) or, after partial partitioning, by the
    commit (sealed.olg)."""
    from evita.bootstrap import stage as st
    from evita.bootstrap.parser import parse_file
    from evita.catalog.encode import encode

    from conftest import stages

    program = parse_file(path)
    rows = encode(program)
    if "partition::partial" in path.read_text():
        rows = st.apply(rows, st.run_stage(spark, stages()["partition"], rows, program.name, evaluator="in-process"))
        assert any(f["relation"] == "seal::partitions" for f in rows.dicts("fact"))
    outs = [st.run_stage(spark, stages()["seal"], rows, program.name, evaluator=e)
            for e in ("in-process", "engine")]
    got = [(o.inserts, o.deletes, o.updates, o.copies, o.term_copies) for o in outs]
    assert got[0] == got[1] and outs[0].inserts and outs[0].term_copies
