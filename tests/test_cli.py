"""The CLI: in-process for speed (sharing the test session's Spark), and once as the
installed `evita` command run from a directory outside the repository."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evita.bootstrap.cli import main
from evita.bootstrap.parser import parse_program
from evita.catalog.encode import encode

from conftest import EXAMPLES, FIXTURES, REPO, lattice_order, stages

SHORTEST_PATH = EXAMPLES / "shortest_path.olg"


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table(out: str) -> list:
    """The rows of the table `evita sql` prints (rich box drawing), as lists of cell text.

    >>> table("┏━━━┓\\n┃ n ┃\\n┡━━━┩\\n│ 4 │\\n└───┘\\n")
    [['4']]
    """
    return [[cell.strip() for cell in line.strip()[1:-1].split("│")]
            for line in out.splitlines() if line.strip().startswith("│")]


def test_table_reads_the_printed_rows():
    import doctest
    import sys

    assert doctest.testmod(sys.modules[__name__]).failed == 0


def test_load_then_inspect(spark, capsys):
    code, out, _ = run(capsys, "load", str(SHORTEST_PATH))
    assert code == 0 and "evita.rule" in out and "evita.argument" in out

    code, out, _ = run(capsys, "catalog", "rule", "--program", "shortest_path")
    assert code == 0 and "r1" in out and "r4" in out

    code, out, _ = run(capsys, "catalog", "--program", "shortest_path")
    assert code == 0 and "evita.predicate" in out

    # a view (sys::scc), derived from the stored rule, predicate and relation rows
    code, out, _ = run(capsys, "catalog", "scc", "--program", "shortest_path")
    assert code == 0 and ["shortest_path", "path", "path", "True", "1", "1"] in table(out)
    code, out, _ = run(capsys, "catalog", "term_text", "--program", "shortest_path")
    assert code == 0 and ["shortest_path", "shortest_path:r1#1", "shortest_path:r1", "atom", "link(@X, Y, C)",
                          "link(@$0, $1, $2)"] in table(out)

    code, out, _ = run(capsys, "sql", "SELECT count(*) AS n FROM evita.rule WHERE program = 'shortest_path'")
    assert code == 0 and table(out) == [["4"]]  # r1 .. r4

    code, out, _ = run(capsys, "print", "shortest_path")
    assert code == 0
    reparsed = parse_program(out, "printed.olg", "shortest_path")
    original = parse_program(SHORTEST_PATH.read_text(), str(SHORTEST_PATH))
    assert encode(reparsed).compared() == encode(original).compared()


def test_bad_program_fails_and_writes_nothing(spark, capsys):
    bad = FIXTURES / "invalid" / "check_unsafe_head.olg"
    code, _, err = run(capsys, "load", str(bad))
    assert code == 1
    assert f"{bad}:4:15" in err and "unsafe-rule" in err and "hint" in err
    code, out, _ = run(capsys, "sql", "SELECT count(*) AS n FROM evita.program WHERE id = 'check_unsafe_head'")
    assert code == 0 and table(out) == [["0"]]


def test_user_errors_are_clear(spark, capsys):
    code, _, err = run(capsys, "load", "no/such/file.olg")
    assert code == 1 and "no such file" in err
    code, _, err = run(capsys, "print", "never_loaded")
    assert code == 1 and "no program" in err
    code, _, err = run(capsys, "sql", "SELECT nope FROM evita.rule")
    assert code == 1 and "Spark SQL rejected" in err
    code, _, err = run(capsys, "catalog", "nonsense")
    assert code == 1 and "no catalog table" in err


def installed_evita() -> str:
    beside = Path(sys.executable).with_name("evita")
    found = str(beside) if beside.exists() else shutil.which("evita")
    if not found:
        pytest.fail("the evita console script is not installed (pip install .)")
    return found


def test_installed_cli_outside_the_repository(tmp_path):
    env = dict(os.environ, EVITA_WAREHOUSE=str(tmp_path / "wh"))
    evita = installed_evita()

    def call(*argv):
        return subprocess.run([evita, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    load = call("load", str(SHORTEST_PATH))
    assert load.returncode == 0, load.stderr
    printed = call("print", "shortest_path")
    assert printed.returncode == 0, printed.stderr
    assert "r2 path(@X, Z, P, C)" in printed.stdout
    assert not (tmp_path / "evita-warehouse").exists()  # the warehouse went where it was told
    assert REPO not in Path(tmp_path).parents

    bad = call("check", str(FIXTURES / "invalid" / "check_arity.olg"))
    assert bad.returncode == 1 and "check_arity.olg:4:18" in bad.stderr


def test_stages_compile_explain_run(spark, capsys, tmp_path):
    code, out, _ = run(capsys, "stages", "--stage-path", str(EXAMPLES / "stages"))
    assert code == 0 and all(name in out for name in stages())  # shipped and external

    code, out, _ = run(capsys, "explain", str(SHORTEST_PATH), "--stage", "delta")
    assert code == 0
    # r2 reads two locations: localize made it r2_loc1 (ships link to Y) and r2_loc2; only
    # r2_loc2 reads its own stratum: it becomes r2_loc2_d2, driven by Δpath, and says where it came from
    assert "- r2_loc2 path(@X, Z, P, C)" in out and "+ r2_loc2_d2" in out
    assert "rule r2 (split by delta into r2_loc2_d2)" in out

    # One version per stage the lattice ran, in its order (explain compiled through all of them).
    order = lattice_order()
    code, out, _ = run(capsys, "sql", "SELECT version, stage FROM evita.version WHERE program = 'shortest_path' "
                                      "ORDER BY version")
    assert code == 0 and table(out) == [[str(i), s] for i, s in enumerate(order)]
    code, out, _ = run(capsys, "sql", "SELECT count(DISTINCT version) AS n FROM evita_history.rule "
                                      "WHERE program = 'shortest_path'")
    assert code == 0 and table(out) == [[str(len(order))]]

    code, out, _ = run(capsys, "run", str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc"), "-D", str(tmp_path))
    assert code == 0, out
    written = (tmp_path / "path.csv").read_text().splitlines()
    assert len(written) == 48 and all(len(line.split("\t")) == 2 for line in written)  # see tc.dl
    # tc has no constant, no location, no bound call, no rule of three atoms, no seal, no dataflow asked for (egraph):
    # those stages were skipped, at no job
    code, out, _ = run(capsys, "sql", "SELECT stage, actions FROM evita.version WHERE program = 'tc' "
                                      "AND message LIKE 'skipped:%' ORDER BY version")
    assert code == 0 and table(out) == [["const_prop", "0"], ["localize", "0"], ["decouple", "0"],
                                        ["magic_sets", "0"], ["stats", "0"],
                                        ["system_r", "0"], ["seal", "0"], ["egraph", "0"]]

    code, out, _ = run(capsys, "run", str(SHORTEST_PATH))
    assert code == 0 and "node5" in out and "[node1, node2, node3, node4, node5]" in out

    code, _, err = run(capsys, "compile", str(SHORTEST_PATH), "--skip", "nope")
    assert code == 1 and "no stage named nope" in err


def test_explain_draws_the_adorned_rule_goal_graph(spark, capsys, tmp_path):
    dot = tmp_path / "magic.dot"
    # Fig 4.3 is drawn for the program as written: localization (before magic sets) left out
    code, out, _ = run(capsys, "explain", str(EXAMPLES / "path_magic.olg"), "--stage", "magic_sets",
                       "--skip", "localize", "--dot", str(dot))
    assert code == 0, out
    assert "+ r2_case3_2 magic_path(Y) :- sup_r2_1(X, Y, C1)." in out
    assert "path^bfff" in out and "rewritten" in out  # the goal table
    text = dot.read_text()
    assert text.startswith('digraph "magic_sets"')
    assert '"path_magic:r2" -> "path" [label="2: bfff"];' in text  # r2 calls path with X bound
    assert '"path_magic:query22" -> "path" [label="1: bfff"];' in text

    code, _, err = run(capsys, "explain", str(EXAMPLES / "tc.dl"), "--stage", "delta", "--dot", str(dot))
    assert code == 1 and "explain view" in err


def test_previews_from_the_driver_show_what_spark_would(spark):
    """`evita run` previews a relation the run left on the driver from that table (no
    Spark job); the text is the one Spark's ordering gives, 50 rows of more, nulls
    first, lists and booleans spelled the same."""
    import pandas as pd
    from rich.console import Console

    from evita.runtime.cli_commands import PREVIEW_ROWS, print_tables

    tables = {"many": pd.DataFrame({"c0": list(range(120, 0, -1)), "c1": [f"v{i % 7}" for i in range(120)]}),
              "mixed": pd.DataFrame({"c0": [2.5, 1.0, 3.0], "c1": [True, False, True]})}
    frames = {n: spark.createDataFrame(t).toDF("a", "b") for n, t in tables.items()}
    shown = []
    for held in (None, tables):
        console = Console(record=True, width=120)
        print_tables(console, frames, held=held)
        shown.append(console.export_text())
    assert shown[0] == shown[1]
    words = " ".join(shown[1].split())  # titles wrap
    assert f"many (first {PREVIEW_ROWS} rows)" in words and "mixed (3 rows)" in words
    assert "│ 1 │ v0 │" in words and "│ 50 │" in words and "│ 51 │" not in words and "false" in words


def test_query_previews_from_the_driver_select_what_spark_selects(spark):
    import pandas as pd

    from evita.bootstrap import syntax as S
    from evita.runtime.queries import query_frame, query_table

    table = pd.DataFrame({"c0": ["a", "a", "b", "a"], "c1": [1, 2, 2, 3], "c2": [1, 5, 2, 3]})
    frame = spark.createDataFrame(table)
    for q in (S.Atom("r", (S.Const("a", S.STRING), S.Var("X"), S.Var("X"))),
              S.Atom("r", (S.Var("A"), S.Const(2, S.INT), S.Wildcard())),
              S.Atom("r", (S.Var("A"), S.Var("B"), S.Var("C")))):
        want = sorted(tuple(r) for r in query_frame(frame, q).collect())
        assert sorted(map(tuple, query_table(table, q).values.tolist())) == want, q


SWEEP = """
import sys
from evita.bootstrap.cli import main

