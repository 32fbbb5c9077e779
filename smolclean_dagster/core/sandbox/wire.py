"""The wire format between the orchestrator and its sandbox workers: length-prefixed frames over pipes.

A frame is a 4-byte big-endian length followed by that many bytes. Commands, results and errors are
small JSON objects; data frames travel as Arrow IPC streams. Nothing is ever pickled, so a hostile
worker can at worst send bytes that fail to parse.

This module is loaded both by the package and, by file path, by `worker.py` inside the worker process,
so it imports only the standard library, pandas and pyarrow, and no sibling module. pandas and pyarrow
are imported where frames are encoded and decoded: `smolclean apply`'s own process moves the bytes of a
drop's batches and never needs them.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

_LENGTH = struct.Struct(">I")
MAX_FRAME = (1 << 32) - 1
HEADER_LIMIT = 1 << 20  # JSON headers are small; anything bigger is a broken or hostile peer


class WireError(Exception):
    """The peer closed the pipe, missed the deadline, or sent a frame that breaks the protocol."""


class PeerClosed(WireError):
    """The other end closed its pipe (usually: the process died)."""


class DeadlinePassed(WireError):
    """No complete frame arrived before the deadline."""


class FrameTooLarge(WireError):
    """The peer announced a frame bigger than the reader accepts."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


