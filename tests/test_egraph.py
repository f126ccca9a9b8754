"""The physical dataflow as catalog rows (bootstrap/flow.py) and the egraph stage over it
(stages/egraph.dl, docs/egraph.md).

The stage's cases, header example and answers' check are in test_stage_cases.py, like every
stage's. Here: the planner's rows, and the check that matters for a rewrite of dataflows
over time: the planned and the extracted graph, run tick by tick over 200 seeds of random
inputs (`flow.differential`), give the same tuples, and a planted wrong rewrite is caught.
"""
from __future__ import annotations

import pytest

from evita.bootstrap import stage as st
from evita.bootstrap.flow import differential, flow_rows, flow_text, graph_of
from evita.bootstrap.parser import parse_program
from evita.bootstrap.planner import plan
from evita.bootstrap.stage import find_stages
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program
from evita.catalog.rows import CatalogRows

from conftest import REPO

CHAT = """
.plan op am(op=source, relation=add_member)
.plan op ms(op=source, relation=messages)
.plan op pa(op=persist, in0=am)
.plan op pm(op=persist, in0=ms)
.plan op x(op=join, in0=pa, in1=pm)
.plan op out(op=delta, in0=x, relation=notify)
"""

DEDALUS_CHAT = """
member(U)@next :- member(U).
member(U) :- add_member(U).
msg(M)@next :- msg(M).
msg(M) :- message(M).
r1 notify(U, M) :- member(U), msg(M).
r2 seen(M) :- msg(M).
add_member("ann"). message("hi").
"""


SMALL_DEDALUS = """
msg(M)@next :- msg(M).
msg(M) :- message(M).
message("hi").
"""


def rows_of(flow: dict) -> CatalogRows:
    rows = CatalogRows()
    for table, dicts in flow.items():
        for d in dicts:
            rows.add(table, **d)
    return rows


def run_egraph(text: str, stage_paths=(), name: str = "egraph") -> CatalogRows:
    """The catalog of `text` after the (egraph-like) stage `name` alone, in this process."""
    program = parse_program(text, "chat.dl")
    rows = encode(program)
    out = st.run_stage(None, find_stages(stage_paths)[name], rows, program.name, evaluator="in-process")
    return st.apply(rows, out)


def egraph_of(spark, program) -> CatalogRows:
    """The catalog after the egraph stage, shared with test_stage_cases (`stage_alone`
    caches one run per stage and program for the session)."""
    from conftest import stage_alone

    if isinstance(program, str):
        program = parse_program(program, "chat.dl")
    return encode(stage_alone(spark, "egraph", program))


def test_the_planners_dataflow_as_rows_shares_a_relation_read_twice():
    program = parse_program(DEDALUS_CHAT, "chat.olg")
    rows = rows_of(flow_rows(plan(program), program))
    ops = {r["name"]: r for r in rows.dicts("flow_op")}
    # a relation carried to the next timestep unchanged is the persist of its other rules
    assert ops["persist_msg"]["op"] == "persist" and ops["persist_msg"]["relation"] == "msg"
    assert (ops["persist_msg"]["stateful"], ops["persist_msg"]["persisted"], ops["persist_msg"]["tick"]) == \
        (True, True, "all")
    assert ops["r1_2"]["op"] == "join" and not ops["r1_2"]["stateful"]
    # msg is read by r1 and r2: one operator, two consumers
    readers = [r["op"] for r in rows.dicts("flow_input") if r["input"] == "chat:persist_msg"]
    assert sorted(readers) == ["chat:r1_2", "chat:r2_head"]
    text = flow_text(rows, "chat")
    assert "persist_msg = persist(rule4_head)" in text and "2 consumers" in text


def test_the_rows_print_as_plan_op_statements_and_read_back():
    program = parse_program("e(1, 2).\nr1 tc(X, Y) :- e(X, Y).\nr2 tc(X, Z) :- delta tc(X, Y), e(Y, Z).\n"
                            "r3 two(X, Z) :- e(X, Y), e(Y, Z).", "tc.dl")
    rows = encode(program)
    for table, dicts in flow_rows(plan(program), program).items():
        for d in dicts:
            rows.add(table, **d)
    printed = format_program(decode(rows, "tc"))
    assert ".plan op r2_2(op=join, in0=r2_1_delta, in1=src_e, detail=Y, rule=r2)" in printed
    again = encode(parse_program(printed, "tc.dl"))
    for table in ("flow_op", "flow_input"):
        assert sorted(map(tuple, again.dicts(table)), key=str) == sorted(map(tuple, rows.dicts(table)), key=str)


def test_the_chat_example_becomes_a_streaming_join_with_the_same_tuples_every_tick(spark):
    rows = egraph_of(spark, CHAT)
    extracted, _, writes = graph_of(rows, "chat", "extracted")
    assert "delta" not in {op for op, _ in extracted.values()}
    notify = extracted[writes["notify"]]
    assert notify[0] == "chain" and {extracted[i][0] for i in notify[1]} == {"join"}
    assert differential(rows, "chat", seeds=range(200)) == []


