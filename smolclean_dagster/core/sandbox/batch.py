"""BatchRunner: apply one accepted piece of code to many batches in a reused, dedicated worker.

Candidate validation forks a fresh child per call; applying an accepted module over a whole dataset
instead execs the code once in a long-lived child and feeds it batch after batch. That child is dedicated
to this one code (never reused for other code) and is replaced by a fresh fork every `recycle_after` calls,
so state the code keeps between calls cannot grow without bound.
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
from dataclasses import dataclass
from typing import Callable

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # frames are only passed through here: the apply process need not load pandas
    import pandas as pd

from .errors import InputError, SandboxError
from .gate import Program
from .level import SandboxLevel
from .process import WorkerProcess, encode_input, frame_or_raise, program_header

logger = logging.getLogger("smolclean.sandbox")


@dataclass(frozen=True)
class EncodedBatch:
    """A batch cleaned by `BatchRunner.run_encoded`: the output file's bytes and what the worker says of them."""

    data: bytes  # as `drop_io.encode_batch` writes it
    header_bytes: int  # CSV/TSV: the header line's length at the start of `data`
    columns: list[str]
    rows_in: int
    rows_out: int
    sample: bytes  # an Arrow stream of the rows asked for (`wire.decode_frame`), or b""


class BatchRunner:
    """Runs one program over many frames; get it from `Sandbox.batch_runner`, use it as a context manager.

    Example:
        >>> with Sandbox() as sb, sb.batch_runner(module_code) as runner:   # doctest: +SKIP
        ...     cleaned = [runner.run(batch) for batch in batches]
    """

    def __init__(self, program: Program, *, timeout_s: float, recycle_after: int, worker: WorkerProcess,
                 check_level: Callable[[SandboxLevel], None], output: str | None = None,
                 drop: dict | None = None) -> None:
        if recycle_after < 1:
            raise SandboxError(f"recycle_after must be at least 1, got {recycle_after}")
        self.program = program
        self.output = output
        # the whole drop's counts, handed to the entry as `drop=` on every call (core/drop_counts.py)
        self._drop = pickle.dumps(drop, protocol=pickle.HIGHEST_PROTOCOL) if drop is not None else b""
        self.timeout_s = timeout_s
        self.recycle_after = recycle_after
        self._worker = worker
        self._check_level = check_level
        self._lock = threading.Lock()
        self._session_open = False
        self._calls_in_session = 0
        self._closed = False
        self.calls = 0
        self.sessions = 0

    def run(self, df: pd.DataFrame) -> pd.DataFrame:
        """Apply the program's entry to `df` and return its result; raises the same errors as Sandbox.run."""
        if self.output is not None:
            raise SandboxError("this batch runner takes encoded batches (run_encoded), not frames")
        return frame_or_raise(*self._call(encode_input(df)))

    def run_encoded(self, data: bytes, *, input: str, sample_first: int = 0, sample_stride: int = 0) -> EncodedBatch:  # noqa: A002
        """Clean one batch given as the input file's bytes: `input` "jsonl" (whole lines), "csv" or "tsv" (the
        header and whole records) or "table" (an Arrow stream of a Parquet batch), as `drops.iter_encoded_batches` cuts it.
        The worker parses it, runs the entry and writes the result as this runner's `output` kind; the rows at
        `sample_first::sample_stride` come back as a sample (none for 0).

        Raises the errors of `run`, and InputError (with `.index`, the bad line's place) for input it cannot parse.
        """
        if self.output is None:
            raise SandboxError("this batch runner was opened without an output kind; use run")
        meta = json.dumps({"input": input, "sample_first": sample_first,
                           "sample_stride": sample_stride or (1 << 62)}).encode()
        head, reply = self._call(len(meta).to_bytes(4, "big") + meta + data)
        if head.get("ok") is not True:
            if head.get("kind") == "input":
                raise InputError(str(head.get("message", ""))[:2000], index=head.get("index"))
            frame_or_raise(head, reply)  # raises what the header describes
        try:
            size = int(head["out_bytes"])
            batch = EncodedBatch(data=reply[:size], header_bytes=int(head["header_bytes"]),
                                 columns=[str(c) for c in head["columns"]], rows_in=int(head["rows_in"]),
                                 rows_out=int(head["rows_out"]), sample=reply[size:])
        except (KeyError, TypeError, ValueError) as exc:
            raise SandboxError(f"the sandbox worker gave a malformed batch reply ({exc})") from None
        lines = batch.data.count(b"\n") if self.output == "jsonl" else batch.rows_out
        if lines != batch.rows_out:
            raise SandboxError(f"the sandbox worker wrote {lines} JSONL lines for {batch.rows_out} rows")
        return batch

    def _call(self, payload: bytes) -> tuple[dict, bytes]:
        with self._lock:
            if self._closed:
                raise SandboxError("this batch runner is closed; open a new one with Sandbox.batch_runner")
            if not self._session_open or self._calls_in_session >= self.recycle_after:
                self._open_session()
            try:
                head, data = self._worker.command({"op": "call"}, payload, timeout_s=self.timeout_s)
            except SandboxError:
                self._session_open = False  # the worker was replaced or the child died: start over next time
                raise
            self._calls_in_session += 1
            self.calls += 1
        return head, data

    def _open_session(self) -> None:
        if self._session_open:
            self._worker.command({"op": "close"}, b"", timeout_s=self.timeout_s)
            self._session_open = False
        self._check_level(self._worker.ready())
        header = program_header("open", self.program.source, self.program.entry,
                                cpu_s=self.timeout_s * self.recycle_after, screened=True)
        if self.output is not None:
            header["io"] = {"output": self.output}
        if self._drop:
            header["drop"] = True
        head, _ = self._worker.command(header, self._drop, timeout_s=self.timeout_s)
        if head.get("ok") is not True:
            frame_or_raise(head, b"")  # raises the error that stopped the code from loading
        self._session_open = True
        self._calls_in_session = 0
        self.sessions += 1
        logger.debug("batch runner for `%s` opened session %d", self.program.entry, self.sessions)

    def close(self) -> None:
        """Stop the dedicated worker; further `run` calls raise SandboxError."""
        with self._lock:
            self._closed = True
            self._session_open = False
            self._worker.kill()

    def __enter__(self) -> BatchRunner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
