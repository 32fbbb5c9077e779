"""WorkerProcess: one sandbox zygote seen from the orchestrator: start, handshake, commands with a deadline.

The zygote runs `worker.py` by file path under `python -I`, with a clean environment, in an empty
temporary directory and its own session, so killing its process group ends it and every child it forked.
A command that misses its deadline gets the whole group SIGKILLed and a new zygote started at once (its
warm-up runs while the caller handles the timeout).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from . import wire
from .errors import FunctionFailed, ResourceLimitExceeded, SandboxCrashed, SandboxError, SandboxTimeout
from .gate import ALLOWED_IMPORTS, FORBIDDEN_BUILTINS, INDIRECT_IMPORTS, READ_ONLY_IMPORT
from .level import SandboxLevel

logger = logging.getLogger("smolclean.sandbox")

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
START_TIMEOUT_S = 60.0
#: A command's wall-clock deadline: this many times its CPU time limit, plus a grace for moving the frames. Four
#: busy processes per core still leave a computing child its CPU limit before the deadline passes.
WALL_SLACK = 4
WALL_GRACE_S = 5.0
# The only environment a worker gets: no API keys, no PYTHON* variables, one thread per numeric library.
WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "ARROW_DEFAULT_MEMORY_POOL": "system",
}


class WorkerProcess:
    """A zygote process and the pipes to it; not thread-safe (the pool hands each one to one caller)."""

    def __init__(self, *, memory_mb: int, max_output_mb: int, disable: tuple[str, ...] = ()) -> None:
        self.memory_mb = memory_mb
        self.max_output_mb = max_output_mb
        self.disable = disable
        self.level: SandboxLevel | None = None
        self._proc: subprocess.Popen | None = None
        self._workdir: str | None = None
        self._ready = False

    # ----------------------------------------------------------------- life cycle

    def start(self) -> None:
        """Launch the zygote without waiting for its warm-up; `ready()` waits."""
        self._workdir = tempfile.mkdtemp(prefix="smolclean-sandbox-")
        command = [sys.executable, "-I", str(WORKER_SCRIPT), "--memory-mb", str(self.memory_mb),
                   "--max-output-mb", str(self.max_output_mb), "--disable", ",".join(self.disable)]
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=dict(WORKER_ENV), cwd=self._workdir, start_new_session=True, close_fds=True,
        )
        self._ready = False

    def ready(self) -> SandboxLevel:
        """Wait for the zygote's handshake (starting it if needed) and return the layers it reported."""
        if self._proc is None:
            self.start()
        if not self._ready:
            try:
                hello = wire.read_json(self._proc.stdout.fileno(), time.monotonic() + START_TIMEOUT_S)
            except wire.WireError as exc:
                self.kill()
                raise SandboxError(f"the sandbox worker did not start ({exc}); run `{sys.executable} -I "
                                   f"{WORKER_SCRIPT} --memory-mb 2048 --max-output-mb 64` to see why") from None
            if not hello.get("ready"):
                self.kill()
                raise SandboxError(f"the sandbox worker failed while starting:\n{hello.get('error', hello)}")
            self.level = SandboxLevel.from_layers(hello.get("layers", {}), hello.get("notes", []))
            self._ready = True
            logger.debug("sandbox worker %s ready: %s", hello.get("pid"), self.level.describe())
        return self.level

    def kill(self) -> None:
        """SIGKILL the zygote's process group (the zygote and any child) and forget it."""
        proc, self._proc, self._ready = self._proc, None, False
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def restart(self) -> None:
        """Kill the zygote and launch a new one right away."""
        self.kill()
        self.start()

    # ----------------------------------------------------------------- commands

    def command(self, header: dict, payload: bytes, *, timeout_s: float) -> tuple[dict, bytes]:
        """Send one command and return the child's header and data, or raise the matching SandboxError.

        `timeout_s` is CPU time: the child's CPU limit stops code that computes too long, whatever else the machine
        runs. The wall-clock deadline, covering sending, running and receiving, is `WALL_SLACK` times longer (plus
        `WALL_GRACE_S`): it catches code that waits instead of computing, and is never what stops a busy function on
        a busy machine. On a timeout, a dead zygote or a broken protocol the zygote is replaced before raising, so
        the next command finds a working one.
        """
        self.ready()
        deadline = time.monotonic() + timeout_s * WALL_SLACK + WALL_GRACE_S
        proc = self._proc
        try:
            wire.write_json(proc.stdin.fileno(), header)
            wire.write_frame(proc.stdin.fileno(), payload)
            status = wire.read_json(proc.stdout.fileno(), deadline)
            head = wire.read_frame(proc.stdout.fileno(), wire.HEADER_LIMIT, deadline)
            data = wire.read_frame(proc.stdout.fileno(), (self.max_output_mb << 20) + (1 << 20), deadline)
        except wire.DeadlinePassed:
            self.restart()
            raise SandboxTimeout(f"the function did not finish within {timeout_s * WALL_SLACK + WALL_GRACE_S:g} s; it "
                                 f"was killed. Check for endless waits or loops")
        except (wire.WireError, OSError) as exc:
            self.restart()
            raise SandboxCrashed(f"the sandbox worker died or broke the protocol ({exc}); a new one was started")
        return self._child_reply(status, head, timeout_s), data

    def _child_reply(self, status: dict, head: bytes, timeout_s: float) -> dict:
        outcome = status.get("child")
        if outcome == "replied":
            try:
                return wire.parse_json(head)
            except wire.WireError as exc:
                raise SandboxCrashed(f"the sandboxed code sent an unreadable reply ({exc})") from None
        if outcome == "closed":
            return {"ok": True}
        if outcome == "oversized":
            raise ResourceLimitExceeded(f"the result is over the {self.max_output_mb} MiB output cap "
                                        f"({status.get('size', '?')} bytes); return fewer rows or columns")
        if outcome == "died":
            how = status.get("how", "unknown")
            if "SIGXCPU" in how:
                raise SandboxTimeout(f"the function did not finish within {timeout_s:g} s of CPU time; it was "
                                     f"killed. Make it faster (vectorise instead of looping row by row) or check for "
                                     f"endless loops")
            raise SandboxCrashed(f"the sandboxed process died ({how}); it was probably stopped by the "
                                 f"sandbox's kernel layers or crashed in native code")
        self.restart()
        raise SandboxCrashed(f"the sandbox worker refused the command: {status.get('error', status)}")


