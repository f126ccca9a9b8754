"""The one-row evaluator of catalog programs (runtime/onerow.py), on real Spark.

Differential: every stage, on every example, fixture and stage file as input, derives
the same catalog rows evaluated as one-row statements as on the engine's SQL loop, and
in one Spark action (the suite: each stage on one covering example; `pytest -m extended`,
which CI runs, the rest). Small programs pin the semantics the stages use: recursion
(mutual, non-linear, through negation of a lower stratum), aggregates, keys, and the
iteration limit.
"""
from __future__ import annotations


import pytest

from evita.bootstrap import stage as st
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.scheduler import Lattice, check_integrity, integrity_program
from evita.catalog.encode import encode
from evita.catalog.rows import CatalogRows

from conftest import EXAMPLES, FIXTURES, lattice_order, stages

PROGRAMS = (sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))
            + sorted((FIXTURES / "magic").glob("*.olg")) + sorted((FIXTURES / "magic").glob("*.dl")))
STAGES = sorted(stages())  # every stage, shipped and under examples/stages
STAGE_FILES = [stages()[name].path for name in STAGES]


def _both(spark, stage, rows, program_id, reference="engine", **kw):
    before = len(st.FALLBACKS)
    one = st.run_stage(spark, stage, rows, program_id, evaluator="one-row", **kw)
    engine = st.run_stage(spark, stage, rows, program_id, evaluator=reference, **kw)
    assert len(st.FALLBACKS) == before
    return one, engine


# Every stage on four examples that between them hold every construct the stages read
# (lists, keys, aggregates, queries, negation, locations, @next, recursion); the magic
# programs with bound queries (non-linear, several queries, Fig. 4.1) for magic_sets. test_stage_cases runs each
# stage's own cases; this test is about the two evaluators agreeing.
COVERING = ("shortest_path.olg", "two_phase_commit.olg", "chord_aggregates.olg", "negation.dl")
# The stages that rewrite Dedalus components (decouple; seal; partition, whose other half, the
# decomposable-recursion decision, every example with recursion runs) are held equal on
# the example with components, against the in-process evaluator (their many small
# recursions cost the engine's loop a job each); test_stage_cases holds partition's
# decisions on ordinary programs.
# Cascades shares system_r's search space and cost model (include/join_order.dl): two
# examples hold its own search.
DEDALUS_ONLY = ("decouple", "partition", "seal")
# Held against the in-process evaluator too: the egraph stage's many strata (union-find,
# extraction, write-back) cost the engine's loop a job each, over three minutes per example;
# and only under `-m extended`: the examples hold no dataflow rows, so it derives nothing
# there, and its one-row statement still costs Spark over a minute to analyze.
IN_PROCESS_REFERENCE = DEDALUS_ONLY + ("egraph",)
EXTENDED_ONLY = ("egraph",)
PAIRS = [(stage, path) for stage in STAGES for path in PROGRAMS
         if (path.parent == EXAMPLES and path.name in COVERING
             and (stage not in DEDALUS_ONLY or path.name == "two_phase_commit.olg")
             and (stage != "cascades" or path.name in ("shortest_path.olg", "chord_aggregates.olg")))
         or (stage == "magic_sets" and path.name in ("nonlinear.dl", "several_queries.olg", "path_magic.olg"))]


def _sampled(pairs: list) -> list:
    """The suite runs each stage on one of its examples, the covering examples taken in
    turn by the stage's place in the sorted list (so every example is read by some stage),
    and magic_sets on nonlinear.dl too; `pytest -m extended` runs the other pairs."""
    kept = set()
    for i, stage in enumerate(STAGES):
        mine = [p for s, p in pairs if s == stage]
        turn = [p for p in mine if p.name == COVERING[i % len(COVERING)]]
        if mine and stage not in EXTENDED_ONLY:
            kept.add((stage, (turn or mine)[0]))
    kept.add(("magic_sets", next(p for s, p in pairs if s == "magic_sets" and p.name == "nonlinear.dl")))
    return [pytest.param(s, p, id=f"{p.name}-{s}", marks=() if (s, p) in kept else pytest.mark.extended)
            for s, p in pairs]


