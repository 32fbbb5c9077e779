"""Drops and chunks: read an input file raw, and slice it into stably named chunks.

A drop is read RAW: every CSV/TSV cell is the string exactly as written, so "N/A", "" and "none" reach
the analyst and the cleaning functions unchanged. JSON, JSONL and Parquet values keep their types: a
number stays a number, a list a list, an object a dict, null None.

There is one way to read a drop, for learning and cleaning alike: `iter_encoded_batches` checks the file
as a whole and cuts it into blocks with `drop_io` (the code the exported module's `__main__` carries), and
`drop_io`'s `decode_batch` parses each block, here (`iter_batches`, `read_drop`) or in `smolclean apply`'s
sandbox workers. So a module always meets the rows it was learned and validated on.

A drop that cannot be read as it is raises DropReadError naming the file, the problem and, where there
is one, the line; nothing is guessed (see docs/reliability.md for each kind of bad file). A file that
changes or disappears while it is read raises too, so no output is ever made from half a file.
"""

from __future__ import annotations

import contextlib

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .delimited import check_quotes_closed, delimited_header, describe_problem
from .drop_io.blocks import BATCH_ROWS, check_text, delimited_blocks, json_array_blocks, jsonl_blocks
from .drop_io.formats import JsonlError, arrow_stream, decode_batch, json_kind
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


def is_text_drop(path: Path | str) -> bool:
    """Whether a drop is text (CSV, TSV), where an empty field and a null are written alike; False for a name
    with no known extension."""
    return FORMATS.get(Path(path).suffix.lower()) in ("csv", "tsv")


def drop_key(path: Path | str) -> str:
    """A partition-safe key for a drop: its file name with anything unusual replaced by '_'."""
    return _partition_safe(Path(path).name)[:200]


