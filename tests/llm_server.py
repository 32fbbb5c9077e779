"""A small OpenAI-compatible HTTP server for tests: scripted replies and failures, every request recorded.

The LLM path is tested over real HTTP through litellm against this server, so retries, timeouts, status
codes and token counts go through the same code as with a real provider.

Example:
    >>> with ScriptedLLM([reply("<status>clean</status>"), fail(429, retry_after="1"), reply("...")]) as llm:
    ...     llm.api_base   # "http://127.0.0.1:PORT/v1": give it to litellm with model "openai/test-model"
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Action:
    """What the server does with one request: answer (after an optional delay) or fail with a status."""

    text: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None  # a raw body instead of a chat completion (errors, garbage)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cut: str | None = None  # "reset": close the connection without answering; "body": send half the body


def reply(text: str, *, finish_reason: str = "stop", prompt_tokens: int = 100, completion_tokens: int = 20,
          delay_s: float = 0.0) -> Action:
    """A chat completion whose message content is `text`."""
    return Action(text=text, finish_reason=finish_reason, prompt_tokens=prompt_tokens,
                  completion_tokens=completion_tokens, delay_s=delay_s)


def fail(status: int, *, retry_after: str | None = None, message: str = "scripted failure") -> Action:
    """An OpenAI-style error response with `status` (and a Retry-After header when given)."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    body = json.dumps({"error": {"message": message, "type": "scripted", "code": str(status)}})
    return Action(status=status, headers=headers, body=body)


def garbage() -> Action:
    """A 200 response whose body is not JSON at all."""
    return Action(body="<html>upstream proxy hiccup", headers={"Content-Type": "text/html"})


def reset() -> Action:
    """Close the connection (with a TCP reset) without answering: a crashed proxy or server."""
    return Action(cut="reset")


def cut_body(text: str = "<status>clean</status>") -> Action:
    """A 200 chat completion whose body stops halfway (Content-Length promises more): a dropped connection."""
    return Action(text=text, cut="body")


@dataclass(frozen=True)
class Recorded:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict
    at: float

    @property
    def prompt(self) -> str:
        """Every message's content joined: what the model was shown."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


class ScriptedLLM:
    """An OpenAI-compatible server on 127.0.0.1 (random port) serving `script` one action per request.

    When the script is used up it answers 400 "script exhausted", which litellm does not retry, so a test
    that makes more calls than it scripted fails loudly.
    """

    def __init__(self, script: list[Action] | None = None, responder=None):
        self.script: list[Action] = list(script or [])
        # Answers requests once the script is used up: a function of the Recorded request -> Action.
        self.responder = responder
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def add(self, *actions: Action) -> None:
        with self._lock:
            self.script.extend(actions)

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, recorded: Recorded) -> Action:
        with self._lock:
            self.requests.append(recorded)
            if not self.script:
                if self.responder is not None:
                    return self.responder(recorded)
                return fail(400, message="script exhausted: the test made more calls than it scripted")
            return self.script.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                action = server._next(Recorded(self.path, dict(self.headers), body, time.monotonic()))
                if action.delay_s:
                    time.sleep(action.delay_s)
                if action.cut == "reset":
                    # SO_LINGER with a zero timeout: close() sends RST instead of FIN
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                payload = action.body if action.body is not None else json.dumps(_completion(action, body))
                data = payload.encode()
                try:
                    self.send_response(action.status)
                    self.send_header("Content-Type", action.headers.get("Content-Type", "application/json"))
                    for k, v in action.headers.items():
                        if k != "Content-Type":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2] if action.cut == "body" else data)
                    if action.cut == "body":
                        self.wfile.flush()
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a scripted timeout)

        return Handler


def _completion(action: Action, request: dict) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.get("model", "test-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": action.text},
                "finish_reason": action.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": action.prompt_tokens,
            "completion_tokens": action.completion_tokens,
            "total_tokens": action.prompt_tokens + action.completion_tokens,
        },
    }