@pytest.mark.parametrize("stage,path", _sampled(PAIRS))
def test_stage_derives_the_same_rows_as_on_the_engine(spark, stage, path):
    program = parse_file(path)
    rows = encode(program)
    one, engine = _both(spark, stages()[stage], rows, program.name,
                        reference="in-process" if stage in IN_PROCESS_REFERENCE else "engine")
    assert one.actions == 1
    assert (one.inserts, one.deletes, one.updates, one.copies, one.term_copies) == \
        (engine.inserts, engine.deletes, engine.updates, engine.copies, engine.term_copies)


LARGEST = sorted((p for p in STAGE_FILES if p.stem not in DEDALUS_ONLY), key=lambda p: -len(p.read_text()))[:1]


@pytest.mark.extended  # the suite's catalogs are the examples' (above); this one is ten times larger
@pytest.mark.parametrize("path", LARGEST, ids=lambda p: p.name)
def test_stages_compiled_as_programs_give_the_same_rows(spark, path):
    """The largest stage file as input: the largest catalog the stages see in the tests."""
    program = parse_file(path)
    rows = encode(program)
    # The join-order stages' own recursion (min inside it) is held equal on the examples
    # above and by test_min_and_keys_inside_recursion_match_the_engine; on the engine's
    # SQL loop their search over every set of a stage file's rules costs a job per step.
    for name in [s for s in STAGES if s not in ("system_r", "cascades") + DEDALUS_ONLY]:
        one, engine = _both(spark, stages()[name], rows, program.name)
        assert (one.inserts, one.deletes) == (engine.inserts, engine.deletes)
    violations = st.evaluate(spark, integrity_program(), rows, program.name, ["violation"], origin="integrity",
                             evaluator="one-row")
    assert violations.tuples["violation"] == set() == set(check_integrity(spark, rows, program.name))


def _run(spark, text: str, wanted, evaluator: str, **kw):
    return st.evaluate(spark, parse_program(text, "<test>"), CatalogRows(), "p", wanted, origin="test",
                       evaluator=evaluator, **kw).tuples


SEMANTICS = """
edge(1, 2). edge(2, 3). edge(3, 1). edge(3, 4). edge(5, 6).
node(1). node(2). node(3). node(4). node(5). node(6). node(7).
// mutual recursion: even and odd path lengths
even(X, X) :- node(X).
odd(X, Z) :- even(X, Y), edge(Y, Z).
even(X, Z) :- odd(X, Y), edge(Y, Z).
// non-linear recursion
tc(X, Y) :- edge(X, Y).
tc(X, Z) :- tc(X, Y), tc(Y, Z).
// negation of a lower stratum, assignments, selections
unreached(X, Y) :- node(X), node(Y), !tc(X, Y), S := X + Y, S < 9.
// aggregates, with and without group columns
outdeg(X, count<Y>) :- tc(X, Y).
far(X, max<Y>, min<Y>, sum<Y>) :- tc(X, Y).
pairs(count<*>) :- tc(_, _).
nothing(count<*>) :- tc(X, X), X > 100.
// a key (the first column): the greatest other column wins
materialize(best, infinity, infinity, keys(1)).
best(X, Y) :- tc(X, Y).
"""
WANTED = ["even", "odd", "tc", "unreached", "outdeg", "far", "pairs", "nothing", "best"]


def test_recursion_negation_aggregates_and_keys_match_the_engine(spark):
    one = _run(spark, SEMANTICS, WANTED, "one-row")
    assert one == _run(spark, SEMANTICS, WANTED, "engine")
    assert (1, 4) in one["tc"] and (1, 1) in one["tc"] and (5, 1) not in one["tc"]
    assert one["pairs"] == {(13,)} and one["nothing"] == set()
    assert one["best"] >= {(1, 4), (5, 6)}


PREM = """
edge(1, 2, 7). edge(1, 3, 2). edge(3, 2, 1). edge(2, 4, 1). edge(4, 1, 1). edge(5, 6, 3).
// min inside recursion (PreM): an improved distance replaces the old one
dist(X, Y, min<C>) :- edge(X, Y, C).
dist(X, Z, min<C>) :- dist(X, Y, C1), edge(Y, Z, C2), C := C1 + C2.
// a keyed relation inside recursion: the greatest hop count per pair wins
materialize(hops, infinity, infinity, keys(1, 2)).
hops(X, Y, 1) :- edge(X, Y, _).
hops(X, Z, N) :- hops(X, Y, M), edge(Y, Z, _), N := M + 1, N < 5.
"""


