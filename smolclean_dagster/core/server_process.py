"""A server program run in the foreground until it exits or we are asked to stop (`smolclean ui`).

Service managers, containers and CI stop a program with SIGTERM, a terminal with Ctrl-C (SIGINT), a closed
terminal with SIGHUP. `dg dev` (like `dagster dev`) stops its webserver, daemon and code servers on Ctrl-C only, and
processes started in a background job inherit SIGINT ignored. So the server runs in a process group of its
own, started with the default signal handling whatever ours was; any stop signal we get becomes one SIGINT
to that whole group (Ctrl-C as in a terminal); after `grace_s` whatever is left of the group is killed.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

log = logging.getLogger("smolclean.server")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds the server's processes get to stop on their own before they are killed.
GRACE_S = 10.0


def run_until_stopped(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, grace_s: float = GRACE_S) -> int:
    """Run `cmd` until it exits (its exit code) or we get SIGINT/SIGTERM/SIGHUP (0, once all of it is gone).

    Example:
        >>> run_until_stopped(["true"])
        0
    """
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    # Handlers (not SIG_IGN) are reset to the default by exec: the server gets SIGINT even from a background job.
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        proc = subprocess.Popen(list(cmd), env=dict(env) if env is not None else None, process_group=0)
        try:
            while not received:
                try:
                    code = proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    continue
                # The server ended by itself: what it started must not outlive it either.
                stop_group(proc, grace_s, received)
                return code
            log.warning("%s received: stopping the server and everything it started", signal.Signals(received[0]).name)
            stop_group(proc, grace_s, received)
            return 0
        except BaseException:
            stop_group(proc, 0, received)
            raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_group(proc: subprocess.Popen, grace_s: float, received: list[int] | None = None) -> None:
    """SIGINT to the process group `proc` leads, then SIGKILL to what is left after `grace_s` (or a second stop signal)."""
    if not _group_alive(proc):
        return
    asked = len(received) if received is not None else 0
    _signal_group(proc.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(proc):
        if received is not None and len(received) > asked:
            break  # asked again: stop now
        time.sleep(0.1)
    if _group_alive(proc):
        log.warning("processes of the server still running after %.0f s: killing them", grace_s)
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reaps the leader: a zombie must not count as alive
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
