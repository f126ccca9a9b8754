"""Reading input files in this process, for a run too small to be worth starting Spark.

A JVM costs seconds; a few kilobytes of facts take milliseconds to read. But what a run
computes must not depend on where its inputs were read, so this reader gives exactly
what runtime/validate.py gives on Spark (rows, types, skipped counts, diagnostics). It
follows Spark's rules for lines, UTF-8 and numbers, measured on Spark, not Python's or
Arrow's, which differ (tests/test_inputs_here.py compares the two). Where it cannot be
exact it raises NotHere, and the caller reads on Spark.
"""
from __future__ import annotations

import codecs
import re
from pathlib import Path
from urllib.parse import urlparse

from ..bootstrap.diagnostics import EvitaError
from ..catalog.fs import Loc
from .io import DECLARED
from .validate import (_INFERRED, MAX_SHOWN, NOT_UTF8, TOO_FEW_OR_MANY, _diagnostic, _rest_note, _shown_path,
                       input_range, is_parquet, is_quoted, separator)


class NotHere(Exception):
    """This input cannot be read in this process exactly as Spark reads it; the caller reads it on Spark."""


HERE_BYTES = 64 << 20  # documented limit: above this total file size, read on Spark

_ROW = -3  # `err` of a good row (validate's NULL); not a row at all is `data` false
# compression Spark's text reader undoes by suffix (Hadoop's codecs, and a few more to be safe)
_COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".br", ".lzo", ".xz")
_LINE_BREAK = re.compile("\r\n|\r|\n")  # Hadoop's LineReader without a lineSep
_TRIM_ALL = "".join(map(chr, range(0x21))) + "\x7f"  # UTF8String.trimAll (try_cast AS BIGINT / BOOLEAN)
_TRIM = "".join(map(chr, range(0x21)))  # java.lang.String.trim (AS DOUBLE)
_DECIMAL = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?$"  # Double.parseDouble
_HEX = r"^[+-]?0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?$"
_SPECIAL = {"nan": float("nan"), "+nan": float("nan"), "-nan": float("nan"), "inf": float("inf"),
            "+inf": float("inf"), "infinity": float("inf"), "+infinity": float("inf"), "-inf": float("-inf"),
            "-infinity": float("-inf")}  # Cast.processFloatingPointSpecialLiterals, and Java's NaN/Infinity
# validate's RLIKE '^".*"$' in Java: `.` stops at any of Java's line terminators, and `$`
# also matches before a final one (\n and \r never reach a value: they end lines).
_JAVA_QUOTED = r'^"[^\n\r\x{85}\x{2028}\x{2029}]*"[\x{85}\x{2028}\x{2029}]?$'


def _java_utf8(e: UnicodeDecodeError):
    """Java's replacement where it differs from Python's: an encoded surrogate (ED A0..BF ..)
    is one U+FFFD for its bytes, not one per byte."""
    b, i = e.object, e.start
    if b[i] == 0xED and i + 1 < len(b) and 0xA0 <= b[i + 1] <= 0xBF:
        end = i + 2
        return "\ufffd", end + 1 if end < len(b) and 0x80 <= b[end] <= 0xBF else end
    return "\ufffd", e.end


codecs.register_error("evita-java-utf8", _java_utf8)


