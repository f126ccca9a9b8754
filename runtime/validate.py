"""Reading input files into relations with every row checked, in the job that reads them.

A row with the wrong number of columns, or a value that is not of its column's declared
type, is an error naming the file, the line (the row, for Parquet), the column, the text
and the type: nothing is dropped or turned into null behind the user's back (Soufflé
refuses such files too). `lenient` skips those rows instead and counts them.

Two passes, the second only for a file with a bad row:

* the first pass (`_text_fast`) reads each text file as lines (`spark.read.text`),
  splits them (a plain separator: Java's split takes its fast path, no regex per line;
  the quote-aware pattern only on lines with a quote), casts each value with
  `try_cast` to its declared type and gives each line the same error code `err` as the
  second pass would (a bad value is a code, never a null). It persists just that: `err`
  and the typed values, not the line, its file, split or ordinal;
* ONE Spark job over all inputs then persists those rows and, in the same job, counts
  each input's bad rows and infers the types of undeclared columns (`observe`, the rows
  going to Spark's no-op sink): a well-formed file is read once, in one job, and the
  engine reads the persisted rows, not the file. `lenient` needs no more: it keeps the
  rows without an error and reports the count;
* only when a file has bad rows (and not `lenient`) is it read again the precise way
  (`_text`): with each line's file, split start and ordinal (`_metadata`,
  `monotonically_increasing_id`), its text and its tokens; one aggregate numbers the
  lines of each split (a split's first line number is the sum of the lines of the
  splits before it in its file) and a second query takes the first MAX_SHOWN bad rows
  (Spark's take-ordered: bounded memory), so diagnostics name file, line and column.
  A file with a header line, and Parquet (`_parquet`), are read the precise way from
  the start; their rows go through the same counting job.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..bootstrap import syntax as S
from ..bootstrap.diagnostics import Diagnostic, EvitaError, plural, quoted
from ..bootstrap.fact_types import article
from ..catalog.fs import Loc
from .dataflow import Storage
from .inputs import InputFile
from .io import DECLARED

MAX_SHOWN = 20  # errors shown; the rest are counted
TSV_SUFFIXES = (".tsv", ".facts", ".tab")
TOO_FEW_OR_MANY, NOT_UTF8 = -1, -2  # `err` codes; 0, 1, ... name the column whose value is bad
_HINTS = {"bigint": "write a whole number, like 42", "double": "write a number, like 3.5",
          "boolean": "write true or false", "string": "give every column a value"}
_INFERRED = ((1, "bigint"), (2, "double"), (4, "boolean"))  # bit of the inference mask -> type
_OUTSIDE_QUOTES = '(?=(?:[^"]*"[^"]*")*[^"]*$)'  # a separator followed by an even number of quotes


@dataclass
class _Read:
    """One input file on its way in: the persisted, checked rows and how to type them."""
    file: InputFile
    storage: Storage
    parquet: bool
    frame: object  # DataFrame: err, data, v0, v1, ... (precise: also file, block, mid, value, tokens)
    targets: list  # Spark type per column; None: infer (undeclared, text); "keep": v<i> has it already
    precise: bool = True  # every line's file, split and ordinal are kept: diagnostics can be made


def is_parquet(path: str) -> bool:
    if path.lower().rstrip("/").endswith(".parquet"):
        return True
    loc = Loc.of(path)  # a local path or a URI (catalog/fs.py)
    return loc.is_dir() and any(child.name.endswith(".parquet") for child, _ in loc.children())


def read_inputs(spark, files: list, lenient: bool = False) -> tuple:
    """[(InputFile, Storage)] -> ({relation: DataFrame c0, c1, ...}, {relation: rows skipped})."""
    reads, problems = [], []
    with_records = [(f, s) for f, s in files if s.records]
    files = [(f, s) for f, s in files if not s.records]
    record_frames, record_skipped = _records_read_here(spark, with_records, lenient) if with_records else ({}, {})
    for f, s in files:
        try:
            reads.append(_parquet(spark, f, s) if is_parquet(f.path) else
                         _text(spark, f, s) if _precise_only(f) else _text_fast(spark, f, s))
        except EvitaError as e:
            problems += e.diagnostics
    if problems:
        raise EvitaError(problems)
    if not reads:
        return record_frames, record_skipped
    errors, masks = _count(reads)
    if any(errors.values()) and not lenient:
        try:
            shown = _precise_errors(spark, reads, errors)
        finally:
            for r in reads:
                r.frame.unpersist()
        raise EvitaError(shown)
    frames, skipped = {}, {}
    for i, r in enumerate(reads):  # a relation read from several files (.input twice) is their union
        typed = _typed(r, masks.get(i, {}))
        rel = r.file.relation
        frames[rel] = frames[rel].unionByName(typed) if rel in frames else typed
        if errors.get(i, 0):
            skipped[rel] = skipped.get(rel, 0) + errors[i]
    for rel, frame in record_frames.items():
        frames[rel] = frames[rel].unionByName(frame) if rel in frames else frame
        skipped[rel] = skipped.get(rel, 0) + record_skipped.get(rel, 0)
    return frames, {rel: n for rel, n in skipped.items() if n}


def _records_read_here(spark, files: list, lenient: bool) -> tuple:
    """The inputs of relations with record columns: Soufflé's text of a record is read
    by a recursive parser (bootstrap/records.py), which Spark SQL has no form of and
    which runs on no executor without a Python UDF, so the driver reads these files
    (runtime/inputs_here.py, with its checks and diagnostics) and Spark gets the rows.
    A file the driver cannot read (not local, Parquet, compressed) is not supported yet."""
    from .inputs_here import NotHere, read_inputs_here

    try:
        tables, skipped = read_inputs_here(files, lenient, any_size=True)
    except NotHere as e:
        f = files[0][0]
        raise EvitaError([Diagnostic("input-format", f"{f.relation} has record columns, and its file is read by "
                                     f"the driver, which cannot read it: {e}", f.span, f.path,
                                     "give a local text file (records in Parquet or remote files are not supported yet)")]
                         ) from None
    frames = {}
    for rel, table in tables.items():
        s = next(s for f, s in files if f.relation == rel)
        schema = ", ".join(f"c{i} {DECLARED.get(t) or 'string'}" for i, t in enumerate(s.types))
        frames[rel] = spark.createDataFrame(table, schema) if len(table) else spark.createDataFrame([], schema)
    return frames, skipped


def _precise_errors(spark, reads: list, errors: dict) -> list:
    """The diagnostics of the first MAX_SHOWN bad rows and a note of the rest: the files
    with errors read again the precise way (file, split and ordinal of every line), then
    the aggregate that numbers their lines and the query that takes the first bad rows."""
    bad = [r for i, r in enumerate(reads) if errors.get(i, 0)]
    again = [r if r.precise else _text(spark, r.file, r.storage) for r in bad]
    try:
        _, offsets, _ = _summarize(again)
        shown = _first_errors(again, offsets)
    finally:
        for r in again:
            if not any(r is kept for kept in reads):
                r.frame.unpersist()
    if not shown:  # the second read found none: the file was rewritten between the two
        return [Diagnostic("input-changed", f"{r.file.path} changed while it was read: the first read found "
                           f"{plural(errors[i], 'bad row')}, the second none", S.Span(r.file.path, 0, 0),
                           r.file.path, "run again once nothing writes the file")
                for i, r in enumerate(reads) if errors.get(i, 0)]
    return shown + _rest_note(sum(errors.values()), shown)


# ---------------------------------------------------------------- the checked rows

def _for_spark(f: InputFile) -> str:
    """The file as Spark is to open it: a local path made absolute here, since the JVM
    resolves a relative one against its own working directory, not this process's
    (which a notebook or a script may have changed since Spark started)."""
    return str(Loc.of(f.path))


def _text(spark, f: InputFile, s: Storage) -> _Read:
    from pyspark.sql import functions as F

    sep = separator(f)
    quoted = is_quoted(f)
    # The ordinal is taken in the projection over the scan, before any filter could shift it.
    lines = spark.read.text(_for_spark(f)).select(
        F.regexp_replace("value", "\r$", "").alias("value"), F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"), F.monotonically_increasing_id().alias("mid"))
    if f.headers:  # Soufflé headers=true: the first line of the file (of its first split) is no row
        from pyspark.sql import Window

        first = F.min("mid").over(Window.partitionBy("file", "block"))
        lines = lines.withColumn("value", F.when((F.col("block") == 0) & (F.col("mid") == first), F.lit(""))
                                 .otherwise(F.col("value")))
    pattern = "\\Q" + sep + "\\E" + (_OUTSIDE_QUOTES if quoted else "")
    tokens = lines.withColumn("tokens", F.split("value", pattern, -1))
    values = [_unquoted(f"try_element_at(tokens, {i + 1})") if quoted else f"try_element_at(tokens, {i + 1})"
              for i in range(s.arity)]
    targets = [DECLARED.get(t) for t in s.types]
    cases = [f"WHEN size(tokens) != {s.arity} THEN {TOO_FEW_OR_MANY}",
             f"WHEN instr(value, '\ufffd') > 0 THEN {NOT_UTF8}"]
    cases += [f"WHEN {bad} THEN {i}" for i, bad in enumerate(_per_column(values, targets, s, f.number_bits))]
    err = f"CASE WHEN value = '' THEN NULL {' '.join(cases)} END"
    frame = tokens.select("file", "block", "mid", "value", F.expr("value != ''").alias("data"), "tokens",
                          F.expr(err).cast("int").alias("err"), *[F.expr(v).alias(f"v{i}") for i, v in enumerate(values)])
    return _Read(f, s, False, _persisted(frame), targets)


def _text_fast(spark, f: InputFile, s: Storage) -> _Read:
    """The first pass over a text file: the rows split, checked and cast to their declared
    types, with the same `err` as `_text` gives each line, but nothing kept for
    diagnostics (no file, split, ordinal, line text or tokens), so it is cheap to compute
    and to persist. Empty lines are no rows. No line holds a `\\r` for it to strip, as `_text`
    does: Spark's line reader ends a line at \\r, \\n and \\r\\n."""
    from pyspark.sql import functions as F

    sep, quoted = separator(f), is_quoted(f)
    plain = F.split("value", _literal_pattern(sep), -1)
    if quoted:  # a separator inside quotes splits nothing; the lookahead is costly, so only where there is a quote
        tokens = F.when(F.instr("value", '"') > 0, F.split("value", "\\Q" + sep + "\\E" + _OUTSIDE_QUOTES, -1)) \
            .otherwise(plain)
    else:
        tokens = plain
    lines = spark.read.text(_for_spark(f)).where("value != ''").select(tokens.alias("tokens"))
    texts = [f"try_element_at(tokens, {i + 1})" for i in range(s.arity)]
    if quoted:  # _unquoted's pattern starts with a quote: test that first, cheaply
        texts = [f"CASE WHEN startswith({v}, '\"') THEN {_unquoted(v)} ELSE {v} END" for v in texts]
    split = lines.select("tokens", *[F.expr(v).alias(f"t{i}") for i, v in enumerate(texts)])
    declared = [DECLARED.get(t) for t in s.types]
    values = [f"t{i}" for i in range(s.arity)]
    # The line is raw bytes; splitting it decodes it, as Java does, with U+FFFD for what is not UTF-8.
    # A line of the right width is its values and separators: a U+FFFD in it is in a value.
    replaced = " OR ".join(f"instr({v}, '\ufffd') > 0" for v in values) or "FALSE"
    cases = [f"WHEN size(tokens) != {s.arity} THEN {TOO_FEW_OR_MANY}", f"WHEN {replaced} THEN {NOT_UTF8}"]
    cases += [f"WHEN {bad} THEN {i}" for i, bad in enumerate(_per_column(values, declared, s, f.number_bits))]
    typed = [v if t in (None, "string") else
             _held(f"try_cast({v} AS BIGINT)", s.types[i], f.number_bits) if t == "bigint" else
             f"try_cast({v} AS {t.upper()})" for i, (v, t) in enumerate(zip(values, declared))]
    frame = split.select(F.expr(f"CASE {' '.join(cases)} END").cast("int").alias("err"), F.lit(True).alias("data"),
                         *[F.expr(v).alias(f"v{i}") for i, v in enumerate(typed)])
    return _Read(f, s, False, _persisted(frame), [None if t is None else "keep" for t in declared], precise=False)


