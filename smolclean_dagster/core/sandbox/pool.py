"""Sandbox: the pool of warm, locked-down worker processes that runs untrusted pandas cleaning code.

Each `run` gates the code, borrows an idle zygote (starting one if fewer than `workers` exist, waiting
otherwise), has it fork a fresh locked-down child for the call, and turns the reply into a DataFrame or a
SandboxError. One zygote serves one call at a time, so concurrent threads never share a pipe.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # frames are only passed through here: the apply process need not load pandas
    import pandas as pd

from .batch import BatchRunner
from .errors import SandboxCrashed, SandboxError
from .gate import prepare
from .level import SandboxLevel
from .process import WorkerProcess, encode_input, frame_or_raise, program_header

logger = logging.getLogger("smolclean.sandbox")

MIN_MEMORY_MB = 512  # the warm interpreter alone maps about 350 MB
OPTIONAL_LAYERS = ("rlimits", "netns", "landlock", "seccomp")  # the ones `disable` may leave off


class Sandbox:
    """Run generated `def name(df) -> df` code in locked-down worker processes; safe to share between threads.

    Workers start lazily on the first call (or on `start()` / entering the `with` block). With
    `require_strong=True` the first worker to start raises SandboxError if any isolation layer is missing.
    `workers` caps concurrent calls (default: CPU count); `disable` leaves layers off, for diagnosis only.

    Example:
        >>> import pandas as pd
        >>> code = '''
        ... def strip_names(df):
        ...     df = df.copy()
        ...     df["name"] = df["name"].str.strip()
        ...     return df
        ... '''
        >>> with Sandbox() as sb:
        ...     sb.run(code, pd.DataFrame({"name": ["  Ada "]}))["name"].tolist()
        ['Ada']
    """

    def __init__(self, require_strong: bool = False, memory_mb: int = 2048, max_output_mb: int = 512, *,
                 workers: int | None = None, disable: tuple[str, ...] | list[str] = ()) -> None:
        if memory_mb < MIN_MEMORY_MB:
            raise SandboxError(f"memory_mb={memory_mb} is too small: the worker needs at least {MIN_MEMORY_MB}")
        unknown = set(disable) - set(OPTIONAL_LAYERS)
        if unknown:
            raise SandboxError(f"disable={sorted(unknown)} names no optional layer; choose from {OPTIONAL_LAYERS}")
        if not 1 <= max_output_mb < 4096:
            raise SandboxError(f"max_output_mb={max_output_mb} must be between 1 and 4095")
        self.require_strong = require_strong
        self.memory_mb = memory_mb
        self.max_output_mb = max_output_mb
        self.disable = tuple(disable)
        self.size = workers or os.cpu_count() or 1
        self._idle: list[WorkerProcess] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self._level: SandboxLevel | None = None
        self._runners: weakref.WeakSet[BatchRunner] = weakref.WeakSet()

    # ----------------------------------------------------------------- public

    @property
    def level(self) -> SandboxLevel:
        """The isolation layers this machine gives the workers (starts one worker if none has started)."""
        if self._level is None:
            self.start()
        return self._level

    def start(self) -> Sandbox:
        """Start one worker now and check its level, instead of on the first call."""
        with self._borrow():
            pass
        return self

    def run(self, code: str, df: pd.DataFrame, *, entry: str | None = None, timeout_s: float = 10.0,
            module: bool = False) -> pd.DataFrame:
        """Gate `code`, run its entry on `df` in a fresh locked-down process, and return the result.

        `entry` defaults to the single function's name, or `clean` when `module=True` (the code is then
        gated with check_module). Raises GateRejected, FunctionFailed, SandboxTimeout,
        ResourceLimitExceeded or SandboxCrashed.
        """
        program = prepare(code, module=module, entry=entry)
        return self._execute(program.source, program.entry, df, timeout_s=timeout_s, screened=True)[0]

    def screen(self, code: str, *, entry: str | None = None, module: bool = False) -> None:
        """Gate `code` now, in the calling thread, as a run of it would (raises GateRejected): runs of it from
        other threads then reuse the verdict, and never parse code at the same time as this thread (Python's
        parser is not safe to run in two threads at once: "AST constructor recursion depth mismatch")."""
        prepare(code, module=module, entry=entry)

    def timed_run(self, code: str, df: pd.DataFrame, *, entry: str | None = None,
                  timeout_s: float = 10.0) -> tuple[pd.DataFrame, float]:
        """Like `run`, and also the CPU seconds the function itself took inside the sandbox (without starting
        the process or moving the frame): what validation weighs a candidate's cost by.

        Example:
            >>> out, seconds = sb.timed_run("def f(df):\\n    return df\\n", df)   # doctest: +SKIP
        """
        program = prepare(code, module=False, entry=entry)
        return self._execute(program.source, program.entry, df, timeout_s=timeout_s, screened=True)

    def checked_run(self, code: str, df: pd.DataFrame, *, entry: str | None = None,
                    timeout_s: float = 10.0) -> tuple[pd.DataFrame, float, pd.DataFrame | SandboxError,
                                                      pd.DataFrame | SandboxError]:
        """Validation's three runs of a function in one sandbox process: (its result on `df`, the CPU seconds
        that run took, its result on `df` once more, its result on its own result). The first run's failure is
        raised as `run` raises it; the other two give the error in place of their frame, for the caller to raise
        when it comes to that check. `timeout_s` holds for each run.

        Example:
            >>> out, seconds, repeat, again = sb.checked_run("def f(df):\\n    return df\\n", df)   # doctest: +SKIP
        """
        program = prepare(code, module=False, entry=entry)
        payload = encode_input(df)
        header = {**program_header("run", program.source, program.entry, cpu_s=3 * timeout_s, screened=True),
                  "checked": True}
        with self._borrow() as worker:
            head, data = worker.command(header, payload, timeout_s=3 * timeout_s)
        if head.get("ok") is not True:
            frame_or_raise(head, data)  # raises what the header describes
        try:
            sizes, failed = [int(n) for n in head["parts"]], dict(head.get("failed") or {})
            frames: list = []
            start = 0
            for run in range(3):
                size = sizes[run] if run < len(sizes) else 0
                frames.append(_error_of(failed[str(run)]) if str(run) in failed
                              else frame_or_raise({"ok": True}, data[start:start + size]))
                start += size
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SandboxCrashed(f"the sandbox worker gave a malformed checked reply ({exc})") from None
        seconds = head.get("seconds")
        return frames[0], float(seconds) if isinstance(seconds, (int, float)) else 0.0, frames[1], frames[2]

    def batch_runner(self, code: str, *, entry: str = "clean", module: bool = True, timeout_s: float = 60.0,
                     recycle_after: int = 50, output: str | None = None, drop: dict | None = None) -> BatchRunner:
        """A context manager applying one gated program to many frames in a reused, dedicated worker.

        With `output` (csv, tsv, jsonl or parquet) the runner also takes batches as the input file's bytes
        and gives them back as the output file's (`BatchRunner.run_encoded`). With `drop` (the whole drop's
        counts, core/drop_counts.py) every call is `entry(batch, drop=drop)`.

        Example:
            >>> with sb.batch_runner(module_code) as runner:   # doctest: +SKIP
            ...     parts = [runner.run(batch) for batch in batches]
        """
        self._ensure_open()
        program = prepare(code, module=module, entry=entry)
        worker = self._new_worker()
        worker.start()  # warms up while the caller prepares its first batch
        runner = BatchRunner(program, timeout_s=timeout_s, recycle_after=recycle_after, worker=worker,
                             check_level=self._adopt_level, output=output, drop=drop)
        self._runners.add(runner)
        return runner

    def close(self) -> None:
        """Stop every worker and batch runner; calls made afterwards raise SandboxError."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
        for runner in list(self._runners):
            runner.close()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----------------------------------------------------------------- internals

    def _run_unscreened(self, code: str, df: pd.DataFrame, *, entry: str = "f",
                        timeout_s: float = 10.0) -> pd.DataFrame:
        """Run code WITHOUT the gate or the worker-side guards: only for tests of the kernel layers."""
        return self._execute(code, entry, df, timeout_s=timeout_s, screened=False)[0]

    def _execute(self, source: str, entry: str, df: pd.DataFrame, *, timeout_s: float,
                 screened: bool) -> tuple[pd.DataFrame, float]:
        payload = encode_input(df)
        header = program_header("run", source, entry, cpu_s=timeout_s, screened=screened)
        started = time.perf_counter()
        with self._borrow() as worker:
            head, data = worker.command(header, payload, timeout_s=timeout_s)
        logger.debug("sandboxed `%s` replied in %.1f ms", entry, (time.perf_counter() - started) * 1e3)
        seconds = head.get("seconds")
        return frame_or_raise(head, data), float(seconds) if isinstance(seconds, (int, float)) else 0.0

    @contextlib.contextmanager
    def _borrow(self) -> Iterator[WorkerProcess]:
        """Lend an idle, ready worker to one caller; create one if the pool is not full, else wait."""
        with self._cond:
            while True:
                self._ensure_open()
                if self._idle:
                    worker = self._idle.pop()
                    break
                if self._count < self.size:
                    self._count += 1
                    worker = self._new_worker()
                    break
                self._cond.wait()
        try:
            self._adopt_level(worker.ready())
            yield worker
        except BaseException:
            if worker.level is None or (self.require_strong and not worker.level.strong):
                self._retire(worker)
                raise
            self._give_back(worker)
            raise
        else:
            self._give_back(worker)

    def _new_worker(self) -> WorkerProcess:
        return WorkerProcess(memory_mb=self.memory_mb, max_output_mb=self.max_output_mb, disable=self.disable)

    def _give_back(self, worker: WorkerProcess) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
        worker.kill()

    def _retire(self, worker: WorkerProcess) -> None:
        worker.kill()
        with self._cond:
            self._count -= 1
            self._cond.notify()

    def _adopt_level(self, level: SandboxLevel) -> None:
        if self._level is None:
            self._level = level
            logger.info("sandbox level: %s", level.describe())
        if self.require_strong and not level.strong:
            notes = f" ({'; '.join(level.notes)})" if level.notes else ""
            raise SandboxError(f"a strong sandbox is required (require_strong=True) but these layers are "
                               f"unavailable: {', '.join(level.missing)}{notes}")

    def _ensure_open(self) -> None:
        if self._closed:
            raise SandboxError("this Sandbox is closed; create a new one")


