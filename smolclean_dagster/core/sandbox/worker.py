"""The sandbox worker process: a warm zygote that forks one locked-down child per piece of generated code.

The orchestrator starts it as `python -I worker.py --memory-mb N --max-output-mb M [--disable a,b]`, by
file path, in an empty directory with a clean environment. It imports only the standard library, numpy,
pandas, pyarrow and pyseccomp, plus its siblings `wire.py` and `lockdown.py` and `../drop_io/` and
`../frozen.py`, which it loads by path.

Life of the zygote: warm up (import everything generated code may use and exercise pandas' lazy paths),
enter an empty network namespace, probe which kernel layers work, report them, then serve commands. The
zygote never runs generated code: for each command it forks a child, which applies rlimits, Landlock and
seccomp to itself and only then compiles the code. The zygote relays the child's reply, so the child
never touches the orchestrator's pipes and cannot forge or desynchronise the protocol.

Commands (a JSON frame, then a data frame that may be empty) and replies (three frames: the zygote's JSON
status, the child's JSON header as sent, the child's Arrow data):
  run   {code, entry, allowed_imports, forbidden_builtins, cpu_s} + data: fresh child, one call, exit
  open  {same without data}: fork a child that execs the code once and then serves `call`s
  call  data: one call in the open child
  close: end the open child
An `open` with `io: {output: KIND}` starts a child for `smolclean apply`: each `call` then carries one batch
as the input file's bytes (a length-prefixed JSON meta, then JSONL lines, CSV/TSV records or an Arrow
stream), and the reply's data is the batch as the output file's bytes followed by an Arrow sample of its
rows (see `_call_io`).
"""

from __future__ import annotations

import argparse
import builtins
import functools
import gc
import importlib.util
import linecache
import os
import pickle
import select
import signal
import sys
import time
import traceback


def _load_sibling(name: str):
    path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
    if os.path.isdir(path):  # a package: its files import one another relatively
        spec = importlib.util.spec_from_file_location(f"smolclean_sandbox_{os.path.basename(name)}",
                                                      os.path.join(path, "__init__.py"), submodule_search_locations=[path])
    else:
        spec = importlib.util.spec_from_file_location(f"smolclean_sandbox_{os.path.basename(name)}", f"{path}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


wire = _load_sibling("wire")
lockdown = _load_sibling("lockdown")
drop_io = _load_sibling("../drop_io")  # a batch of `smolclean apply` is parsed and written in the child
frozen = _load_sibling("../frozen")  # the code's constants are read-only once it is loaded

import collections, datetime, decimal, functools, html, itertools, math, re  # noqa: E401,E402,F401
import statistics, string, typing, unicodedata, zoneinfo  # noqa: E401,E402,F401

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

FILENAME = "<smolclean_generated>"
MODULE_NAME = "smolclean_generated"


# --------------------------------------------------------------------------- zygote


def main() -> None:
    """Warm up, lock the zygote's network away, probe the layers, report, then serve until the pipe closes."""
    args = _parse_args()
    conn_in, conn_out = _move_protocol_off_stdio()
    try:
        _warm_up()
        layers, notes = _prepare_layers(args)
    except Exception:  # noqa: BLE001  (report any start-up failure instead of dying silently)
        wire.write_json(conn_out, {"ready": False, "error": traceback.format_exc()[-2000:]})
        return
    # Children then skip scanning (and copying on write) the warm heap they inherit.
    gc.freeze()
    wire.write_json(conn_out, {"ready": True, "pid": os.getpid(), "layers": layers, "notes": notes})
    try:
        Zygote(conn_in, conn_out, args, layers).serve()
    finally:
        _remove_workdir()


def _remove_workdir() -> None:
    """Remove the empty working folder the orchestrator made for this zygote, once its pipe closed: an
    orchestrator that ends without closing its pool (a killed run) would otherwise leave it behind."""
    workdir = os.getcwd()
    if os.path.basename(workdir).startswith("smolclean-sandbox-"):
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="smolclean sandbox worker")
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--max-output-mb", type=int, required=True)
    parser.add_argument("--disable", default="", help="comma-separated layers to leave off (for diagnosis)")
    return parser.parse_args()


