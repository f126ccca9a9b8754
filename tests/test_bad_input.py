"""Bad input never passes silently, through the command line: each case of issue 18
gets a positioned error or warning and the right exit code; a Spark failure or an
interrupt is one line; a failed compile keeps the last good one."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evita.bootstrap.cli import main

from conftest import EXAMPLES, FIXTURES

BAD = FIXTURES / "bad_input"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# fixture (in tests/fixtures/bad_input), command, exit code, diagnostic code, "file:line:col"
NO_SPARK = [
    ("binary.olg", "check", 1, "not-text", "binary.olg:2:9"),
    ("latin1.dl", "check", 1, "not-text", "latin1.dl:1:21"),
    ("nul.olg", "check", 1, "not-text", "nul.olg:1:5"),
    ("empty.olg", "check", 0, "empty-program", "empty.olg:1:1"),
    # a warning, so exit 0 on every command (as Soufflé runs an empty program): the two agree
    ("empty.olg", "run", 0, "empty-program", "empty.olg:1:1"),
    ("only_declarations.dl", "run", 0, "empty-program", "only_declarations.dl:1:1"),
    # no position in the file: the file alone, never `file:0:0`
    ("a_directory.olg", "check", 1, "not-a-file", "a_directory.olg: error[not-a-file]"),
    ("no_such_file.olg", "check", 1, "no-such-file", "no_such_file.olg: error[no-such-file]"),
    ("noise.olg", "check", 1, "error-limit", "noise.olg:"),
    ("fact_type.dl", "check", 1, "fact-type", "fact_type.dl:3:9"),
    ("io_param.dl", "check", 1, "io-param", "io_param.dl:2:22"),
]


@pytest.fixture(scope="module", autouse=True)
def odd_files():
    """Files git cannot hold as text, and a directory, made fresh from their recipes."""
    BAD.mkdir(exist_ok=True)
    (BAD / "binary.olg").write_bytes(b"a(1).\nr1 b(X) \xff\xfe\x00:- a(X).\n")
    (BAD / "latin1.dl").write_bytes(b".decl city(name: sym\xe9bol)\n")
    (BAD / "nul.olg").write_bytes(b"a(1)\x00.\n")
    (BAD / "a_directory.olg").mkdir(exist_ok=True)
    yield


@pytest.mark.parametrize("name, command, rc, code, where", NO_SPARK, ids=[f"{c[1]}-{c[0]}" for c in NO_SPARK])
def test_odd_input_without_spark(capsys, name, command, rc, code, where):
    got, _, err = run(capsys, command, BAD / name)
    assert (got, f"[{code}]") == (rc, f"[{code}]") and f"[{code}]" in err, err
    assert str(BAD / where) in err, err
    assert "Traceback" not in err
    assert all(c.isprintable() or c == "\n" for c in err), repr(err)  # a binary file's bytes come escaped


def test_a_diagnostic_without_a_position_names_its_source_alone_and_repeats_nothing():
    from evita.bootstrap.diagnostics import Diagnostic
    from evita.bootstrap.syntax import Span

    said = Diagnostic("bad-inputs", "inputs['n'] is a str: give a DataFrame", Span("<api>", 0, 0), "n").render()
    assert said == "<api>: error[bad-inputs]: inputs['n'] is a str: give a DataFrame"  # no :0:0, no "offending text: n"
    unsaid = Diagnostic("x", "cannot reach the master", Span("<command line>", 0, 0), "spark://h:7").render()
    assert unsaid.splitlines()[1] == "  offending text: spark://h:7"  # the message does not show it: kept
    assert str(Span("f.dl", 3, 0)) == "f.dl:3" and str(Span("f.dl", 3, 4)) == "f.dl:3:4"


def test_the_error_cap_says_how_much_it_did_not_check(capsys):
    _, _, err = run(capsys, "check", BAD / "noise.olg")
    assert "note[error-limit]: stopped after 20 errors;" in err and "more lines not checked" in err
    assert "20 errors; nothing was stored in the catalog" in err  # the note is not counted as an error


def test_missing_facts_file_is_reported_at_the_input_directive_before_spark(capsys, tmp_path, monkeypatch):
    from evita.bootstrap import cli
    from evita.runtime import session

    def no_spark(*a, **kw):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(cli, "session", no_spark)
    monkeypatch.setattr(session, "spark_session", no_spark)
    code, _, err = run(capsys, "run", EXAMPLES / "tc.dl", "-F", tmp_path)
    assert code == 1 and f"{EXAMPLES / 'tc.dl'}:6:8: error[input-missing]" in err
    assert str(tmp_path / "edge.facts") in err and "Spark was started" not in err


def test_checked_command_line_subprocess_is_fast(tmp_path):
    """`evita check` of a bad file, as a user runs it: exit code 1 in well under 2 s of
    CPU (the wall clock is that too on an idle machine; CI machines are not idle). The CPU
    is this one child's, from wait4: RUSAGE_CHILDREN would also charge whatever other
    child of the test process happens to be reaped meanwhile."""
    child = subprocess.Popen([sys.executable, "-m", "evita.bootstrap.cli", "check", str(BAD / "fact_type.dl")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    assert child.returncode == 1 and "error[fact-type]" in stderr
    assert cpu < 2, cpu


def test_bad_facts_rows_fail_the_run_at_their_line(spark, capsys):
    quick = ("--only", "delta")  # the stages are not what is tested here
    code, out, err = run(capsys, "run", EXAMPLES / "tc.dl", "-F", BAD / "tc_bad", *quick)
    assert code == 1, out + err
    assert f"{BAD / 'tc_bad' / 'edge.facts'}:3:5: error[input-columns]" in err
    assert f"{BAD / 'tc_bad' / 'edge.facts'}:4:3: error[input-type]" in err and "'two'" in err
    assert "did not run" in err
    for where in ("here", "spark"):  # read in this process (runtime/inputs_here.py), and on Spark
        code, out, err = run(capsys, "run", EXAMPLES / "tc.dl", "-F", BAD / "tc_bad", "--lenient", "--stats", *quick,
                             *(["--spark"] if where == "spark" else []))
        assert code == 0 and "skipped 2 rows of edge" in out and "input edge: 2 rows skipped" in out
        assert "null" not in out  # no value became null
        # --stats: where each stratum ran and where the time of the run went
        assert (" small " in out or " local " in out) if where == "spark" else " here " in out
        for phase in ("compile: stages", "read inputs", "fixpoint", "previews"):
            assert phase in out
        assert ("start Spark (JVM)" in out) == (where == "spark")


def test_spark_failure_is_one_line_naming_the_stratum(spark, capsys, monkeypatch):
    from evita.bootstrap.activity import doing
    from evita.runtime import engine

    def failing(dataflow, spark, inputs=None, **kw):
        with doing("stratum 1 (path)"):
            spark.sql("SELECT raise_error('disk on fire')").collect()

    monkeypatch.setattr(engine, "run", failing)
    code, _, err = run(capsys, "run", EXAMPLES / "tc.dl", "-F", EXAMPLES / "tc", "--only", "delta", "--spark")
    assert code == 1 and "Spark failed in stratum 1 (path):" in err and "disk on fire" in err
    assert "Traceback" not in err and "\tat " not in err and "--verbose" in err
    code, _, err = run(capsys, "run", EXAMPLES / "tc.dl", "-F", EXAMPLES / "tc", "--only", "delta", "--verbose",
                       "--spark")
    assert code == 1 and "Traceback" in err


def test_interrupt_names_the_stage_and_leaves_the_catalog(spark, capsys, monkeypatch):
    from evita.bootstrap import scheduler

    code, _, _ = run(capsys, "compile", EXAMPLES / "tc.dl")
    assert code == 0
    _, before, _ = run(capsys, "sql", "SELECT version, stage, status FROM evita.version WHERE program = 'tc'")

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(scheduler, "run_one", interrupted)
    code, _, err = run(capsys, "compile", EXAMPLES / "tc.dl")
    assert code == 130 and "interrupted (Ctrl-C) in stage " in err and "Traceback" not in err
    _, after, _ = run(capsys, "sql", "SELECT version, stage, status FROM evita.version WHERE program = 'tc'")
    assert after == before


def test_a_failed_compile_keeps_the_last_good_one(spark, capsys, tmp_path):
    from evita.catalog import store

    def versions(status):
        rows = store.load_rows(spark, "shortest_path")
        return [(r["version"], r["stage"], r["message"]) for r in rows.dicts("version") if r["status"] == status]

    program = EXAMPLES / "shortest_path.olg"
    code, _, err = run(capsys, "compile", program, "--skip", "magic_sets")
    assert code == 0, err
    good, catalog = versions("ok"), store.load_rows(spark, "shortest_path")
    history = store.load_versions(spark, "shortest_path")
    assert len(good) > 1 and sorted(history) == [v for v, _, _ in good]
    # A stage that deletes rules but not their atoms: the integrity checks reject it.
    (tmp_path / "sloppy.dl").write_text(
        'stage("sloppy").\nprecedes("parse", "sloppy").\nprecedes("sloppy", "delta").\n'
        'x1 sys::predicate{id: A, rule: "nowhere"} :- sys::rule{id: R, name: "r2"}, sys::predicate{rule: R, id: A, pos: 1}.\n')
    code, out, err = run(capsys, "explain", program, "--stage-path", tmp_path, "--only", "sloppy")
    assert code == 1 and "stage sloppy failed" in err and "stays at its last good compile" in err
    assert "this compile failed" in out
    assert versions("ok") == good and store.load_versions(spark, "shortest_path") == history  # untouched
    assert store.load_rows(spark, "shortest_path").compared()["rule"] == catalog.compared()["rule"]
    failed = versions("failed")
    assert [v[1] for v in failed] == ["parse", "sloppy"] and "integrity" in failed[-1][2]
    assert sorted(store.load_versions(spark, "shortest_path", store.FAILED)) == [0]
    code, _, _ = run(capsys, "compile", program, "--skip", "magic_sets")
    assert code == 0 and versions("failed") == []  # a good compile clears the failed attempt


def _catalog_versions(capsys, name: str):
    """How many `evita.version` rows `evita catalog --program NAME` shows, or None when
    it says the catalog has no such program."""
    code, out, err = run(capsys, "catalog", "--program", name)
    if code != 0:
        assert f"no program {name!r}" in err, err
        return None
    return next(int(line.split("│")[2]) for line in out.splitlines() if "evita.version " in line)


# failure point -> (program file, what to write in it or copy, extra arguments)
SLOPPY = ('stage("sloppy").\nprecedes("parse", "sloppy").\nprecedes("sloppy", "delta").\n'
          'x1 sys::predicate{id: A, rule: "nowhere"} :- sys::rule{id: R, name: "r2"}, '
          'sys::predicate{rule: R, id: A, pos: 1}.\n')  # breaks the integrity checks
GHOST = ('stage("ghost").\nprecedes("parse", "ghost").\nprecedes("ghost", "delta").\n'
         'g1 sys::io{program: P, relation: "ghost", direction: "output", pos: 99, line: 1, col: 1} :- '
         'programEvent(P).\n')  # passes the integrity checks; the planner refuses it


@pytest.mark.parametrize("point", ["parse", "check", "stage", "plan", "run", "write"])
def test_a_failed_run_says_what_it_stored(spark, capsys, tmp_path, point):
    """Issue 36: after a failure, the message says what the command stored and wrote,
    and `evita catalog` agrees (a failed run used to say "nothing was written to the
    catalog" after its compile had stored 11 versions)."""
    import re

    name = f"told_{point}"
    program, extra = tmp_path / f"{name}.dl", []
    tc = (EXAMPLES / "tc.dl").read_text()
    if point == "parse":
        program.write_text(".decl c(n: number)\nc(n) :- c(n\n")
    elif point == "check":
        program.write_text(".decl c(n: number)\n.output c\nc(n) :- d(m).\n")
    elif point == "stage":
        program = tmp_path / f"{name}.olg"
        program.write_text((EXAMPLES / "shortest_path.olg").read_text())
        (tmp_path / "stages").mkdir()
        (tmp_path / "stages" / "sloppy.dl").write_text(SLOPPY)
        extra = ["--stage-path", tmp_path / "stages", "--only", "sloppy"]
    elif point == "plan":
        program.write_text(tc)
        (tmp_path / "stages").mkdir()
        (tmp_path / "stages" / "ghost.dl").write_text(GHOST)
        extra = ["-F", EXAMPLES / "tc", "--stage-path", tmp_path / "stages", "--only", "ghost"]
    elif point == "run":
        program.write_text(".decl c(n: number)\n.output c\nc(0).\nc(n + 1) :- c(n), n < 100.\n")
        extra = ["--max-iterations", "5", "--only", "delta"]
    else:  # write: -D under a file, which no one can make a folder of
        program.write_text(tc)
        (tmp_path / "a_file").write_text("")
        extra = ["-F", EXAMPLES / "tc", "-D", tmp_path / "a_file" / "out", "--only", "delta"]
    code, _, err = run(capsys, "run", program, *extra)
    assert code == 1 and "Traceback" not in err, err
    assert "nothing was written to the catalog" not in err
    versions = _catalog_versions(capsys, name)
    if point in ("parse", "check"):
        assert "nothing was stored in the catalog." in err and versions is None, err
    elif point == "stage":  # the failed attempt is kept apart, with status 'failed'
        assert f"{name} has no good compile in the catalog; this attempt is kept apart" in err
        code, out, _ = run(capsys, "sql", f"SELECT stage FROM evita.version WHERE program = '{name}' "
                           "AND status = 'failed' ORDER BY version")  # the query the message gives
        assert versions is None and [line.split("│")[1].strip() for line in out.splitlines()
                                     if line.startswith("│")] == ["parse", "sloppy"]
    else:
        said = re.search(rf"the compile of {name} is stored in the catalog \((\d+) versions, 0-(\d+)", err)
        assert said, err
        assert int(said.group(1)) == versions == int(said.group(2)) + 1
    if point == "write":
        assert "error[output-unwritable]" in err and "no output file was written." in err