@pytest.mark.parametrize("title", ["a keyed join: the delta of a join on U of persisted inputs becomes a "
                                   "streaming join on U",
                                   "a diamond: persist(a) read by two joins stays one operator with two consumers",
                                   "a delta of a persist cancels"])
def test_every_changed_case_gives_the_same_tuples_every_tick(spark, title):
    from test_stage_cases import case_program, the_case

    program = case_program("egraph", the_case("egraph", title))
    rows = egraph_of(spark, program)
    assert graph_of(rows, program.name, "extracted")[0], "the case should extract a new graph"
    assert differential(rows, program.name, seeds=range(200)) == []


def test_the_diamond_keeps_its_shared_operator_shared(spark):
    from test_stage_cases import case_program, the_case

    program = case_program("egraph", the_case("egraph", "a diamond: persist(a) read by two joins stays one "
                                                         "operator with two consumers"))
    rows = egraph_of(spark, program)
    extracted, _, _ = graph_of(rows, program.name, "extracted")
    readers = [n for n, (_, ins) in extracted.items() if f"{program.name}:x_pa" in ins]
    assert len(readers) == 2
    assert sum(1 for op, _ in extracted.values() if op == "persist") == 1


USER_STAGE = """
stage("my_egraph").
alternative("dataflow", "my_egraph").
#include "include/egraph.dl"
#include "include/egraph_rewrites.dl"
budget("depth", BUDGET).
// the user's own rewrite: (persist ?a) => (persist (delta ?a))
u1 rw("persist-delta", N, "persist", "delta", A, "-", "=", "-", "-") :- node(N, "persist", A, "-").
"""

WRONG = """
stage("wrong_egraph").
alternative("dataflow", "wrong_egraph").
#include "include/egraph.dl"
#include "include/egraph_rewrites.dl"
budget("depth", 2).
// planted, and false: (delta ?a) => ?a
z1 rw("delta-is-all", N, "=", "=", A, "-", "=", "-", "-") :- node(N, "delta", A, "-").
"""


def test_a_wrong_rewrite_is_caught_by_the_differential_check(tmp_path):
    (tmp_path / "wrong_egraph.dl").write_text(WRONG)
    rows = run_egraph(CHAT, [str(tmp_path)], "wrong_egraph")
    problems = differential(rows, "chat", seeds=range(200))
    assert problems and "notify" in problems[0]


def test_the_budget_bounds_saturation_without_failing(tmp_path):
    (tmp_path / "my_egraph.dl").write_text(USER_STAGE.replace("BUDGET", "2"))
    rows = run_egraph(CHAT, [str(tmp_path)], "my_egraph")
    # too shallow to find the streaming join: no error, and nothing cheaper to write
    assert not graph_of(rows, "chat", "extracted")[0]


def test_a_users_rewrite_fires_in_explain(spark, tmp_path, capsys):
    from evita.bootstrap.cli import main

    (tmp_path / "stages" / "explain").mkdir(parents=True)
    (tmp_path / "stages" / "my_egraph.dl").write_text(USER_STAGE.replace("BUDGET", "2"))
    # its explain view is the shipped one (an #include not found beside the file is looked up in stages/)
    (tmp_path / "stages" / "explain" / "my_egraph.dl").write_text('#include "explain/egraph.dl"\n')
    program = tmp_path / "chat.olg"
    program.write_text(SMALL_DEDALUS)
    code = main(["explain", str(program), "--stage-path", str(tmp_path / "stages"), "--stage", "my_egraph",
                 "--choose", "dataflow=my_egraph"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "persist-delta: fired" in out  # the user's rule, in the stage's explain view
    assert "depth budget 2" in out


def test_plan_flow_reads_the_rows_back(spark, tmp_path, capsys):
    from evita.bootstrap.cli import main

    program = tmp_path / "chat.olg"
    program.write_text(DEDALUS_CHAT)
    code = main(["plan", str(program), "--flow"])
    out = capsys.readouterr().out
    assert code == 0
    assert "dataflow chat (planned) {" in out and "persist_member = persist(rule2_head)" in out
    assert "extracted" not in out  # the egraph stage is opt-in: without --egraph it does not run


@pytest.mark.parametrize("text,message", [
    (".plan op n(op=bogus)", "operator 'bogus', which is not one"),
    (".plan op n(op=persist, in0=nowhere)", "reads nowhere, which no .plan op names"),
    (".plan op n(op=persist, colour=red)", "unknown .plan op key colour"),
])
def test_a_bad_plan_op_is_a_positioned_error(text, message):
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.diagnostics import EvitaError

    with pytest.raises(EvitaError) as e:
        check_program(parse_program(text + "\n", "bad.dl"))
    rendered = e.value.render()
    assert message in rendered and "bad.dl:1:1" in rendered
