"""Apply an exported cleaning module to a drop: batch by batch, in parallel sandbox workers, in bounded memory.

The drop streams in batches (CSV/TSV and JSONL cut into blocks of whole records, Parquet row group by row
group), each batch is cleaned by one of `workers` dedicated sandbox processes (one per core by default),
and the results are written in input order as they come back. The workers do the parsing and the writing
too: a batch goes to a worker as the input's bytes and comes back as the bytes the output file gets, made
by the same code as the exported module's `__main__` (`drop_io`), so both give the same output and this
process only moves bytes. At most `workers` batches are in flight, so memory depends
on the batch size and the number of workers, never on the size of the file. A bounded, evenly spread
sample of the cleaned rows feeds the residual report (what the detectors still find).
"""

from __future__ import annotations

import ast
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
from typing import TYPE_CHECKING


from .delimited import describe_problem
from .drop_counts import add_counts, drop_counts
from .drop_io.blocks import BATCH_ROWS
from .drop_io.formats import JsonlError, decode_batch
from .drop_io.output_files import OutputIsInput, check_output, remove_stale_temporaries
from .drop_io.writers import BatchWriter, output_kind
from .drops import drop_format, iter_encoded_batches
from .errors import DropReadError, SmolcleanError
from .sandbox.errors import InputError

if TYPE_CHECKING:  # the residual report loads pandas: imported when the cleaning is done and the workers gone
    from .residual import ResidualReport

#: Cleaned rows the residual report looks at, at most (evenly spread over the file).
RESIDUAL_ROWS = 5000

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


def read_registry_revision(source: str) -> int | None:
    """The registry revision an exported module was rendered from (its header), or None if it has none.

    A module exported by an older release names it "Registry version: N": that header is read too, so the drops
    it cleaned are not all cleaned again after an upgrade.

    Example:
        >>> read_registry_revision("Cleaning module for 'customers'\\n\\nRegistry revision: 7\\n")
        7
        >>> read_registry_revision("Cleaning module for 'customers'\\n\\nRegistry version: 7\\n")
        7
    """
    head = "\n".join(source.splitlines()[:12])
    match = re.search(r"^Registry (?:revision|version): (\d+)\s*$", head, re.MULTILINE)
    return int(match.group(1)) if match else None


