"""Typed values in and out: a drop read in batches, and cleaned batches written, the same way on both paths.

`smolclean apply` and the exported module's `__main__` read and write files with this code: the export
embeds this file's source in the module, so the module imports nothing from smolclean and both paths
give the same output for the same drop. It therefore imports only the standard library, pandas and
pyarrow, and nothing from its own package.

What a cleaning function sees (and what is written back):
- CSV/TSV: every cell the text exactly as written, "" for an empty cell (never null).
- JSON, JSONL: each value as JSON made it: str, int, float, bool, None, list, dict (an object column).
- Parquet: each value as its Arrow type makes it in Python (int, float, bool, str, list, dict,
  datetime, ...), one object column per field; text columns as str.
Output: JSONL writes JSON values (a list stays an array, a number a number), Parquet Arrow types, CSV
text (JSON text for lists and objects, `true`/`false` for booleans, "" for null).

Memory is bounded by the batch: CSV/TSV and JSONL are cut into blocks of whole records as written (the
process that cuts them never parses a value), Parquet is read row group by row group. A JSON array is one
value, so it is read whole (keep JSON drops under a few hundred MB, or export them as JSONL).

pandas and pyarrow are imported where a frame or an Arrow table is made, not when this file is loaded:
`smolclean apply`'s own process only cuts drops into blocks (with pyarrow's reader for Parquet) and
appends the workers' bytes, and loads pandas only for a JSON array (read whole).

A batch travels as bytes on both sides of the cleaning: `decode_batch` turns a block of JSONL lines or CSV
records into a frame (pyarrow's CSV reader parses a block on its own) and `encode_batch` turns a cleaned
frame into the bytes the output file gets, so `smolclean apply`'s workers parse and write their own batches
and the parent only moves bytes. With orjson installed, JSON is
parsed and written by it (several times faster); without it, by the standard library. Both read the same
values; written numbers may differ in spelling only (`1e16` and `1e+16`).
"""

import contextlib
import csv
import io
import json
import math
import os
import re
import socket
import time

try:
    import orjson
except ImportError:  # optional: the standard library reads and writes the same values, slower
    orjson = None

#: Rows per batch by default, for `smolclean apply` and the module's `__main__` alike.
BATCH_ROWS = 10_000
#: pyarrow's CSV block size; a row longer than this is read with larger blocks.
CSV_BLOCK_BYTES = 1 << 20

INPUT_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
                  ".json": "json", ".parquet": "parquet", ".pq": "parquet"}


def json_frame(records):
    """JSON objects as a frame of object columns holding each value as JSON made it (None where a record
    lacks a key), columns in the order the keys first appear.

    Example:
        >>> json_frame([{"id": 1, "tags": ["a"]}, {"id": 2, "ok": True}]).to_dict("list")
        {'id': [1, 2], 'tags': [['a'], None], 'ok': [None, True]}
    """
    import pandas as pd

    frame = pd.DataFrame(records, dtype=object)  # pandas' C loop over the dicts
    if frame.isna().to_numpy().any():
        frame = frame.where(frame.notna(), None)  # a missing key reads as NaN; JSON has null
    return frame


def parse_json_lines(lines):
    """The JSON values of a list of JSONL lines (str or UTF-8 bytes; blank lines left out before), parsed as one
    array: one call of the parser instead of one per line. A line that is not one JSON value is parsed alone,
    so its error (json.JSONDecodeError) is the one a line-by-line parse raises."""
    as_bytes = bool(lines) and isinstance(lines[0], bytes)
    if orjson is not None:
        joiner, start, end = (b",", b"[", b"]") if as_bytes else (",", "[", "]")
        values = []
        try:
            # orjson holds a parse of its whole input besides the values: a thousand lines at a time keeps that small
            for first in range(0, len(lines), 1000):
                values += orjson.loads(start + joiner.join(lines[first:first + 1000]) + end)
            if len(values) == len(lines):
                return values
        except orjson.JSONDecodeError:
            pass  # NaN, integers over 64 bits and other things only the standard parser takes
    if as_bytes:
        lines = [line.decode("utf-8") for line in lines]
    try:
        values = json.loads("[" + ",".join(lines) + "]")
        if len(values) == len(lines):
            return values
    except ValueError:
        pass
    return [json.loads(line) for line in lines]


