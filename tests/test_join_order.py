"""The join-order stages (system_r, cascades) and the statistics they read, on real Spark.

Their cases (tests/fixtures/stages/system_r.dl, cascades.dl) hold the golden plans and
the no-op cases, and check answers with and without each stage on the reference
evaluator. Here: Cascades chooses System R's plan from no more alternatives on random
rules; statistics measured from input files steer the plan `evita plan` shows and the
answers `evita run` writes stay the same; `.plan statistics` reads back.
"""
from __future__ import annotations

import random

import pytest

from evita.bootstrap import stage as st
from evita.bootstrap.parser import parse_program
from evita.catalog.decode import decode
from evita.catalog.encode import encode
from evita.catalog.printer import format_program

from test_cli import run


def random_rules(seed: int, rules: int, lo: int, hi: int) -> str:
    """Rules of `lo`..`hi` atoms shaped as chains, stars and cycles, written in a
    shuffled order, over relations with random statistics."""
    rnd = random.Random(seed)
    out = []
    for r in range(rules):
        n, shape = rnd.randint(lo, hi), rnd.choice(["chain", "star", "cycle"])
        atoms = []
        for i in range(n):
            args = {"chain": (f"V{i}", f"V{i + 1}"), "star": ("V0", f"V{i + 1}"),
                    "cycle": (f"V{i}", f"V{(i + 1) % n}")}[shape]
            atoms.append((f"t{r}_{i}", args))
            rows = rnd.choice([10, 100, 1000, 10000, 100000])
            out.append(f".plan statistics t{r}_{i}(rows={rows}, distinct0={rnd.randint(1, rows)}, "
                       f"distinct1={rnd.randint(1, rows)})")
        rnd.shuffle(atoms)
        body = ", ".join(f"{rel}({', '.join(args)})" for rel, args in atoms)
        out.append(f"q{r} h{r}(V0, V1) :- {body}.")
    return "\n".join(out) + "\n"


def _search(spark, stage: str, rows, program_id: str) -> dict:
    """The stage's own relations: the chosen order and what it costed."""
    wanted = ["order", "best", "step"] + (["wanted"] if stage == "cascades" else [])
    return st.evaluate(spark, st.find_stages()[stage].program, rows, program_id, wanted, origin=stage).tuples


def _costed(t: dict) -> int:
    """Plan alternatives costed: extensions of a costed set by one atom (into a wanted set)."""
    best = {(r, m) for r, m, _ in t["best"]}
    wanted = {(r, m) for r, m in t["wanted"]} if "wanted" in t else None
    return sum(1 for r, m, k in t["step"] if (r, m) in best and (wanted is None or (r, m | 1 << k) in wanted))


@pytest.mark.parametrize("seed", [0])
def test_cascades_chooses_system_rs_plan_from_no_more_alternatives(spark, seed):
    text = random_rules(seed, rules=8, lo=3, hi=6) + random_rules(100 + seed, rules=1, lo=8, hi=8).replace(
        "t0_", "u_").replace("q0 h0", "q9 h9")
    program = parse_program(text, f"random{seed}.dl")
    rows = encode(program)
    system_r, cascades = (_search(spark, s, rows, program.name) for s in ("system_r", "cascades"))
    assert cascades["order"] == system_r["order"]
    assert {r for r, _, _ in system_r["order"]} == {f"random{seed}:q{i}" for i in list(range(8)) + [9]}
    assert _costed(cascades) <= _costed(system_r)
    # and the program each writes back is the same
    texts = [format_program(decode(st.apply(rows, st.run_stage(spark, st.find_stages()[s], rows, program.name)),
                                   program.name)) for s in ("system_r", "cascades")]
    assert texts[0] == texts[1]


def test_statistics_round_trip_as_plan_statements():
    text = (".decl r(a: number, b: symbol)\n.decl q(a: number)\n"
            '.plan statistics r(rows=1000, distinct0=10, min0="-1.5", max0=9, nulls1=2)\nq(A) :- r(A, _).\n')
    program = parse_program(text, "s.dl")
    rows = encode(program)
    assert sorted(rows["statistic"], key=str) == sorted([
        ("s", "r", None, "cardinality", 1000.0), ("s", "r", 0, "distinct", 10.0), ("s", "r", 0, "min", -1.5),
        ("s", "r", 0, "max", 9.0), ("s", "r", 1, "nulls", 2.0)], key=str)
    printed = format_program(decode(rows, "s"))
    assert '.plan statistics r(rows=1000, distinct0=10, min0="-1.5", max0=9, nulls1=2)' in printed
    assert format_program(decode(encode(parse_program(printed, "s.dl")), "s")) == printed


GOLDEN_2 = """.decl r1(a: number, b: number)
.decl r2(b: number, c: number)
.decl r3(a: number, c: number)
.decl q(a: number, c: number)
.input r1
.input r2
.input r3
.output q
q(A, C) :- r1(A, B), r2(B, C), r3(A, C).
"""


def test_measured_statistics_order_the_joins_and_keep_the_answers(spark, capsys, tmp_path):
    """Golden 2 of the research note, with data that realizes its statistics: r1 ⋈ r2
    makes 10^5 rows here, r1 ⋈ r3 10^3. `evita analyze` measures and stores the
    statistics, `evita plan` follows them; `evita run` measures by itself."""
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "r1.facts").write_text("".join(f"{a}\t{a % 10}\n" for a in range(1000)))
    (facts / "r2.facts").write_text("".join(f"{c % 10}\t{c}\n" for c in range(1000)))
    (facts / "r3.facts").write_text("".join(f"{a}\t{a}\n" for a in range(1000)))
    program = tmp_path / "golden2.dl"
    program.write_text(GOLDEN_2)

    code, out, _ = run(capsys, "plan", str(program))
    assert code == 0 and "scan r1(A, B) -> join r2(B, C) on B -> join r3(A, C)" in out, out  # no statistics yet
    code, out, _ = run(capsys, "analyze", str(program), "-F", str(facts))
    assert code == 0 and "r2" in out and "1,000" in out
    code, out, _ = run(capsys, "plan", str(program))
    assert code == 0 and "scan r1(A, B) -> join r3(A, C) on A -> join r2(B, C) on B, C" in out, out
    code, out, _ = run(capsys, "explain", str(program), "--stage", "cascades", "--choose", "join_order=cascades",
                       "--dot", str(tmp_path / "lattice.dot"))
    assert code == 0 and "rule1: reordered; written r1, r2, r3; chosen r1, r3 (" in out, out
    assert "plans costed" in out and "{r1 r3}" in (tmp_path / "lattice.dot").read_text()

    code, out, _ = run(capsys, "run", str(program), "-F", str(facts), "-D", str(tmp_path / "out"), "--stats")
    assert code == 0 and "measure inputs" in out, out
    assert sorted((tmp_path / "out" / "q.csv").read_text().splitlines()) == sorted(f"{a}\t{a}" for a in range(1000))