_shared: dict[tuple[bool, int], Sandbox] = {}
_shared_lock = threading.Lock()


def shared_sandbox(require_strong: bool = False, memory_mb: int = 2048) -> Sandbox:
    """The process-wide Sandbox of this configuration, created on first use and closed at exit.

    Everything in one process that runs generated code one call after another (the runs of `smolclean
    learn`, the chunks of a wave's worker) shares its warm workers instead of starting new ones; every
    call still runs in a fresh fork of a worker.
    """
    key = (require_strong, memory_mb)
    with _shared_lock:
        sandbox = _shared.get(key)
        if sandbox is None or sandbox._closed:
            sandbox = _shared[key] = Sandbox(require_strong=require_strong, memory_mb=memory_mb)
            atexit.register(sandbox.close)
        return sandbox


def default_sandbox() -> Sandbox:
    """The process-wide Sandbox behind `run_function`, created on first use and closed at exit."""
    return shared_sandbox()


def run_function(code: str, df: pd.DataFrame, *, timeout_s: float = 10.0) -> pd.DataFrame:
    """Gate and run one candidate function on `df` in the process-wide default Sandbox.

    Example:
        >>> run_function("def f(df):\\n    return df.head(1)\\n", pd.DataFrame({"a": [1, 2]}))
           a
        0  1
    """
    return default_sandbox().run(code, df, timeout_s=timeout_s)


def _error_of(head: dict) -> SandboxError:
    """The error a failed run's header describes, as `frame_or_raise` raises it."""
    try:
        frame_or_raise(head, b"")
    except SandboxError as exc:
        return exc
    return SandboxCrashed(f"the sandbox reported a failure it did not describe: {head}")
