"""Drops and chunks: read an input file raw, and slice it into stably named chunks.

A drop is read RAW: every CSV/TSV cell is the string exactly as written, so "N/A", "" and "none" reach
the analyst and the cleaning functions unchanged. JSON keeps nested values (serialised to JSON text
so that every column stays a plain string column the functions can work on).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import DropReadError

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
    """Read a drop raw: every CSV cell a string exactly as written.

    Example:
        >>> df = read_drop("customers.csv")          # doctest: +SKIP
        >>> df.dtypes.unique()                       # doctest: +SKIP
        array([dtype('O')], dtype=object)

    Raises DropReadError naming the file and the reason when the file cannot be read.
    """
    path = Path(path)
    fmt = drop_format(path)
    if not path.is_file():
        raise DropReadError(f"{path}: no such file")
    try:
        if fmt in ("csv", "tsv"):
            df = _read_delimited(path, "\t" if fmt == "tsv" else ",")
        elif fmt == "jsonl":
            df = _read_jsonl(path)
        elif fmt == "json":
            df = _read_json_array(path)
        else:
            df = _read_parquet(path)
    except DropReadError:
        raise
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: not valid UTF-8 at byte {exc.start}; re-encode the file as UTF-8") from exc
    except (pd.errors.ParserError, csv.Error) as exc:
        raise DropReadError(f"{path}: cannot parse as {fmt}: {exc}") from exc
    except (OSError, ValueError) as exc:
        raise DropReadError(f"{path}: cannot read as {fmt}: {exc}") from exc
    if df.shape[1] == 0:
        raise DropReadError(f"{path}: no columns found; is the file empty?")
    df.columns = [str(c) for c in df.columns]
    return df.reset_index(drop=True)


def _read_delimited(path: Path, sep: str) -> pd.DataFrame:
    try:
        return pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            encoding="utf-8",
            on_bad_lines="error",
            engine="c",
        ).astype(object)
    except pd.errors.EmptyDataError as exc:
        raise DropReadError(f"{path}: the file is empty (no header row)") from exc


def _to_text(value: object) -> object:
    """JSON scalars become their text; nested values become JSON text; null stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _records_frame(path: Path, records: list[object]) -> pd.DataFrame:
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise DropReadError(f"{path}: record {i + 1} is {type(rec).__name__}, expected an object")
    columns: dict[str, None] = {}
    for rec in records:
        columns.update(dict.fromkeys(rec))  # type: ignore[arg-type]
    rows = [[_to_text(rec.get(c)) for c in columns] for rec in records]  # type: ignore[union-attr]
    return pd.DataFrame(rows, columns=list(columns), dtype=object)


def _read_jsonl(path: Path) -> pd.DataFrame:
    records = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DropReadError(f"{path}: line {lineno} is not valid JSON: {exc.msg}") from exc
    return _records_frame(path, records)


def _read_json_array(path: Path) -> pd.DataFrame:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DropReadError(f"{path}: not valid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(data, list):
        raise DropReadError(f"{path}: expected a JSON array of objects, found {type(data).__name__}")
    return _records_frame(path, data)


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    # Parquet has real types; the functions see text like for every other format. Going through Python
    # values (not pandas) keeps integers with nulls as "1", not "1.0".
    return pd.DataFrame(
        {name: [_parquet_text(v) for v in table.column(name).to_pylist()] for name in table.column_names},
        dtype=object,
    )


def _parquet_text(value: object) -> object:
    if isinstance(value, (str, bool, int, float, list, dict)) or value is None:
        return _to_text(value) if not isinstance(value, (list, dict)) else json.dumps(value, default=str, ensure_ascii=False)
    if hasattr(value, "isoformat"):
        return value.isoformat()  # type: ignore[no-any-return]
    return str(value)


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


def chunk_id(drop: str, start: int, stop: int) -> str:
    """A stable, partition-safe chunk id: a short hash of the drop key plus the row range."""
    digest = hashlib.sha1(drop.encode()).hexdigest()[:6]
    stem = re.sub(r"[^A-Za-z0-9]", "", Path(drop).stem)[:24] or "drop"
    return f"{stem}-{digest}-r{start:07d}-{stop:07d}"


def make_chunks(drop: str, n_rows: int, size: int) -> list[Chunk]:
    """Cut `n_rows` rows of drop `drop` into chunks of `size` rows (the last may be shorter)."""
    if size <= 0:
        raise ValueError("chunk size must be positive")
    return [Chunk(drop, start, min(start + size, n_rows)) for start in range(0, n_rows, size)]


def iter_batches(path: Path | str, batch_size: int) -> Iterator[pd.DataFrame]:
    """Read a drop in batches of `batch_size` rows, raw like `read_drop`, with bounded memory for CSV/TSV.

    CSV and TSV stream through pyarrow's incremental reader; the other formats are read whole and sliced.
    """
    path = Path(path)
    fmt = drop_format(path)
    if fmt not in ("csv", "tsv"):
        df = read_drop(path)
        for start in range(0, len(df), batch_size):
            yield df.iloc[start : start + batch_size].reset_index(drop=True)
        return
    yield from _stream_delimited(path, "\t" if fmt == "tsv" else ",", batch_size)


def _stream_delimited(path: Path, sep: str, batch_size: int) -> Iterator[pd.DataFrame]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        with path.open(encoding="utf-8", newline="") as fh:
            header = next(csv.reader(fh, delimiter=sep), None)
    except UnicodeDecodeError as exc:
        raise DropReadError(f"{path}: not valid UTF-8 at byte {exc.start}; re-encode the file as UTF-8") from exc
    if not header:
        raise DropReadError(f"{path}: the file is empty (no header row)")
    # Every column as text and no value turned into null: the raw reading contract.
    convert = pacsv.ConvertOptions(
        column_types={name: pa.string() for name in header},
        null_values=[],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )
    try:
        reader = pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=sep, newlines_in_values=True),
            convert_options=convert,
        )
        pending: list[pd.DataFrame] = []
        rows = 0
        for batch in reader:
            frame = batch.to_pandas().astype(object)
            pending.append(frame)
            rows += len(frame)
            while rows >= batch_size:
                joined = pd.concat(pending, ignore_index=True)
                yield joined.iloc[:batch_size].reset_index(drop=True)
                rest = joined.iloc[batch_size:].reset_index(drop=True)
                pending, rows = [rest], len(rest)
        if rows:
            yield pd.concat(pending, ignore_index=True)
    except pa.ArrowInvalid as exc:
        raise DropReadError(f"{path}: cannot parse as CSV: {exc}") from exc