def _precise_only(f: InputFile) -> bool:
    """A file the first pass cannot read as `_text` does: with a header line (known only
    by the file's split and ordinal), or a separator that is U+FFFD (it would hide the
    mark of bytes that are not UTF-8)."""
    return f.headers or "\ufffd" in separator(f)


def _literal_pattern(sep: str) -> str:
    """`sep` as a regular expression Java's String.split takes its fast path for (no
    regex compiled per line): a character as itself, or escaped when it means something."""
    if len(sep) == 1 and sep not in ".$|()[{^?*+\\":
        return sep
    if len(sep) == 1 and not sep.isalnum():
        return "\\" + sep
    return "\\Q" + sep + "\\E"


def _persisted(frame):
    """`frame` persisted under a plan of its own. Spark serves a persisted plan's rows to
    any later query whose plan is the same, and a second read of one path has the same
    plan: after the file was rewritten (an API user's next run, a server's next command)
    it would get the first read's rows. A read id in the plan keeps every read its own."""
    import uuid

    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    return frame.withColumn("read", F.lit(uuid.uuid4().hex)).persist(StorageLevel.MEMORY_AND_DISK)


def separator(f: InputFile) -> str:
    return f.delimiter or ("\t" if Path(f.path).suffix.lower() in TSV_SUFFIXES else ",")


