"""Analysts: they read a chunk and propose cleaning functions (rules offline, or an LLM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import AnalysisRequest, Analyst, Issue, Proposal, RegisteredSummary, Usage

__all__ = ["AnalysisRequest", "Analyst", "Issue", "Proposal", "RegisteredSummary", "Usage", "make_analyst"]

KINDS = ("rules", "llm", "hybrid")


def make_analyst(
    kind: str,
    *,
    model: str | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    cache_dir: Path | str | None = None,
    allow_row_drops: bool = False,
    **options: Any,
) -> Analyst:
    """The analyst for a dataset: "rules" (offline, deterministic), "llm" (any litellm model) or "hybrid"
    (rules first, then the LLM on what they left).

    `options` are the other LLMSettings fields (timeout_s, max_attempts, backoff_s, backoff_max_s,
    max_retry_after_s, rpm, temperature, max_tokens, params); `cache_dir` keeps replies on disk so an
    unchanged re-run makes no calls; `allow_row_drops` tells the model it may drop rows where the
    instructions ask for it (as the loop's setting of the same name allows). Importing this never
    imports litellm; the first call does.

    Example:
        >>> make_analyst("rules").name
        'rules'
        >>> make_analyst("hybrid", model="openai/gpt-4o-mini", cache_dir="work/llm_cache", rpm=30).name
        'hybrid'
    """
    from ..errors import SettingsError

    if kind == "rules":
        from .rules import RulesAnalyst

        return RulesAnalyst()
    if kind not in KINDS:
        raise SettingsError(f"setting 'analyst': {kind!r} is not one of {', '.join(KINDS)}")
    if not model:
        raise SettingsError(
            f"setting 'model' is required for the {kind!r} analyst: set SMOLCLEAN_MODEL or --model to a litellm "
            "model string such as 'openai/gpt-4o-mini'"
        )
    from pydantic import ValidationError

    from .client import LLMClient, LLMSettings
    from .llm import LLMAnalyst

    try:
        settings = LLMSettings(model=model, api_base=api_base, api_key=api_key, cache_dir=cache_dir, **options)
    except ValidationError as exc:
        problems = "; ".join(f"setting {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in exc.errors())
        raise SettingsError(f"invalid LLM settings: {problems}") from exc
    llm = LLMAnalyst(LLMClient(settings), allow_row_drops=allow_row_drops)
    if kind == "llm":
        return llm
    from .hybrid import HybridAnalyst
    from .rules import RulesAnalyst

    return HybridAnalyst(RulesAnalyst(), llm)
