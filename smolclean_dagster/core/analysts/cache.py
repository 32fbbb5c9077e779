"""ResponseCache: LLM replies on disk, keyed by model, parameters and prompt.

Re-materializing with unchanged inputs then makes zero LLM calls: the same chunk, registry and
instructions render the same prompt, whose reply is read back from here. Each entry is one JSON file
holding the request and the reply, so it doubles as the transcript of the call. Files are written
atomically, so concurrent steps and crashes never leave a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ..registry import write_atomic

log = logging.getLogger("smolclean.analysts.cache")


class CachedReply(BaseModel):
    """One stored call: what was asked, what came back, and what it cost the first time."""

    model_config = ConfigDict(frozen=True)

    key: str
    request: dict[str, Any]
    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    created_at: str = ""


class ResponseCache:
    """A folder of cached replies, one `<key>.json` per distinct request.

    Example:
        >>> cache = ResponseCache(Path("work/llm_cache"))                        # doctest: +SKIP
        >>> key = cache.key({"model": "openai/gpt-4o-mini", "messages": [...]})  # doctest: +SKIP
        >>> cache.get(key) is None                                               # doctest: +SKIP
        True
    """

    def __init__(self, root: Path | str):
        self.root = Path(root)

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        """The cache key of a request: a hash of everything that shapes the reply (never the API key)."""
        return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedReply | None:
        """The stored reply for `key`, or None. An unreadable entry counts as missing (and is rewritten)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            entry = CachedReply.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as exc:
            log.warning("ignoring unreadable LLM cache entry %s (%s); the call will be made again", path, exc)
            return None
        return entry if entry.key == key else None

    def put(self, entry: CachedReply) -> Path:
        """Store `entry` atomically and return its file."""
        if not entry.created_at:
            created = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
            entry = entry.model_copy(update={"created_at": created})
        path = self.path(entry.key)
        write_atomic(path, json.dumps(entry.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
        return path
