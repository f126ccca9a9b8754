"""Getting tuples in and out: facts, `--input REL=PATH`, Soufflé `-F`/`-D`, `--output`.

Relations are DataFrames with columns c0, c1, ... inside the engine. Types come from the
declaration when there is one (Soufflé `number`/`unsigned` -> bigint, `float` -> double,
`symbol` -> string), otherwise from the values (ints -> bigint, any float -> double,
any string -> string, lists -> arrays).
"""
from __future__ import annotations

import os
from pathlib import Path

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError
from ..catalog.fs import Loc, joined
from .dataflow import Dataflow, Storage

DECLARED = {"number": "bigint", "unsigned": "bigint", "int": "bigint", "integer": "bigint", "long": "bigint",
            "float": "double", "double": "double", "symbol": "string", "string": "string", "bool": "boolean"}


def plain(v):
    """A value Spark returned (a Row, a list) as plain Python: rows and lists become tuples."""
    if isinstance(v, (list, tuple)):
        return tuple(plain(x) for x in v)
    if hasattr(v, "asDict"):
        return tuple(plain(x) for x in v)
    return v


def _spark_type(name: str):
    from pyspark.sql import types as T

    return {"bigint": T.LongType(), "double": T.DoubleType(), "string": T.StringType(),
            "boolean": T.BooleanType()}[name]


def _infer(values: list):
    """The Spark type for a column holding `values` (Nones ignored)."""
    from pyspark.sql import types as T

    vals = [v for v in values if v is not None]
    if not vals:
        return T.StringType()
    if all(isinstance(v, bool) for v in vals):
        return T.BooleanType()
    if all(isinstance(v, (list, tuple)) for v in vals):
        return T.ArrayType(_infer([x for v in vals for x in v]))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return T.LongType()
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return T.DoubleType()
    return T.StringType()


def _convert(v, t):
    from pyspark.sql import types as T

    if v is None:
        return None
    if isinstance(t, T.StringType) and not isinstance(v, str):
        return str(v).lower() if isinstance(v, bool) else str(v)
    if isinstance(t, T.DoubleType):
        return float(v)
    if isinstance(t, T.ArrayType):
        return [_convert(x, t.elementType) for x in v]
    return v


# A nullary relation (a proposition) holds the empty tuple or nothing. On Spark it has one
# column, c0, always true: Spark SQL has no SELECT of no columns, and its DISTINCT over
# no columns is a global aggregate that answers one row even for no input. The column is
# Spark's only: the columnar evaluator holds zero columns, and what a user sees (outputs,
# `Result.relations`, tuples) has none (`as_nullary`).
UNIT = "c0"


def unit_rows(rows: list) -> list:
    """A nullary relation's tuples as Spark holds them: (True,) for the empty tuple."""
    return [(True,) for _ in rows[:1]]


def as_nullary(df):
    """A nullary relation's Spark frame without its unit column, as users see it."""
    return df.select()


def schema_for(s: Storage, columns_values=None):
    from pyspark.sql import types as T

    if s.arity == 0:
        return T.StructType([T.StructField(UNIT, T.BooleanType(), False)])
    fields = []
    for i in range(s.arity):
        declared = DECLARED.get(s.types[i]) if s.types[i] != "any" else None
        t = _spark_type(declared) if declared else _infer(columns_values[i] if columns_values else [])
        fields.append(T.StructField(f"c{i}", t, True))
    return T.StructType(fields)


VALUES_LIMIT = 2000  # up to this many facts become an inline VALUES table (no RDD behind it)


def facts_frame(spark, rows: list, s: Storage):
    if s.arity == 0:
        return spark.createDataFrame(unit_rows(rows), schema_for(s))
    schema = schema_for(s, list(zip(*rows)) if rows else None)
    data = [tuple(_convert(v, f.dataType) for v, f in zip(r, schema.fields)) for r in rows]
    if not data or len(data) > VALUES_LIMIT or s.arity == 0:
        return spark.createDataFrame(data, schema)
    return spark.sql(values_select(data, schema).sql("spark"))


