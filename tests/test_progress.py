"""Progress you can see (runtime/progress.py): the events of a compile and of a run
reach the logger `evita.progress`, and the terminal line draws on a terminal only,
after its delay, and steps aside for anything written to stdout. Cheap: one small
engine run on Spark (no compile), a scheduler whose stage does no Spark work."""
from __future__ import annotations

import logging
import re
import sys
from dataclasses import replace
from io import StringIO

import pytest
from rich.console import Console

from evita.bootstrap import activity
from evita.runtime import progress

SG_CHAIN = """
edge(1, 2). edge(2, 3). edge(3, 4). edge(4, 5).
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
"""


@pytest.fixture
def events(caplog):
    caplog.set_level(logging.INFO, logger="evita.progress")
    return lambda: [r for r in caplog.records if r.name == "evita.progress"]


@pytest.mark.parametrize("local", [False, True], ids=["sql loop", "driver"])
def test_a_recursive_run_logs_its_stratum_iterations_and_delta_sizes(spark, events, local):
    from evita.bootstrap.checks import check_program
    from evita.bootstrap.parser import parse_program
    from evita.bootstrap.planner import plan
    from evita.runtime.engine import run

    flow = plan(check_program(parse_program(SG_CHAIN, "chain.dl")))
    result = run(flow, spark, local=local)
    got = events()
    kinds = [r.event for r in got]
    assert kinds[0] == "stratum started" and kinds[-1] == "stratum done"
    assert got[0].relations == ["path"] and got[0].activity.startswith("stratum ")
    rounds = [r for r in got if r.event == "iteration"]
    # the sizes the loop counted: 4 paths of length 1, then 3, 2, 1, then none new
    assert [r.deltas["path"] for r in rounds] == [4, 3, 2, 1, 0]
    assert [r.iteration for r in rounds] == [0, 1, 2, 3, 4]
    assert rounds[-1].mode == ("small" if local else "sql")
    assert "iteration 2" in rounds[2].getMessage() and "path 2" in rounds[2].getMessage()
    # the same numbers as the run's own stats: reported, not counted again
    assert [s.deltas["path"] for s in result.stats if s.deltas] == [r.deltas["path"] for r in rounds]
    assert activity.current() == []


def test_the_scheduler_logs_each_stage_and_a_failing_one(monkeypatch, events):
    from evita.bootstrap import scheduler
    from evita.bootstrap.parser import parse_program
    from evita.catalog.encode import encode

    program = parse_program(SG_CHAIN, "chain.dl", name="chain")

    def stage_without_spark(spark, stage, before, program_id, *a, **kw):
        return replace(scheduler.skipped_version(before, program_id, stage.name, 0.0), skipped=False)

    monkeypatch.setattr(scheduler, "run_one", stage_without_spark)
    scheduler.compile_program(None, encode(program), "chain")
    started = [r for r in events() if r.event == "stage started"]
    assert started and started[0].getMessage() == f"stage {started[0].stage} started"
    skipped = [r.stage for r in events() if r.event == "stage skipped"]  # asked in process: stages with nothing to do
    assert started[0].stage not in skipped and {"magic_sets", "localize"} <= set(skipped)
    assert [r.event for r in events()][-1] == "stage done"

    def failing(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(scheduler, "run_one", failing)
    with pytest.raises(KeyboardInterrupt):
        scheduler.compile_program(None, encode(program), "chain")
    assert events()[-1].event == "stage failed" and "KeyboardInterrupt" in events()[-1].getMessage()
    assert activity.current() == []


def terminal() -> tuple:
    buf = StringIO()
    return Console(force_terminal=True, file=buf, width=100), buf


def test_the_line_draws_on_a_terminal_and_steps_aside_for_stdout(capsys):
    console, buf = terminal()
    with progress.shown(console=console, delay=0) as display:
        display.done.set()  # no refresh thread: the test draws
        with progress.stratum(1, ["path"]):
            progress.iteration(3, {"path": 1200})
            display.draw()
            drawn = buf.getvalue()
            print("the answers")
            erased = buf.getvalue()
            display.draw()  # within PAUSE of the answers: stays away
            assert buf.getvalue() == erased
    assert "stratum 1 (path)" in drawn and "iteration 3: new tuples path 1,200" in drawn
    assert erased.endswith("\x1b[2K") and len(erased) > len(drawn)  # erased before the answers went out
    assert capsys.readouterr().out == "the answers\n"
    assert sys.stdout is not None and not isinstance(sys.stdout, progress._Guarded)


def test_the_line_names_the_command_while_no_activity_runs():
    """Never a spinner without a word: between activities the line says the command."""
    console, buf = terminal()
    with progress.shown(console=console, delay=0, what="evita explain") as display:
        display.done.set()
        display.draw()
        between = buf.getvalue()
        with activity.doing("stage system_r: its explain view"):
            display.draw()
    assert "evita explain" in between
    assert "stage system_r: its explain view" in buf.getvalue()[len(between):]


def test_the_line_waits_its_delay():
    console, buf = terminal()
    with progress.shown(console=console, delay=60) as display:
        display.done.set()
        with activity.doing("the Spark start-up"):
            display.draw()
    assert buf.getvalue() == ""


@pytest.mark.parametrize("case", ["not a terminal", "quiet"])
def test_no_line_when_piped_or_quiet(case):
    buf = StringIO()
    console = Console(file=buf) if case == "not a terminal" else Console(force_terminal=True, file=buf)
    with progress.shown(quiet=case == "quiet", console=console, delay=0) as display:
        with activity.doing("stage delta"):
            pass
    assert display is None and buf.getvalue() == ""


def test_the_spark_job_in_flight_and_none_on_connect(spark, monkeypatch):
    import threading
    import time

    jobs = progress.SparkJobs()
    assert jobs.text() == ""  # none in flight
    # a job that sleeps in the JVM for a moment (no Python worker to start)
    slow = spark.range(1).selectExpr("reflect('java.lang.Thread', 'sleep', cast(2000 as bigint))")
    running = threading.Thread(target=slow.collect)
    running.start()
    seen, deadline = "", time.monotonic() + 10
    while running.is_alive() and time.monotonic() < deadline and "tasks" not in seen:
        seen = jobs.text()
        time.sleep(0.1)
    running.join()
    assert re.fullmatch(r"Spark job \d+: \d+/\d+ tasks", seen), seen
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # what a Spark Connect client sets
    assert progress.SparkJobs().text() == "" and progress.SparkJobs()._tracker() is None


def test_an_interrupt_erases_the_line_and_shows_the_cursor():
    console, buf = terminal()
    with pytest.raises(KeyboardInterrupt):
        with progress.shown(console=console, delay=0) as display:
            display.done.set()
            with progress.stage("magic_sets"):
                display.draw()
                raise KeyboardInterrupt
    out = buf.getvalue()
    assert "stage magic_sets" in out and "\x1b[?25l" in out  # drawn, cursor hidden while it showed
    assert out.endswith("\x1b[2K") and "\x1b[?25h" in out  # then erased, cursor back
    assert activity.current() == []


@pytest.mark.parametrize("command", ["compile", "explain", "plan", "run", "simulate", "load", "sql"])
def test_quiet_is_on_every_command_that_starts_spark(command):
    from evita.bootstrap.cli import build_parser

    assert build_parser().parse_args([command, "x", "--quiet"]).quiet
    assert not build_parser().parse_args([command, "x"]).quiet
