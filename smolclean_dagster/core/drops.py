"""Drops and chunks: read an input file raw, and slice it into stably named chunks.

A drop is read RAW: every CSV/TSV cell is the string exactly as written, so "N/A", "" and "none" reach
the analyst and the cleaning functions unchanged. JSON, JSONL and Parquet values keep their types: a
number stays a number, a list a list, an object a dict, null None (see `drop_io`, which the exported
module's `__main__` shares, so learning and both ways of cleaning see the same values).

A drop that cannot be read as it is raises DropReadError naming the file, the problem and, where there
is one, the line; nothing is guessed (see the README, "Reliability", for each kind of bad file). A file
that changes or disappears while it is read raises too, so no output is ever made from half a file.
"""

from __future__ import annotations

import contextlib

import codecs
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .delimited import check_quotes_closed, delimited_frames, delimited_header, describe_problem
from .drop_io import _json_kind, arrow_frame, arrow_stream, delimited_blocks, json_frame, jsonl_blocks, parse_json_lines
from .errors import DropReadError

if TYPE_CHECKING:  # the readers import pandas: `smolclean apply`'s process only splits drops and never needs it
    import pandas as pd

#: Extensions we can read, mapped to the reader's name. Add a format by adding a reader below.
FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


@dataclass(frozen=True)
class Drop:
    """One input file, and the partition key it is known by."""

    path: Path

    @property
    def format(self) -> str:
        return drop_format(self.path)

    @property
    def key(self) -> str:
        return drop_key(self.path)


def drop_format(path: Path | str) -> str:
    """The format name of a drop, from its extension; raises DropReadError for an unknown one."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise DropReadError(f"{path}: unknown file extension {suffix!r}; smolclean reads {known}")
    return FORMATS[suffix]


def drop_key(path: Path | str) -> str:
    """A partition-safe key for a drop: its file name with anything unusual replaced by '_'."""
    name = Path(path).name
    key = re.sub(r"[^A-Za-z0-9_.\-]", "_", name).replace("...", "_")
    return key[:200]


def read_drop(path: Path | str) -> pd.DataFrame:
    """Read a drop raw: every CSV cell a string exactly as written, JSON and Parquet values with their types.

    Example:
        >>> df = read_drop("customers.csv")          # doctest: +SKIP
        >>> df.dtypes.unique()                       # doctest: +SKIP
        array([dtype('O')], dtype=object)

    Raises DropReadError naming the file and the reason (and the line, where there is one) when the
    file cannot be read. A file with a header and no rows is read as zero rows.
    """
    path = Path(path)
    fmt = drop_format(path)
    before = _file_version(path)
    with _read_errors(path, fmt):
        if fmt in ("csv", "tsv"):
            df = _read_delimited(path, "\t" if fmt == "tsv" else ",")
        elif fmt == "jsonl":
            df = _read_jsonl(path)
        elif fmt == "json":
            df = _read_json_array(path)
        else:
            df = _read_parquet(path)
    _check_unchanged(path, before)
    if df.shape[1] == 0:
        raise DropReadError(f"{path}: no columns found; is the file empty?")
    df.columns = [str(c) for c in df.columns]
    return df.reset_index(drop=True)


@contextlib.contextmanager
def _read_errors(path: Path, fmt: str) -> Iterator[None]:
    """Turn what the readers raise on a bad file into a DropReadError naming the file and what to do."""
    try:
        yield
    except DropReadError:
        raise
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: not valid UTF-8 at byte {exc.start}; re-encode the file as UTF-8") from exc
    except Exception as exc:
        # pyarrow's errors only once a reader has loaded it: a JSONL drop is split without it
        arrow = sys.modules.get("pyarrow")
        if isinstance(exc, (OSError, ValueError)) or (arrow is not None and isinstance(exc, arrow.ArrowException)):
            raise DropReadError(f"{path}: cannot read as {fmt}: {exc}") from exc
        raise


def _file_version(path: Path) -> tuple[int, int]:
    """(size, modification time) of a drop file; raises DropReadError when it is not a readable file."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DropReadError(f"{path}: no such file") from None
    except OSError as exc:
        raise DropReadError(f"{path}: cannot open the file ({exc.strerror or exc})") from exc
    if path.is_dir():
        raise DropReadError(f"{path}: is a folder, not a file")
    return st.st_size, st.st_mtime_ns