class JsonlError(ValueError):
    """A line of a JSONL block that is not a JSON object: `index` is its place among the block's lines."""

    def __init__(self, index, message):
        super().__init__(message)
        self.index = index

    def __reduce__(self):  # raised in a worker process, it travels back pickled
        return JsonlError, (self.index, str(self))


def jsonl_block_lines(data):
    """The non-blank lines of a block of JSONL bytes."""
    return [line for line in data.split(b"\n") if line.strip()]


def decode_jsonl(data):
    """A block of JSONL bytes (whole lines) as a frame (see `json_frame`); JsonlError names the bad line."""
    lines = jsonl_block_lines(data)
    try:
        records = parse_json_lines(lines)
    except UnicodeDecodeError as exc:
        bad = next(i for i, line in enumerate(lines) if not _is_utf8(line))
        raise JsonlError(bad, f"is not valid UTF-8 ({exc.reason}); re-encode the file as UTF-8") from None
    except json.JSONDecodeError:
        for i, line in enumerate(lines):  # which line: parse them one by one
            try:
                json.loads(line.decode("utf-8"))
            except json.JSONDecodeError as exc:
                raise JsonlError(i, f"is not valid JSON: {exc.msg} (column {exc.colno})") from None
        raise
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise JsonlError(i, f"is a JSON {_json_kind(record)}, expected an object {{...}}")
    return json_frame(records)


def _is_utf8(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _json_kind(value):
    kinds = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return kinds.get(type(value), "null")


def arrow_frame(table):
    """An Arrow table or record batch as a frame of object columns of Python values (text columns as str).

    Going through Python values (not pandas' conversion) keeps integers with nulls as int, lists as lists
    and structs as dicts.
    """
    import pandas as pd
    import pyarrow as pa

    columns = {}
    for name, array in zip(table.column_names, table.columns):
        kind = array.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            values = array.to_numpy(zero_copy_only=False)
        else:
            values = array.to_pylist()
        columns[name] = pd.Series(values, dtype=object)
    return pd.DataFrame(columns, columns=list(table.column_names))


def read_batches(path, batch_rows=BATCH_ROWS):
    """The rows of a drop in frames of at most `batch_rows` rows, typed as the module docstring says."""
    for kind, data, _ in encoded_batches(path, batch_rows):
        yield decode_batch(kind, data)


def encoded_batches(path, batch_rows=BATCH_ROWS):
    """A drop in batches of bytes that `decode_batch` turns into frames, as (kind, bytes, line numbers):
    JSONL as its lines ("jsonl", with each line's number), CSV/TSV as the header and whole records as
    written ("csv"/"tsv", see `delimited_blocks`), Parquet as Arrow streams of its row groups' batches
    ("table"), a JSON array (read whole) as JSONL lines."""
    path = os.fspath(path)
    fmt = INPUT_SUFFIXES.get(os.path.splitext(path)[1].lower())
    if fmt in ("csv", "tsv"):
        for block, _, lines in delimited_blocks(path, "\t" if fmt == "tsv" else ",", batch_rows):
            yield fmt, block, lines
    elif fmt == "jsonl":
        for block, numbers in jsonl_blocks(path, batch_rows):
            yield "jsonl", block, numbers
    elif fmt == "json":
        with open(path, encoding="utf-8-sig") as fh:
            records = json.load(fh)
        for start in range(0, len(records), batch_rows):
            lines = [json.dumps(record, ensure_ascii=False) for record in records[start:start + batch_rows]]
            yield "jsonl", ("\n".join(lines) + "\n").encode("utf-8"), None
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=batch_rows):
            yield "table", arrow_stream(batch), None
    else:
        raise ValueError(f"{path}: cannot read this file type; use {', '.join(sorted(INPUT_SUFFIXES))}")


