"""Input files: every bad row is an error at its file, line and column, found in the
Spark job that reads the file; nothing is dropped or nulled. One fixture per case in
tests/fixtures/inputs, with the expected code and position below."""
from __future__ import annotations

import pytest

from evita.bootstrap import syntax as S
from evita.bootstrap.diagnostics import EvitaError
from evita.runtime.dataflow import Storage
from evita.runtime.inputs import InputFile
from evita.runtime.validate import MAX_SHOWN, read_inputs

from conftest import FIXTURES

INPUTS = FIXTURES / "inputs"


def storage(types, name="edge"):
    return Storage(name, len(types), tuple(f"c{i}" for i in range(len(types))), tuple(types), "base", input=True)


def read(spark, path, types, lenient=False, delimiter=None):
    f = InputFile("edge", str(path), delimiter, S.NOWHERE)
    frames, skipped = read_inputs(spark, [(f, storage(types))], lenient)
    return frames["edge"], skipped


# fixture, declared types, expected code, line, column, offending text
CASES = [
    ("extra_column.facts", ["number", "number"], "input-columns", 2, 5, "9"),
    ("missing_column.facts", ["number", "number"], "input-columns", 3, 2, ""),
    ("word_in_number.facts", ["number", "number"], "input-type", 2, 3, "two"),
    ("empty_number.facts", ["number", "number"], "input-type", 2, 3, ""),
    ("not_utf8.facts", ["number", "symbol"], "input-encoding", 2, 3, "\ufffd"),
    ("negative_unsigned.facts", ["unsigned", "number"], "input-type", 2, 1, "-3"),
    ("word_in_float.csv", ["number", "float"], "input-type", 2, 3, "high"),
    ("bad_bool.tsv", ["number", "bool"], "input-type", 2, 3, "maybe"),
]


@pytest.mark.parametrize("name, types, code, line, col, text", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_an_error_at_its_position(spark, name, types, code, line, col, text):
    with pytest.raises(EvitaError) as info:
        read(spark, INPUTS / name, types)
    [d] = info.value.diagnostics
    assert (d.code, d.span.line, d.span.col, d.text) == (code, line, col, text), info.value.render()
    rendered = info.value.render()
    assert f"{INPUTS / name}:{line}:{col}" in rendered and "hint:" in rendered
    assert d.source_line is not None and "^" in rendered  # the line itself, with a caret


def test_a_word_in_a_number_column_names_column_and_type(spark):
    with pytest.raises(EvitaError) as info:
        read(spark, INPUTS / "word_in_number.facts", ["number", "number"])
    assert "column 2 (c1) of edge is number, but 'two' is not a number" in info.value.render()


def test_good_rows_keep_their_types_and_quotes(spark):
    df, skipped = read(spark, INPUTS / "quoted.csv", ["symbol", "symbol"])
    assert sorted(map(tuple, df.collect())) == [("a", "b, c"), ('x "y"', "z")] and skipped == {}
    df, _ = read(spark, INPUTS / "word_in_float.csv", ["number", "symbol"])
    assert df.schema.simpleString() == "struct<c0:bigint,c1:string>"


def test_lenient_skips_and_counts_bad_rows(spark):
    df, skipped = read(spark, INPUTS / "extra_column.facts", ["number", "number"], lenient=True)
    assert [tuple(r) for r in df.collect()] == [(1, 2)] and skipped == {"edge": 1}


def test_undeclared_columns_take_the_type_of_their_values(spark, tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("1,1.5,a,true\n2,,b,false\n")
    df, _ = read(spark, path, ["any"] * 4)
    assert df.schema.simpleString() == "struct<c0:bigint,c1:double,c2:string,c3:boolean>"
    assert sorted(map(tuple, df.collect())) == [(1, 1.5, "a", True), (2, None, "b", False)]


def test_line_numbers_are_exact_across_file_splits_and_errors_are_capped(spark, tmp_path):
    path = tmp_path / "big.facts"
    bad = {17, 2003, 4711} | set(range(5000, 5030))
    path.write_text("".join(f"{i}\tx{i}\n" if i in bad else ("\n" if i % 97 == 0 else f"{i}\t{i}\n")
                            for i in range(1, 6001)))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")  # many splits of one file
    try:
        with pytest.raises(EvitaError) as info:
            read(spark, path, ["number", "number"])
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert [d.span.line for d in errors] == sorted(bad)[:MAX_SHOWN]
    [note] = [d for d in info.value.diagnostics if d.severity == "note"]
    assert note.message == f"stopped after {MAX_SHOWN} errors; {len(bad) - MAX_SHOWN} more rows with errors not shown"


def test_a_well_formed_file_is_read_in_one_job_and_then_from_the_persisted_rows(spark, tmp_path):
    """The first pass persists the typed rows and counts bad ones in the job that reads
    the file, over all its splits; the engine then reads the persisted rows, not the file."""
    path = tmp_path / "good.facts"
    path.write_text("".join(f"{i}\t{i * 2}\t{i % 7}.5\n" + ("\n" if i % 50 == 0 else "") for i in range(3000)))
    sc = spark.sparkContext
    sc.setJobGroup("one-pass", "one-pass")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "8192")  # many splits of one file
    try:
        df, skipped = read(spark, path, ["number", "unsigned", "any"])
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup("one-pass")) == 1 and skipped == {}
    path.unlink()  # read from the persisted rows from here on
    assert df.schema.simpleString() == "struct<c0:bigint,c1:bigint,c2:double>"
    assert sorted(map(tuple, df.collect())) == [(i, i * 2, i % 7 + 0.5) for i in range(3000)]


