"""LLMClient: one chat completion through litellm, with retries, a rate limit, usage accounting and a cache.

litellm reaches every provider with one call. It takes seconds to import, so a learning run has it imported in
its model process (`core/model_process.py`, started when learning starts), which then makes the calls; a
process without one imports it on its first call. Either way `LITELLM_LOCAL_MODEL_COST_MAP=True` is set
first unless the user chose otherwise, so importing it never fetches a price map over the network. Retries
are tenacity's (litellm's own `num_retries` needs tenacity anyway and does not tell us how many attempts it
made), and litellm's and the OpenAI SDK's hidden retries are switched off so that every attempt is ours and
counted.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..errors import AnalystError
from ..model_process import RemoteAPIError, model_process, reply_of, retry_after, start_model_process, summary, \
    transient_error
from .base import Usage
from .cache import CachedReply, ResponseCache

log = logging.getLogger("smolclean.analysts.client")

#: Chat messages as litellm takes them: [{"role": "system" | "user", "content": "..."}].
Messages = list[dict[str, str]]


class LLMSettings(BaseModel):
    """How to reach the model and how patiently.

    `model` is any litellm model string ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest",
    "ollama/qwen2.5-coder"); `api_base` points at an OpenAI-compatible server when there is one. Failed
    calls are retried (timeouts, 429, 5xx, lost connections) up to `max_attempts` attempts in all, waiting
    `backoff_s`, then twice as long each time plus up to `backoff_s` of jitter, at most `backoff_max_s`;
    a 429's Retry-After is honoured (up to `max_retry_after_s`). `rpm` spaces requests at least 60/rpm
    seconds apart in this process. With `cache_dir`, replies are kept on disk and an identical request
    is answered from there without a call.

    Example:
        >>> LLMSettings(model="openai/gpt-4o-mini", rpm=30, cache_dir="work/llm_cache").timeout_s
        120.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="litellm model string, e.g. 'openai/gpt-4o-mini'")
    api_base: str | None = Field(default=None, description="base URL of the API, e.g. http://127.0.0.1:8000/v1")
    api_key: str | None = Field(default=None, repr=False, description="API key; never cached, logged or stored")
    timeout_s: float = Field(default=120.0, gt=0, description="seconds one request may take")
    max_attempts: int = Field(default=5, ge=1, le=20, description="attempts per call, the first one included")
    backoff_s: float = Field(default=1.0, ge=0, description="first wait before a retry; doubles each time")
    backoff_max_s: float = Field(default=30.0, ge=0, description="longest wait between two attempts")
    max_retry_after_s: float = Field(default=120.0, ge=0, description="longest Retry-After wait honoured")
    rpm: float | None = Field(default=None, gt=0, description="requests per minute at most; None = no limit")
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=8192, gt=0, description="longest reply, in tokens (a reply may send several functions)")
    params: dict[str, Any] = Field(default_factory=dict, description="more litellm parameters (top_p, seed...)")
    cache_dir: Path | None = Field(default=None, description="folder of cached replies; None = no cache")

    @field_validator("api_base")
    @classmethod
    def _api_base_is_a_url(cls, v: str | None) -> str | None:
        return check_api_base(v)


def check_api_base(url: str | None) -> str | None:
    """`url` if it is an http(s) URL with a host (an API base), else ValueError saying what one looks like.

    Example:
        >>> check_api_base("localhost:8000/v1")
        Traceback (most recent call last):
        ...
        ValueError: 'localhost:8000/v1' is not an http(s) URL; write it like http://127.0.0.1:8000/v1
    """
    from urllib.parse import urlsplit

    if url is None:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL; write it like http://127.0.0.1:8000/v1")
    return url.strip()


@dataclass(frozen=True)
class Completion:
    """The model's reply to one request, what it cost, and where its transcript is (cache file), if kept."""

    text: str
    finish_reason: str | None
    usage: Usage
    transcript: Path | None = None


class RateLimiter:
    """Spaces request starts at least 60/rpm seconds apart, across the threads of this process.

    A dozen lines on a monotonic clock do this; a rate-limiting library would be a dependency for no
    more. Smooth spacing (no bursts) is also what providers' per-minute limits tolerate best.
    """

    def __init__(self, rpm: float):
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