def _check_unchanged(path: Path, before: tuple[int, int]) -> None:
    """Raise DropReadError when the file changed or went away while it was read: what was read may be
    half of one version, half of another."""
    try:
        after = _file_version(path)
    except DropReadError:
        raise DropReadError(
            f"{path}: the file disappeared while it was being read; nothing was made from it. Put it back "
            "(write it under a temporary name and rename it when complete) and try again"
        ) from None
    if after != before:
        raise DropReadError(
            f"{path}: the file changed while it was being read (size {before[0]} -> {after[0]} bytes); nothing was "
            "made from it. Write drops under a temporary name and rename them when complete, then try again"
        )


#: Magic numbers of files that are sometimes saved with a text extension.
_BINARY_STARTS = {
    b"\x1f\x8b": "is gzip-compressed; decompress it first",
    b"PK\x03\x04": "is a zip archive (an Excel workbook?); export the sheet as CSV",
    b"PAR1": "is a Parquet file; give it the extension .parquet",
    b"%PDF": "is a PDF document, not data",
}


def _check_text(path: Path, fmt: str) -> None:
    """Raise DropReadError for a text drop that is a binary file, or text in another encoding than UTF-8."""
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        raise DropReadError(f"{path}: the file is UTF-32 text (it starts with a byte-order mark); save it as UTF-8")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DropReadError(f"{path}: the file is UTF-16 text (it starts with a byte-order mark); save it as UTF-8")
    for magic, what in _BINARY_STARTS.items():
        if head.startswith(magic):
            raise DropReadError(f"{path}: the file {what}")
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DropReadError(
            f"{path}: byte {nul} is a NUL byte: this is a binary file (or UTF-16 text without a byte-order mark), "
            f"not {fmt.upper()} text; export it as UTF-8 {fmt.upper()}"
        )


def _read_delimited(path: Path, sep: str) -> pd.DataFrame:
    import pandas as pd

    names = _delimited_names(path, sep)
    frames = list(_delimited_rows(path, sep, names))
    if not frames:
        return pd.DataFrame({name: pd.Series([], dtype=object) for name in names})
    return pd.concat(frames, ignore_index=True)


def _delimited_names(path: Path, sep: str) -> list[str]:
    _check_text(path, "tsv" if sep == "\t" else "csv")
    try:
        return delimited_header(path, sep)
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: {describe_problem(path, sep) or exc}") from exc


def _delimited_rows(path: Path, sep: str, names: list[str]) -> Iterator[pd.DataFrame]:
    try:
        yield from delimited_frames(path, sep, names)
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: {describe_problem(path, sep) or exc}") from exc


def _records_frame(path: Path, records: list[object], lines: list[int] | None = None) -> pd.DataFrame:
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            where = f"line {lines[i]}" if lines else f"record {i + 1}"
            raise DropReadError(f"{path}: {where} is a JSON {_json_kind(rec)}, expected an object {{...}}")
    if not records:
        raise DropReadError(f"{path}: holds no records; nothing to read")
    return json_frame(records)


def _read_jsonl(path: Path) -> pd.DataFrame:
    records, lines = [], []
    for batch_records, batch_lines in _jsonl_records(path, None):
        records += batch_records
        lines += batch_lines
    return _records_frame(path, records, lines)


def _jsonl_records(path: Path, batch_rows: int | None) -> Iterator[tuple[list[object], list[int]]]:
    """The records of a JSONL file with their line numbers, `batch_rows` at a time (all at once for None)."""
    _check_text(path, "jsonl")
    texts, lines = [], []
    with path.open(encoding="utf-8-sig") as fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                texts.append(line)
                lines.append(lineno)
                if len(texts) == batch_rows:
                    yield _parse_lines(path, texts, lines), lines
                    texts, lines = [], []
        except UnicodeDecodeError as exc:
            raise DropReadError(f"{path}: line {lineno + 1} is not valid UTF-8; re-encode the file as UTF-8") from exc
    if texts or batch_rows is None:
        yield _parse_lines(path, texts, lines), lines


