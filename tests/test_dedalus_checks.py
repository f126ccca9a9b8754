"""Dedalus well-formedness (bootstrap/dedalus_checks.py): each error at its atom or term,
every violation reported, the CLI printing them, and the shipped Dedalus programs and the
decoupling goldens passing untouched. No Spark: parse and check only."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evita.bootstrap import builtins
from evita.bootstrap.checks import check_program, diagnose
from evita.bootstrap.dedalus_checks import check_dedalus, is_dedalus
from evita.bootstrap.diagnostics import EvitaError
from evita.bootstrap.folding import fold
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.syntax import Assign, Select

from conftest import EXAMPLES, REPO

GOLDEN = Path(__file__).resolve().parents[2] / "shared" / "research" / "decoupling_golden"


def found(tmp_path, text: str, name: str = "d.olg") -> list:
    """`file:line:col: error[code]` of every diagnostic of the program, in order, and
    the diagnostics."""
    path = tmp_path / name
    path.write_text(text)
    program = parse_file(path)
    ds = sorted(diagnose(program), key=lambda d: d.sort_key())
    return [f"{d.span}: {d.severity}[{d.code}]" for d in ds], ds


def at(tmp_path, name, line, col, code):
    return f"{tmp_path / name}:{line}:{col}: error[{code}]"


# ---------------------------------------------------------------- what a Dedalus program is

def test_a_program_with_time_or_components_is_dedalus():
    assert not is_dedalus(parse_program("r1 a(X) :- b(X).", "p.olg"))
    assert is_dedalus(parse_program("r1 a(X)@next :- a(X).", "p.olg"))
    assert is_dedalus(parse_program("r1 a(@X)@async :- b(@Y, X).", "p.olg"))
    assert is_dedalus(parse_program('component c @ "c:1" { }', "p.olg"))


def test_checks_of_a_program_without_time_are_unchanged():
    # P2-style located rules, a head at another location than the body: localize's business
    text = 'link("a", "b"). r1 path(@Y, X) :- link(@X, Y). r2 back(@"z", X) :- link(@X, _).'
    assert check_dedalus(parse_program(text, "p2.olg")) == []


# ---------------------------------------------------------------- async-unlocated

def test_an_async_head_without_a_location(tmp_path):
    text = ('component a @ "a:1" {\n'
            '    in(@"a:1", 1).\n'
            '    r1 out(X)@async :- in(@N, X).\n'
            '    r2 fine(@N, X)@async :- in(@N, X).\n'
            '    r3 gone(X, N)@async :- in(@N, X).\n'
            '}\n')
    got, ds = found(tmp_path, text)
    assert got == [at(tmp_path, "d.olg", 3, 8, "async-unlocated"), at(tmp_path, "d.olg", 5, 8, "async-unlocated")]
    assert "rule r1: the @async head out names no destination" in ds[0].message
    assert ds[0].text == "out" and "@" in ds[0].hint and "rule r3" in ds[1].message


# ---------------------------------------------------------------- remote-head

REMOTE = '''component a @ "a:1" {
    in(@"a:1", 1, "a:1").
    other(@"a:1", 1).
    r1 seen(@C, X) :- in(@N, X, C).
    r2 kept(@M, X)@next :- in(@N, X, M), other(@N, X).
    r3 split(@C, X) :- in(@N, X, C), other(@C, X).
    r4 here(@N, X) :- in(@N, X, C), other(@N, X), notin kept(@C, X).
    r5 sent(@C, X)@async :- in(@N, X, C).
    r6 free(@C, X) :- cfg(C, X).
    r7 rest(C, X) :- in(@N, X, C).
}
'''


def test_a_head_away_from_its_body_is_a_message(tmp_path):
    got, ds = found(tmp_path, REMOTE)
    # r3 reads two locations (localize splits it); r4's negated atom does not count;
    # r5 is a message; r6 reads no location; r7's head has none
    assert got == [at(tmp_path, "d.olg", 4, 14, "remote-head"), at(tmp_path, "d.olg", 5, 14, "remote-head")]
    assert ds[0].message == "rule r1: seen derives at @C from @N: that is a message; write @async"
    assert ds[1].message == "rule r2: kept@next derives at @M from @N: that is a message; write @async"
    assert ds[0].text == "C" and "@async" in ds[0].hint


def test_a_constant_head_location_differs_from_a_variable_one(tmp_path):
    text = ('component a @ ["a:1", "a:2"] {\n'
            '    in(@"a:1", 1).\n'
            '    r1 copy(@"a:2", X) :- in(@N, X).\n'
            '    r2 same(@"a:1", X) :- in(@"a:1", X).\n'
            '}\n')
    got, ds = found(tmp_path, text)
    assert got == [at(tmp_path, "d.olg", 3, 14, "remote-head")]
    assert 'copy derives at @"a:2" from @N' in ds[0].message and ds[0].text == '"a:2"'


# ---------------------------------------------------------------- cross-component

CROSS = '''component a @ "a:1" {
    in(@"a:1", 1).
    cfg(@"a:1", 7).
    a1 seen(@N, X) :- in(@N, X).
    a2 mail(@"b:1", X)@async :- in(@N, X).
}
component b @ "b:1" {
    got(@"b:1", 2).
    cfg(@"b:1", 8).
    b1 seen(@N, X)@next :- got(@N, X).
    b2 seen(@"a:1", X)@async :- got(@N, X).
    b3 mail(@N, X)@async :- got(@N, X).
    b4 in(@N, X) :- got(@N, X).
}
r1 log(@N, X) :- seen(@N, X).
'''


def test_a_relation_is_derived_in_one_component(tmp_path):
    got, ds = found(tmp_path, CROSS)
    # b1 derives a's seen, b2 sends into it though a derives it; b4 derives in, of
    # which a has a fact. mail (@async from both) and cfg (facts in each) are fine,
    # and r1 is in no component.
    assert got == [at(tmp_path, "d.olg", 10, 8, "cross-component"), at(tmp_path, "d.olg", 11, 8, "cross-component"),
                   at(tmp_path, "d.olg", 13, 8, "cross-component")]
    b1, b2, b4 = ds
    assert b1.message.startswith("rule b1 derives (@next) seen in component b, but rule a1 derives it in component a")
    assert f"(at {tmp_path / 'd.olg'}:4:8)" in b1.message and "only with @async" in b1.message
    assert b2.message.startswith("rule b2 sends (@async) seen in component b, but rule a1 derives it")
    assert b4.message.startswith("rule b4 derives in in component b, but a fact gives it in component a")
    assert b1.text == "seen" and "@async" in b1.hint


def test_a_fact_after_a_rule_of_another_component_is_reported_at_the_fact(tmp_path):
    text = ('component a @ "a:1" {\n    in(@"a:1", 1).\n    a1 seen(@N, X) :- in(@N, X).\n}\n'
            'component b @ "b:1" {\n    seen(@"b:1", 2).\n}\n')
    got, ds = found(tmp_path, text)
    assert got == [at(tmp_path, "d.olg", 6, 5, "cross-component")]
    assert ds[0].message.startswith("a fact gives seen in component b, but rule a1 derives it in component a")


# ---------------------------------------------------------------- time-as-data

TIME = '''component a @ "a:1" {
    ev(@"a:1", 1).
    t1 stamp(@N, T)@next :- ev(@N, _), T := f_now().
    t2 late(@N, T) :- ev(@N, T), tick() % 10 == 0, T < tick().
    t3 where(@tick(), X) :- ev(@N, X).
    t4 clock(@N, now()) :- ev(@N, _).
    t5 timer(@N, T)@next :- ev(@N, _), T := tick().
}
'''


def test_wall_clock_and_tick_as_a_location(tmp_path):
    got, ds = found(tmp_path, TIME)
    assert got == [at(tmp_path, "d.olg", 3, 45, "time-as-data"), at(tmp_path, "d.olg", 5, 15, "time-as-data"),
                   at(tmp_path, "d.olg", 6, 18, "time-as-data")]
    assert ds[0].message.startswith("f_now() reads the wall clock") and "tick()" in ds[0].hint
    assert ds[1].message == "tick() cannot be used as the @ location of where"
    assert ds[2].message.startswith("now() reads the wall clock") and ds[2].text == "now"


def test_tick_in_a_program_without_time(tmp_path):
    got, ds = found(tmp_path, "e(1).\nr1 t(X, T) :- e(X), T := tick().\n")
    assert got == [at(tmp_path, "d.olg", 2, 26, "time-as-data")]
    assert "tick() is the timestep of a Dedalus program" in ds[0].message and "@next" in ds[0].message


def test_tick_in_a_fact(tmp_path):
    path = tmp_path / "f.olg"
    path.write_text('component a @ "a:1" {\n    start(@"a:1", tick()).\n}\n')
    with pytest.raises(EvitaError) as e:
        parse_file(path)
    [d] = e.value.diagnostics
    assert f"{d.span}: error[{d.code}]" == at(tmp_path, "f.olg", 2, 19, "time-as-data")
    assert d.message == "tick() cannot be used in fact start" and d.text == "tick"


def test_tick_is_a_number_in_bodies_and_never_a_constant(tmp_path):
    text = ('component a @ "a:1" {\n    leader(@"a:1", 1).\n'
            '    t1 timeout(@P, T) :- leader(@P, B), T := tick(), tick() % 10 == 0, T + B > 3.\n}\n')
    program = check_program(parse_program(text, "timer.olg"))
    body = program.rules[0].body
    call = next(lit.expr for lit in body if isinstance(lit, Assign))
    assert fold(call) is None and fold(next(lit.expr for lit in body if isinstance(lit, Select)).left) is None
    assert builtins.lookup("tick").accepts(0) and not builtins.lookup("f_tick").accepts(1)
    assert builtins.lookup("tick").doc.startswith("tick(): the current timestep of the node")


# ---------------------------------------------------------------- unknown-address

ADDRESSES = '''component kv @ "kv:1" {
    put(@"kv:2", "a", 1).
    cfg("k", 1).
    k1 store(@"kv:9", K, V) :- cfg(K, V).
    k2 reply(@"client:1", K)@async :- put(@N, K, _).
    k3 ask(@"other:1", K)@async :- put(@N, K, _).
    k4 asked(@N, K) :- ask(@N, K).
    k5 stored(@"kv:1", K) :- cfg(K, _).
}
component c @ "c:1" {
    put(@"kv:1", "b", 2).
}
put(@"nowhere", "c", 3).
put(@"c:1", "d", 4).
'''


def test_addresses_no_component_has(tmp_path):
    got, ds = found(tmp_path, ADDRESSES)
    # k2's reply is read by no rule: it leaves the system; k5 is at kv's own address
    assert got == [at(tmp_path, "d.olg", line, col, "unknown-address")
                   for line, col in ((2, 10), (4, 15), (6, 13), (11, 10), (13, 6))]
    fact_kv, k1, k3, fact_c, outside = ds
    assert fact_kv.message == 'fact put in component kv is located at "kv:2", which is not an address of kv'
    assert fact_kv.text == '"kv:2"' and '"kv:1"' in fact_kv.hint
    assert k1.message == 'rule k1: store is located at "kv:9", which no component has as an address'
    assert k3.message.startswith('rule k3: ask is located at "other:1"') and "rules read ask" in k3.hint
    assert fact_c.message.endswith("which is not an address of c (an address of another component)")
    assert outside.message == 'fact put is located at "nowhere", which no component has as an address'


ALL = '''component a @ "a:1" {
    in(@"a:1", 1).
    a1 out(X)@async :- in(@N, X).
    a2 seen(@"a:2", X) :- in(@N, X).
    a3 t(@N, T) :- in(@N, _), T := now().
}
component b @ "b:1" {
    b1 seen(@N, X) :- in(@N, X).
}
'''


def test_every_violation_is_reported_at_once(tmp_path):
    got, _ = found(tmp_path, ALL)
    assert got == [at(tmp_path, "d.olg", 3, 8, "async-unlocated"), at(tmp_path, "d.olg", 4, 14, "remote-head"),
                   at(tmp_path, "d.olg", 4, 14, "unknown-address"), at(tmp_path, "d.olg", 5, 36, "time-as-data"),
                   at(tmp_path, "d.olg", 8, 8, "cross-component")]


# ---------------------------------------------------------------- the command line

@pytest.mark.parametrize("command", ["check", "compile"])
def test_the_cli_prints_the_diagnostics(tmp_path, command):
    path = tmp_path / "bad.olg"
    path.write_text(REMOTE)
    done = subprocess.run([sys.executable, "-m", "evita.bootstrap.cli", command, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{path}:4:14: error[remote-head]: rule r1: seen derives at @C from @N" in done.stderr
    assert f"{path}:5:14: error[remote-head]" in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "2 errors" in done.stderr


# ---------------------------------------------------------------- no change to good programs

GOOD = sorted(EXAMPLES.glob("*.olg")) + sorted(EXAMPLES.glob("*.dl"))
GOLDENS = sorted(GOLDEN.glob("*.olg")) if GOLDEN.is_dir() else []


@pytest.mark.parametrize("path", GOOD + GOLDENS, ids=lambda p: p.name)
def test_shipped_programs_and_goldens_pass(path):
    program = parse_file(path)
    assert check_dedalus(program) == [] and diagnose(program) == []


def test_the_goldens_are_there_or_skipped():
    if not GOLDENS:
        pytest.skip(f"{GOLDEN} is absent")
    assert any(is_dedalus(parse_file(p)) for p in GOLDENS)
    assert is_dedalus(parse_file(EXAMPLES / "two_phase_commit.olg")) and is_dedalus(parse_file(EXAMPLES / "hashset.olg"))