def is_quoted(f: InputFile) -> bool:
    """A .csv given by --input, or Soufflé's rfc4180=true: RFC 4180 quotes."""
    return f.quoted or (f.delimiter is None and separator(f) == ",")


def _per_column(values: list, targets: list, s: Storage, bits: int = 64) -> list:
    """Per column, the condition of a bad value (FALSE where any text will do)."""
    return [f"({v}) IS NOT NULL AND {_cast(v, t, s.types[i], bits)} IS NULL" if t not in (None, "string") else "FALSE"
            for i, (v, t) in enumerate(zip(values, targets))]


def _parquet(spark, f: InputFile, s: Storage) -> _Read:
    """Parquet columns are typed already: a column of another type is an error about the
    file; a text column read as numbers is checked row by row; a null is an error."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(_for_spark(f))
    where = S.Span(f.path, 0, 0)
    if len(df.columns) != s.arity:
        raise EvitaError([Diagnostic("input-columns", f"{f.path} has {plural(len(df.columns), 'column')}; {s.name} has "
                                     f"{s.arity} ({_columns(s)})", where, ", ".join(df.columns),
                                     f"write {s.name} with {plural(s.arity, 'column')}")])
    targets = [DECLARED.get(t) for t in s.types]
    conds, problems = [], []
    for i, (field, target) in enumerate(zip(df.schema.fields, targets)):
        v = f"`{field.name}`"
        if target is None:
            conds.append("FALSE")
        elif target == "string" or _fits(field.dataType, target):
            conds.append(f"{v} IS NULL")
        elif isinstance(field.dataType, T.StringType):
            conds.append(f"{v} IS NULL OR {_cast(v, target, s.types[i], f.number_bits)} IS NULL")
        else:
            problems.append(Diagnostic("input-type", f"column {i + 1} ({field.name}) of {f.path} is "
                                       f"{field.dataType.simpleString()}; {s.name} declares {s.types[i]}", where,
                                       field.name, f"write the column as {target}, or declare it to match"))
    if problems:
        raise EvitaError(problems)
    err = "CASE " + " ".join(f"WHEN {c} THEN {i}" for i, c in enumerate(conds)) + " END" if conds else "NULL"
    frame = df.select(F.col("_metadata.file_path").alias("file"), F.lit(0).cast("long").alias("block"),
                      F.col("_metadata.row_index").alias("mid"), F.lit("").alias("value"), F.lit(True).alias("data"),
                      F.array(*[F.col(f"`{c}`").cast("string") for c in df.columns]).alias("tokens"),
                      F.expr(err).cast("int").alias("err"),
                      *[F.col(f"`{c}`").alias(f"v{i}") for i, c in enumerate(df.columns)])
    return _Read(f, s, True, _persisted(frame), [t or "keep" for t in targets])


def _fits(dtype, target: str) -> bool:
    from pyspark.sql import types as T

    return {"bigint": isinstance(dtype, T.IntegralType),
            "double": isinstance(dtype, (T.IntegralType, T.FractionalType)),
            "boolean": isinstance(dtype, T.BooleanType)}.get(target, False)


def _cast(v: str, target: str, declared: str, bits: int = 64) -> str:
    """The value of text `v` as `target`, null when it is not one: an unsigned is 0 or
    more, and at 32 bits (`--number-bits 32`) a whole number is in the 32-bit range
    (`numbers.input_range`)."""
    cast = f"try_cast({v} AS {target.upper()})"
    if target != "bigint" or (declared != "unsigned" and bits == 64):
        return cast
    low, high = input_range(declared, bits)
    return f"(CASE WHEN {cast} BETWEEN {low} AND {high} THEN {cast} END)"


def _held(value: str, declared: str, bits: int) -> str:
    """A whole value read as the program holds it: an unsigned above 2^31 - 1 at 32 bits
    is its bit pattern (bootstrap/numbers.py)."""
    if bits == 64 or declared != "unsigned":
        return value
    return f"((({value}) + 2147483648) & 4294967295) - 2147483648"


def _unquoted(v: str) -> str:
    return f"CASE WHEN {v} RLIKE '^\".*\"$' THEN replace(substr({v}, 2, length({v}) - 2), '\"\"', '\"') ELSE {v} END"


# ---------------------------------------------------------------- the one job

def _count(reads: list) -> tuple:
    """The one Spark job of a read: it persists every input's checked rows and, as it
    goes, counts each input's bad rows and ANDs the type masks of its undeclared columns
    (`observe`: metrics of the job itself, no aggregate after it; the rows go to Spark's
    no-op sink). -> ({input: bad rows}, {input: {column: mask}})."""
    import uuid
    from functools import reduce

    from pyspark.sql import functions as F

    width = max(r.storage.arity for r in reads)
    parts = []
    for i, r in enumerate(reads):
        masks = [_mask(f"v{c}") if t is None else "CAST(NULL AS INT)" for c, t in enumerate(r.targets)]
        masks += ["CAST(NULL AS INT)"] * (width - len(masks))
        parts.append(r.frame.select(F.lit(i).alias("input"), F.expr("err IS NOT NULL AND data").alias("bad"),
                                    *[F.expr(f"CASE WHEN err IS NULL AND data THEN {m} END").alias(f"m{c}")
                                      for c, m in enumerate(masks)]))
    metrics = []
    for i in range(len(reads)):
        mine = F.col("input") == i
        metrics.append(F.count(F.when(mine & F.col("bad"), 1)).alias(f"e{i}"))
        metrics += [F.bit_and(F.when(mine, F.col(f"m{c}"))).alias(f"m{i}_{c}") for c in range(reads[i].storage.arity)
                    if reads[i].targets[c] is None]
    rows = reduce(lambda a, b: a.unionByName(b), parts)
    seen = _observation(rows, f"read-{uuid.uuid4().hex}")
    rows.observe(seen, *metrics).write.format("noop").mode("overwrite").save()
    got = seen.get
    errors = {i: got[f"e{i}"] for i in range(len(reads))}
    masks = {i: {c: got[f"m{i}_{c}"] for c in range(r.storage.arity)
                 if r.targets[c] is None and got[f"m{i}_{c}"] is not None} for i, r in enumerate(reads)}
    return errors, masks


def _observation(frame, name: str):
    """An Observation of the kind `frame` takes: Spark Connect's for a Connect frame
    (pyspark picks by an environment variable, which a session made with
    `builder.remote(url)` does not set)."""
    if type(frame).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.observation import Observation
    else:
        from pyspark.sql.observation import Observation
    return Observation(name)


def _summarize(reads: list) -> tuple:
    """One Spark job over the inputs read the precise way because they have errors: per
    file split its first ordinal, its lines and its errors (and per undeclared column the
    types all its values parse as, which `_count` has given already)."""
    from functools import reduce

    from pyspark.sql import functions as F

    width = max(r.storage.arity for r in reads)
    parts = []
    for i, r in enumerate(reads):
        masks = [_mask(f"v{c}") if t is None else "CAST(NULL AS INT)" for c, t in enumerate(r.targets)]
        masks += ["CAST(NULL AS INT)"] * (width - len(masks))
        ok = "err IS NULL AND data"
        parts.append(r.frame.select(F.lit(i).alias("input"), "file", "block", "mid", "err",
                                    *[F.expr(f"CASE WHEN {ok} THEN {m} END").alias(f"m{c}") for c, m in enumerate(masks)]))
    agg = reduce(lambda a, b: a.unionByName(b), parts).groupBy("input", "file", "block").agg(
        F.min("mid").alias("first"), F.count(F.lit(1)).alias("lines"), F.count("err").alias("errors"),
        *[F.bit_and(f"m{c}").alias(f"m{c}") for c in range(width)])
    errors, offsets, masks, counted = {}, {}, {}, {}
    for row in sorted(agg.collect(), key=lambda r: (r["input"], r["file"], r["block"])):
        i, key = row["input"], (row["input"], row["file"])
        errors[i] = errors.get(i, 0) + row["errors"]
        offsets[i, row["file"], row["block"]] = (counted.get(key, 0), row["first"])
        counted[key] = counted.get(key, 0) + row["lines"]
        for c in range(width):
            if row[f"m{c}"] is not None:
                masks.setdefault(i, {})[c] = masks.get(i, {}).get(c, 7) & row[f"m{c}"]
    return errors, offsets, masks


def _mask(v: str) -> str:
    """Which types a text value parses as: 1 bigint, 2 double, 4 boolean; NULL if empty."""
    return (f"CASE WHEN {v} IS NULL OR {v} = '' THEN NULL ELSE "
            f"IF(try_cast({v} AS BIGINT) IS NULL, 0, 1) + IF(try_cast({v} AS DOUBLE) IS NULL, 0, 2) + "
            f"IF(lower({v}) IN ('true', 'false'), 4, 0) END")


def _typed(r: _Read, masks: dict):
    """The relation: good rows only, each column cast to its declared (or inferred) type."""
    from pyspark.sql import functions as F

    cols = []
    for c, target in enumerate(r.targets):
        if target is None:  # undeclared text column: the narrowest type every value parses as
            target = next((t for bit, t in _INFERRED if masks.get(c, 0) & bit), "string")
        v = f"v{c}"
        keep = target == "keep" or (target == "string" and not r.parquet)
        if keep:
            cols.append(F.col(v))
        elif target == "bigint" and c < len(r.storage.types):
            cols.append(F.expr(_held(f"try_cast({v} AS BIGINT)", r.storage.types[c], r.file.number_bits)))
        else:
            cols.append(F.expr(f"try_cast({v} AS {target.upper()})"))
    return r.frame.where("err IS NULL AND data").select(*[c.alias(f"c{i}") for i, c in enumerate(cols)])


# ---------------------------------------------------------------- reporting

def _first_errors(reads: list, offsets: dict) -> list:
    """The first MAX_SHOWN bad rows, in file order, as diagnostics (a second query, over
    the persisted rows, run only when there are errors)."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [r.frame.where("err IS NOT NULL").select(F.lit(i).alias("input"), "file", "block", "mid", "value",
                                                      "tokens", "err") for i, r in enumerate(reads)]
    rows = reduce(lambda a, b: a.unionByName(b), parts).orderBy("input", "file", "block", "mid").limit(MAX_SHOWN)
    out = []
    for row in rows.collect():
        r = reads[row["input"]]
        before, first = offsets[row["input"], row["file"], row["block"]]
        line = row["mid"] + 1 if r.parquet else before + row["mid"] - first + 1
        out.append(_diagnostic(r.file, r.storage, r.parquet, _shown_path(r.file.path, row["file"]), line,
                               list(row["tokens"] or []), row["err"], None if r.parquet else row["value"]))
    return out


