"""The lowerings: rewrites from the language as written to the smaller language the
catalog stores, each in its own module with its rewrite as a doctest, and titled cases
in tests/fixtures/lowering/ (tests/test_lowering_cases.py).

In the parser (`parser.parse_program`), per file:
  `statements` drives `disjunction`, `aggregates`, `autoinc`, `equalities` and `eqrel`
  over the raw statements of `raw` (what the builder gives);
then on the whole program: `components` (Soufflé's .comp/.init), `autoinc_numbered`,
`inline` (Soufflé's inline relations).

In the planner: `division` (Soufflé's `/` on whole numbers as `//`).

Dedalus time is lowered to its tick program by runtime/dedalus.py (`lower`), which the
simulator and the Spark supersteps run.
"""