def decode_batch(kind, data):
    """A batch from `encoded_batches` as the frame a cleaning function sees."""
    if kind == "jsonl":
        return decode_jsonl(data)
    if kind in ("csv", "tsv"):
        import pyarrow as pa

        frame = arrow_frame(decode_delimited(data, "\t" if kind == "tsv" else ","))
        pa.default_memory_pool().release_unused()  # the table is gone: hand its blocks back to the system
        return frame
    if kind == "table":
        import pyarrow as pa

        with pa.ipc.open_stream(data) as stream:
            return arrow_frame(stream.read_all())
    raise ValueError(f"unknown batch kind {kind!r}")


def arrow_stream(table):
    """An Arrow table or record batch as the bytes of an Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write(table)
    return sink.getvalue().to_pybytes()


def jsonl_blocks(path, batch_rows=BATCH_ROWS):
    """The non-blank lines of a JSONL file in blocks of `batch_rows` lines, as (bytes, their line numbers: a
    range, or a list where blank lines fall between); a leading byte-order mark is dropped."""
    with open(path, "rb") as fh:
        block, numbers = bytearray(), []
        for number, line in enumerate(fh, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if line.strip():
                block += line if line.endswith(b"\n") else line + b"\n"
                numbers.append(number)
                if len(numbers) == batch_rows:
                    yield bytes(block), _compact(numbers)
                    block, numbers = bytearray(), []
        if numbers:
            yield bytes(block), _compact(numbers)


def delimited_blocks(path, sep, batch_rows=BATCH_ROWS):
    """A CSV/TSV file in blocks of bytes that pyarrow's CSV reader parses on their own, as (block, records,
    the line each record starts on): each block is the header record, then up to `batch_rows` records
    exactly as written; the lines are a range, or a list where blank lines or line breaks inside quotes
    fall between.

    Records end where the reader ends them: at a line break outside quotes. A value is quoted when its
    field starts with a quote; `""` inside is a quote, and a quote anywhere else is a plain character
    (`5'10"`). Blank lines are left out (the reader skips them) and so is a leading byte-order mark.
    Only lines holding a quote are looked at closely, and each line once (a quoted value over many lines
    costs in proportion to its size), so splitting costs little beside parsing.
    """
    record, rest = _record_pattern(sep), _record_pattern(sep, inside_quotes=True)
    header, parts, starts, pending = None, [], [], []
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if not line.endswith(b"\n"):
                line += b"\n"
            if pending:  # inside a quoted value that holds line breaks: it can only end on a line with a quote
                pending.append(line)
                if b'"' not in line or not rest.fullmatch(line):
                    continue
                line, start, pending = b"".join(pending), number - len(pending) + 1, []
            elif b'"' in line and not record.fullmatch(line):
                pending = [line]
                continue
            else:
                start = number
            if not line.strip(b"\r\n"):
                continue
            if header is None:
                header = line
                continue
            parts.append(line)
            starts.append(start)
            if len(parts) == batch_rows:
                yield header + b"".join(parts), len(parts), _compact(starts)
                parts, starts = [], []
    if pending:  # a quote never closed: the reader says what is wrong with it
        if header is None:
            raise ValueError(f"{path}: a quoted name in the header is never closed")
        parts.append(b"".join(pending))
        starts.append(number - len(pending) + 1)
    if parts:
        yield header + b"".join(parts), len(parts), _compact(starts)


def _compact(numbers):
    """Ascending line numbers as a range where they follow one another, else the list itself."""
    return range(numbers[0], numbers[-1] + 1) if numbers[-1] - numbers[0] == len(numbers) - 1 else numbers


def _record_pattern(sep, inside_quotes=False):
    """A regular expression matching one whole CSV/TSV record (its line break included); `inside_quotes`: the
    rest of a record from inside a quoted value (a line that closes the value and ends the record).

    The quantifiers are possessive, so the match never backtracks: it fails exactly where a quoted value
    runs past the line break."""
    s = re.escape(sep.encode())
    tail = rb'(?:[^"' + s + rb'\n][^' + s + rb'\n]*+)?'  # text after a closing quote is kept as written
    field = rb'"(?:[^"]++|"")*+"' + tail + rb'|(?!")[^' + s + rb'\n]*+'
    first = rb'(?:[^"]++|"")*+"' + tail if inside_quotes else rb"(?:" + field + rb")"
    return re.compile(first + rb"(?:" + s + rb"(?:" + field + rb"))*+\n")


def decode_delimited(data, sep):
    """A block of `delimited_blocks` as an Arrow table of text columns: every cell the text exactly as written,
    "" for an empty one (never null), an empty header cell named "Unnamed: N" (N its place from 0)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    header = next(csv.reader(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=""), delimiter=sep), [])
    names = [name if name else f"Unnamed: {i}" for i, name in enumerate(header)]
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ValueError(f"the header names column {twice!r} twice; give every column its own name")
    table = pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(block_size=max(len(data) + 1, CSV_BLOCK_BYTES), use_threads=False),
        parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(column_types={name: pa.string() for name in header}, null_values=[],
                                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )
    return table.rename_columns(names)