def read_inputs_here(files: list, lenient: bool = False, any_size: bool = False) -> tuple:
    """[(InputFile, Storage)] -> ({relation: pandas.DataFrame with columns c0, c1, ...}, {relation: rows skipped})
    Same contract as validate.read_inputs. Raises EvitaError with the same diagnostics; raises NotHere when it cannot be exact."""
    import pandas as pd

    paths = [_local_file(f) for f, _ in files]
    if not any_size and sum(p.stat().st_size for p in paths) > HERE_BYTES:
        raise NotHere(f"inputs above {HERE_BYTES} bytes")
    reads = [_Checked(f, s, p) for (f, s), p in zip(files, paths)]
    total = sum(r.errors for r in reads)
    if total and not lenient:
        shown = []
        for r in reads:
            shown += r.diagnostics(MAX_SHOWN - len(shown))
        raise EvitaError(shown + _rest_note(total, shown))
    frames, kinds, skipped = {}, {}, {}
    for r in reads:  # a relation read from several files is their union
        rel, (types, table) = r.file.relation, r.typed()
        if rel in frames:
            if types != kinds[rel]:
                raise NotHere(f"the files of {rel} give its columns different types (Spark's union widens them)")
            table = pd.concat([frames[rel], table], ignore_index=True)
        frames[rel], kinds[rel] = table, types
        if r.errors:
            skipped[rel] = skipped.get(rel, 0) + r.errors
    return frames, skipped


def _local_file(f) -> Path:
    """The local file Spark would read for `f`, or NotHere."""
    path = f.path
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):  # a URI: only file:///path is read here
        u = urlparse(path)
        if u.scheme != "file" or "://" not in path or u.netloc or "%" in path:
            raise NotHere(f"{path} is a URI")
    loc = Loc.of(path)
    if not loc.local:
        raise NotHere(f"{path} is not a local path")
    if any(c in path for c in "{}[]*?\\"):
        raise NotHere(f"{path} is a glob pattern to Spark")
    if is_parquet(path):
        raise NotHere(f"{path} is Parquet")
    local = Path(loc.uri)
    if not local.is_file():
        raise NotHere(f"{path} is not a file")
    name = local.name
    if name.startswith(("_", ".")) or name.endswith("._COPYING_"):  # Spark lists no such file
        raise NotHere(f"{path} is a file Spark leaves out")
    if name.lower().endswith(_COMPRESSED):
        raise NotHere(f"{path} is compressed")
    sep = separator(f)
    if not sep or "\\E" in sep:  # validate quotes it as \Q...\E
        raise NotHere(f"delimiter {sep!r}")
    return local


