"""Reading inputs without Spark (runtime/inputs_here.py) gives exactly what Spark's reader
(runtime/validate.py) gives: the same rows and column types, the same skipped counts, or
the same diagnostics. Each comparison reads a batch of files in one call of each."""
from __future__ import annotations

import math

import pytest

from evita.bootstrap import syntax as S
from evita.bootstrap.diagnostics import EvitaError
from evita.runtime.dataflow import Storage
from evita.runtime.inputs import InputFile
from evita.runtime.inputs_here import HERE_BYTES, NotHere, parse, read_inputs_here
from evita.runtime.validate import MAX_SHOWN, read_inputs

N, U, F, Y, B, A = "number", "unsigned", "float", "symbol", "bool", "any"

# name -> (file name, content, declared types, InputFile options); a name REL#2 is a second file of REL.
# Few files, many cases in each: Spark's reader takes about a quarter of a second per file.
GOOD = {
    "lines": ("lines.facts", b"\r\n1\t2\r\n\r\n3\t4\r5\t6\r\r7\t8\r\r\n9\t10", [N, N], {}),  # no final line break
    "lines#2": ("lines2.facts", b"11\t12\n\n", [N, N], {}),
    "quoted": ("quoted.csv", '\ufeffa,"b, c"\n"x ""y""",z\n"",""\n"a""b",c\n"q"\u2028,"r\u2028"\n'
               '"é, ü",日本\n" sp ",\'x\'\n'.encode(), [Y, Y], {}),
    "headers": ("headers.txt", b"a;b\n1;2\n3;4\n", [N, F], {"delimiter": ";", "headers": True}),
    "headers_quoted": ("hq.txt", b'"x","y"\n"1","a,b"\n', [N, Y], {"delimiter": ",", "headers": True, "quoted": True}),
    "text": ("text.facts", '"a"\t"b"\né\t日本\n😀\t\u0085x\n\ufeffa\tb\n1e3\t 5 \ntrue\tNaN\n\t\n'.encode(), [Y, Y], {}),
    "numbers": ("numbers.facts", "\n".join(
        "\t".join(r) for r in [(" +5 ", "007", "1e3", "yes"), ("-0", "0", "NaN", "N"), ("\x1f3", "+0", "-inf", " true"),
                               ("9223372036854775807", "9223372036854775807", "1d", "F"),
                               ("-9223372036854775808", "12", "0x1p3", "0"), ("1", "2", "4.9e-324", "t"),
                               ("2", "3", "0.1f", "\x7fno\x7f"), ("3", "4", " Infinity", "1"),
                               ("4", "5", "1e400", "y"), ("5", "6", "-0.0", "TRUE"), ("6", "7", ".5", "n"),
                               ("7", "8", "5.", "FALSE"), ("8", "9", "+NaN", "f"), ("9", "10", "1.e3", "false"),
                               ("10", "11", "0x1.8p1d", "true"), ("11", "12", "1.0000000000000000000001", "t")]).encode(),
                [N, U, F, B], {}),
    "infer": ("infer.csv", b"1,1.5,a,true,x, 7 ,nan\n2,2,b,FALSE,1,8,1d\n-3,1e3,1,True,2.5,9,inf\n",
              [A, A, A, A, A, A, A], {}),
    "infer_empty_column": ("infer2.csv", b"1,,true\n2,,false\n", [A, A, A], {}),
    # undeclared columns with empty values: nulls (the columnar evaluator refuses them)
    "infer_nulls": ("nulls.csv", b"1,1.5,true,\n,,,\n3,2,false,x\n", [A, A, A, A], {}),
    "empty": ("empty.facts", b"", [N, F, B, Y], {}),
    "multi_char": ("mc.txt", b"a::b\n1::\n", [Y, Y], {"delimiter": "::"}),
    "regex_char": ("pipe.txt", b"a|b|\n|c|d.\n", [Y, Y, Y], {"delimiter": "|"}),  # a separator Java's regex escapes
    "option_csv": ("opt.csv", b'1,"2"\n', [N, N], {"option": True}),
}
BAD = {
    "columns_and_numbers": ("cols.facts", b"1\t2\n2\t3\t9\n\n5\n1\ttwo\n1\t\n9223372036854775808\t1\n"
                            b"1\t-9223372036854775809\n1.0\t2\n", [N, N], {}),
    "not_utf8": ("latin.facts", b"1\tcaf\xe9\n2\tx\xed\xa0\x80y\n3\tx\xed\xa0y\n4\t\xe0\x80\x80\xff\n5\tx\xed\xa0\n"
                 b"6\tok\n7\t\xf0\x9f\x98\n8\tx\xed\xbf\xbf", [N, Y], {}),
    "negative_unsigned": ("neg.facts", b"-3\t4\n", [U, N], {}),
    "bad_bool": ("bool.tsv", b"1\tmaybe\n2\ton\n", [N, B], {}),
}
BAD2 = {
    "word_in_float": ("float.csv", b"1,high\n2,0x10\n3,1_000\n4,Infinityd\n", [N, F], {}),
    "quoted_columns": ("qc.csv", b'"a,b",c,d\n"x""\n', [Y, Y], {}),
    "headers_crlf": ("hc.csv", b"x,y\r\n1,2\r\n\r\nz,3\r\n1,\t2\x0b\n", [N, N], {"headers": True}),
    "cr_bom": ("crl.facts", b"\xef\xbb\xbfx\t2\r1\t2\r\r3\tq\r", [N, N], {}),
    "unicode_column": ("uc.facts", "é日\tx\n".encode(), [Y, N], {}),
    "second_file": ("sf.facts", b"1\t2\n", [N, N], {}),
    "second_file#2": ("sf2.facts", b"3\tx\n", [N, N], {}),
    "all_bad": ("allbad.facts", b"a\tb\n", [N, N], {}),
}