def test_parquet_rows_are_checked_by_row_number(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "edge.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["4", "five", None]}), path)
    with pytest.raises(EvitaError) as info:
        read(spark, path, ["number", "number"])
    assert [(d.code, d.span.line, d.text) for d in info.value.diagnostics] == [("input-type", 2, "five"),
                                                                                ("input-type", 3, "")]
    df, skipped = read(spark, path, ["number", "symbol"], lenient=True)
    assert sorted(map(tuple, df.collect())) == [(1, "4"), (2, "five")] and skipped == {"edge": 1}


def test_parquet_columns_of_the_wrong_count_or_type_are_errors_about_the_file(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"a": [1], "b": [2.5], "c": [3]}), path)
    with pytest.raises(EvitaError) as info:
        read(spark, path, ["number", "number"])
    assert info.value.first.code == "input-columns"
    path = tmp_path / "float.parquet"
    pq.write_table(pa.table({"a": [1], "b": [2.5]}), path)
    with pytest.raises(EvitaError) as info:
        read(spark, path, ["number", "number"])
    assert info.value.first.code == "input-type" and "double" in info.value.first.message


def test_inputs_and_outputs_named_by_uri(spark, tmp_path, capsys):
    """-F, --input and -D take URIs (file:// here; hdfs://, s3a:// on a cluster): inputs are
    found and read through them, outputs written through pyarrow's filesystems, and a
    missing file is named as given."""
    from evita.bootstrap.cli import main

    from conftest import EXAMPLES

    facts = (EXAMPLES / "tc").as_uri()
    out = tmp_path / "out"
    assert main(["run", str(EXAMPLES / "tc.dl"), "-F", facts, "-D", out.as_uri(), "--master", "local[2]"]) == 0
    assert len((out / "path.csv").read_text().splitlines()) == 48
    parquet = tmp_path / "edges.parquet"
    spark.read.csv(str(EXAMPLES / "tc" / "edge.facts"), sep="\t", schema="a long, b long").write.parquet(str(parquet))
    assert main(["run", str(EXAMPLES / "tc.dl"), "--input", f"edge={parquet.as_uri()}", "-D", out.as_uri(),
                 "--master", "local[2]"]) == 0
    assert len((out / "path.csv").read_text().splitlines()) == 48
    capsys.readouterr()
    assert main(["run", str(EXAMPLES / "tc.dl"), "-F", (tmp_path / "nope").as_uri(), "--master", "local[2]"]) == 1
    assert f"error[input-missing]: .input edge: no file {(tmp_path / 'nope').as_uri()}/edge.facts" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".facts", ".parquet"])
def test_a_file_rewritten_between_two_reads_in_one_session_is_read_again(spark, tmp_path, suffix):
    """Spark serves a persisted plan to any later query with the same plan: a second read
    of the same path (the file rewritten since, as an API user's next run does) must give
    the new rows, not the first read's."""
    path = tmp_path / f"edge{suffix}"

    def write(rows):
        if suffix == ".parquet":
            spark.createDataFrame(rows, "a long, b long").write.mode("overwrite").parquet(str(path))
        else:
            path.write_text("".join(f"{a}\t{b}\n" for a, b in rows))

    write([(1, 2), (2, 3)])
    first = sorted(tuple(r) for r in read(spark, path, ["number", "number"])[0].collect())
    write([(7, 8)])
    second = sorted(tuple(r) for r in read(spark, path, ["number", "number"])[0].collect())
    assert (first, second) == ([(1, 2), (2, 3)], [(7, 8)])