class _Checked:
    """One file read and checked: per line its error code, and the good rows' values."""

    def __init__(self, f, s, path: Path):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        self.file, self.storage, self.path = f, s, path
        self.targets = [DECLARED.get(t) for t in s.types]
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):  # Hadoop's LineRecordReader skips a UTF-8 byte-order mark
            data = data[3:]
        lines = _LINE_BREAK.split(data.decode("utf-8", errors="evita-java-utf8"))
        if lines[-1] == "":  # the last line break ends a line; it starts none
            lines.pop()
        if f.headers and lines:
            lines[0] = ""
        self.lines = lines
        self.sep, self.quoted = separator(f), is_quoted(f)
        self.pattern = re.compile(re.escape(self.sep) + ('(?=(?:[^"]*"[^"]*")*[^"]*$)' if self.quoted else ""))
        arr = pa.array(lines, pa.string())
        n, arity = len(lines), s.arity
        split = pc.split_pattern(arr, self.sep)
        counts = pc.list_value_length(split).to_numpy(zero_copy_only=False).astype(np.int64)
        special = {}  # line -> its tokens, where a quote can hide a separator
        quotes = np.zeros(n, dtype=bool)
        if self.quoted and n:
            quotes = pc.match_substring(arr, '"').to_numpy(zero_copy_only=False).astype(bool)
            for i in np.flatnonzero(quotes).tolist():
                special[i] = self.pattern.split(lines[i])
                counts[i] = len(special[i])
        data_ = pc.not_equal(arr, "").to_numpy(zero_copy_only=False).astype(bool)
        fffd = pc.match_substring(arr, "\ufffd").to_numpy(zero_copy_only=False).astype(bool)
        err = np.full(n, _ROW, dtype=np.int64)
        err[data_ & fffd] = NOT_UTF8
        err[data_ & (counts != arity)] = TOO_FEW_OR_MANY
        idx = np.flatnonzero(data_ & (err == _ROW))  # rows of the right shape: their values are checked
        columns = []
        plain = ~quotes[idx]
        plain_split = split.take(pa.array(idx[plain])) if len(idx) else None
        for c in range(arity):
            values = np.empty(len(idx), dtype=object)
            if plain.any():
                values[plain] = pc.list_element(plain_split, c).to_numpy(zero_copy_only=False)
            if (~plain).any():
                values[~plain] = [special[i][c] for i in idx[~plain].tolist()]
            col = pa.array(values, pa.string())
            if self.quoted:
                unq = pc.replace_substring(pc.utf8_slice_codeunits(col, 1, -1), '""', '"')
                col = pc.if_else(pc.match_substring_regex(col, _JAVA_QUOTED), unq, col)
            columns.append(col)
        here, parsed = err[idx], {}
        for c, (col, target) in enumerate(zip(columns, self.targets)):
            if s.records and s.records[c]:  # Soufflé's text of a record -> its canonical text
                parsed[c] = parse_records(col, s.records[c], dict(s.record_table))
                here[(here == _ROW) & ~parsed[c][0]] = c
                columns[c] = pa.array(parsed[c][1], pa.string())
            elif target not in (None, "string"):
                parsed[c] = parse(col, target, s.types[c], f.number_bits)
                here[(here == _ROW) & ~parsed[c][0]] = c
        err[idx] = here
        good = here == _ROW
        self.err, self.data = err, data_
        self.good = [pc.filter(col, pa.array(good)) for col in columns]
        self.parsed = {c: (ok[good], values[good]) for c, (ok, values) in parsed.items()}  # typed() needs no 2nd parse
        self.errors = int(((err != _ROW) & data_).sum())

    def diagnostics(self, limit: int) -> list:
        import numpy as np

        path = _shown_path(self.file.path, self.path.resolve().as_uri())
        return [_diagnostic(self.file, self.storage, False, path, i + 1, self.pattern.split(self.lines[i]),
                            int(self.err[i]), self.lines[i])
                for i in np.flatnonzero((self.err != _ROW) & self.data)[:max(limit, 0)].tolist()]

    def typed(self) -> tuple:
        """(Spark type per column, the good rows as `spark_frame.toPandas()` gives them)."""
        import pandas as pd

        out, types = {}, []
        for c, (col, target) in enumerate(zip(self.good, self.targets)):
            if target is None:  # undeclared: the narrowest type every non-empty value parses as
                mask = _mask(col)
                target = next((t for bit, t in _INFERRED if mask & bit), "string")
            out[f"c{c}"] = _series(col, target, self.parsed.get(c))
            types.append(target)
        return types, pd.DataFrame(out) if out else pd.DataFrame(index=pd.RangeIndex(0))


def _mask(col) -> int:
    """validate._mask AND-ed over the column: 1 bigint, 2 double, 4 boolean; 0 when no value."""
    import pyarrow.compute as pc

    col = pc.filter(col, pc.not_equal(col, ""))
    if not len(col):
        return 0
    bits = 0
    for bit, target in ((1, "bigint"), (2, "double")):
        if parse(col, target, target)[0].all():
            bits |= bit
    if pc.all(pc.is_in(pc.utf8_lower(col), value_set=_strings(["true", "false"]))).as_py():
        bits |= 4
    return bits


def parse_records(col, type_name: str, table: dict) -> tuple:
    """(ok per value, canonical text per value or None) of a column of Soufflé's record
    text (bootstrap/records.py)."""
    import numpy as np

    from ..bootstrap.records import RecordSyntaxError, parse_souffle

    ok, values = [], []
    for text in col.to_pylist():
        try:
            values.append(parse_souffle(text or "", type_name, table))
            ok.append(True)
        except RecordSyntaxError:
            values.append(None)
            ok.append(False)
    return np.array(ok, dtype=bool), np.array(values, dtype=object)