def estimate_rows(path: Path | str) -> int | None:
    """About how many rows a drop holds, from its size and its first MiB (exact for Parquet), for progress.

    None when there is no cheap guess (a JSON array).
    """
    path = Path(path)
    fmt = drop_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

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
    residual_rows: int = RESIDUAL_ROWS,
    on_batch: Callable[[int, int], None] | None = None,
) -> ApplyResult:
    """Clean `input_path` with the module's `clean(df)` in sandbox batches and write `output_path`.

    `workers` sandbox processes (default: one per core) clean batches side by side; the output keeps the
    input's row order. The output may not be the input (SmolcleanError before anything is read or
    written). It appears only when every batch is cleaned: written to a temporary file beside it, synced
    and renamed; the temporary files that killed runs left in its folder are removed first.
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
    try:
        check_output(input_path, output_path)
    except OutputIsInput as exc:
        raise SmolcleanError(str(exc)) from None
    output_path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(output_path.parent)
    kind, fmt = output_kind(output_path), drop_format(input_path)
    writer = BatchWriter(output_path, kind)
    try:
        stride = _sample_stride(estimate_rows(input_path), residual_rows)
    except Exception:  # noqa: BLE001  (a bad drop is reported by the reader below, naming what is wrong)
        stride = 1
    samples: list[bytes] = []
    started = time.perf_counter()
    rows_in = rows_out = batches = 0
    groups = module_drop_groups(module_source)
    counted = _count_drop(input_path, fmt, batch_size, groups) if groups else None

    def write(start: int, size: int, lines: list[int] | None, future: Future) -> None:
        nonlocal rows_in, rows_out, batches
        where = f"rows {start + 1}-{start + size} (batch {batches + 1})"
        try:
            cleaned = future.result()
        except InputError as exc:
            if lines and exc.index is not None and exc.index < len(lines):
                raise DropReadError(f"{input_path}: line {lines[exc.index]} {exc}") from None
            if fmt in ("csv", "tsv"):  # another pass over the file names the line
                problem = describe_problem(input_path, "\t" if fmt == "tsv" else ",")
                raise DropReadError(f"{input_path}: {problem or f'{where}: {exc}'}") from None
            raise DropReadError(f"{input_path}: {where}: {exc}") from None
        except SmolcleanError as exc:
            raise SmolcleanError(f"{input_path.name}, {where}: {exc}") from exc
        try:
            writer.write_encoded(cleaned.data, cleaned.header_bytes, cleaned.columns)
        except ValueError as exc:
            raise SmolcleanError(f"{output_path.name}, rows {start + 1}-{start + size}: {exc}") from exc
        if cleaned.sample:
            samples.append(cleaned.sample)
        rows_in, rows_out, batches = rows_in + cleaned.rows_in, rows_out + cleaned.rows_out, batches + 1
        log.info("%s: batch %d cleaned (%d rows so far)", input_path.name, batches, rows_in)
        if on_batch:
            on_batch(batches, rows_in)

    try:
        with contextlib.ExitStack() as stack:
            runners = [
                stack.enter_context(sandbox.batch_runner(module_source, entry="clean", module=True, timeout_s=timeout_s,
                                                         output=kind, drop=counted))
                for _ in range(workers)
            ]
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="smolclean-apply"))
            in_flight: deque[tuple[int, int, list[int] | None, Future]] = deque()
            read = 0
            for n, (sent_as, data, size, lines) in enumerate(iter_encoded_batches(input_path, batch_size)):
                if len(in_flight) == workers:
                    write(*in_flight.popleft())
                # Batch n goes to runner n % workers; the batch that runner had before is written by now.
                future = pool.submit(runners[n % workers].run_encoded, data, input=sent_as,
                                     sample_first=(-read) % stride, sample_stride=stride)
                in_flight.append((read, size, lines, future))
                read += size
                del data
            while in_flight:
                write(*in_flight.popleft())
        writer.close()
    except BaseException:
        writer.abort()
        raise
    seconds = round(time.perf_counter() - started, 3)
    from .residual import residual_report

    return ApplyResult(input_path, output_path, rows_in, rows_out, batches, seconds, workers,
                       residual_report(_sample(samples, residual_rows)))


def module_drop_groups(module_source: str) -> list[tuple[str, ...]]:
    """The groups of columns a module's functions count over the whole drop (its `DROP_GROUPS`; none when
    it has none): read from the source, never run here.

    Example:
        >>> module_drop_groups("DROP_GROUPS = [('zip', 'city')]\\ndef clean(df, drop=None):\\n    return df\\n")
        [('zip', 'city')]
    """
    for node in ast.parse(module_source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "DROP_GROUPS"):
            with contextlib.suppress(ValueError):
                return [tuple(group) for group in ast.literal_eval(node.value)]
    return []


def _count_drop(input_path: Path, fmt: str, batch_size: int, groups: list[tuple[str, ...]]) -> dict:
    """The drop's counts for `groups` (core/drop_counts.py), read once before any batch is cleaned."""
    tables: dict = {}
    read = 0
    for sent_as, data, size, lines in iter_encoded_batches(input_path, batch_size):
        try:
            frame = decode_batch(sent_as, data)
        except JsonlError as exc:
            where = f"line {lines[exc.index]}" if lines and exc.index is not None and exc.index < len(lines) else \
                f"rows {read + 1}-{read + size}"
            raise DropReadError(f"{input_path}: {where} {exc}") from None
        except Exception as exc:  # noqa: BLE001  (pyarrow raises several types for a broken block)
            if fmt in ("csv", "tsv"):  # another pass over the file names the line
                problem = describe_problem(input_path, "\t" if fmt == "tsv" else ",")
                raise DropReadError(f"{input_path}: {problem or f'rows {read + 1}-{read + size}: {exc}'}") from None
            raise DropReadError(f"{input_path}: rows {read + 1}-{read + size}: {exc}") from None
        add_counts(tables, drop_counts(frame, groups))
        read += size
    return tables


def _sample_stride(rows: int | None, sample_rows: int) -> int:
    """Every how many rows the workers keep one for the residual sample: a power of two that gives about
    `sample_rows` rows over the whole file (every row when its size is unknown; `_sample` thins then)."""
    stride = 1
    while rows and rows > stride * sample_rows:
        stride *= 2
    return stride


def _sample(parts: list[bytes], sample_rows: int):
    """The workers' sample parts as one frame of at most `sample_rows` rows, evenly spread, in file order."""
    from .residual import RowSampler
    from .sandbox.wire import decode_frame

    sampler = RowSampler(sample_rows)
    for part in parts:
        sampler.add(decode_frame(part))
    return sampler.sample()