def _parse_lines(path: Path, texts: list[str], lines: list[int]) -> list[object]:
    try:
        return parse_json_lines(texts)
    except json.JSONDecodeError:
        for text, lineno in zip(texts, lines):  # which line: parse them one by one
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise DropReadError(f"{path}: line {lineno} is not valid JSON: {exc.msg} (column {exc.colno})") from exc
        raise


def _read_json_array(path: Path) -> pd.DataFrame:
    _check_text(path, "json")
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = "" if text.rstrip().endswith("]") else " (the file looks cut off: it does not end with ']')"
        problem = exc.msg.removesuffix(" starting at")  # "Unterminated string starting at": the position says where
        raise DropReadError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {problem}{cut}") from exc
    if not isinstance(data, list):
        raise DropReadError(f"{path}: expected a JSON array of objects [{{...}}, ...], found a JSON {_json_kind(data)}")
    return _records_frame(path, data)


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    _check_parquet_schema(path, pq.read_schema(path))
    return arrow_frame(pq.read_table(path))


def _check_parquet_schema(path: Path, schema) -> None:
    for field in schema:
        if _is_binary(field.type):
            raise DropReadError(
                f"{path}: column {field.name!r} holds raw bytes (Parquet type {field.type}), which smolclean cannot "
                "show as text; store it as a string column, or leave it out"
            )


def _is_binary(kind) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _is_binary(kind.value_type)
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind) or (
        hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(kind)
    )


@dataclass(frozen=True)
class Chunk:
    """A slice of rows of one drop, with an id that stays the same for the same drop and row range."""

    drop_key: str
    start: int
    stop: int

    @property
    def id(self) -> str:
        return chunk_id(self.drop_key, self.start, self.stop)

    def rows(self, df: pd.DataFrame) -> pd.DataFrame:
        return df.iloc[self.start : self.stop]


#: Characters of a drop's name a chunk id keeps; a longer name keeps its start and its end.
CHUNK_NAME_MAX = 40


def chunk_id(drop: str, start: int, stop: int) -> str:
    """A stable, partition-safe chunk id that reads as the drop's name and the row range.

    The name is kept as written (`_`, `-` and `.` too); a long one keeps its start and its end, where dates
    and part numbers usually are, so chunks of two drops read differently in the UI; a short hash of the
    drop key keeps them apart even where the names agree.

    Example:
        >>> chunk_id("orders_2024-11-01.csv", 50, 100)
        'orders_2024-11-01-5f4c22-r0000050-0000100'
    """
    digest = hashlib.sha1(drop.encode()).hexdigest()[:6]
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", Path(drop).stem).replace("..", "_") or "drop"
    if len(stem) > CHUNK_NAME_MAX:
        head = CHUNK_NAME_MAX // 2 - 1
        stem = f"{stem[:head]}~{stem[-(CHUNK_NAME_MAX - head - 1):]}"
    return f"{stem}-{digest}-r{start:07d}-{stop:07d}"


