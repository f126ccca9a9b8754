"""The localize stage (stages/localize.dl) beyond its case file: the rule it must refuse,
and its place in the lattice before magic sets (Fig 4.1's program through both)."""
from __future__ import annotations

import pytest

from evita.bootstrap.checks import check_program
from evita.bootstrap.parser import parse_file, parse_program
from evita.bootstrap.scheduler import compile_program
from evita.bootstrap.stage import StageFailure
from evita.catalog.decode import decode
from evita.catalog.encode import encode

from conftest import EXAMPLES, lattice_order
from test_magic import answers

UNROUTABLE = """clique("a", 1). clique("b", 1).
s1 separator(@I, J, V) :- clique(@I, V), clique(@J, V), I != J.
"""


def test_an_unroutable_rule_fails_at_its_atom_and_keeps_the_catalog(spark):
    # P2's unitTests/olg/unroutableLocalization.olg: J occurs nowhere left of clique(@J, V).
    program = check_program(parse_program(UNROUTABLE, "unroutable.olg", "unroutable"))
    with pytest.raises(StageFailure) as failed:
        compile_program(spark, encode(program), program.name)
    e = failed.value
    assert e.stage == "localize"
    assert "unroutable.olg:2:42" in e.detail and "error[unroutable]" in e.detail
    assert "rule s1: location variable @J is not bound left of its atom" in e.detail
    assert e.versions[-1].stage == lattice_order()[lattice_order().index("localize") - 1]  # the last good one


def test_localize_runs_before_magic_sets_and_the_answers_stay(spark):
    # Fig 4.1: the path program with a bound query. Localized first, magic sets then
    # restrict the chain's links; answers as without either stage.
    path = EXAMPLES / "path_magic.olg"
    program = check_program(parse_file(path))
    order = lattice_order()
    assert order.index("localize") < order.index("magic_sets")
    comp = compile_program(spark, encode(program), program.name)
    final = decode(comp.final, program.name)
    labels = {r.name for r in final.rules}
    assert any(label.startswith("r2_loc") for label in labels), sorted(labels)
    assert any(r.head.relation.startswith("magic_") for r in final.rules)
    left_out = compile_program(spark, encode(program), program.name, only=["delta"])
    plain = decode(left_out.final, program.name)
    # left out, localize's trigger still finds r2: the user is told it runs centralized
    assert any(n.startswith("stage localize was left out, but it applies here (r2)") and "run centralized" in n
               for n in left_out.notes), left_out.notes
    assert not comp.notes
    want, _ = answers(spark, plain, path.parent)
    have, _ = answers(spark, final, path.parent)
    assert want and have == want