def _series(col, target: str, parsed=None):
    """A column of text as `try_cast(v AS target)` collected by toPandas: int64, float64,
    bool, object of str; a null makes a bigint column float64 and a boolean one object."""
    import numpy as np
    import pandas as pd

    if target == "string":
        return pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)
    ok, values = parsed or parse(col, target, target)
    if ok.all():
        return pd.Series(values, dtype={"bigint": "int64", "double": "float64", "boolean": "bool"}[target])
    if target == "boolean":
        return pd.Series(np.where(ok, values, None), dtype=object)
    return pd.Series(np.where(ok, values.astype(np.float64), np.nan), dtype="float64")


def _strings(values):
    import pyarrow as pa

    return pa.array(values, pa.string())


def _from_hex(text: str) -> float:
    try:
        return float.fromhex(text)
    except OverflowError:  # Java's parseDouble gives infinity
        return float("-inf") if text.startswith("-") else float("inf")


def parse(col, target: str, declared: str, bits: int = 64) -> tuple:
    """Spark's `try_cast(text AS target)` of an Arrow string column: (parsed: numpy bool,
    values: numpy, arbitrary where not parsed). A whole value must be in the range of
    `declared` at `bits` (`validate.input_range`: an unsigned 0 or more), and an unsigned
    is held as the width's bit pattern, as `validate._held` gives it."""
    import numpy as np
    import pyarrow.compute as pc

    if target == "bigint":
        t = pc.utf8_trim(col, characters=_TRIM_ALL)
        ok = pc.match_substring_regex(t, r"^[+-]?[0-9]+$")
        digits = pc.replace_substring_regex(t, r"^[+-]?0*", "")
        neg = pc.starts_with(t, "-")
        width = pc.utf8_length(digits)
        limit = pc.if_else(neg, "9223372036854775808", "9223372036854775807")
        fits = pc.or_(pc.less(width, 19), pc.and_(pc.equal(width, 19), pc.less_equal(digits, limit)))
        ok = pc.and_(ok, fits).to_numpy(zero_copy_only=False).astype(bool)
        digits = pc.if_else(pc.equal(digits, ""), "0", digits)
        text = pc.if_else(ok, pc.if_else(neg, pc.binary_join_element_wise("-", digits, ""), digits), "0")
        values = pc.cast(text, "int64").to_numpy(zero_copy_only=False)
        if declared == "unsigned" or bits < 64:
            low, high = input_range(declared, bits)
            ok = ok & (values >= low) & (values <= high)
        if declared == "unsigned" and bits < 64:
            values = values.astype(np.int32).astype(np.int64)  # the low 32 bits, as two's complement
        return ok, values
    if target == "double":
        t = pc.utf8_trim(col, characters=_TRIM)
        lower = pc.utf8_lower(t)
        special = pc.is_in(lower, value_set=_strings(list(_SPECIAL))).to_numpy(zero_copy_only=False).astype(bool)
        decimal = pc.match_substring_regex(t, _DECIMAL).to_numpy(zero_copy_only=False).astype(bool)
        hexa = pc.match_substring_regex(t, _HEX).to_numpy(zero_copy_only=False).astype(bool)
        values = np.zeros(len(col), dtype=np.float64)
        texts = pc.replace_substring_regex(t, "[fFdD]$", "").to_numpy(zero_copy_only=False)
        if decimal.any():
            values[decimal] = texts[decimal].astype(object).astype(np.float64)
        if hexa.any():
            values[hexa] = [_from_hex(x) for x in texts[hexa].tolist()]
        if special.any():
            values[special] = [_SPECIAL[x] for x in lower.to_numpy(zero_copy_only=False)[special].tolist()]
        return decimal | hexa | special, values
    if target == "boolean":
        t = pc.utf8_lower(pc.utf8_trim(col, characters=_TRIM_ALL))
        yes = pc.is_in(t, value_set=_strings(["t", "true", "y", "yes", "1"])).to_numpy(zero_copy_only=False)
        no = pc.is_in(t, value_set=_strings(["f", "false", "n", "no", "0"])).to_numpy(zero_copy_only=False)
        return yes.astype(bool) | no.astype(bool), yes.astype(bool)
    raise ValueError(target)
