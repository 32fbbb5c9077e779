"""Real PostgreSQL and Redis servers for the deployment tests, started from Debian's packages on loopback.

Each server lives in a fresh temporary folder on a free port and is stopped (and the folder removed) when the
context manager exits. When the server's programs are not installed, the test is skipped with the reason;
`.ci/run` installs them.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGINT, grace_s: float = 30) -> None:
    """Stop a server started with `start_new_session=True` and everything it started: `sig` to its process
    group (SIGINT stops `dagster dev`'s webserver, daemon and code servers; SIGTERM is Celery's warm
    shutdown), then SIGKILL after `grace_s`."""
    try:
        os.killpg(proc.pid, sig)
        proc.wait(grace_s)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def session_processes(sid: int) -> list[int]:
    """The live (not zombie) processes of session `sid`, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on port {port} after {timeout_s} s")
        time.sleep(0.1)


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str

    def create_database(self, name: str) -> None:
        import psycopg2

        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()

    def query(self, db: str, sql: str, params: tuple = ()) -> list[tuple]:
        import psycopg2

        with contextlib.closing(psycopg2.connect(host=self.host, port=self.port, user=self.user, dbname=db)) as conn:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()


def _postgres_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A throw-away PostgreSQL cluster (initdb + pg_ctl) on 127.0.0.1, `trust` authentication for `postgres`.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user of Debian's package.
    """
    bindir = _postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="smolclean-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, log, port = root / "data", root / "server.log", free_port()
    try:
        subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                        "-E", "UTF8", "--locale=C", "--no-sync"], check=True, capture_output=True, timeout=120)
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
                        "-w", "-t", "60", "start"], check=True, capture_output=True, timeout=90)
        try:
            yield Postgres(host="127.0.0.1", port=port, user="postgres")
        finally:
            subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True, timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throw-away Redis on 127.0.0.1 (no persistence); yields its URL prefix `redis://127.0.0.1:PORT`."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="smolclean-redis-"))
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_port(port, 30, proc)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)
