"""The lowerings: rewrites from the language as written to the smaller language the
catalog stores, each in its own module with its rewrite as a doctest, and titled cases
in tests/fixtures/lowering/ (tests/test_lowering_cases.py).

In the parser (`parser.parse_program`), per file:
  `statements` drives `disjunction`, `aggregates`, `autoinc`, `equalities` and `eqrel`
  over the raw statements of `raw` (what the builder gives);
then on the whole program: `components` (Soufflé's .comp/.init), `autoinc_numbered`,
`inline` (Soufflé's inline relations), `lattice` (btree_max, btree_min).

In the planner: `symbols` (Soufflé 2.4's `+` on symbols as `cat`), `division` (Soufflé's `/` on
whole numbers as `//`), `unsigned`, `width`, `conversions` (text that spells no number derives
nothing).

Dedalus time is lowered to its tick program by runtime/dedalus.py (`lower`), which the
simulator and the Spark supersteps run.
"""
