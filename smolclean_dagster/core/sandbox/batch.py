"""BatchRunner: apply one accepted piece of code to many batches in a reused, dedicated worker.

Candidate validation forks a fresh child per call; applying an accepted module over a whole dataset
instead execs the code once in a long-lived child and feeds it batch after batch. That child is dedicated
to this one code (never reused for other code) and is replaced by a fresh fork every `recycle_after` calls,
so state the code keeps between calls cannot grow without bound.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

import pandas as pd

from .errors import SandboxError
from .gate import Program
from .level import SandboxLevel
from .process import WorkerProcess, encode_input, frame_or_raise, program_header

logger = logging.getLogger("smolclean.sandbox")


class BatchRunner:
    """Runs one program over many frames; get it from `Sandbox.batch_runner`, use it as a context manager.

    Example:
        >>> with Sandbox() as sb, sb.batch_runner(module_code) as runner:   # doctest: +SKIP
        ...     cleaned = [runner.run(batch) for batch in batches]
    """

    def __init__(self, program: Program, *, timeout_s: float, recycle_after: int, worker: WorkerProcess,
                 check_level: Callable[[SandboxLevel], None]) -> None:
        if recycle_after < 1:
            raise SandboxError(f"recycle_after must be at least 1, got {recycle_after}")
        self.program = program
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
        payload = encode_input(df)
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
        return frame_or_raise(head, data)

    def _open_session(self) -> None:
        if self._session_open:
            self._worker.command({"op": "close"}, b"", timeout_s=self.timeout_s)
            self._session_open = False
        self._check_level(self._worker.ready())
        header = program_header("open", self.program.source, self.program.entry,
                                cpu_s=self.timeout_s * self.recycle_after, screened=True)
        head, _ = self._worker.command(header, b"", timeout_s=self.timeout_s)
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