def write_frame(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write one frame, looping over partial writes (pipes take at most their buffer size at once)."""
    if len(data) > MAX_FRAME:
        raise FrameTooLarge(len(data), MAX_FRAME)
    _write_all(fd, _LENGTH.pack(len(data)))
    _write_all(fd, data)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_frame(fd: int, limit: int, deadline: float | None = None) -> bytes:
    """Read one frame of at most `limit` bytes; `deadline` is a time.monotonic() value or None to block."""
    (size,) = _LENGTH.unpack(_read_exact(fd, _LENGTH.size, deadline))
    if size > limit:
        raise FrameTooLarge(size, limit)
    return _read_exact(fd, size, deadline)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise DeadlinePassed(f"no reply within the deadline ({len(buf)} of {n} bytes read)")
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise PeerClosed("the other end closed the pipe")
        buf += chunk
    return bytes(buf)


def write_json(fd: int, obj: dict) -> None:
    """Write a JSON header frame."""
    write_frame(fd, json.dumps(obj).encode())


def read_json(fd: int, deadline: float | None = None) -> dict:
    """Read a JSON header frame; anything but a JSON object breaks the protocol."""
    return parse_json(read_frame(fd, HEADER_LIMIT, deadline))


def parse_json(data: bytes) -> dict:
    """Parse a JSON header sent by a peer that may be hostile."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise WireError(f"header is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise WireError(f"header is a JSON {type(obj).__name__}, not an object")
    return obj


#: Schema metadata naming the columns whose cells travel as JSON text (typed values: numbers, booleans,
#: lists, objects, or a mix of them and text), so they arrive as the same Python values.
JSON_COLUMNS = b"smolclean.json_columns"
#: Schema metadata naming the text columns that were object columns, so they arrive as object columns.
OBJECT_COLUMNS = b"smolclean.object_columns"
_PLAIN = {"integer", "floating", "boolean"}  # one JSON scalar type: Arrow carries these faster than JSON text
_NATIVE = {"string", "empty", "bytes", "datetime", "datetime64", "date", "time", "timedelta", "timedelta64",
           "period", "interval", "decimal", "categorical"}


def encode_frame(df: pd.DataFrame) -> bytes:
    """Serialize a DataFrame as an Arrow IPC stream, keeping its index, column names and order.

    Object columns holding values that are not all text (JSON numbers, booleans, lists, objects) travel
    as JSON text and come back as the same Python values; text object columns come back as object columns.
    """
    import pyarrow as pa

    table = frame_to_table(df)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def frame_to_table(df: pd.DataFrame) -> pa.Table:
    """A DataFrame as an Arrow table that `table_to_frame` turns back into the same frame, typed values
    included (the storage of learning's frames uses it too)."""
    import pandas as pd
    import pyarrow as pa

    json_columns, object_columns, converted = [], [], {}
    for i, name in enumerate(df.columns):
        series = df.iloc[:, i]
        if series.dtype != object:
            continue
        kind = pd.api.types.infer_dtype(series, skipna=True)
        if kind in ("string", "empty") or (kind in _PLAIN and _arrow_can_type(series)):
            object_columns.append(str(name))  # Arrow types it; it comes back as Python values in an object column
        elif kind not in _NATIVE:
            try:
                converted[i] = [None if _is_null(v) else json.dumps(v, ensure_ascii=False, allow_nan=True) for v in series]
            except (TypeError, ValueError, RecursionError):
                continue  # values JSON cannot hold (dates, decimals): Arrow types them, as before
            json_columns.append(str(name))
    if converted:
        df = df.copy(deep=False)
        for i, texts in converted.items():
            df.isetitem(i, pd.Series(texts, index=df.index, dtype=object))
    table = pa.Table.from_pandas(df, preserve_index=None, nthreads=1)
    return table.replace_schema_metadata({**(table.schema.metadata or {}), JSON_COLUMNS: json.dumps(json_columns),
                                          OBJECT_COLUMNS: json.dumps(object_columns)})


def _arrow_can_type(series: pd.Series) -> bool:
    import pyarrow as pa

    try:
        pa.array(series, from_pandas=True)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return False  # an integer beyond 64 bits: JSON carries it
    return True


def _is_null(value: object) -> bool:
    """None, NaN, pandas' NA and NaT (by type name: called per cell, so no import here)."""
    return value is None or (isinstance(value, float) and value != value) or type(value).__name__ in ("NAType", "NaTType")


def decode_frame(data: bytes) -> pd.DataFrame:
    """Rebuild a DataFrame from an Arrow IPC stream, refusing anything that is not a plain table.

    Extension types are refused because reconstructing them can run type-specific Python code; typed
    values sent as JSON text are parsed back with `json.loads`, which runs none.
    """
    import pyarrow as pa
    import pyarrow.ipc  # noqa: F401  (makes pa.ipc available)

    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise WireError(f"result is not an Arrow IPC table: {exc}") from None
    return table_to_frame(table)


def table_to_frame(table: pa.Table) -> pd.DataFrame:
    """The DataFrame `frame_to_table` made `table` from; raises WireError for a table that is not plain."""
    import pyarrow as pa

    for field in table.schema:
        if _has_extension_type(field.type):
            raise WireError(f"column {field.name!r} has the type {field.type}, which holds an extension type")
    metadata = table.schema.metadata or {}
    try:
        json_columns = set(json.loads(metadata.get(JSON_COLUMNS, b"[]")))
        object_columns = set(json.loads(metadata.get(OBJECT_COLUMNS, b"[]")))
        df = table.to_pandas(use_threads=False)
    except Exception as exc:  # noqa: BLE001  (malformed pandas metadata can raise nearly anything)
        raise WireError(f"result cannot be turned into a DataFrame: {type(exc).__name__}: {exc}") from None
    try:
        return _restore_typed_columns(table, df, json_columns, object_columns)
    except (KeyError, TypeError, pa.ArrowException) as exc:  # a hostile peer's names or metadata
        raise WireError(f"result's typed columns cannot be restored: {type(exc).__name__}: {exc}") from None


def _restore_typed_columns(table: pa.Table, df: pd.DataFrame, json_columns: set, object_columns: set) -> pd.DataFrame:
    import pandas as pd
    import pyarrow as pa

    names = [str(c) for c in df.columns]
    for i, name in enumerate(names):
        if name not in json_columns and name not in object_columns:
            continue
        if name not in table.column_names:
            continue
        kind = table.schema.field(name).type
        if name in object_columns and not pa.types.is_string(kind):
            df.isetitem(i, pd.Series(table.column(name).to_pylist(), index=df.index, dtype=object))
            continue
        if not pa.types.is_string(kind):
            continue
        texts = table.column(name).to_numpy(zero_copy_only=False)
        if name in json_columns:
            try:
                texts = [None if t is None else json.loads(t) for t in texts]
            except (ValueError, RecursionError) as exc:
                raise WireError(f"column {name!r} holds text that is not JSON: {exc}") from None
        df.isetitem(i, pd.Series(texts, index=df.index, dtype=object))
    return df


def _has_extension_type(dtype: pa.DataType) -> bool:
    import pyarrow as pa

    if isinstance(dtype, pa.ExtensionType):
        return True
    return any(_has_extension_type(dtype.field(i).type) for i in range(dtype.num_fields))