_limiters: dict[tuple[str, str | None, float], RateLimiter] = {}
_limiters_lock = threading.Lock()


def _limiter(settings: LLMSettings) -> RateLimiter | None:
    """One limiter per model, server and rate in this process, shared by every client using them."""
    if settings.rpm is None:
        return None
    key = (settings.model, settings.api_base, settings.rpm)
    with _limiters_lock:
        return _limiters.setdefault(key, RateLimiter(settings.rpm))


#: Set while this process waits for a model's reply, from the request's sending on (not while litellm is
#: imported, nor for a cached reply): background start-up work runs then, when the cores are idle
#: (`learning.embedded`).
AWAITING_REPLY = threading.Event()


class LLMClient:
    """Chat completions from one model, through litellm.

    Example:
        >>> client = LLMClient(LLMSettings(model="openai/gpt-4o-mini", cache_dir="work/llm_cache"))  # doctest: +SKIP
        >>> reply = client.complete([{"role": "user", "content": "Say hi"}])                          # doctest: +SKIP
        >>> reply.text, reply.usage.calls, reply.usage.prompt_tokens                                  # doctest: +SKIP
        ('Hi!', 1, 9)
    """

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.cache = ResponseCache(settings.cache_dir) if settings.cache_dir is not None else None
        self._limiter = _limiter(settings)
        prefetch_litellm()

    def complete(self, messages: Messages) -> Completion:
        """The model's reply to `messages`: from the cache when this exact request was made before.

        Raises AnalystError when the model cannot be used: a refused key or an invalid request (not
        retried), or a server still failing after `max_attempts` attempts. Those are not the model's
        fault and would fail the same way at every step.
        """
        s = self.settings
        request = {"model": s.model, "params": self._params(), "messages": messages}
        key = ResponseCache.key(request)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            log.debug("LLM reply for %s served from the cache (%s)", s.model, key[:12])
            return Completion(hit.text, hit.finish_reason, Usage(cached_calls=1), self.cache.path(key))
        process = model_process()  # makes the call when learning started one, else litellm is imported here
        attempts = 0
        started = time.perf_counter()
        kwargs = dict(model=s.model, messages=messages, api_base=s.api_base, api_key=s.api_key, timeout=s.timeout_s,
                      max_retries=0, num_retries=0, drop_params=True, **self._params())

        def attempt() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            if self._limiter is not None:
                self._limiter.wait()
            if process is not None and (reply := process.complete(kwargs, s.timeout_s, sent=AWAITING_REPLY.set)):
                return reply
            litellm = import_litellm()
            AWAITING_REPLY.set()
            return reply_of(litellm, litellm.completion(**kwargs))

        try:
            reply = self._retrying()(attempt)
        except Exception as exc:
            error = self._error(exc, attempts)
            if error is exc:
                raise
            raise error from exc
        finally:
            AWAITING_REPLY.clear()
        latency = time.perf_counter() - started  # what the step waited: retries and backoff included
        text, finish_reason = reply["text"], reply["finish_reason"]
        prompt_tokens, completion_tokens, cost = reply["prompt_tokens"], reply["completion_tokens"], reply["cost_usd"]
        usage = Usage(
            calls=1, attempts=attempts, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cost_usd=cost, latency_s=round(latency, 4),
        )
        log.info(
            "LLM call to %s: %d+%d tokens, %.2f s, %d attempt(s)", s.model, prompt_tokens, completion_tokens,
            latency, attempts,
        )
        transcript = None
        if self.cache is not None:
            transcript = self.cache.put(CachedReply(
                key=key, request=request, text=text, finish_reason=finish_reason,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost,
            ))
        return Completion(text, finish_reason, usage, transcript)

    def _params(self) -> dict[str, Any]:
        """The parameters that shape the reply (part of the cache key)."""
        return {"temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens, **self.settings.params}

    def _retrying(self) -> Any:
        import tenacity

        s = self.settings
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(s.max_attempts),
            wait=_WaitRetryAfter(
                tenacity.wait_exponential(multiplier=s.backoff_s, max=s.backoff_max_s)
                + tenacity.wait_random(0, s.backoff_s),
                cap=s.max_retry_after_s,
            ),
            retry=tenacity.retry_if_exception(is_transient),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _log_retry(self, state: Any) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "LLM call to %s failed (%s); attempt %d of %d, next in %.2f s", self.settings.model,
            summary(exc), state.attempt_number, self.settings.max_attempts, state.next_action.sleep,
        )

    def _error(self, exc: Exception, attempts: int) -> Exception:
        """The AnalystError telling the user what to check, or `exc` itself when it is not an API error."""
        if isinstance(exc, RemoteAPIError):  # raised in the model process, described here
            if not exc.api:
                return exc  # our own bug: raise it as it is
            authentication, context_window = exc.authentication, exc.context_window
        else:
            import openai  # installed with litellm, whose exceptions derive from openai's

            if not isinstance(exc, openai.OpenAIError):
                return exc  # our own bug: raise it as it is
            authentication = isinstance(exc, openai.AuthenticationError)
            context_window = isinstance(exc, import_litellm().ContextWindowExceededError)
        s = self.settings
        where = f"model {s.model!r}" + (f" at {s.api_base}" if s.api_base else "")
        status = getattr(exc, "status_code", None)
        said = summary(exc)
        if is_transient(exc):
            return AnalystError(
                f"the LLM call to {where} failed {attempts} time(s), last with {said}; check that the server is "
                "up and reachable at the setting 'api_base' (SMOLCLEAN_API_BASE, --api-base), or allow more with "
                "the settings 'llm_max_attempts' / 'llm_timeout_s'"
            )
        if status == 401 or authentication:
            return AnalystError(
                f"the LLM server refused the API key for {where} ({said}); check the setting 'api_key' "
                "(SMOLCLEAN_API_KEY, --api-key)"
            )
        if status == 403:
            return AnalystError(f"the API key may not use {where} ({said}); check the key's permissions")
        if status == 404:
            return AnalystError(
                f"{where} was not found ({said}); check the setting 'model' (SMOLCLEAN_MODEL, --model: a litellm "
                "model string such as 'openai/gpt-4o-mini') and the setting 'api_base' (SMOLCLEAN_API_BASE, "
                "--api-base: OpenAI-compatible servers usually end in /v1)"
            )
        if "llm provider not provided" in said.lower():
            return AnalystError(
                f"the setting 'model' ({s.model!r}, SMOLCLEAN_MODEL, --model) names no provider litellm knows; "
                "write it as PROVIDER/MODEL, e.g. 'openai/gpt-4o-mini' (also for OpenAI-compatible servers)"
            )
        if context_window:
            return AnalystError(
                f"the prompt is too long for {where} ({said}); lower the dataset's chunk_size"
            )
        return AnalystError(
            f"the LLM server rejected the request to {where} ({said}); check the settings 'model' (SMOLCLEAN_MODEL), "
            "'api_base' (SMOLCLEAN_API_BASE) and the LLM parameters"
        )


