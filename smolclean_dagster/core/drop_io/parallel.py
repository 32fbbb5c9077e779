"""A drop cleaned batch by batch on every core: `clean_file`, the runner of the exported module's `__main__`.

This process cuts the drop into blocks and appends the output's bytes in the input's order; processes forked
from it parse, clean and encode the batches side by side. Memory stays bounded by a batch or two per process.
"""

import contextlib
import functools
import os
import re
import time

from .blocks import BATCH_ROWS, encoded_batches
from .formats import JsonlError, decode_batch
from .output_files import check_output, remove_stale_temporaries
from .writers import BatchWriter, encode_batch


def clean_file(clean, source, destination, batch_rows=BATCH_ROWS, workers=None, counts=None):
    """Clean `source` batch by batch with `clean(df)` and write `destination`; returns (rows in, rows out).

    `workers` processes (default: one per core) clean batches side by side: this one and `workers - 1`
    forked from it, so each has `clean` as this process has it. A forked process parses its batch, cleans
    it and writes it as the output file's bytes; this process reads the drop, cleans a batch itself
    whenever the forked ones are all busy, and appends the bytes in the input's order. Where processes
    cannot be forked (Windows), or with one worker, every batch is cleaned here.

    `counts`: (groups, drop_counts, add_counts) when the module's functions read the whole drop: the drop is
    read once first and counted, and every batch is cleaned with `clean(df, drop=the counts)`, so a row's
    result never depends on the batch it is in (core/drop_counts.py).

    The output may not be the input (OutputIsInput, before anything is read or written). It is written
    under a temporary name beside it and renamed, synced to disk, when every batch is done; the temporary
    files that killed runs left in its folder are removed first.
    """
    import multiprocessing
    from collections import deque

    check_output(source, destination)
    remove_stale_temporaries(os.path.dirname(os.fspath(destination)))
    writer = BatchWriter(destination)
    workers = max(1, workers or _cores()) if "fork" in multiprocessing.get_all_start_methods() else 1
    if counts:
        groups, count, add = counts
        tables = {}
        for kind, data, numbers in encoded_batches(source, batch_rows):
            try:
                frame = decode_batch(kind, data)
            except ValueError as exc:  # JsonlError too
                raise _located(exc, numbers) from None
            add(tables, count(frame, groups))
            del frame, data
        clean = functools.partial(clean, drop=tables)
    _WORK[:] = [clean, writer.kind]  # what the forked workers clean with
    return_freed_buffers()  # before forking: the workers inherit it
    pool = _Workers(workers - 1) if workers > 1 else None  # forked before any reading
    rows_in = rows_out = 0

    def write(result, numbers):
        nonlocal rows_in, rows_out
        try:
            data, header_bytes, columns, batch_in, batch_out = result.get()
        except ValueError as exc:  # JsonlError too
            raise _located(exc, numbers) from None
        writer.write_encoded(data, header_bytes, columns)
        rows_in, rows_out = rows_in + batch_in, rows_out + batch_out

    finished = False
    try:
        pending = deque()  # (result, line numbers) in input order
        for kind, data, numbers in encoded_batches(source, batch_rows):
            while pending and pending[0][0].ready():
                write(*pending.popleft())
            # The forked processes keep one batch queued behind each running one, so they never wait while
            # this process cleans; when they have that much, this process cleans the batch itself.
            if pool and sum(not r.ready() for r, _ in pending) < 2 * pool.size:
                pending.append((pool.submit(kind, data), numbers))
            else:
                pending.append((_Done(_clean_encoded, kind, data), numbers))
            del data  # not held while the next batch is read
            while len(pending) > workers + 1:  # memory stays bounded: a batch or two per process
                write(*pending.popleft())
        while pending:
            write(*pending.popleft())
        writer.close()
        finished = True
    except BaseException:
        writer.abort()
        raise
    finally:
        if pool:
            pool.stop(grace_s=10.0 if finished else 1.0)  # after a failure, what they clean is thrown away
    return rows_in, rows_out


def _located(exc, numbers):
    """A batch's reading error naming the file's line (`numbers`: the batch's lines in the file)."""
    if isinstance(exc, JsonlError):
        where = f"line {numbers[exc.index]}" if numbers and exc.index is not None else "a line"
        return ValueError(f"{where} {exc}")
    row = re.search(r"\bRow #(\d+)", str(exc))  # the CSV reader counts a block's rows from its header
    if not numbers or not row or not 2 <= int(row[1]) < len(numbers) + 2:
        return exc
    return ValueError(str(exc).replace(row[0], f"line {numbers[int(row[1]) - 2]}"))


