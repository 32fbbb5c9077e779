"""Cleaned batches written: a frame as the bytes its output file gets, and a writer appending them in order.

Output: JSONL writes JSON values (a list stays an array, a number a number), Parquet Arrow types, CSV text
(JSON text for lists and objects, `true`/`false` for booleans, "" for null). `encode_batch` runs where the
batch was cleaned (a worker process), so the process that writes the file only appends bytes. With orjson
installed, JSON is written by it; without it, by the standard library: the same values, though a number
may be spelled differently (`1e16` and `1e+16`).
"""

import contextlib
import csv
import io
import json
import math
import os

try:
    import orjson
except ImportError:  # optional: the standard library reads and writes the same values, slower
    orjson = None

from .formats import arrow_stream
from .output_files import sync_to_disk, temporary_path


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
        sync_to_disk(self.path)
        os.replace(self.path, self.destination)
        with contextlib.suppress(OSError):  # the rename itself, where the system syncs folders
            sync_to_disk(os.path.dirname(self.destination) or ".")

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