def test_min_and_keys_inside_recursion_match_the_engine(spark):
    """Stages search plans with min inside recursion (System R's best plan per set):
    the one-row fold replaces an improved tuple, as the engine does."""
    before = len(st.FALLBACKS)
    one = _run(spark, PREM, ["dist", "hops"], "one-row")
    assert len(st.FALLBACKS) == before
    assert one == _run(spark, PREM, ["dist", "hops"], "engine")
    assert (1, 2, 3) in one["dist"] and (1, 1, 5) in one["dist"] and (5, 6, 3) in one["dist"]
    assert len({(x, y) for x, y, _ in one["dist"]}) == len(one["dist"])
    assert (1, 2, 4) in one["hops"]


KEYED = """
edge(1, 2). edge(2, 3). seed(1, 1). seed(3, 10).
// a keyed relation inside recursion: a derived tuple that differs from the one held
// replaces it, a smaller one too (3's level 10 becomes 3)
materialize(level, infinity, infinity, keys(1)).
level(X, N) :- seed(X, N).
level(Y, N) :- level(X, M), edge(X, Y), N := M + 1.
"""


def test_a_keyed_relation_inside_recursion_replaces_as_the_core_says(spark):
    """runtime/semantics.py: delta = greatest per key(cand) - full, and the delta replaces
    the tuples of full with its keys (not the greatest of old and new). The oracle does
    not model keys; the engine and the in-process (columnar) backend do."""
    before = len(st.FALLBACKS)
    one = _run(spark, KEYED, ["level"], "one-row")
    assert len(st.FALLBACKS) == before
    assert one == {"level": {(1, 1), (2, 2), (3, 3)}}
    assert one == _run(spark, KEYED, ["level"], "engine") == _run(spark, KEYED, ["level"], "in-process")


MIN = """
edge(1, 2, 7). edge(1, 3, 2). edge(3, 2, 1). edge(2, 4, 1). edge(4, 1, 1). edge(5, 6, 3).
dist(X, Y, min<C>) :- edge(X, Y, C).
dist(X, Z, min<C>) :- dist(X, Y, C1), edge(Y, Z, C2), C := C1 + C2.
"""


def test_min_inside_recursion_agrees_with_the_oracle(spark):
    """PreM: 1 reaches 2 at 7 first, then at 3 through 3; the better tuple replaces it."""
    import oracle

    before = len(st.FALLBACKS)
    one = _run(spark, MIN, ["dist"], "one-row")
    assert len(st.FALLBACKS) == before
    assert one["dist"] == oracle.evaluate(parse_program(MIN, "<test>"))["dist"] == \
        _run(spark, MIN, ["dist"], "engine")["dist"]
    assert (1, 2, 3) in one["dist"] and (1, 2, 7) not in one["dist"]


def test_size_limits_and_autoinc_fall_back_to_the_engine(spark, monkeypatch):
    """The fold runs to empty deltas and numbers nothing: `unsupported` says so, and the
    caller runs such a program on the engine."""
    from evita.bootstrap.planner import plan
    from evita.runtime import onerow

    limited = ".decl n(x: number)\n.limitsize n(n=5)\nn(0).\nn(y) :- n(x), y = x + 1.\n"
    assert "limitsize" in onerow.unsupported(plan(parse_program(limited, "<test>")), {})
    numbered = "p(2). p(1). q(X, autoinc<*>) :- p(X)."
    assert "autoinc" in onerow.unsupported(plan(parse_program(numbered, "<test>")), {})
    monkeypatch.setattr(st, "IN_PROCESS_BYTES", -1)  # past the in-process evaluator
    before = len(st.FALLBACKS)
    assert _run(spark, numbered, ["q"], "auto")["q"] == {(1, 0), (2, 1)}
    assert len(st.FALLBACKS) == before + 1 and "autoinc" in st.FALLBACKS[-1][1]