def _partition_safe(name: str) -> str:
    """`name` with anything but letters, digits, '_', '.' and '-' replaced by '_', and no '...' (which Dagster
    refuses in a partition key)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name).replace("...", "_")


def read_drop(path: Path | str) -> pd.DataFrame:
    """Read a drop raw: every CSV cell a string exactly as written, JSON and Parquet values with their types.

    Example:
        >>> df = read_drop("customers.csv")          # doctest: +SKIP
        >>> df.dtypes.unique()                       # doctest: +SKIP
        array([dtype('O')], dtype=object)

    Raises DropReadError naming the file and the reason (and the line, where there is one) when the
    file cannot be read. A file with a header and no rows is read as zero rows.
    """
    import pandas as pd

    path = Path(path)
    fmt = drop_format(path)
    frames = list(iter_batches(path, BATCH_ROWS))
    if not frames:
        df = _without_rows(path, fmt)
    elif len(frames) == 1:
        df = frames[0]
    else:
        df = pd.concat(frames, ignore_index=True)
        if any(list(f.columns) != list(df.columns) for f in frames):  # JSON records with keys the first block lacks
            df = df.where(df.notna(), None)  # where a record lacks a key, None as in one block (`json_frame`)
    if df.shape[1] == 0:
        raise DropReadError(f"{path}: no columns found; is the file empty?")
    df.columns = [str(c) for c in df.columns]
    return df.reset_index(drop=True)


def _without_rows(path: Path, fmt: str) -> pd.DataFrame:
    """The frame of a drop with a header (or a schema) and no rows: its columns, empty."""
    import pandas as pd

    if fmt == "parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    else:
        names = delimited_header(path, "\t" if fmt == "tsv" else ",")
    return pd.DataFrame({name: pd.Series([], dtype=object) for name in names})


def iter_batches(path: Path | str, batch_size: int) -> Iterator[pd.DataFrame]:
    """Read a drop in batches of `batch_size` rows, raw like `read_drop`, in memory bounded by the batch.

    Each block of `iter_encoded_batches` is parsed here with `decode_batch`, as a sandbox worker of
    `smolclean apply` parses it. Raises DropReadError like `read_drop`, also after the last batch when the file
    changed or disappeared meanwhile (so a caller writing the batches somewhere must not publish them
    before the end).
    """
    path = Path(path)
    fmt = drop_format(path)
    for kind, data, _, lines in iter_encoded_batches(path, batch_size):
        try:
            frame = decode_batch(kind, data)
        except JsonlError as exc:
            where = f"line {lines[exc.index]}" if lines and exc.index < len(lines) else "a line"
            raise DropReadError(f"{path}: {where} {exc}") from None
        except ValueError as exc:  # pyarrow's CSV errors count rows from the block's start: find the line
            if fmt not in ("csv", "tsv"):
                raise DropReadError(f"{path}: cannot read as {fmt}: {exc}") from exc
            problem = describe_problem(path, "\t" if fmt == "tsv" else ",")
            raise DropReadError(f"{path}: {problem or f'cannot parse as {fmt.upper()}: {exc}'}") from exc
        yield frame


def iter_encoded_batches(path: Path | str, batch_size: int) -> Iterator[tuple[str, bytes, int, list[int] | None]]:
    """A drop checked as a whole and cut into blocks of bytes for `decode_batch`, as (kind, bytes, rows,
    line numbers).

    The checks need the whole file and come before the first block: a text drop is text in UTF-8 (not a
    binary file, not UTF-16); a CSV/TSV header names every column once and every quoted value is closed; a
    JSON array is valid JSON holding objects; a Parquet schema has no raw bytes; JSON and JSONL hold at
    least one record. Then `drop_io` cuts the file as the exported module does: JSONL as its own lines
    ("jsonl", with each row's line number, so a parse error names the line); CSV and TSV as the header and
    whole records, as written ("csv", "tsv"); Parquet as Arrow streams of its batches ("table"); a JSON
    array, read whole, as JSONL lines ("jsonl"). Raises DropReadError naming the file, also after the last
    block when the file changed or disappeared meanwhile.
    """
    path = Path(path)
    fmt = drop_format(path)
    before = _file_version(path)
    if fmt == "json":
        with _read_errors(path, fmt):
            records = _json_array_records(path)
        for n, block in enumerate(json_array_blocks(records, batch_size)):
            yield "jsonl", block, min(batch_size, len(records) - n * batch_size), None
    elif fmt == "jsonl":
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
                yield fmt, block, rows, None  # a parse error is placed by `describe_problem`
    _check_unchanged(path, before)


def _parquet_record_batches(path: Path, batch_size: int):
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    _check_parquet_schema(path, parquet.schema_arrow)
    yield from parquet.iter_batches(batch_size=batch_size)


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
def _check_text(path: Path, fmt: str) -> None:
    """Raise DropReadError for a text drop that is a binary file, or text in another encoding than UTF-8 (the
    module's `__main__` runs the same check, `drop_io.blocks.check_text`)."""
    try:
        check_text(path, fmt)
    except ValueError as exc:
        raise DropReadError(f"{path}: {exc}") from None


def _delimited_names(path: Path, sep: str) -> list[str]:
    _check_text(path, "tsv" if sep == "\t" else "csv")
    try:
        return delimited_header(path, sep)
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: {describe_problem(path, sep) or exc}") from exc


def _json_array_records(path: Path) -> list[dict]:
    """The records of a JSON array, read whole and checked: valid JSON, an array, of objects, at least one."""
    _check_text(path, "json")
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = "" if text.rstrip().endswith("]") else " (the file looks cut off: it does not end with ']')"
        problem = exc.msg.removesuffix(" starting at")  # "Unterminated string starting at": the position says where
        raise DropReadError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {problem}{cut}") from exc
    if not isinstance(data, list):
        raise DropReadError(f"{path}: expected a JSON array of objects [{{...}}, ...], found a JSON {json_kind(data)}")
    for i, record in enumerate(data):
        if not isinstance(record, dict):
            raise DropReadError(f"{path}: record {i + 1} is a JSON {json_kind(record)}, expected an object {{...}}")
    if not data:
        raise DropReadError(f"{path}: holds no records; nothing to read")
    return data


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
    #: The drop's row count: the ids of its chunks pad their rows to its digits, so they sort in row order.
    drop_rows: int

    @property
    def id(self) -> str:
        return chunk_id(self.drop_key, self.start, self.stop, rows=self.drop_rows)

    def rows(self, df: pd.DataFrame) -> pd.DataFrame:
        return df.iloc[self.start : self.stop]


#: Most characters of a chunk id before its rows; a longer drop key is shortened to its start, its end and a hash.
CHUNK_DROP_MAX = 30
#: Characters a shortened drop key keeps of its start, and hex digits of the hash that keeps it apart.
CHUNK_DROP_HEAD, CHUNK_DROP_HASH = 8, 4


def chunk_id(drop: str, start: int, stop: int, *, rows: int) -> str:
    """A short, stable, partition-safe chunk id: the drop first, then the rows, `<drop>@<start>-<stop>`.

    Dagster's partition lists cut a long key in the middle, so the id stays near 40 characters and starts with
    what tells drops apart: the drop's key itself when short (a drop's key is unique), else its start and end
    (where dates and part numbers usually are) and a short hash of the whole key (`_drop_part`). The rows are
    zero-padded to the digits of the drop's row count `rows`, so the ids of one drop sort in row order.

    Example:
        >>> chunk_id("orders_2024-11-01.csv", 50, 100, rows=120)
        'orders_2024-11-01.csv@050-100'
        >>> chunk_id("daily_orders_export_north_region_2024-11-01_part1.csv", 0, 50, rows=120)
        'daily_or~2024-11-01_part1~a804@000-050'
    """
    width = len(str(rows))
    return f"{_drop_part(drop)}@{start:0{width}d}-{stop:0{width}d}"


def _drop_part(drop: str) -> str:
    """The drop as a chunk id names it: its partition-safe key when at most `CHUNK_DROP_MAX` characters, else its
    name's start and end and a hash of the whole key, so drops with alike names stay apart (only a shortened
    part holds '~')."""
    key = _partition_safe(drop)
    if len(key) <= CHUNK_DROP_MAX:
        return key
    digest = hashlib.sha1(drop.encode()).hexdigest()[:CHUNK_DROP_HASH]
    stem, room = _partition_safe(Path(drop).stem), CHUNK_DROP_MAX - CHUNK_DROP_HASH - 1
    if len(stem) > room:
        stem = f"{stem[:CHUNK_DROP_HEAD]}~{stem[-(room - CHUNK_DROP_HEAD - 1):]}"
    return f"{stem}~{digest}"


def make_chunks(drop: str, n_rows: int, size: int) -> list[Chunk]:
    """Cut `n_rows` rows of drop `drop` into chunks of `size` rows (the last may be shorter)."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    return [Chunk(drop, start, min(start + size, n_rows), n_rows) for start in range(0, n_rows, size)]