def values_select(data: list, schema):
    """SELECT CAST(col1 AS type) AS c0, ... FROM VALUES (...), (...): a local relation."""
    from sqlglot import exp

    from .sql import lit

    n = len(schema.fields)
    values = exp.Values(expressions=[exp.Tuple(expressions=[lit(v) for v in row]) for row in data],
                        alias=exp.TableAlias(this=exp.to_identifier("v"),
                                             columns=[exp.to_identifier(f"v{i}") for i in range(n)]))
    cols = [exp.alias_(exp.Cast(this=exp.column(f"v{i}", table="v"),
                                to=exp.DataType.build(f.dataType.simpleString(), dialect="spark")), f"c{i}")
            for i, f in enumerate(schema.fields)]
    return exp.select(*cols).from_(values)


def facts_table(rows: list, s: Storage):
    """The facts as a pandas table with the types `facts_frame` gives them, for the
    columnar evaluator; None when a value is null or a list (it lacks both)."""
    import pandas as pd
    from pyspark.sql import types as T

    if s.arity == 0:  # the columnar evaluator's proposition: no columns, a row when true
        return pd.DataFrame(index=range(min(len(rows), 1)))
    schema = schema_for(s, list(zip(*rows)) if rows else None)
    dtypes = {T.LongType: "int64", T.DoubleType: "float64", T.BooleanType: "bool", T.StringType: "object"}
    if any(type(f.dataType) not in dtypes for f in schema.fields):
        return None
    if any(v is None for r in rows for v in r):
        return None
    columns = list(zip(*rows)) if rows else [()] * s.arity
    return pd.DataFrame({f"c{i}": pd.Series([_convert(v, f.dataType) for v in columns[i]],
                                            dtype=dtypes[type(f.dataType)])
                         for i, f in enumerate(schema.fields)})


def empty_frame(spark, s: Storage):
    return spark.createDataFrame([], schema_for(s))


# ---------------------------------------------------------------- reading

class Inputs(dict):
    """relation -> DataFrame of the rows read; `skipped`: relation -> rows left out (--lenient)."""
    skipped: dict = {}


def gather_inputs(spark, dataflow: Dataflow, inputs=(), facts_dir: str | None = None, *,
                  files: dict | None = None, lenient: bool = False) -> Inputs:
    """DataFrames for `--input REL=PATH` options and Soufflé's `-F DIR`, every row checked
    (runtime/validate.py). `files` (relation -> InputFile, from `inputs.resolve_inputs`
    before Spark started) replaces `inputs` and `facts_dir`."""
    from .inputs import COMMAND_LINE, InputFile, parse_input_option
    from .validate import read_inputs

    if files is None:
        files = {}
        if facts_dir:
            files = {rel: InputFile(rel, joined(facts_dir, f"{rel}.facts"), "\t", S.NOWHERE)
                     for rel in dataflow.inputs}
        for text in inputs:
            rel, path = parse_input_option(text)
            files[rel] = InputFile(rel, path, None, COMMAND_LINE, True)
    frames, skipped = read_inputs(spark, input_pairs(dataflow, files), lenient)
    out = Inputs(frames)
    out.skipped = skipped
    return out


def input_pairs(dataflow: Dataflow, files: dict) -> list:
    """[(InputFile, Storage)] of the files to read (relation -> InputFile), each checked:
    a relation the program has, a file that is there."""
    from .inputs import missing_files

    problems = [Diagnostic("unknown-relation", f"--input names {f.relation}, which the program does not use",
                           f.span, f.relation, "known: " + ", ".join(dataflow.relations))
                for f in files.values() if f.option and f.relation not in dataflow.relations]
    problems += missing_files(files)
    if problems:
        raise EvitaError(problems)
    # A relation the stages removed (nothing reads it any more) needs no file.
    from dataclasses import replace

    return [(replace(f, number_bits=dataflow.number_bits), dataflow.relations[f.relation])
            for f in files.values() if f.relation in dataflow.relations]


# ---------------------------------------------------------------- writing