def storage(name, types):
    return Storage(name, len(types), tuple(f"c{i}" for i in range(len(types))), tuple(types), "base", input=True)


def pairs(tmp_path, cases: dict) -> list:
    out = []
    for name, (file, content, types, options) in cases.items():
        (tmp_path / file).write_bytes(content)
        rel = name.split("#")[0]
        out.append((InputFile(rel, str(tmp_path / file), options.get("delimiter"), S.NOWHERE,
                              option=options.get("option", False), headers=options.get("headers", False),
                              quoted=options.get("quoted", False)), storage(rel, types)))
    return out


def shown(v):
    """A value as comparable text: exact floats (NaN and -0.0 included), ints, bools, str."""
    v = v.item() if hasattr(v, "item") else v
    return (type(v).__name__, "nan" if isinstance(v, float) and math.isnan(v) else repr(v))


def rows(table) -> list:
    return sorted(tuple(shown(v) for v in row) for row in table.itertuples(index=False))


def outcome(read):
    try:
        return read()
    except EvitaError as e:
        return e


def assert_same(spark, files, lenient=False):
    """Both readers on `files`: the same diagnostics, or the same tables as Spark's frames
    collected by toPandas (`columnar.checked` keeps their dtypes; it refuses nulls and NaN)."""
    theirs = outcome(lambda: read_inputs(spark, files, lenient))
    ours = outcome(lambda: read_inputs_here(files, lenient))
    if isinstance(theirs, EvitaError) or isinstance(ours, EvitaError):
        assert isinstance(ours, EvitaError) and isinstance(theirs, EvitaError), (theirs, ours)
        assert ours.diagnostics == theirs.diagnostics, ours.render() + "\n----- Spark:\n" + theirs.render()
        return theirs.diagnostics
    (frames, skipped), (tables, here_skipped) = theirs, ours
    assert sorted(tables) == sorted(frames) and here_skipped == skipped
    for rel, df in frames.items():
        expected = df.toPandas()
        assert list(tables[rel].columns) == list(expected.columns), rel
        assert list(tables[rel].dtypes) == list(expected.dtypes), (rel, tables[rel].dtypes, expected.dtypes)
        assert rows(tables[rel]) == rows(expected), rel
        assert evaluable(tables[rel]) == evaluable(expected), rel
    return frames, skipped


def evaluable(table):
    """The dtypes `columnar.checked` leaves the table, or what it refuses."""
    from evita.runtime.columnar import Unsupported, checked

    try:
        return list(checked(table.copy()).dtypes)
    except Unsupported as e:
        return str(e)


def test_good_files_give_the_same_rows_and_types(spark, tmp_path):
    files = pairs(tmp_path, GOOD)
    uri = tmp_path / "uri.facts"
    uri.write_bytes(b"1\t2\n")
    files.append((InputFile("uri", uri.as_uri(), None, S.NOWHERE), storage("uri", [N, N])))
    frames, skipped = assert_same(spark, files)
    assert skipped == {} and len(frames) == len(GOOD)  # with uri, less lines#2


