"""Apply an exported cleaning module to a drop: batch by batch, in parallel sandbox workers, in bounded memory.

The drop streams in batches (pyarrow's incremental CSV reader, JSONL line by line, Parquet row group by
row group), each batch is cleaned by one of `workers` dedicated sandbox processes (one per core by
default), and the results are written in input order as they come back, by the same writer as the
exported module's `__main__` (`drop_io`), so both give the same output. At most `workers` batches are in
flight, so memory depends on the batch size and the number of workers, never on the size of the file. A bounded, evenly spread sample of the cleaned rows feeds the residual
report (what the detectors still find).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .drop_io import BATCH_ROWS, BatchWriter, output_kind
from .drops import drop_format, iter_batches
from .errors import SmolcleanError
from .residual import DEFAULT_SAMPLE_ROWS, ResidualReport, RowSampler, residual_report

log = logging.getLogger("smolclean.apply")


@dataclass(frozen=True)
class ApplyResult:
    """What an apply run did: rows in and out, batches, where the output is, how long, what is left to fix."""

    input: Path
    output: Path
    rows_in: int
    rows_out: int
    batches: int
    seconds: float
    workers: int
    residual: ResidualReport

    @property
    def rows_per_s(self) -> float:
        return round(self.rows_in / self.seconds, 1) if self.seconds else 0.0


def default_workers() -> int:
    """Sandbox workers to clean with when none are asked for: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def read_module_version(source: str) -> int | None:
    """The registry version an exported module was rendered from (its header), or None if it has none.

    Example:
        >>> read_module_version("Cleaning module for 'customers'\\n\\nRegistry version: 7\\n")
        7
    """
    match = re.search(r"^Registry version: (\d+)\s*$", "\n".join(source.splitlines()[:12]), re.MULTILINE)
    return int(match.group(1)) if match else None


def estimate_rows(path: Path | str) -> int | None:
    """About how many rows a drop holds, from its size and its first MiB (exact for Parquet), for progress.

    None when there is no cheap guess (a JSON array).
    """
    path = Path(path)
    fmt = drop_format(path)
    if fmt == "parquet":
        return pq.read_metadata(path).num_rows
    if fmt == "json":
        return None
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(1 << 20)
    lines = head.count(b"\n") + (0 if head.endswith(b"\n") or not head else 1)
    if not lines:
        return 0
    header = 1 if fmt in ("csv", "tsv") else 0
    if len(head) >= size:
        return max(0, lines - header)
    return max(0, round(lines * size / len(head)) - header)


def apply_module(
    module_source: str,
    input_path: Path | str,
    output_path: Path | str,
    *,
    sandbox,
    batch_size: int = BATCH_ROWS,
    workers: int | None = None,
    timeout_s: float = 120.0,
    residual_rows: int = DEFAULT_SAMPLE_ROWS,
    on_batch: Callable[[int, int], None] | None = None,
) -> ApplyResult:
    """Clean `input_path` with the module's `clean(df)` in sandbox batches and write `output_path`.

    `workers` sandbox processes (default: one per core) clean batches side by side; the output keeps the
    input's row order.
    The output appears only when every batch is cleaned (written to a temporary file, then renamed).
    `on_batch(batches_done, rows_done)` is called after each batch is written.

    Example:
        >>> from smolclean_dagster.sandbox import Sandbox
        >>> with Sandbox() as sb:                                                      # doctest: +SKIP
        ...     apply_module(Path("clean_customers.py").read_text(), "in.csv", "out.parquet", sandbox=sb, workers=2)
    """
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise SmolcleanError(f"workers={workers}: at least one sandbox worker is needed")
    input_path, output_path = Path(input_path), Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_path.with_name(f".{output_path.name}.{os.getpid()}.tmp")
    writer = BatchWriter(tmp, output_kind(output_path))
    sampler = RowSampler(residual_rows)
    started = time.perf_counter()
    rows_in = rows_out = batches = 0

    def write(start: int, size: int, future: Future) -> None:
        nonlocal rows_in, rows_out, batches
        try:
            cleaned = future.result()
        except SmolcleanError as exc:
            raise SmolcleanError(f"{input_path.name}, rows {start + 1}-{start + size} (batch {batches + 1}): {exc}") from exc
        try:
            writer.write(cleaned)
        except ValueError as exc:
            raise SmolcleanError(f"{output_path.name}, rows {start + 1}-{start + size}: {exc}") from exc
        sampler.add(cleaned)
        rows_in, rows_out, batches = rows_in + size, rows_out + len(cleaned), batches + 1
        del cleaned
        # Arrow's allocator keeps freed blocks for reuse; handing them back keeps the peak near one batch's worth.
        pa.default_memory_pool().release_unused()
        log.info("%s: batch %d cleaned (%d rows so far)", input_path.name, batches, rows_in)
        if on_batch:
            on_batch(batches, rows_in)

    try:
        with contextlib.ExitStack() as stack:
            runners = [
                stack.enter_context(sandbox.batch_runner(module_source, entry="clean", module=True, timeout_s=timeout_s))
                for _ in range(workers)
            ]
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="smolclean-apply"))
            in_flight: deque[tuple[int, int, Future]] = deque()
            read = 0
            for n, batch in enumerate(iter_batches(input_path, batch_size)):
                if len(in_flight) == workers:
                    write(*in_flight.popleft())
                # Batch n goes to runner n % workers; the batch that runner had before is written by now.
                in_flight.append((read, len(batch), pool.submit(runners[n % workers].run, batch)))
                read += len(batch)
            while in_flight:
                write(*in_flight.popleft())
        writer.close()
        os.replace(tmp, output_path)
    except BaseException:
        writer.abort()
        raise
    return ApplyResult(
        input_path, output_path, rows_in, rows_out, batches, round(time.perf_counter() - started, 3), workers,
        residual_report(sampler.sample()),
    )