def writable(df):
    """Arrays become text so that CSV can hold them."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    return df.select(*[F.to_json(F.col(f.name)).alias(f.name) if isinstance(f.dataType, ArrayType)
                       else F.col(f.name) for f in df.schema.fields])


def write_outputs(result, relations: list, directory: str, fmt: str = "csv", souffle: bool = False) -> list:
    """Write each relation to DIR/REL.csv (one file, sorted, as Soufflé `-D` does) or
    DIR/REL.parquet. CSV rows are formatted column by column over Arrow (the table the
    driver holds for a small stratum, else the relation collected as Arrow batches)."""
    from .inputs import OutputFile

    if fmt == "parquet":
        os.makedirs(directory, exist_ok=True)
        written = []
        for rel in relations:
            target = Loc.of(joined(directory, f"{rel}.parquet"))
            target.parent.drop_stale_temporaries()
            # Spark writes a folder of part files: whole or not at all, as a CSV file is
            target.replace_folder(lambda tmp: result.relations[rel].write.parquet(str(tmp)))
            written.append(str(target))
        return written
    return write_text_outputs(result, [OutputFile(rel, joined(directory, f"{rel}.csv"), "\t" if souffle else ",",
                                                  False) for rel in relations], souffle_floats=souffle)


def write_text_outputs(result, files: list, columns: dict | None = None, souffle_floats: bool = True) -> list:
    """Write each OutputFile (Soufflé's `.output R(filename=..., delimiter=..., headers=true)`):
    its rows sorted, the column names first when `headers`, floats as Soufflé writes them
    (`souffle_float`) unless `souffle_floats` is false. A relation written to several
    files is collected once."""
    tables: dict = {}
    for f in files:
        if _nullary(result, f.relation):
            # Soufflé's writer: a true proposition is the line "()", a false one no line
            text = b"()\n" if _holds_a_tuple(result, f.relation) else b""
            _write_output(f.path, text)
            continue
        if f.relation not in tables:
            tables[f.relation] = _arrow_table(result, f.relation)
        text = _text_bytes(csv_text(tables[f.relation], f.delimiter, souffle_floats, getattr(f, "quoted", False),
                                    _unsigned_columns(result, f.relation), result.dataflow.number_bits,
                                    _record_columns(result, f.relation)))
        if f.headers:
            names = (columns or {}).get(f.relation) or list(result.relations[f.relation].columns)
            text = (f.delimiter.join(names) + "\n").encode() + text
        _write_output(f.path, text)
    return [f.path for f in files]


def _write_output(path: str, text: bytes) -> None:
    """One output file, recorded for the command's error to report (`bootstrap.outcome`);
    a folder or file that cannot be written is an EvitaError naming it."""
    from ..bootstrap import outcome

    target = Loc.of(path)  # a local file, or hdfs://, s3a://... (catalog/fs.py)
    try:
        target.parent.mkdir()
        target.parent.drop_stale_temporaries()  # what a run killed while writing here left
        target.write_atomically(text)  # whole or not at all, even under kill -9
    except OSError as e:
        from .inputs import COMMAND_LINE

        raise EvitaError([Diagnostic("output-unwritable", f"cannot write the output file {path}: "
                                     f"{e.strerror or e}", COMMAND_LINE, str(path),
                                     "give -D a folder you may write to (it is made if missing)")]) from None
    outcome.wrote(path)


def _unsigned_columns(result, rel: str) -> set:
    s = result.dataflow.relations.get(rel)
    return {i for i, t in enumerate(s.types) if t == "unsigned"} if s is not None else set()


def _record_columns(result, rel: str) -> set:
    s = result.dataflow.relations.get(rel)
    return {i for i, t in enumerate(s.records) if t} if s is not None else set()


def _nullary(result, rel: str) -> bool:
    s = result.dataflow.relations.get(rel)
    return s is not None and s.arity == 0


def _holds_a_tuple(result, rel: str) -> bool:
    """Whether a relation holds a tuple: from the driver's table, else one Spark job."""
    held = result.held
    return bool(len(held[rel])) if rel in held else not result.relations[rel].isEmpty()


def _text_bytes(lines) -> bytes:
    """An Arrow array of lines as the bytes of a text file, each line ended by a line
    break (no Python string per line: millions of rows are written in milliseconds)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(lines) == 0:
        return b""
    ended = pc.binary_join_element_wise(lines, "", "\n").cast(pa.large_string())  # line + "\n" + ""
    if isinstance(ended, pa.ChunkedArray):
        ended = ended.combine_chunks()
    offsets = np.frombuffer(ended.buffers()[1], dtype=np.int64)[ended.offset:ended.offset + len(ended) + 1]
    return ended.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]


def _arrow_table(result, rel: str):
    """The relation as Arrow: the table the driver holds for a small stratum, else the
    relation collected as Arrow batches (lists written as JSON, as Spark writes them)."""
    import pyarrow as pa

    held = result.held
    lists = rel in held and any(held[rel][c].dtype == object and len(held[rel]) and
                                isinstance(held[rel][c].iloc[0], tuple) for c in held[rel].columns)
    if rel in held and not lists:
        return pa.Table.from_pandas(held[rel], preserve_index=False)
    return writable(result.relations[rel]).toArrow()


def souffle_float(v: float) -> str:
    """A float as Soufflé writes it to a file: C++'s ostream at the precision
    `max_digits10` of its float type (WriteStreamCSV.h), that is `%.17g` for the 64-bit
    double Evita computes with (a Soufflé built with 64-bit floats; the default 32-bit
    build writes `%.9g` of a 32-bit float). So 2.0 is "2", 0.25 is "0.25", 1e20 is "1e+20",
    and 0.1 is "0.10000000000000001".

    >>> [souffle_float(x) for x in (2.0, -0.5, 1e20, 0.1, float("inf"))]
    ['2', '-0.5', '1e+20', '0.10000000000000001', 'inf']
    """
    return "%.17g" % v


def csv_lines(table, sep: str, souffle_floats: bool = False) -> list:
    """The rows of an Arrow table as text lines, sorted by the columns' types (runtime/order.py:
    numbers numerically, nulls first), then formatted: null as "", booleans as
    true/false, numbers as Python prints them, or floats as Soufflé does (`souffle_floats`).
    (`csv_text` gives them as an Arrow array.)

    >>> import pyarrow as pa
    >>> csv_lines(pa.table({"a": [2, None, 10], "b": [1.5, 2.0, None], "c": [True, False, None]}), ",")
    [',2.0,false', '2,1.5,true', '10,,']
    """
    return csv_text(table, sep, souffle_floats).to_pylist()


def csv_text(table, sep: str, souffle_floats: bool = False, quoted: bool = False, unsigned=frozenset(),
             bits: int = 64, records=frozenset()):
    """`csv_lines` as an Arrow string array. `quoted` (Soufflé's rfc4180=true): every
    text value in double quotes, a quote inside it doubled (RFC 4180). `unsigned`: the
    positions of unsigned columns, written as Soufflé writes them, modulo 2^bits (the
    program's width, bootstrap/numbers.py): to_unsigned(-1) is 18446744073709551615 at
    64 bits, 4294967295 at 32. `records`: the positions of record columns, their canonical
    text written in Soufflé's form (`[1, a, [2, nil]]`, bootstrap/records.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .order import sorted_table

    for i in sorted(unsigned):  # unsigned before sorting: 4294967295 sorts after 10
        col = table.column(i).combine_chunks()
        if pa.types.is_signed_integer(col.type):
            table = table.set_column(i, table.schema.field(i).name, _as_unsigned(col, bits))
    table = sorted_table(table)  # by the columns' types (numbers numerically), before they become text
    columns = []
    for i, col in enumerate(table.columns):
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        t = col.type
        if pa.types.is_boolean(t):
            text = pc.if_else(col, "true", "false")
        elif pa.types.is_floating(t):  # Arrow prints 2.0 as "2"; Python as "2.0"
            values = col.to_numpy(zero_copy_only=False)
            shown = [souffle_float(v) for v in values.tolist()] if souffle_floats else values.astype(str).astype(object)
            text = pa.array(shown, pa.string(),
                            mask=col.is_null().to_numpy(zero_copy_only=False))
        elif i in records:
            from ..bootstrap.records import souffle_text

            text = pa.array([souffle_text(v) for v in col.to_pylist()], pa.string())
        else:
            text = pc.cast(col, pa.string())
            if quoted and (pa.types.is_string(t) or pa.types.is_large_string(t)):
                text = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
        columns.append(pc.fill_null(text, ""))
    if not columns:
        return pa.array([""] * table.num_rows, pa.string())
    return pc.binary_join_element_wise(*columns, sep) if len(columns) > 1 else columns[0]


def _as_unsigned(col, bits: int = 64):
    """A signed column as unsigned at `bits`: a negative value wraps to 2^bits + value."""
    import numpy as np
    import pyarrow as pa

    values = col.to_numpy(zero_copy_only=False)
    mask = col.is_null().to_numpy(zero_copy_only=False)
    wrapped = np.where(mask, 0, values).astype(np.int64).view(np.uint64)
    if bits < 64:
        wrapped = wrapped & np.uint64((1 << bits) - 1)
    return pa.array(wrapped, pa.uint64(), mask=mask)


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return repr(v)
    return str(v)