def test_range_generates_in_one_row_too(spark):
    """range(...) (Soufflé's generator, Overlog's f_range): each value a `transform` of the
    rest of the rule, inside the recursive fold as well."""
    text = ("base(X) :- X := f_range(0, 3).\nn(X) :- base(X).\nn(Y) :- n(X), Y := f_range(X, X + 3), Y < 8.\n"
            "down(X, Y) :- base(X), Y := f_range(X, 0).")
    before = len(st.FALLBACKS)
    one = _run(spark, text, ["n", "down"], "one-row")
    assert len(st.FALLBACKS) == before
    assert one == {"n": {(x,) for x in range(8)}, "down": {(1, 1), (2, 2), (2, 1)}}


def test_the_iteration_limit_names_the_stratum(spark):
    text = "n(0). n(Y) :- n(X), Y := X + 1, X < 50."
    assert len(_run(spark, text, ["n"], "one-row")["n"]) == 51
    with pytest.raises(st.StageFailure, match="did not reach a fixpoint within 10 iterations: n still gains"):
        _run(spark, text, ["n"], "one-row", max_iterations=10)


def test_lattice_rides_in_the_stage_action(spark):
    shipped = st.find_stages()
    lattice = Lattice(shipped)
    program = parse_file(EXAMPLES / "shortest_path.olg")
    order = lattice_order()
    last = shipped[order[-1]]
    # Every stage but the last has run; asked with the last one, the lattice answers the planner.
    out = st.run_stage(spark, last, encode(program), program.name, evaluator="one-row",
                       lattice=lattice.question(order, [], {}))
    assert out.actions == 1
    assert Lattice.answer(out.next) == "planner"
    # Asked with a stage before it, the answer is the stage that follows.
    out = st.run_stage(spark, shipped[order[1]], encode(program), program.name, evaluator="one-row",
                       lattice=lattice.question(order[:2], [], {}))
    assert Lattice.answer(out.next) == (order[2] if len(order) > 2 else "planner")


def test_programs_with_lists_fall_back_to_the_engine(spark, monkeypatch):
    monkeypatch.setattr(st, "IN_PROCESS_BYTES", -1)  # past the in-process evaluator, which has lists
    text = "p(1). l(L) :- p(X), L := f_cons(X, X)."
    before = len(st.FALLBACKS)
    assert _run(spark, text, ["l"], "auto")["l"] == {((1, 1),)}
    assert len(st.FALLBACKS) == before + 1 and "lists" in st.FALLBACKS[-1][1]


def test_one_statement_reads_the_same_as_the_levels(spark):
    """`Built.statement()`, the evaluation as one SELECT for people to read and run in
    Spark SQL, gives the row the stacked DataFrame gives."""
    from evita.bootstrap.planner import plan
    from evita.runtime import onerow

    dataflow = plan(parse_program(SEMANTICS, "<test>"))
    types = onerow.probe_types(spark, dataflow, {}, now="x")
    built = onerow.Program(dataflow, {}, max_iterations=100, now="x", types=types).build(["tc", "outdeg"])
    with st.catalog_sized(spark):
        by_levels = built.frame(spark).selectExpr(*built.output_columns()).collect()[0]
        by_statement = spark.sql(built.statement().sql("spark")).collect()[0]
    assert by_levels == by_statement and len(by_statement["ro0"]) == 13


def test_a_failure_while_running_is_a_stage_failure(spark):
    with pytest.raises(st.StageFailure, match="Spark failed while evaluating test"):
        _run(spark, "n(1). n(0). q(Y) :- n(X), Y := 10 / X, Y > 1.", ["q"], "one-row")


# the suite: partial partitioning, the rewrite with the most new rules (its seal, and
# the others, with `pytest -m extended`)
@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=() if p.stem == "partial" else
                                               pytest.mark.extended)
                                  for p in sorted((FIXTURES / "partition").glob("*.olg"))])
def test_partition_derives_the_same_in_process_as_in_one_statement(spark, path):
    """A directive's rewrite (the examples hold none): compiling a small program runs the
    stage in process (columnar backend), a large catalog as one Spark statement."""
    program = parse_file(path)
    rows = encode(program)
    outs = [st.run_stage(spark, stages()["partition"], rows, program.name, evaluator=e)
            for e in ("in-process", "one-row")]
    got = [(o.inserts, o.deletes, o.updates, o.copies, o.term_copies) for o in outs]
    assert got[0] == got[1] and outs[0].inserts and outs[0].updates