def make_chunks(drop: str, n_rows: int, size: int) -> list[Chunk]:
    """Cut `n_rows` rows of drop `drop` into chunks of `size` rows (the last may be shorter)."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    return [Chunk(drop, start, min(start + size, n_rows)) for start in range(0, n_rows, size)]


def iter_batches(path: Path | str, batch_size: int) -> Iterator[pd.DataFrame]:
    """Read a drop in batches of `batch_size` rows, raw like `read_drop`, in memory bounded by the batch.

    CSV and TSV stream through the same pyarrow reader as `read_drop`, JSONL line by line, Parquet row
    group by row group; a JSON array is one value and is read whole, then sliced. Raises DropReadError like
    `read_drop`, also after the last batch when the file changed or disappeared meanwhile (so a caller
    writing the batches somewhere must not publish them before the end).
    """
    path = Path(path)
    fmt = drop_format(path)
    if fmt == "json":
        df = read_drop(path)
        for start in range(0, len(df), batch_size):
            yield df.iloc[start : start + batch_size].reset_index(drop=True)
        return
    before = _file_version(path)
    if fmt == "jsonl":
        batches = _jsonl_batches(path, batch_size)
    elif fmt == "parquet":
        batches = _parquet_batches(path, batch_size)
    else:
        batches = _delimited_batches(path, "\t" if fmt == "tsv" else ",", batch_size)
    with _read_errors(path, fmt):
        yield from batches
    _check_unchanged(path, before)


def iter_encoded_batches(path: Path | str, batch_size: int) -> Iterator[tuple[str, bytes, int, list[int] | None]]:
    """A drop in batches of bytes for a sandbox worker to parse, as (kind, bytes, rows, line numbers).

    This process only splits the file; the workers turn the bytes into frames side by side, with the same
    code as the exported module (`drop_io`). JSONL goes as its own lines ("jsonl", with each row's line
    number, so a worker's parse error can name the line); CSV and TSV as the header and whole records, as
    written ("csv", "tsv"); Parquet as Arrow streams of its batches ("table"); a JSON array, read whole, as
    frames (`wire`, "frame"). Raises DropReadError like `iter_batches`; a worker that cannot parse a CSV
    block says so, and `describe_problem` then names the line.
    """
    path = Path(path)
    fmt = drop_format(path)
    if fmt == "json":
        from .sandbox.wire import encode_frame

        for frame in iter_batches(path, batch_size):
            yield "frame", encode_frame(frame), len(frame), None
        return
    before = _file_version(path)
    if fmt == "jsonl":
        _check_text(path, fmt)
        rows = 0
        with _read_errors(path, fmt):
            for block, lines in jsonl_blocks(path, batch_size):
                rows += len(lines)
                yield "jsonl", block, len(lines), lines
        if not rows:
            raise DropReadError(f"{path}: holds no records; nothing to read")
    elif fmt == "parquet":
        with _read_errors(path, fmt):
            for batch in _parquet_record_batches(path, batch_size):
                yield "table", arrow_stream(batch), batch.num_rows, None
    else:
        sep = "\t" if fmt == "tsv" else ","
        _delimited_names(path, sep)  # text, with a header that names every column once
        check_quotes_closed(path, sep)
        with _read_errors(path, fmt):
            for block, rows, _ in delimited_blocks(path, sep, batch_size):
                yield fmt, block, rows, None  # a worker's parse error is placed by `describe_problem`
    _check_unchanged(path, before)


def _jsonl_batches(path: Path, batch_size: int) -> Iterator[pd.DataFrame]:
    any_rows = False
    for records, lines in _jsonl_records(path, batch_size):
        any_rows = True
        yield _records_frame(path, records, lines)
    if not any_rows:
        _records_frame(path, [], [])  # raises: the file holds no records


def _parquet_batches(path: Path, batch_size: int) -> Iterator[pd.DataFrame]:
    for batch in _parquet_record_batches(path, batch_size):
        yield arrow_frame(batch)


def _parquet_record_batches(path: Path, batch_size: int):
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    _check_parquet_schema(path, parquet.schema_arrow)
    yield from parquet.iter_batches(batch_size=batch_size)


def _delimited_batches(path: Path, sep: str, batch_size: int) -> Iterator[pd.DataFrame]:
    import pandas as pd

    names = _delimited_names(path, sep)
    pending: list[pd.DataFrame] = []
    rows = 0
    for frame in _delimited_rows(path, sep, names):
        pending.append(frame)
        rows += len(frame)
        while rows >= batch_size:
            joined = pd.concat(pending, ignore_index=True)
            yield joined.iloc[:batch_size].reset_index(drop=True)
            rest = joined.iloc[batch_size:].reset_index(drop=True)
            pending, rows = [rest], len(rest)
    if rows:
        yield pd.concat(pending, ignore_index=True)