class _Workers:
    """Processes forked from this one that clean batches (`_clean_encoded`) taken from one queue, each
    answering on its own pipe; a thread of this process takes the answers as they come, so a worker never
    waits for this one to read.

    They are stopped without signals the caller may have ignored (a shell's background job ignores
    SIGINT, and what runs it may ignore SIGTERM too): each is told to finish, and one still running at
    the deadline is killed with SIGKILL. A worker also dies with this process (Linux), never left behind.
    """

    def __init__(self, size):
        import multiprocessing
        import threading

        context = multiprocessing.get_context("fork")
        self.size = size
        self._tasks = context.Queue()  # sent by a thread: handing over a batch never waits for a busy worker
        self._sent, self._answers, self._died, self._stopping = 0, {}, None, False
        self._arrived = threading.Condition()
        self._processes, self._replies = [], []
        for _ in range(size):
            reader, writer = context.Pipe(duplex=False)
            process = context.Process(target=_serve, args=(self._tasks, writer), daemon=True)
            process.start()
            writer.close()
            self._processes.append(process)
            self._replies.append(reader)
        self._receiver = threading.Thread(target=self._receive, name="smolclean-answers", daemon=True)
        self._receiver.start()

    def submit(self, kind, data):
        """Queue a batch; returns its result (`ready`, `get`)."""
        self._sent += 1
        self._tasks.put((self._sent, kind, data))
        return _Queued(self, self._sent)

    def _receive(self):
        from multiprocessing.connection import wait

        open_replies = list(self._replies)
        while open_replies:
            for reply in wait(open_replies):
                try:
                    number, ok, value = reply.recv()
                except (EOFError, OSError):  # the worker ended: told to, or killed
                    open_replies.remove(reply)
                    process = self._processes[self._replies.index(reply)]
                    process.join(5)
                    with self._arrived:
                        if not self._stopping and self._died is None:
                            self._died = process
                        self._arrived.notify_all()
                    continue
                with self._arrived:
                    self._answers[number] = (ok, value)
                    self._arrived.notify_all()

    def answer(self, number, block):
        """The answer for batch `number` as (ok, value), or None when not there yet and not `block`ing."""
        with self._arrived:
            while number not in self._answers:
                if self._died is not None:
                    raise RuntimeError(f"a worker process cleaning batches ended (exit code {self._died.exitcode}); "
                                       "was it killed for lack of memory? Try fewer workers or smaller batches")
                if not block:
                    return None
                self._arrived.wait()
            return self._answers.pop(number) if block else self._answers[number]

    def stop(self, grace_s):
        """Tell every worker to finish, and kill (SIGKILL) those still running after `grace_s` seconds."""
        with self._arrived:
            self._stopping = True
        for _ in self._processes:
            self._tasks.put(None)
        deadline = time.monotonic() + grace_s
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.exitcode is None:
                process.kill()
                process.join()
        self._receiver.join()  # every worker gone: every pipe at its end
        for reply in self._replies:
            reply.close()
        self._tasks.cancel_join_thread()  # batches no worker took are dropped, not waited for at exit
        self._tasks.close()


class _Queued:
    """A batch handed to the forked workers; answers like `_Done`."""

    def __init__(self, workers, number):
        self.workers, self.number = workers, number

    def ready(self):
        return self.workers.answer(self.number, block=False) is not None

    def get(self):
        ok, value = self.workers.answer(self.number, block=True)
        if not ok:
            raise value
        return value


def _serve(tasks, reply):
    """A forked worker: clean the batches of the queue until told to finish (None)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the process that forked this one, which stops it
    with contextlib.suppress(Exception):  # Linux: killed when that process dies, however it dies
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    while True:
        task = tasks.get()
        if task is None:
            return
        number, kind, data = task
        try:
            answer = (number, True, _clean_encoded(kind, data))
        except Exception as exc:  # noqa: BLE001  (raised again where the batch is written, in order)
            answer = (number, False, exc)
        try:
            reply.send(answer)
        except Exception:  # noqa: BLE001  (an error that cannot be pickled: sent as its text)
            reply.send((number, False, RuntimeError(f"{type(answer[2]).__name__}: {answer[2]}")))


class _Done:
    """A batch this process cleaned itself, answering like the forked workers' results (`ready`, `get`)."""

    def __init__(self, function, *args):
        try:
            self.value, self.error = function(*args), None
        except Exception as exc:  # noqa: BLE001  (raised again where the batch is written, in order)
            self.value, self.error = None, exc

    def ready(self):
        return True

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


_WORK = []  # [clean, output kind] for `_clean_encoded`, set before the workers are forked


def _clean_encoded(kind, data):
    """One batch in a worker: parse it, clean it, and write it as the output file's bytes."""
    clean, output = _WORK
    frame = decode_batch(kind, data)
    cleaned = clean(frame)
    return (*encode_batch(cleaned, output), len(frame), len(cleaned))


def return_freed_buffers():
    """Have the C library give every freed buffer of 128 KiB or more straight back to the system.

    glibc raises that threshold each time such a buffer is freed, so the bytes of a batch, once freed,
    stay in the heap for reuse, and a process cleaning batch after batch holds the peak of several batches
    rather than one (about 20 MB more per process here). Where the C library has no `mallopt` (macOS,
    Windows) this does nothing.
    """
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD, fixed: no longer raised
    except Exception:  # noqa: BLE001  (another C library: its own defaults stand)
        pass


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
