"""A block of a drop parsed into the frame a cleaning function sees, each value typed as its format says.

A block is CSV/TSV records, JSONL lines or an Arrow stream (see `blocks.py`).

CSV/TSV: every cell the text exactly as written, "" for an empty cell (never null). JSON, JSONL: each
value as JSON made it: str, int, float, bool, None, list, dict (an object column). Parquet: each value as
its Arrow type makes it in Python (int, float, bool, str, list, dict, datetime, ...), one object column per
field; text columns as str.

`decode_batch` is the one parser of a block, for learning (`drops.read_drop`), `smolclean apply`'s sandbox
workers and the exported module's `__main__` alike. With orjson installed, JSON is parsed by it (several
times faster); without it, by the standard library, which reads the same values.
"""

import csv
import io
import json

try:
    import orjson
except ImportError:  # optional: the standard library reads and writes the same values, slower
    orjson = None

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
            raise JsonlError(i, f"is a JSON {json_kind(record)}, expected an object {{...}}")
    return json_frame(records)


def _is_utf8(data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def json_kind(value):
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