def _diagnostic(f: InputFile, s: Storage, parquet: bool, path: str, line: int, tokens: list, err: int,
                value: str | None) -> Diagnostic:
    """The diagnostic of one bad row: its split `tokens`, `err` code and line `value` (None for Parquet)."""
    sep = len(separator(f))
    starts = [sum(len(t or "") + sep for t in tokens[:k]) + 1 for k in range(len(tokens) + 1)]
    what = "row" if parquet else "line"
    if err == TOO_FEW_OR_MANY:
        extra = len(tokens) > s.arity
        return Diagnostic("input-columns", f"{what} has {plural(len(tokens), 'column')}; {s.name} has {s.arity} ({_columns(s)})",
                          S.Span(path, line, starts[s.arity] if extra else len(value or "") + 1),
                          tokens[s.arity] if extra else "", f"give every {what} of {path} {plural(s.arity, 'column')}",
                          source_line=value)
    if err == NOT_UTF8:
        return Diagnostic("input-encoding", f"{what} is not valid UTF-8", S.Span(path, line, value.index("\ufffd") + 1),
                          "\ufffd", "save the file as UTF-8 text", source_line=value)
    text, declared = tokens[err] if err < len(tokens) else None, s.types[err]
    name = s.columns[err] if err < len(s.columns) else f"c{err}"
    where = S.Span(path, line, 0 if parquet else starts[err])
    if s.records and s.records[err]:
        return _bad_record(s, err, name, text or "", where, value)
    beyond = _beyond_width(text, declared, f.number_bits)
    if beyond:
        return Diagnostic("input-range", f"column {err + 1} ({name}) of {s.name} is {declared}, but {quoted(text)} "
                          f"is out of its range at {f.number_bits} bits ({beyond})", where, text,
                          "run with --number-bits 64 (Soufflé's 64-bit build), or fix the value", source_line=value)
    why = "has no value" if not text else f"{quoted(text)} is not {article(declared)}"
    return Diagnostic("input-type", f"column {err + 1} ({name}) of {s.name} is {declared}, but {why}",
                      where, text or "",
                      _HINTS[DECLARED[declared]] + (" (0 or more)" if declared == "unsigned" else ""),
                      source_line=value)