for argv in {cases!r}:
    sys.stderr.write("=== case\\n")
    sys.stderr.flush()
    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stderr.write(f"=== exit {{code}}\\n")
    sys.stderr.flush()
"""

# Issue 36: each used to be preceded by Spark's JSON log line with the Java stack trace.
BAD_NAMES = [
    ["sql", "SELECT * FROM evita.nosuch"],  # a table
    ["sql", "SELECT nope FROM evita.rule"],  # a column
    ["sql", "SELEC * FROM evita.rule"],  # the syntax
    ["sql", "SELECT * FROM nosuch_db.t"],  # a database
    ["sql", "SELECT * FROM evita_history.nosuch"],
    ["catalog", "nosuch"],
    ["catalog", "rule", "--program", "nosuch"],
    ["catalog", "--program", "nosuch"],
    ["print", "nosuch"],
]


def test_bad_names_and_sql_give_one_line_and_no_java(tmp_path):
    """Every command that takes SQL or a table or program name, given a bad one, through
    the command line's `main` in a process of its own (its stderr is the JVM's too, as a
    user's terminal is): a nonzero exit, one `error:` line (and its hint), no Java or
    Python trace, no JSON log line. One process, one JVM, one warehouse."""
    env = dict(os.environ, EVITA_WAREHOUSE=str(tmp_path / "wh"))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    cases = [["load", str(SHORTEST_PATH)], *BAD_NAMES]
    done = subprocess.run([sys.executable, "-c", SWEEP.format(cases=cases)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    parts = done.stderr.split("=== case\n")[1:]
    assert len(parts) == len(cases), done.stderr[-3000:]
    assert parts[0].strip().endswith("=== exit 0"), parts[0]  # the load
    for argv, part in zip(BAD_NAMES, parts[1:]):
        said, _, code = part.rpartition("=== exit ")
        lines = [line for line in said.splitlines() if line.strip()]
        assert code.strip() == "1", (argv, said)
        assert "at org.apache" not in said and "Traceback" not in said and "Exception" not in said, (argv, said)
        assert not any(line.lstrip().startswith("{") for line in lines), (argv, said)  # a JSON log line
        assert [line for line in lines if line.startswith("error")] == [lines[0]], (argv, said)
        assert len(lines) <= 2 and all(line.startswith(("error:", "hint:")) for line in lines), (argv, said)


def test_version_comes_from_the_package_metadata(capsys, tmp_path):
    from importlib import metadata

    import evita

    installed = metadata.version("evita")
    assert evita.__version__ == installed
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"evita {installed}"
    # A checkout that is not installed: no metadata on the path, so pyproject.toml's version.
    (tmp_path / "evita").symlink_to(REPO, target_is_directory=True)
    got = subprocess.run([sys.executable, "-S", "-c", "import evita; print(evita.__version__)"], cwd=tmp_path,
                         env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == f"{installed}+checkout"


def test_stages_lists_the_planner_last_and_the_readme_gives_the_order_compile_runs(capsys):
    import re

    code, out, _ = run(capsys, "stages")
    listed = [row[0] for row in table(out)]
    order = lattice_order()  # what a compile runs, from the lattice's facts
    assert code == 0 and listed[-1] == "planner"
    assert [s for s in listed if s in order] == order  # the alternatives not picked (cascades) listed besides
    readme = (REPO / "README.md").read_text()
    line = next(text for text in readme.splitlines() if text.startswith("parse →"))
    assert [re.sub(r"\(.*?\)", "", part).strip(" ;") for part in line.split("→")] == order + ["planner"]


SORTED = """\
.decl n(i: number, u: unsigned, f: float, s: symbol)
.output n
n(10, 1, 1.0, "a"). n(2, 10, 1.0, "a"). n(2, 9, 1.0, "a"). n(2, 9, 10.5, "a"). n(2, 9, 2.5, "a").
n(2, 9, -0.5, "b"). n(2, 9, -0.5, "B"). n(-3, 1, 1.0, "a").
"""


def test_rows_sort_by_their_types_on_screen_and_in_files_on_both_paths(spark, capsys, tmp_path):
    """Numbers (number, unsigned, float) numerically, symbols as text, column by column,
    as Soufflé orders its output: 2 before 10, in the previews and in the -D files, in
    process and on Spark (ties on the first columns order by the next)."""
    program = tmp_path / "sorted.dl"
    program.write_text(SORTED)
    want = [["-3", "1", "1", "a"], ["2", "9", "-0.5", "B"], ["2", "9", "-0.5", "b"], ["2", "9", "1", "a"],
            ["2", "9", "2.5", "a"], ["2", "9", "10.5", "a"], ["2", "10", "1", "a"], ["10", "1", "1", "a"]]
    for path, extra in (("here", []), ("spark", ["--spark"])):
        # the stages have nothing to do here: --only delta spares their time
        code, out, err = run(capsys, "run", str(program), "-D", str(tmp_path / path), "--only", "delta", *extra)
        assert code == 0, err
        assert [line.split("\t") for line in (tmp_path / path / "n.csv").read_text().splitlines()] == want, path
        assert [[cell.replace(".0", "") if cell.endswith(".0") else cell for cell in row]
                for row in table(out)] == want, path  # the screen shows 1.0 where the file has Soufflé's 1


def test_parquet_output_is_written_whole_and_replaced_whole(spark, capsys, tmp_path):
    """`--output DIR --format parquet`: Spark's folder of part files reaches its name by a
    rename, so a second run replaces it whole and no temporary stays beside it."""
    import pyarrow.dataset as ds

    out = tmp_path / "out"
    for _ in range(2):
        code, _, err = run(capsys, "run", str(EXAMPLES / "tc.dl"), "-F", str(EXAMPLES / "tc"), "--output", str(out),
                           "--format", "parquet", "--only", "delta", "--quiet")
        assert code == 0, err
        assert sorted(p.name for p in out.iterdir()) == ["path.parquet"]
        assert ds.dataset(out / "path.parquet", format="parquet", ignore_prefixes=[".", "_"]).count_rows() == 48


def test_one_sort_key_for_python_rows_and_arrow_tables():
    import pyarrow as pa

    from evita.runtime.order import row_key, sorted_table

    rows = [(10, "b", 1.5), (2, "a", None), (None, "z", 0.0), (2, "B", float("nan")), (2, "B", -1.0), (-1, "é", 2.0)]
    by_arrow = sorted_table(pa.table({"a": [r[0] for r in rows], "b": [r[1] for r in rows],
                                      "c": [r[2] for r in rows]}))
    got = list(zip(*(c.to_pylist() for c in by_arrow.columns)))
    assert [repr(r) for r in got] == [repr(r) for r in sorted(rows, key=row_key)]
    assert [r[0] for r in got] == [None, -1, 2, 2, 2, 10]


def test_facts_are_read_from_the_current_directory_without_F(capsys, tmp_path, monkeypatch):
    """As Soufflé's -F defaults to `.`: a file there is read, a missing one is a warning
    (the relation holds the program's facts), a missing one under a -F DIR given an error."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(EXAMPLES / "tc.dl", tmp_path / "tc.dl")
    code, out, err = run(capsys, "run", "tc.dl")
    assert code == 0 and "path (0 rows)" in " ".join(out.split())
    assert "warning[input-not-given]" in err and "no file edge.facts in the current directory" in err
    shutil.copy(EXAMPLES / "tc" / "edge.facts", tmp_path / "edge.facts")
    code, out, err = run(capsys, "run", "tc.dl", "-D", "out")
    assert code == 0 and "path (48 rows)" in " ".join(out.split()) and "input-not-given" not in err
    assert len((tmp_path / "out" / "path.csv").read_text().splitlines()) == 48
    code, _, err = run(capsys, "run", "tc.dl", "-F", "nowhere")
    assert code == 1 and "error[input-missing]" in err


def test_number_bits_32_wraps_and_rejects_an_input_beyond_32_bits(capsys, tmp_path, monkeypatch):
    """`--number-bits 32`: Soufflé's default build. Sums, arithmetic and unsigned wrap and
    print as it writes them; an input value beyond 32 bits is a positioned error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.dl").write_text(".decl a(x: number)\n.input a\n.decl r(x: number, s: number, u: unsigned)\n"
                                   ".output r\nr(x + 1, s, to_unsigned(x)) :- a(x), s = sum y : { a(y) }.\n")
    (tmp_path / "a.facts").write_text("2147483647\n-1\n")
    code, out, err = run(capsys, "run", "w.dl", "--number-bits", "32", "-D", "out")
    assert code == 0, err
    assert sorted((tmp_path / "out" / "r.csv").read_text().splitlines()) == [
        "-2147483648\t2147483646\t2147483647", "0\t2147483646\t4294967295"]
    assert "4294967295" in out  # the preview shows an unsigned as the file does
    code, out, err = run(capsys, "run", "w.dl", "-D", "out64")  # the default: 64 bits
    assert code == 0 and sorted((tmp_path / "out64" / "r.csv").read_text().splitlines()) == [
        "0\t2147483646\t18446744073709551615", "2147483648\t2147483646\t2147483647"]
    (tmp_path / "a.facts").write_text("1\n4294967296\n")
    code, _, err = run(capsys, "run", "w.dl", "--number-bits", "32")
    assert code == 1 and "a.facts:2:1: error[input-range]: column 1 (x) of a is number, but '4294967296' is out " \
        "of its range at 32 bits (from -2147483648 to 2147483647)" in " ".join(err.split())
    assert "--number-bits 64" in err and "Traceback" not in err
    with pytest.raises(SystemExit):  # argparse's usage error
        run(capsys, "run", "w.dl", "--number-bits", "16")
    assert "--number-bits: invalid choice: 16 (choose from 64, 32)" in capsys.readouterr().err


def test_query_headings_and_counts_read_as_words(capsys, tmp_path):
    program = tmp_path / "q.olg"
    program.write_text('materialize(link, infinity, infinity, keys(1, 2)).\n'
                       'link("a", "b", 1).\nlink("a", "c", 2).\nquery link("a", "b", C).\n')
    code, out, err = run(capsys, "run", str(program))
    assert code == 0, err
    assert table(out) == [["a", "b", "1"]] and '"a"' in out and '"b"' in out and "c0" not in out
    assert "(1 row)" in out
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "edge.facts").write_text("1\n")
    code, _, err = run(capsys, "run", str(EXAMPLES / "tc.dl"), "-F", str(facts))
    assert code == 1 and "line has 1 column;" in err


def test_run_help_reads_clearly(capsys):
    """Inputs and outputs grouped, each flag saying what it is for; the older --inputs
    spelling kept as an alias of --timed-inputs; --max-iterations not called per stage."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "inputs (--input REL=PATH takes the place" in text and "outputs (both may be given)" in text
    assert "--timed-inputs DIR, --inputs DIR" in text and "with --steps only" in text
    assert "default: the current directory" in text  # -F, as Soufflé's
    assert "Soufflé's -D" in text and "every relation the run shows" in text
    assert "per stage" not in text and "default: no limit for the program" in text


def test_the_stage_iteration_limit_grows_with_the_program_unless_given():
    """Without --max-iterations a compile leaves the stages' limit to the scheduler, which
    grows it with the program (a round per rule and atom: magic sets walks a chain of
    2,500 relations a round each); a fixed 1,000 sent that walk to Spark, where a
    5,000-rule chain did not compile in 10 minutes."""
    import argparse

    from evita.bootstrap.compiling import StageOptions
    from evita.bootstrap.scheduler import STAGE_ITERATIONS, stage_iterations
    from evita.catalog.encode import encode

    assert StageOptions.from_args(argparse.Namespace()).max_iterations is None
    assert StageOptions.from_args(argparse.Namespace(max_iterations=7)).max_iterations == 7
    assert StageOptions().max_iterations is None
    chain = "".join(f"e{i}(x, y) :- e{i - 1}(x, y).\ne{i}(x, z) :- e{i}(x, y), e{i - 1}(y, z).\n" for i in range(1, 600))
    rows = encode(parse_program("e0(1, 2).\n" + chain, "chain.dl"))
    assert stage_iterations(rows) > STAGE_ITERATIONS