def _move_protocol_off_stdio() -> tuple[int, int]:
    """Keep the protocol on private fds; stdin/stdout/stderr become /dev/null so prints cannot corrupt it."""
    conn_in, conn_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return conn_in, conn_out


def _warm_up() -> None:
    """Run the pandas paths that import lazily, so fresh children do not pay for those imports."""
    df = pd.DataFrame({"a": range(6), "s": list("abcdef"), "t": pd.date_range("2020-01-01", periods=6)})
    df = wire.decode_frame(wire.encode_frame(df))
    df["s"].str.strip().str.upper().str.contains("A", regex=True)
    df["s"].str.extract(r"(\w)", expand=False)
    pd.to_datetime(pd.Series(["2020-01-05", "05/01/2021", "n/a"]), errors="coerce", format="mixed")
    df["t"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris").astype(str)
    pd.to_numeric(pd.Series(["1", "x"]), errors="coerce")
    df.groupby("s").agg({"a": "sum"}).reset_index().merge(df, on="s", suffixes=("", "_y")).drop_duplicates().sort_values("a")
    df.assign(c=pd.Categorical(df["s"])).pivot_table(index="c", values="a", aggfunc="mean", observed=True)
    pd.json_normalize([{"a": {"b": 1}}])
    df.describe(include="all").astype(str).to_string()
    df.to_csv()
    np.random.default_rng(0).random(3)


def _prepare_layers(args: argparse.Namespace) -> tuple[dict[str, bool], list[str]]:
    """Enter the empty network namespace here, then find out in a throwaway child which other layers hold."""
    disabled = {name for name in args.disable.split(",") if name}
    notes = [f"{name} disabled by the caller" for name in lockdown.LAYERS if name in disabled]
    layers = {name: False for name in lockdown.LAYERS}
    if "netns" not in disabled:
        try:
            lockdown.enter_empty_netns()
            layers["netns"] = True
        except lockdown.LayerUnavailable as exc:
            notes.append(f"netns unavailable: {exc}")
    layers["fresh_fork"] = True  # every run forks; it is not optional
    wanted = [name for name in lockdown.CHILD_LAYERS if name not in disabled]
    if "seccomp" in wanted and not lockdown.seccomp_available():
        wanted.remove("seccomp")
        notes.append("seccomp unavailable: pyseccomp/libseccomp cannot be loaded")
    probed, probe_notes = lockdown.probe_layers(wanted, memory_mb=args.memory_mb)
    layers.update({name: name in probed for name in wanted})
    return layers, notes + probe_notes


class OrchestratorGone(Exception):
    """The orchestrator closed its pipe while a child was running."""


class Zygote:
    """Serve commands from the orchestrator by forking children; holds at most one open session child."""

    def __init__(self, conn_in: int, conn_out: int, args: argparse.Namespace, layers: dict[str, bool]) -> None:
        self.conn_in, self.conn_out = conn_in, conn_out
        self.args = args
        self.child_layers = [name for name in lockdown.CHILD_LAYERS if layers[name]]
        self.max_output = args.max_output_mb << 20
        self.read_paths = lockdown.python_read_paths()
        self.session: tuple[int, int, int] | None = None  # pid, fd to the child, fd from the child

    def serve(self) -> None:
        """Answer commands until the orchestrator closes its pipe."""
        while True:
            try:
                command = wire.read_json(self.conn_in)
                payload = wire.read_frame(self.conn_in, wire.MAX_FRAME)
            except wire.PeerClosed:
                return  # the orchestrator is gone; a session child dies with us (PDEATHSIG)
            try:
                reply = self._dispatch(command, payload)
            except OrchestratorGone:
                return
            status, head, data = reply
            try:
                wire.write_json(self.conn_out, status)
                wire.write_frame(self.conn_out, head)
                wire.write_frame(self.conn_out, data)
            except BrokenPipeError:
                return

    def _dispatch(self, command: dict, payload: bytes) -> tuple[dict, bytes, bytes]:
        op = command.get("op")
        if op == "run":
            return self._run_once(command, payload)
        if op == "open":
            return self._open_session(command, payload)
        if op == "call" and self.session:
            return self._call_session(payload)
        if op == "close":
            self._close_session()
            return {"child": "closed"}, b"", b""
        return {"error": f"unknown command {op!r} or no open session"}, b"", b""

    def _fork(self, command: dict, *, in_fd: int | None, payload: bytes | None, parent_end: int = -1):
        """Fork a child for `command`; returns its pid and the fd its reply arrives on."""
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            # The child keeps only its own pipe ends: not the orchestrator's, nor an open session's.
            others = (self.conn_in, self.conn_out, read_fd, parent_end, *(self.session[1:] if self.session else ()))
            for fd in others:
                if fd >= 0:
                    os.close(fd)
            _child(command, self, in_fd=in_fd, out_fd=write_fd, payload=payload)
        os.close(write_fd)
        return pid, read_fd

    def _run_once(self, command: dict, payload: bytes) -> tuple[dict, bytes, bytes]:
        pid, from_child = self._fork(command, in_fd=None, payload=payload)
        try:
            return self._collect(pid, from_child, reap=True)
        finally:
            os.close(from_child)

    def _open_session(self, command: dict, payload: bytes) -> tuple[dict, bytes, bytes]:
        self._close_session()
        to_read, to_write = os.pipe()
        pid, from_child = self._fork(command, in_fd=to_read, payload=payload, parent_end=to_write)
        os.close(to_read)
        self.session = (pid, to_write, from_child)
        return self._collect_session()

    def _call_session(self, payload: bytes) -> tuple[dict, bytes, bytes]:
        try:
            wire.write_frame(self.session[1], payload)
        except OSError:
            pass  # the child died; collecting its reply reports how
        return self._collect_session()

    def _collect_session(self) -> tuple[dict, bytes, bytes]:
        pid, _, from_child = self.session
        reply = self._collect(pid, from_child, reap=False)
        if reply[0]["child"] != "replied":
            self._close_session()
        return reply

    def _close_session(self) -> None:
        if self.session is None:
            return
        pid, to_child, from_child = self.session
        self.session = None
        os.close(to_child)  # EOF tells the child to exit
        os.close(from_child)
        _reap(pid)

    def _collect(self, pid: int, from_child: int, *, reap: bool) -> tuple[dict, bytes, bytes]:
        """Read the child's header and data frames; if it died or overflowed, say so instead."""
        # The orchestrator sends nothing while a call runs, so its pipe turning readable means it closed:
        # end the child and ourselves rather than linger behind a child that sleeps forever.
        readable, _, _ = select.select([from_child, self.conn_in], [], [])
        if readable == [self.conn_in]:
            os.kill(pid, signal.SIGKILL)
            _reap(pid)
            raise OrchestratorGone
        try:
            head = wire.read_frame(from_child, wire.HEADER_LIMIT)
            data = wire.read_frame(from_child, self.max_output)
        except wire.FrameTooLarge as exc:
            os.kill(pid, signal.SIGKILL)
            _reap(pid)
            return {"child": "oversized", "size": exc.size, "limit": exc.limit}, b"", b""
        except wire.PeerClosed:
            return {"child": "died", "how": _reap(pid)}, b"", b""
        if reap:
            _reap(pid)
        return {"child": "replied"}, head, data


def _reap(pid: int) -> str:
    """Wait for a child and describe how it ended."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "already reaped"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exited with status {os.WEXITSTATUS(status)}"


# --------------------------------------------------------------------------- child


def _child(command: dict, zygote: Zygote, *, in_fd: int | None, out_fd: int, payload: bytes | None) -> None:
    """Lock down, exec the generated code, serve one call (or calls until EOF on `in_fd`), then exit."""
    code = 0
    try:
        lockdown.die_with_parent()
        try:
            for name in zygote.child_layers:
                lockdown.apply_layer(name, memory_mb=zygote.args.memory_mb, cpu_s=int(command.get("cpu_s", 10)),
                                     read_paths=zygote.read_paths)
        except Exception as exc:  # noqa: BLE001  (fail closed: never run code under fewer layers than reported)
            _reply(out_fd, {"ok": False, "kind": "lockdown", "message": f"lockdown failed: {exc}"}, b"")
            return
        head, function = _load(command)
        if function is None:
            _reply(out_fd, head, b"")
            return
        if in_fd is None:
            call = _call_checked if command.get("checked") else _call
            _reply(out_fd, *call(function, payload, zygote.max_output))
            return
        if command.get("drop"):  # the whole drop's counts from the orchestrator: every call gets them
            function = functools.partial(function, drop=pickle.loads(payload))  # noqa: S301  (our own bytes)
        _reply(out_fd, head, b"")  # the session is ready for calls
        while True:
            try:
                payload = wire.read_frame(in_fd, wire.MAX_FRAME)
            except wire.PeerClosed:
                return
            if command.get("io"):
                _reply(out_fd, *_call_io(function, payload, command["io"]["output"], zygote.max_output))
            else:
                _reply(out_fd, *_call(function, payload, zygote.max_output))
    except BaseException:  # noqa: BLE001  (a child must never fall back into the zygote's loop)
        code = 70
    finally:
        os._exit(code)


def _reply(out_fd: int, head: dict, data: bytes) -> None:
    wire.write_json(out_fd, head)
    wire.write_frame(out_fd, data)


def _load(command: dict) -> tuple[dict, object]:
    """Exec the code in a fresh namespace and return (header, entry function or None on failure)."""
    source = command["code"]
    linecache.cache[FILENAME] = (len(source), None, source.splitlines(True), FILENAME)
    namespace = {"__name__": MODULE_NAME, "__builtins__": _builtins_for(command)}
    try:
        exec(compile(source, FILENAME, "exec"), namespace)  # noqa: S102  (this is the sandbox)
    except BaseException as exc:  # noqa: BLE001
        return _describe_failure(exc), None
    frozen.freeze_namespace(namespace)  # no state carried from one call (one batch) to the next
    function = namespace.get(command["entry"])
    if not callable(function):
        message = f"the code defines no function named `{command['entry']}`"
        return {"ok": False, "kind": "function", "type": "NameError", "message": message, "line": None}, None
    return {"ok": True}, function


def _builtins_for(command: dict) -> dict:
    """Builtins without the forbidden names, and an import that admits only the allowed modules."""
    names = dict(vars(builtins))
    for name in command.get("forbidden_builtins", ()):
        names.pop(name, None)
    allowed = command.get("allowed_imports")
    if allowed is not None:
        allowed = frozenset(allowed)

        def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
            if level != 0 or name.partition(".")[0] not in allowed:
                raise ImportError(f"import of {name!r} is not allowed; allowed: {', '.join(sorted(allowed))}")
            return __import__(name, globals, locals, fromlist, level)

        names["__import__"] = guarded_import
    return names


def _call(function, payload: bytes, max_output: int) -> tuple[dict, bytes]:
    """Call the entry on the decoded frame and encode its result; every failure becomes a header."""
    try:
        frame = wire.decode_frame(payload)
    except BaseException as exc:  # noqa: BLE001  (MemoryError and SystemExit included)
        return _describe_failure(exc), b""
    return _run(function, frame, lambda result: (wire.encode_frame(result), {}), "stored as a table", max_output)


def _call_checked(function, payload: bytes, max_output: int) -> tuple[dict, bytes]:
    """Validation's three runs in one child: the entry on the frame (timed), on the frame again (is it
    deterministic?) and on its own result as the caller would decode it (is it idempotent?). The data is the
    results' frames one after another, their sizes in the header's `parts`. A failure of the first run is the
    reply, as a run of its own would have given it; one of the others is in `failed` (by run) with no frame,
    for the caller to raise when it comes to that check."""
    results, failed, seconds = [], {}, 0.0
    for run in range(3):
        if run == 2 and not results[0]:
            break
        try:
            frame = wire.decode_frame(payload if run < 2 else results[0])
        except BaseException as exc:  # noqa: BLE001  (MemoryError and SystemExit included)
            head = _describe_failure(exc)
        else:
            head, data = _run(function, frame, lambda result: (wire.encode_frame(result), {}), "stored as a table",
                              max_output)
        if head.get("ok") is not True:
            if run == 0:
                return head, b""
            failed[str(run)], data = head, b""
        elif run == 0:
            seconds = head["seconds"]
        results.append(data)
    return {"ok": True, "seconds": seconds, "parts": [len(r) for r in results], "failed": failed}, b"".join(results)


def _call_io(function, payload: bytes, output: str, max_output: int) -> tuple[dict, bytes]:
    """One batch of `smolclean apply`: decode the input's bytes, clean, and encode the output file's bytes.

    The reply header gives the rows in and out, the output's columns, its header's length (CSV) and its
    size; the data is the output bytes, then the rows at `sample_first::sample_stride` as an Arrow stream
    (for the residual report).
    """
    try:
        size = int.from_bytes(payload[:4], "big")
        meta = wire.parse_json(payload[4:4 + size])
        data = memoryview(payload)[4 + size:]
        frame = _decode_input(meta["input"], bytes(data))
    except drop_io.JsonlError as exc:
        return {"ok": False, "kind": "input", "index": exc.index, "message": str(exc)}, b""
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "kind": "input", "message": f"{type(exc).__name__}: {_text_of(exc)}"[:2000]}, b""
    del payload, data

    def encode(result: pd.DataFrame) -> tuple[bytes, dict]:
        out, header_bytes, columns = drop_io.encode_batch(result, output)
        sample = result.iloc[int(meta["sample_first"])::int(meta["sample_stride"])]
        data = out + (wire.encode_frame(sample.reset_index(drop=True)) if len(sample) else b"")
        return data, {"rows_in": len(frame), "rows_out": len(result), "columns": columns,
                      "header_bytes": header_bytes, "out_bytes": len(out)}

    return _run(function, frame, encode, f"written as {output}", max_output)


def _run(function, frame: pd.DataFrame, encode, as_what: str, max_output: int) -> tuple[dict, bytes]:
    """Call the entry on `frame`, check that it gave a frame and `encode` it (bytes and header fields);
    every failure becomes a header."""
    # CPU time of the function alone: what validation weighs its cost by, unswayed by other busy processes
    started = time.process_time()
    try:
        result = function(frame)
    except BaseException as exc:  # noqa: BLE001  (MemoryError and SystemExit included)
        return _describe_failure(exc), b""
    seconds = time.process_time() - started
    if not isinstance(result, pd.DataFrame):
        message = f"the function returned {type(result).__name__}, not a pandas DataFrame; return the whole frame"
        return {"ok": False, "kind": "not_a_frame", "message": message}, b""
    try:
        data, fields = encode(result)
    except MemoryError as exc:
        return {"ok": False, "kind": "memory", "message": f"out of memory encoding the result: {exc}"}, b""
    except Exception as exc:  # noqa: BLE001
        message = (f"the returned DataFrame cannot be {as_what}: {_text_of(exc)}; give every column "
                   f"a unique name and values of one type")
        return {"ok": False, "kind": "unconvertible", "type": type(exc).__name__, "message": message}, b""
    if len(data) > max_output:
        message = f"the result is {len(data) >> 20} MiB, over the {max_output >> 20} MiB output cap"
        return {"ok": False, "kind": "output", "message": message}, b""
    return {"ok": True, "seconds": seconds, **fields}, data


def _decode_input(kind: str, data: bytes) -> pd.DataFrame:
    """A batch as `smolclean apply` sends it: JSONL lines, CSV/TSV records or an Arrow stream of a Parquet
    batch, turned into the frame the exported module's reader makes."""
    return drop_io.decode_batch(kind, data)


def _describe_failure(exc: BaseException) -> dict:
    """Name the exception, its text and the last line of the generated code it passed through."""
    line, text = None, ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == FILENAME:
            line, text = lineno, linecache.getline(FILENAME, lineno).strip()
    if isinstance(exc, SyntaxError) and exc.filename == FILENAME:
        line, text = exc.lineno, (exc.text or "").strip()
    if isinstance(exc, MemoryError):
        kind = "memory"
    elif isinstance(exc, OSError) and exc.errno == 27:  # EFBIG from RLIMIT_FSIZE
        kind = "file_size"
    elif isinstance(exc, PermissionError):
        kind = "blocked"
    else:
        kind = "function"
    return {"ok": False, "kind": kind, "type": type(exc).__name__, "message": _text_of(exc)[:2000],
            "line": line, "source_line": text[:300]}


def _text_of(exc: BaseException) -> str:
    """str(exc), which generated code can make raise."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return "<the exception could not be turned into text>"


if __name__ == "__main__":
    main()