def _bad_record(s: Storage, err: int, name: str, text: str, where, line_text):
    """A value of a record column that is not Soufflé's text of a record of its type:
    positioned at the character where reading it stopped."""
    from ..bootstrap.records import RecordSyntaxError, is_adt_entry, parse_souffle

    table = dict(s.record_table)
    type_name = s.records[err]
    adt = is_adt_entry(table[type_name])
    try:
        parse_souffle(text, type_name, table)
        expected, offset = "an ADT value" if adt else "a record", 0
    except RecordSyntaxError as e:
        expected, offset = e.expected, e.offset
    if adt:  # Soufflé's text of an ADT value: $B(a, b), or $B without fields
        forms = " or ".join(f"${b}({', '.join(kinds)})" if kinds else f"${b}" for b, kinds in table[type_name])
        what, hint = "the ADT type", f"write a {type_name} as Soufflé does: {forms}"
    else:
        what, hint = "the record type", f"write a {type_name} as Soufflé does: [{', '.join(table[type_name])}], or nil"
    at = S.Span(where.file, where.line, where.col + offset if where.col else 0)
    return Diagnostic("input-type", f"column {err + 1} ({name}) of {s.name} is {what} {type_name}, but "
                      f"{quoted(text)} is not one of its {'values' if adt else 'records'}: {expected} expected at "
                      f"character {offset + 1}", at, text[offset:offset + 12] or text, hint, source_line=line_text)