def test_bad_rows_give_the_same_diagnostics_and_lenient_the_same_rows(spark, tmp_path):
    from evita.bootstrap.parser import parse_program
    from evita.bootstrap.planner import plan

    # a relation as the planner gives it (named columns), read from a file:// URI
    dataflow = plan(parse_program(".decl planned(src: number, label: symbol)\n.input planned\n"
                                  "p(X) :- planned(X, _).\n", "t.dl"))
    (tmp_path / "planned.facts").write_bytes(b"1\ta\nb\t2\n")
    planned = (InputFile("planned", (tmp_path / "planned.facts").as_uri(), None, S.NOWHERE),
               dataflow.relations["planned"])
    batches = [pairs(tmp_path, BAD), pairs(tmp_path, BAD2) + [planned]]
    for files in batches:
        diagnostics = assert_same(spark, files)
        assert len(diagnostics) <= MAX_SHOWN and not any(d.code == "error-limit" for d in diagnostics)
        assert {d.code for d in diagnostics} >= {"input-columns", "input-type"}
    assert any(d.code == "input-encoding" for d in diagnostics_of(batches[0]))
    assert any("(src)" in d.message and d.span.file == planned[0].path for d in diagnostics_of(batches[1]))
    _, skipped = assert_same(spark, batches[0] + batches[1], lenient=True)
    assert skipped["all_bad"] == 1 and skipped["planned"] == 1


def diagnostics_of(files) -> list:
    with pytest.raises(EvitaError) as info:
        read_inputs_here(files)
    return info.value.diagnostics


def test_more_errors_than_shown_are_cut_and_counted_alike(spark, tmp_path):
    many = {"many": ("many.facts", "".join(f"{i}\t{'x' if i % 3 else i}\n" for i in range(40)).encode(), [N, N], {}),
            "many#2": ("many2.facts", b"x\t1\n", [N, N], {})}
    diagnostics = assert_same(spark, pairs(tmp_path, many))
    assert diagnostics[-1].code == "error-limit" and len(diagnostics) == MAX_SHOWN + 1


def test_values_parse_as_spark_try_cast_parses_them(spark):
    """Many strings through Spark's try_cast in one query, against `parse`."""
    import pyarrow as pa

    base = ["5", "+5", "-5", "1.0", "1.", "1.5", ".0", "1e3", "1E3", "1e-3", "NaN", "nan", " nan ", "Infinity",
            "infinity", "-Infinity", "+inf", "INF", "infinit", "1d", "1D", "1f", "1.5d", "1e3d", "0x10", "0x1p3",
            "0x1.8p1", "0x1p3d", "0x.8p1", "0x1.fffffffffffff8p0", "0x1p-1075", "0x1.8p-1074", "1_000", "", "+", "-",
            ".", "+-1", "01", "007", "-0", "+0", "-0.0", "9223372036854775807", "9223372036854775808",
            "-9223372036854775808", "-9223372036854775809", "99999999999999999999", "00000000000000000000009",
            "1e400", "-1e400", "1e-400", "1e99999999999", "4.9e-324", "2.4e-324", "0.1", "0.1f", "1.1F",
            "1.7976931348623157e308", "1.7976931348623159e308", "2.2250738585072011e-308", "true", "false", "TRUE",
            "t", "f", "y", "n", "yes", "no", "1", "0", "on", "2", "tru", "٣", "１", "1 000", "e3", "1e", "1.e3",
            ".e3", ".5", "5.", "1..0", "Infinityd", "+NaN", "-NaN", "1L", "0b1", "10e-1", "1.0000000000000000000001",
            "123456789012345678901234567890e-10", "-.5e-3",
            "0x1p99999", "-0x1p1024", "0x1.fffffffffffffp1023", "0x1.fffffffffffff8p1023", "0x1p-99999",
            "1e99999999999999999999", "-1e-99999999999999999999", "0" * 400 + "1", "1" + "0" * 400]
    spaces = [" ", "\t", "\x0b", "\x0c", "\x1c", "\x1f", "\x01", "\x00", "\x7f", "\xa0", "\u2028", "\u3000", "\x85",
              "\ufeff"]
    values = base + [w + v + w for w in spaces for v in ("5", "1.5", "inf", "true", "NaN", "1d", "")]
    values += [w + "7" for w in spaces] + ["7" + w for w in spaces]
    df = spark.createDataFrame(list(enumerate(values)), "i int, v string")
    spark_rows = df.selectExpr("i", "try_cast(v AS BIGINT)", "try_cast(v AS DOUBLE)", "try_cast(v AS BOOLEAN)",
                               "CASE WHEN try_cast(v AS BIGINT) >= 0 THEN try_cast(v AS BIGINT) END").collect()
    col = pa.array(values, pa.string())
    ours = {t: parse(col, t, t) for t in ("bigint", "double", "boolean")}
    ours["unsigned"] = parse(col, "bigint", "unsigned")
    for row in sorted(spark_rows, key=lambda r: r[0]):
        i = row[0]
        got = tuple(shown(ours[t][1][i]) if ours[t][0][i] else None for t in ("bigint", "double", "boolean", "unsigned"))
        want = tuple(None if v is None else shown(v) for v in row[1:])
        assert got == want, (values[i], got, want)


