"""The model process: a child process that imports litellm while learning starts, and makes the model calls.

Importing litellm and the OpenAI client takes about three seconds of CPU. Imported in the learning process, it
delays the first call by that much whatever else runs beside it, since the import holds Python's lock; imported
in a child process, it runs on another core while the learning process opens its instance and reads the drop.
The child answers one call at a time over a pipe (a line of JSON each way) with litellm's reply, or with what
its error was, so that the learning process decides retries and messages without importing litellm or the
OpenAI client itself (`analysts/client.py`). A process that cannot start, cannot import litellm or dies
is not used again: calls are then made in the learning process, as without it.

This module imports nothing beyond the standard library (nor does `smolclean_dagster.core`), so the child's
time goes to litellm alone; the child's own code is `serve()`.
"""

from __future__ import annotations

import atexit
import email.utils
import json
import logging
import os
import selectors
import subprocess
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any, Callable

log = logging.getLogger("smolclean.analysts.model_process")

#: HTTP statuses worth another attempt: the request was fine, the server was not (yet).
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})

#: Seconds beyond a call's own timeout that the learning process waits for the child's answer before it takes
#: the child for hung (litellm enforces the timeout inside the child).
_GRACE_S = 60.0


class RemoteAPIError(Exception):
    """An error of a call the model process made, as the process described it (the exception itself stays there).

    `api` says whether it was an API error (litellm's and the OpenAI client's); the flags say what kind, as
    `analysts.client` judges an exception raised in the learning process itself."""

    def __init__(self, described: dict[str, Any]):
        self.summary = str(described.get("summary") or "error in the model process")
        super().__init__(self.summary)
        self.status_code = described.get("status")
        self.api = bool(described.get("api"))
        self.transient = bool(described.get("transient"))
        self.authentication = bool(described.get("authentication"))
        self.context_window = bool(described.get("context_window"))
        self.retry_after_s = described.get("retry_after_s")


class ModelProcess:
    """The running child process, for the calls of this process (one at a time: they share its pipe)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price map fetched over the network
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-c", "from smolclean_dagster.core.model_process import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            start_new_session=True,  # a Ctrl-C meant for learning reaches the child as the pipe's end instead
        )
        self._lock = threading.Lock()
        self._ready: bool | None = None  # unknown until the child says so (after its import)
        self.gone = False

    def complete(self, kwargs: dict[str, Any], timeout_s: float,
                 sent: Callable[[], object] | None = None) -> dict[str, Any] | None:
        """litellm's reply to `litellm.completion(**kwargs)` as a dict (text, finish_reason, tokens, cost), or
        None when the process cannot make calls (then the caller makes it itself). Raises RemoteAPIError with
        the call's error. `sent` is called once the request is on its way (the child has imported litellm)."""
        try:
            line = json.dumps({"kwargs": kwargs}) + "\n"
        except (TypeError, ValueError):
            return None  # a parameter only Python holds: the caller makes this call itself
        with self._lock:
            if self.gone:
                return None
            if self._ready is None:
                hello = self._read(timeout_s + _GRACE_S)
                self._ready = bool(hello and hello.get("ready"))
                if not self._ready:
                    self._stop("could not import litellm" + (f": {hello.get('error')}" if hello else ""))
                    return None
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode("utf-8"))
                self._proc.stdin.flush()
            except OSError as exc:
                self._stop(f"its pipe is closed ({exc})")
                return None
            if sent is not None:
                sent()
            reply = self._read(timeout_s + _GRACE_S)
            if reply is None:
                self._stop("it gave no answer")
                return None
        if reply.get("ok"):
            return reply
        raise RemoteAPIError(reply.get("error") or {})

    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        out = self._proc.stdout
        assert out is not None
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                return None
        raw = out.readline()
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _stop(self, why: str) -> None:
        log.debug("the model process is not used any more: %s; calls are made in this process", why)
        self.gone = True
        self.close()

    def close(self) -> None:
        """End the child: it exits when its input ends."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()


_PROCESS: list[ModelProcess] = []
_PROCESS_LOCK = threading.Lock()


def start_model_process() -> None:
    """Start this process's model process, once (later calls do nothing)."""
    with _PROCESS_LOCK:
        if _PROCESS:
            return
        try:
            _PROCESS.append(ModelProcess())
        except OSError as exc:
            log.debug("no model process (%s); calls are made in this process", exc)
            return
    atexit.register(_PROCESS[0].close)


def model_process() -> ModelProcess | None:
    """This process's model process, when one was started and still makes calls."""
    with _PROCESS_LOCK:
        return _PROCESS[0] if _PROCESS and not _PROCESS[0].gone else None


# ----------------------------------------------------------------------------------------- the child's side

def serve() -> None:
    """The child: import litellm, say ready, then answer each request line until the input ends."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # whatever litellm prints never enters the channel
    logging.disable(logging.CRITICAL)  # litellm logs through the learning process's own messages instead
    try:
        import litellm
        import openai
        import openai.resources  # noqa: F401  (the client imports its resources on the first call)
    except Exception as exc:  # noqa: BLE001  (any failure: the learning process makes its calls itself)
        _send(channel, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    litellm.suppress_debug_info = True
    _send(channel, {"ready": True})
    for line in sys.stdin:
        kwargs = json.loads(line)["kwargs"]
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001  (described to the learning process, which decides)
            _send(channel, {"ok": False, "error": describe(exc, litellm, openai)})
            continue
        _send(channel, reply_of(litellm, response))


def reply_of(litellm: Any, response: Any) -> dict[str, Any]:
    """What a call's caller reads of litellm's response: the text, why it ended, the tokens and the cost."""
    choice = response.choices[0]
    counts = getattr(response, "usage", None)
    return {
        "ok": True, "text": choice.message.content or "", "finish_reason": choice.finish_reason,
        "prompt_tokens": int(getattr(counts, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(counts, "completion_tokens", 0) or 0),
        "cost_usd": cost_of(litellm, response),
    }


def _send(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def describe(exc: BaseException, litellm: Any, openai: Any) -> dict[str, Any]:
    """What the learning process needs to know of a call's error (see RemoteAPIError)."""
    return {
        "summary": summary(exc), "status": getattr(exc, "status_code", None),
        "api": isinstance(exc, openai.OpenAIError), "transient": transient_error(exc, openai),
        "authentication": isinstance(exc, openai.AuthenticationError),
        "context_window": isinstance(exc, litellm.ContextWindowExceededError), "retry_after_s": retry_after(exc),
    }


def transient_error(exc: BaseException, openai: Any) -> bool:
    """Whether another attempt may succeed after `exc` (an exception of this process): timeouts, lost
    connections, 429 and 5xx."""
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError)):
        return True
    return isinstance(exc, openai.OpenAIError) and getattr(exc, "status_code", None) in TRANSIENT_STATUSES


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms` or `Retry-After`, seconds or an HTTP date)."""
    if isinstance(exc, RemoteAPIError):
        return exc.retry_after_s
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return None


def cost_of(litellm: Any, response: Any) -> float:
    """The call's cost in USD when litellm knows the model's price, else 0."""
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # litellm raises assorted types (ModelNotMappedError, ValueError...) for unpriced models
        return 0.0


def summary(exc: BaseException | None) -> str:
    """The error in one line: its type, status and message (cut at 300 characters)."""
    if exc is None:
        return "no error"
    if isinstance(exc, RemoteAPIError):
        return exc.summary
    status = getattr(exc, "status_code", None)
    message = " ".join(str(getattr(exc, "message", None) or exc).split())
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{type(exc).__name__}" + (f" {status}" if status else "") + f": {message}"