def use_local_price_map() -> None:
    """Make litellm read its bundled price map instead of fetching one over the network when it is imported
    (unless the user chose otherwise); call before anything imports litellm."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def prefetch_litellm() -> None:
    """Have litellm imported for this process's calls while it does other work: in its model process, started
    here once (`core/model_process.py`). A process that already imported litellm (a chunk worker forked with it
    loaded) makes its calls itself."""
    if "litellm" in sys.modules:
        return
    use_local_price_map()
    start_model_process()


def import_litellm() -> Any:
    """litellm, imported on first use with the local price map (no network fetch at import)."""
    use_local_price_map()
    try:
        import litellm
    except ImportError as exc:
        raise AnalystError(
            "the LLM analyst needs litellm and tenacity: pip install 'smolclean-dagster[llm]'"
        ) from exc
    litellm.suppress_debug_info = True
    return litellm


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: timeouts, lost connections, 429 and 5xx."""
    if isinstance(exc, RemoteAPIError):
        return exc.transient
    import openai

    return transient_error(exc, openai)


class _WaitRetryAfter:
    """Wait what the server asked for in Retry-After (capped), else `fallback` (exponential with jitter)."""

    def __init__(self, fallback: Any, cap: float):
        self.fallback, self.cap = fallback, cap

    def __call__(self, state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = retry_after(exc) if exc is not None else None
        return min(after, self.cap) if after is not None else self.fallback(state)