def _is_null(value):
    """None, NaN, pandas' NA and NaT (by type name: called per cell, so no import here)."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ in ("NAType", "NaTType")


def plain_value(value):
    """A cell as a plain Python value for JSON: numpy scalars as int/float/bool, NaN and NA as None."""
    if _is_null(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        try:
            value = value.item()  # numpy scalars and 0-d arrays
        except (TypeError, ValueError):
            return value.tolist() if hasattr(value, "tolist") else value
        return None if _is_null(value) else value
    return value


def _json_default(value):
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def cell_text(value):
    """A cell as CSV text: str as it is, "" for null, JSON text for everything else (`true`, `1.5`, `["a"]`)."""
    if isinstance(value, str):
        return value
    value = plain_value(value)
    if value is None:
        return ""
    if isinstance(value, (bool, int, float, list, dict, tuple)):
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _cells(series):
    """The cells of one column as a list of Python values with None for every kind of null."""
    values = series.to_numpy(dtype=object, na_value=None) if series.dtype != object else series.to_numpy()
    return values.tolist()


def text_frame(df):
    """The frame with every cell as CSV text (see `cell_text`)."""
    import pandas as pd

    out = {}
    for i in range(df.shape[1]):
        series = df.iloc[:, i]
        if series.dtype == object and pd.api.types.infer_dtype(series, skipna=False) == "string":
            out[i] = series.to_numpy()  # all text already (a CSV drop): nothing to convert
        else:
            out[i] = [c if isinstance(c, str) else cell_text(c) for c in _cells(series)]
    frame = pd.DataFrame(out, dtype=object)
    frame.columns = list(df.columns)
    return frame


def jsonl_bytes(df):
    """The frame as JSONL (UTF-8 bytes, or a bytearray of them): one JSON object per row, values as JSON values."""
    names = [str(c) for c in df.columns]
    native = (str, int, bool, list, dict)  # written as they are; anything else (floats: NaN) goes through plain_value
    columns = [[c if type(c) in native else plain_value(c) for c in _cells(df.iloc[:, i])]
               for i in range(len(names))]
    if orjson is not None:
        dumps, option = orjson.dumps, orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
        out = bytearray()  # each row's bytes are let go at once: orjson gives every one a roomy buffer
        try:
            for row in zip(*columns):
                out += dumps(dict(zip(names, row)), default=_json_default, option=option)
            return out  # a bytearray: the rows are not copied once more
        except TypeError:
            pass  # integers over 64 bits and other things only the standard encoder writes
    dumps = json.JSONEncoder(ensure_ascii=False, default=_json_default, separators=(",", ":")).encode
    return "".join([dumps(dict(zip(names, row))) + "\n" for row in zip(*columns)]).encode("utf-8")


def encode_batch(df, kind):
    """A cleaned batch as the bytes its output file gets, as (data, header bytes, column names).

    CSV/TSV: the header line, then the rows (text, see `cell_text`); the header's length is given so a
    writer appending later batches can leave it out. JSONL: the rows. Parquet: an Arrow IPC stream of the
    batch's table (see `_arrow_table`).
    """
    names = [str(c) for c in df.columns]
    if kind == "jsonl":
        return jsonl_bytes(df), 0, names
    if kind == "parquet":
        return arrow_stream(_arrow_table(df)), 0, names
    sep = "\t" if kind == "tsv" else ","
    text = text_frame(df)
    header = text.iloc[:0].to_csv(sep=sep, index=False)
    return (header + text.to_csv(sep=sep, header=False, index=False)).encode("utf-8"), len(header.encode("utf-8")), names


def output_kind(path):
    """The output format of a path: csv, tsv, jsonl or parquet (the default)."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    return {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}.get(suffix, "parquet")