def test_what_cannot_be_read_exactly_here_is_left_to_spark(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evita.runtime import inputs_here

    pq.write_table(pa.table({"a": [1]}), tmp_path / "p.parquet")
    (tmp_path / "dir").mkdir()
    for name in ("_x.facts", ".x.facts", "x.facts.gz", "a[1].facts", "ok.facts"):
        (tmp_path / name).write_bytes(b"1\n")
    s = storage("r", [N])
    for path in [str(tmp_path / "p.parquet"), "hdfs://nn/x.facts", "s3a://bucket/x.facts", "file://host/x.facts",
                 str(tmp_path / "dir"), str(tmp_path / "missing.facts"), str(tmp_path / "_x.facts"),
                 str(tmp_path / ".x.facts"), str(tmp_path / "x.facts.gz"), str(tmp_path / "a[1].facts"),
                 str(tmp_path / "a*.facts")]:
        with pytest.raises(NotHere):
            read_inputs_here([(InputFile("r", path, None, S.NOWHERE), s)])
    ok = (InputFile("r", str(tmp_path / "ok.facts"), None, S.NOWHERE), s)
    assert len(read_inputs_here([ok])[0]["r"]) == 1
    monkeypatch.setattr(inputs_here, "HERE_BYTES", 1)
    with pytest.raises(NotHere):
        read_inputs_here([ok])
    assert HERE_BYTES == 64 << 20
    # undeclared columns typed differently by two files: Spark's union widens them
    (tmp_path / "i1.csv").write_bytes(b"1\n")
    (tmp_path / "i2.csv").write_bytes(b"1.5\n")
    with pytest.raises(NotHere):
        read_inputs_here([(InputFile("r", str(tmp_path / n), None, S.NOWHERE), storage("r", [A]))
                          for n in ("i1.csv", "i2.csv")])


def test_32_bit_inputs_are_range_checked_and_held_alike(spark, tmp_path):
    """At --number-bits 32 both readers keep a number in 32 bits and an unsigned in 0 ..
    2^32 - 1 (held as its bit pattern); a value beyond is error[input-range], never a wrap."""
    def files(name: str, content: bytes):  # a new file each: Spark keeps the rows it read of a path
        (tmp_path / name).write_bytes(content)
        return [(InputFile("w", str(tmp_path / name), "\t", S.NOWHERE, number_bits=32), storage("w", [N, U]))]

    frames, _ = assert_same(spark, files("good.facts", b"2147483647\t4294967295\n-2147483648\t0\n7\t2147483648\n"))
    assert sorted(map(tuple, frames["w"].toPandas().values.tolist())) == [
        (-2147483648, 0), (7, -2147483648), (2147483647, -1)]
    shown_errors = assert_same(spark, files("bad.facts", b"2147483648\t1\n1\t4294967296\n1\t-1\n-2147483649\t1\n"))
    assert [(d.code, d.span.line, d.span.col, d.text) for d in shown_errors] == [
        ("input-range", 1, 1, "2147483648"), ("input-range", 2, 3, "4294967296"), ("input-range", 3, 3, "-1"),
        ("input-range", 4, 1, "-2147483649")]
    assert "(from 0 to 4294967295)" in shown_errors[1].message and "--number-bits 64" in shown_errors[0].hint