def frame_or_raise(head: dict, data: bytes) -> pd.DataFrame:
    """Turn a child's reply into the returned DataFrame, or raise the error its header describes."""
    if head.get("ok") is True:
        try:
            return wire.decode_frame(data)
        except wire.WireError as exc:
            raise SandboxCrashed(f"the sandboxed code returned something that is not a table: {exc}") from None
    kind = head.get("kind")
    message = str(head.get("message", ""))[:2000]
    exc_type = str(head.get("type", ""))
    line = head.get("line") if isinstance(head.get("line"), int) else None
    where = f" at line {line}: `{head.get('source_line', '')}`" if line else ""
    described = f"{exc_type}: {message}{where}" if exc_type else message
    if kind in ("function", "unconvertible"):
        raise FunctionFailed(described, exc_type=exc_type, exc_message=message, line=line)
    if kind == "memory":
        raise ResourceLimitExceeded(f"the function ran out of memory ({described}); the sandbox caps memory, "
                                    f"so avoid building huge intermediate objects")
    if kind in ("output", "file_size"):
        raise ResourceLimitExceeded(described)
    if kind == "not_a_frame":
        raise SandboxCrashed(message)
    if kind == "blocked":
        raise SandboxCrashed(f"the sandbox blocked an operation: {described}")
    raise SandboxCrashed(f"the sandboxed code failed outside the function ({kind}): {described}")


def program_header(op: str, source: str, entry: str, *, cpu_s: float, screened: bool) -> dict:
    """The command that makes the zygote fork a child for this code (`run` once, or `open` a session).

    Screened code also gets the worker-side guards: an import hook admitting only the allow-list and
    builtins without the forbidden names. Unscreened code (tests of the kernel layers) gets neither.
    """
    return {
        "op": op,
        "code": source,
        "entry": entry,
        "cpu_s": int(math.ceil(cpu_s)) + 1,
        "allowed_imports": sorted(ALLOWED_IMPORTS | INDIRECT_IMPORTS | {READ_ONLY_IMPORT[0]}) if screened else None,
        "forbidden_builtins": sorted(FORBIDDEN_BUILTINS) if screened else [],
    }


def encode_input(df: pd.DataFrame) -> bytes:
    """Serialize the caller's frame for a worker; failing here is the caller's problem, not the model's."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise SandboxError(f"the sandbox runs functions on a pandas DataFrame, got {type(df).__name__}")
    try:
        return wire.encode_frame(df)
    except Exception as exc:  # noqa: BLE001  (pyarrow raises several unrelated types)
        raise SandboxError(f"the input frame cannot be sent to the sandbox as Arrow: {exc}") from None