class OutputIsInput(ValueError):
    """The output path names the input file: cleaning never writes over its input."""


def check_output(source, destination):
    """Raise OutputIsInput when writing `destination` would write over `source`: the same path once links
    are resolved, or the same file by device and inode (a hard link, a second mount)."""
    source, destination = os.fspath(source), os.fspath(destination)
    same = os.path.realpath(source) == os.path.realpath(destination)
    if not same:
        try:
            same = os.path.samefile(source, destination)
        except OSError:  # no output yet (or no input: the reader says so)
            same = False
    if same:
        raise OutputIsInput(f"the output {destination} is the input file {source}; cleaning never writes over "
                            "its input: give another output path")


#: A temporary output: `.NAME.smolclean-HOST-PID.tmp` beside the output NAME, so a later run into the folder
#: knows it for ours and can tell whether the run that writes it is still alive.
_TEMPORARY = re.compile(r"\.(.+)\.smolclean-(.+)-(\d+)\.tmp")


def _host():
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def temporary_path(destination):
    """Where an output is written until it is complete: beside it, named for this host and process."""
    folder, name = os.path.split(os.fspath(destination))
    return os.path.join(folder, f".{name}.smolclean-{_host()}-{os.getpid()}.tmp")


def remove_stale_temporaries(folder):
    """Delete the temporary outputs that killed runs left in `folder`: ours by their name, written on this host
    by a process that is gone (a live run's file, or another host's, is left alone). Returns the paths removed."""
    removed = []
    if os.name != "posix":  # whether a process lives is asked with a signal 0, which Windows lacks
        return removed
    host, folder = _host(), folder or "."
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            match = _TEMPORARY.fullmatch(name)
            if match and match[2] == host and not _alive(int(match[3])):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
                    removed.append(os.path.join(folder, name))
    return removed


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _sync(path):
    """Have the system write a file (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchWriter:
    """Appends cleaned batches to one file in order: CSV/TSV text, JSONL values or Parquet types.

    The file is written under a temporary name beside `path` (see `temporary_path`) and appears at `path`,
    synced to disk, on `close`; `abort` deletes it. The columns are those of the first batch. A later batch
    may lack some (they are written empty); a later batch with new columns raises ValueError.
    """

    def __init__(self, path, kind=None):
        self.destination = os.fspath(path)
        self.path = temporary_path(self.destination)
        self.kind = kind or output_kind(path)
        self.columns = None
        self._fh = None
        self._parquet = None

    def write(self, df):
        """Append a cleaned frame."""
        self.write_encoded(*encode_batch(df, self.kind))

    def write_encoded(self, data, header_bytes, columns):
        """Append a batch as `encode_batch` made it for this writer's kind (possibly in another process)."""
        if self.kind == "parquet":
            import pyarrow as pa

            with pa.ipc.open_stream(data) as stream:
                self._write_table(stream.read_all())
            return
        if self._fh is None:
            self._fh = open(self.path, "wb")
        if self.kind == "jsonl":
            self._fh.write(data)  # every record carries its own fields
            return
        if self.columns is None:
            self.columns = list(columns)
            self._fh.write(data)
            return
        body = memoryview(data)[header_bytes:]
        if list(columns) != self.columns:
            body = self._realigned(bytes(body).decode("utf-8"), list(columns))
        self._fh.write(body)

    def _check_new(self, names):
        new = [c for c in names if c not in self.columns]
        if new:
            raise ValueError(f"a later batch has column(s) {new} that the first batch did not have; "
                             "write JSONL, or give every record the same fields")

    def _realigned(self, text, names):
        """CSV rows of a batch whose columns are a subset or another order of the first batch's, in the first
        batch's order (missing ones empty)."""
        self._check_new(names)
        sep = "\t" if self.kind == "tsv" else ","
        out = io.StringIO()
        writer = csv.writer(out, delimiter=sep, lineterminator="\n")
        for row in csv.reader(io.StringIO(text, newline=""), delimiter=sep):
            cells = dict(zip(names, row))
            writer.writerow([cells.get(c, "") for c in self.columns])
        return out.getvalue().encode("utf-8")

    def _write_table(self, table):
        """Append a batch to the Parquet file. Types are those the batches so far agree on: a column that was
        null takes the type of its first values, integers meeting decimals become decimals (float64), and
        types that cannot meet (numbers and text) become text, nulls staying null. When a batch widens a
        type, the rows written so far are copied once under the wider one (row group by row group)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.path, table.schema.remove_metadata())
            self.columns = self._parquet.schema.names
        elif table.column_names != self.columns:
            self._check_new(table.column_names)
        schema = _widened(self._parquet.schema, table.schema)
        try:
            if not schema.equals(self._parquet.schema):
                self._rewrite(schema)
            self._parquet.write_table(_conformed(table, schema))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise ValueError(f"a batch's columns changed type ({exc}); make the functions return the same types "
                             "for every batch, or write CSV") from exc

    def _rewrite(self, schema):
        """Copy the rows written so far into a new temporary file under `schema`, and go on writing there."""
        import pyarrow.parquet as pq

        self._parquet.close()
        first = temporary_path(self.destination)  # the copy goes to the other of two names
        written, self.path = self.path, temporary_path(self.destination + ".widened") if self.path == first else first
        self._parquet = pq.ParquetWriter(self.path, schema)
        with pq.ParquetFile(written) as old:
            for group in range(old.num_row_groups):
                self._parquet.write_table(_conformed(old.read_row_group(group), schema))
        os.remove(written)

    def close(self):
        """Finish the file, sync it to disk and rename it into place; a drop with no rows still gets an
        (empty) output file."""
        self._finish()
        _sync(self.path)
        os.replace(self.path, self.destination)
        with contextlib.suppress(OSError):  # the rename itself, where the system syncs folders
            _sync(os.path.dirname(self.destination) or ".")

    def _finish(self):
        import pandas as pd

        if self._parquet is None and self._fh is None:
            self.write(pd.DataFrame())
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def abort(self):
        """Close and delete the unfinished file (under either of its temporary names, see `_rewrite`)."""
        try:
            self._finish()
        except Exception:  # noqa: BLE001  (the file is deleted anyway)
            pass
        for path in (temporary_path(self.destination), temporary_path(self.destination + ".widened")):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def _arrow_table(df):
    """A frame as an Arrow table; a column Arrow cannot type (numbers and text mixed) is written as text
    (`cell_text`), its nulls null."""
    import pyarrow as pa

    arrays, names = [], []
    for i, name in enumerate(df.columns):
        series = df.iloc[:, i]
        try:
            array = pa.Array.from_pandas(series)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
            array = _text_array(_cells(series))
        arrays.append(array)
        names.append(str(name))
    return pa.Table.from_arrays(arrays, names=names)


def _text_array(values):
    """Python values as an Arrow text array: each as `cell_text` writes it, nulls null."""
    import pyarrow as pa

    return pa.array([None if _is_null(v) else v if isinstance(v, str) else cell_text(v) for v in values],
                    type=pa.string())


def _widened(schema, new):
    """`schema` with each type widened to hold the values of the same column in `new` as well."""
    import pyarrow as pa

    fields = []
    for field in schema:
        other = new.field(field.name).type if field.name in new.names else pa.null()
        try:
            kind = pa.unify_schemas([pa.schema([field]), pa.schema([field.with_type(other)])],
                                    promote_options="permissive").field(0).type
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            kind = pa.string()
        fields.append(field.with_type(kind))
    return pa.schema(fields)


def _conformed(table, schema):
    """`table` under `schema`: missing columns null, each column cast to its type (to text with `_text_array`)."""
    import pyarrow as pa

    arrays = []
    for field in schema:
        column = table.column(field.name) if field.name in table.column_names else pa.nulls(table.num_rows, field.type)
        if column.type != field.type:
            is_text = pa.types.is_string(field.type) and not pa.types.is_null(column.type)
            column = _text_array(column.to_pylist()) if is_text else column.cast(field.type)
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=schema)


def clean_file(clean, source, destination, batch_rows=BATCH_ROWS, workers=None):
    """Clean `source` batch by batch with `clean(df)` and write `destination`; returns (rows in, rows out).

    `workers` processes (default: one per core) clean batches side by side: this one and `workers - 1`
    forked from it, so each has `clean` as this process has it. A forked process parses its batch, cleans
    it and writes it as the output file's bytes; this process reads the drop, cleans a batch itself
    whenever the forked ones are all busy, and appends the bytes in the input's order. Where processes
    cannot be forked (Windows), or with one worker, every batch is cleaned here.

    The output may not be the input (OutputIsInput, before anything is read or written). It is written
    under a temporary name beside it and renamed, synced to disk, when every batch is done; the temporary
    files that killed runs left in its folder are removed first.
    """
    import multiprocessing
    from collections import deque

    check_output(source, destination)
    remove_stale_temporaries(os.path.dirname(os.fspath(destination)))
    writer = BatchWriter(destination)
    workers = max(1, workers or _cores()) if "fork" in multiprocessing.get_all_start_methods() else 1
    _WORK[:] = [clean, writer.kind]  # what the forked workers clean with
    return_freed_buffers()  # before forking: the workers inherit it
    pool = _Workers(workers - 1) if workers > 1 else None  # forked before any reading
    rows_in = rows_out = 0

    def write(result, numbers):
        nonlocal rows_in, rows_out
        try:
            data, header_bytes, columns, batch_in, batch_out = result.get()
        except JsonlError as exc:
            where = f"line {numbers[exc.index]}" if numbers and exc.index is not None else "a line"
            raise ValueError(f"{where} {exc}") from None
        except ValueError as exc:  # the CSV reader counts a block's rows from its header: name the file's line
            row = re.search(r"\bRow #(\d+)", str(exc))
            if not numbers or not row or not 2 <= int(row[1]) < len(numbers) + 2:
                raise
            raise ValueError(str(exc).replace(row[0], f"line {numbers[int(row[1]) - 2]}")) from None
        writer.write_encoded(data, header_bytes, columns)
        rows_in, rows_out = rows_in + batch_in, rows_out + batch_out

    finished = False
    try:
        pending = deque()  # (result, line numbers) in input order
        for kind, data, numbers in encoded_batches(source, batch_rows):
            while pending and pending[0][0].ready():
                write(*pending.popleft())
            # The forked processes keep one batch queued behind each running one, so they never wait while
            # this process cleans; when they have that much, this process cleans the batch itself.
            if pool and sum(not r.ready() for r, _ in pending) < 2 * pool.size:
                pending.append((pool.submit(kind, data), numbers))
            else:
                pending.append((_Done(_clean_encoded, kind, data), numbers))
            del data  # not held while the next batch is read
            while len(pending) > workers + 1:  # memory stays bounded: a batch or two per process
                write(*pending.popleft())
        while pending:
            write(*pending.popleft())
        writer.close()
        finished = True
    except BaseException:
        writer.abort()
        raise
    finally:
        if pool:
            pool.stop(grace_s=10.0 if finished else 1.0)  # after a failure, what they clean is thrown away
    return rows_in, rows_out


class _Workers:
    """Processes forked from this one that clean batches (`_clean_encoded`) taken from one queue, each
    answering on its own pipe; a thread of this process takes the answers as they come, so a worker never
    waits for this one to read.

    They are stopped without signals the caller may have ignored (a shell's background job ignores
    SIGINT, and what runs it may ignore SIGTERM too): each is told to finish, and one still running at
    the deadline is killed with SIGKILL. A worker also dies with this process (Linux), never left behind.
    """

    def __init__(self, size):
        import multiprocessing
        import threading

        context = multiprocessing.get_context("fork")
        self.size = size
        self._tasks = context.Queue()  # sent by a thread: handing over a batch never waits for a busy worker
        self._sent, self._answers, self._died, self._stopping = 0, {}, None, False
        self._arrived = threading.Condition()
        self._processes, self._replies = [], []
        for _ in range(size):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_serve, args=(self._tasks, writer), daemon=True)
            process.start()
            writer.close()
            self._processes.append(process)
            self._replies.append(reader)
        self._receiver = threading.Thread(target=self._receive, name="smolclean-answers", daemon=True)
        self._receiver.start()

    def submit(self, kind, data):
        """Queue a batch; returns its result (`ready`, `get`)."""
        self._sent += 1
        self._tasks.put((self._sent, kind, data))
        return _Queued(self, self._sent)

    def _receive(self):
        from multiprocessing.connection import wait

        open_replies = list(self._replies)
        while open_replies:
            for reply in wait(open_replies):
                try:
                    number, ok, value = reply.recv()
                except (EOFError, OSError):  # the worker ended: told to, or killed
                    open_replies.remove(reply)
                    process = self._processes[self._replies.index(reply)]
                    process.join(5)
                    with self._arrived:
                        if not self._stopping and self._died is None:
                            self._died = process
                        self._arrived.notify_all()
                    continue
                with self._arrived:
                    self._answers[number] = (ok, value)
                    self._arrived.notify_all()

    def answer(self, number, block):
        """The answer for batch `number` as (ok, value), or None when not there yet and not `block`ing."""
        with self._arrived:
            while number not in self._answers:
                if self._died is not None:
                    raise RuntimeError(f"a worker process cleaning batches ended (exit code {self._died.exitcode}); "
                                       "was it killed for lack of memory? Try fewer workers or smaller batches")
                if not block:
                    return None
                self._arrived.wait()
            return self._answers.pop(number) if block else self._answers[number]

    def stop(self, grace_s):
        """Tell every worker to finish, and kill (SIGKILL) those still running after `grace_s` seconds."""
        with self._arrived:
            self._stopping = True
        for _ in self._processes:
            self._tasks.put(None)
        deadline = time.monotonic() + grace_s
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                process.kill()
                process.join()
        self._receiver.join()  # every worker gone: every pipe at its end
        for reply in self._replies:
            reply.close()
        self._tasks.cancel_join_thread()  # batches no worker took are dropped, not waited for at exit
        self._tasks.close()


class _Queued:
    """A batch handed to the forked workers; answers like `_Done`."""

    def __init__(self, workers, number):
        self.workers, self.number = workers, number

    def ready(self):
        return self.workers.answer(self.number, block=False) is not None

    def get(self):
        ok, value = self.workers.answer(self.number, block=True)
        if not ok:
            raise value
        return value


def _serve(tasks, reply):
    """A forked worker: clean the batches of the queue until told to finish (None)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the process that forked this one, which stops it
    with contextlib.suppress(Exception):  # Linux: killed when that process dies, however it dies
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    while True:
        task = tasks.get()
        if task is None:
            return
        number, kind, data = task
        try:
            answer = (number, True, _clean_encoded(kind, data))
        except Exception as exc:  # noqa: BLE001  (raised again where the batch is written, in order)
            answer = (number, False, exc)
        try:
            reply.send(answer)
        except Exception:  # noqa: BLE001  (an error that cannot be pickled: sent as its text)
            reply.send((number, False, RuntimeError(f"{type(answer[2]).__name__}: {answer[2]}")))


class _Done:
    """A batch this process cleaned itself, answering like the forked workers' results (`ready`, `get`)."""

    def __init__(self, function, *args):
        try:
            self.value, self.error = function(*args), None
        except Exception as exc:  # noqa: BLE001  (raised again where the batch is written, in order)
            self.value, self.error = None, exc

    def ready(self):
        return True

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


_WORK = []  # [clean, output kind] for `_clean_encoded`, set before the workers are forked


def _clean_encoded(kind, data):
    """One batch in a worker: parse it, clean it, and write it as the output file's bytes."""
    clean, output = _WORK
    frame = decode_batch(kind, data)
    cleaned = clean(frame)
    return (*encode_batch(cleaned, output), len(frame), len(cleaned))


def return_freed_buffers():
    """Have the C library give every freed buffer of 128 KiB or more straight back to the system.

    glibc raises that threshold each time such a buffer is freed, so the bytes of a batch, once freed,
    stay in the heap for reuse, and a process cleaning batch after batch holds the peak of several batches
    rather than one (about 20 MB more per process here). Where the C library has no `mallopt` (macOS,
    Windows) this does nothing.
    """
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD, fixed: no longer raised
    except Exception:  # noqa: BLE001  (another C library: its own defaults stand)
        pass


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
