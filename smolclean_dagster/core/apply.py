"""Apply an exported cleaning module to a drop, batch by batch, inside the sandbox."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .drops import iter_batches
from .errors import SmolcleanError

log = logging.getLogger("smolclean.apply")


@dataclass(frozen=True)
class ApplyResult:
    """What an apply run did: rows in and out, batches, where the output is, how long it took."""

    input: Path
    output: Path
    rows_in: int
    rows_out: int
    batches: int
    seconds: float


def output_format(path: Path) -> str:
    """The output format from the file extension: parquet (default), csv or jsonl."""
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    return "parquet"


def apply_module(
    module_source: str,
    input_path: Path | str,
    output_path: Path | str,
    *,
    sandbox,
    batch_size: int = 50_000,
    timeout_s: float = 120.0,
    on_batch: Callable[[int, int], None] | None = None,
) -> ApplyResult:
    """Clean `input_path` with the module's `clean(df)` in sandbox batches and write `output_path`.

    The output appears only when every batch is cleaned (written to a temporary file, then renamed).

    Example:
        >>> from smolclean_dagster.sandbox import Sandbox
        >>> with Sandbox() as sb:                                                      # doctest: +SKIP
        ...     apply_module(Path("clean_customers.py").read_text(), "in.csv", "out.parquet", sandbox=sb)
    """
    input_path, output_path = Path(input_path), Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_path.with_name(f".{output_path.name}.{os.getpid()}.tmp")
    fmt = output_format(output_path)
    started = time.perf_counter()
    rows_in = rows_out = batches = 0
    writer: pq.ParquetWriter | None = None
    try:
        with sandbox.batch_runner(module_source, entry="clean", module=True, timeout_s=timeout_s) as runner:
            for batch in iter_batches(input_path, batch_size):
                cleaned = runner.run(batch)
                rows_in += len(batch)
                rows_out += len(cleaned)
                writer = _write_batch(cleaned, tmp, fmt, writer, first=batches == 0)
                batches += 1
                log.info("%s: batch %d cleaned (%d rows so far)", input_path.name, batches, rows_in)
                if on_batch:
                    on_batch(batches, rows_in)
        if writer is not None:
            writer.close()
            writer = None
        if batches == 0:
            _write_batch(pd.DataFrame(), tmp, fmt, None, first=True)
        os.replace(tmp, output_path)
    except BaseException:
        if writer is not None:
            writer.close()
        tmp.unlink(missing_ok=True)
        raise
    return ApplyResult(input_path, output_path, rows_in, rows_out, batches, round(time.perf_counter() - started, 3))


def _write_batch(
    df: pd.DataFrame, path: Path, fmt: str, writer: pq.ParquetWriter | None, *, first: bool
) -> pq.ParquetWriter | None:
    if fmt == "csv":
        df.to_csv(path, mode="w" if first else "a", header=first, index=False)
        return None
    if fmt == "jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False, mode="w" if first else "a")
        return None
    table = pa.Table.from_pandas(df, preserve_index=False)
    if writer is None:
        table = table.cast(pa.schema([_text_if_null(f) for f in table.schema]))
        writer = pq.ParquetWriter(path, table.schema)
    else:
        try:
            table = table.cast(writer.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SmolcleanError(
                f"{path.name}: a batch's columns changed type ({exc}); make the module return the same "
                "types for every batch, or write CSV with -o OUT.csv"
            ) from exc
    writer.write_table(table)
    return writer


def _text_if_null(field: pa.Field) -> pa.Field:
    # A column that is all-null in the first batch would fix the type to null for the whole file.
    return field.with_type(pa.string()) if pa.types.is_null(field.type) else field