def input_range(declared: str, bits: int) -> tuple:
    """The whole values a file may hold for a column of type `declared` (Soufflé's
    reader rejects the others rather than wrapping them): an unsigned 0 .. 2^bits - 1
    (below 2^63 at 64 bits: Spark's bigint), else the signed range."""
    from ..bootstrap.numbers import signed_range

    low, high = signed_range(bits)
    return (0, high if bits == 64 else (1 << bits) - 1) if declared == "unsigned" else (low, high)


def _beyond_width(text, declared: str, bits: int) -> str:
    """The range `text` leaves, when it is a whole number outside it ('' otherwise)."""
    import re

    if bits == 64 or DECLARED.get(declared) != "bigint" or not text or not re.fullmatch(r"\s*[+-]?\d+\s*", text):
        return ""
    low, high = input_range(declared, bits)
    return "" if low <= int(text) <= high else f"from {low} to {high}"


def _rest_note(total: int, shown: list) -> list:
    if total <= len(shown):
        return []
    last = shown[-1].span
    return [Diagnostic("error-limit", f"stopped after {plural(len(shown), 'error')}; "
                       f"{plural(total - len(shown), 'more row')} with errors not shown", S.Span(last.file, last.line, 0), "", "fix these and run again",
                       severity="note")]


def _shown_path(given: str, uri: str) -> str:
    """The file as the user named it, or the file inside the directory they named."""
    path = unquote(urlparse(uri).path)
    if "://" in given:
        return given if Loc.of(given) == Loc.of(uri) or urlparse(given).path == path else uri
    return given if Path(given).resolve() == Path(path).resolve() else path


def _columns(s: Storage) -> str:
    return ", ".join(f"{c}: {t}" for c, t in zip(s.columns, s.types))
