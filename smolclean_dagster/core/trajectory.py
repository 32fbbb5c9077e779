"""What one learning run cost and did, in numbers: calls, tokens, cost, time, steps, rejections, items, cells.

Gathered from the chunk traces the run stored (every step's usage and verdict is there already), the
registry's instruction coverage and the validation, so runs can be compared across materializations.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from .instructions import ItemState
from .steps import ChunkTrace, ProposalStep, VerdictStep

#: Rejection reasons grouped by what they say (first match wins); anything else is "other".
_REASONS = (
    ("too slow", r"^too slow|per row"),
    ("not deterministic", r"^not deterministic"),
    ("not idempotent", r"^not idempotent"),
    ("made nulls", r"into null"),
    ("rows or columns lost", r"^changed the number of rows|^removed column"),
    ("changes nothing", r"^made no change"),
    ("duplicate", r"already has a function|is already defined"),
    ("error", r"^\w+(Error|Exception)\b"),
)


class LearningMetrics(BaseModel):
    """One learning run in numbers (the UI plots them across materializations).

    Example:
        >>> LearningMetrics(accepted=2, steps=6).steps_per_accepted
        3.0
    """

    model_config = ConfigDict(frozen=True)

    chunks: int = 0
    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = Field(default=0.0, description="wall time of the learning run, first run start to export")
    steps: int = 0
    accepted: int = 0
    rejections: dict[str, int] = Field(default_factory=dict, description="rejected proposals by kind of reason")
    unusable_replies: int = 0
    items_served: int = 0
    items_declined: int = 0
    items_open: int = 0
    cells_changed: int = Field(default=0, description="cells the module changed on held-out rows")
    prompts: dict[str, str] = Field(default_factory=dict, description="prompt template versions the run used")

    @property
    def steps_per_accepted(self) -> float:
        return round(self.steps / self.accepted, 2) if self.accepted else float(self.steps)

    def numbers(self) -> dict[str, float | int]:
        """Every figure by a flat name, rejections as `rejected_<kind>`."""
        out: dict[str, float | int] = {
            "chunks": self.chunks, "llm_calls": self.calls, "llm_cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6), "wall_seconds": round(self.seconds, 2), "steps": self.steps,
            "accepted": self.accepted, "steps_per_accepted": self.steps_per_accepted,
            "rejected": sum(self.rejections.values()), "unusable_replies": self.unusable_replies,
            "items_served": self.items_served, "items_declined": self.items_declined, "items_open": self.items_open,
            "cells_changed": self.cells_changed,
        }
        out.update({f"rejected_{_slug(k)}": v for k, v in sorted(self.rejections.items())})
        return out

    def line(self) -> str:
        """The figures on one line, for a terminal."""
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(self.rejections.items())) or "none"
        prompts = ", ".join(f"{k} v{v}" for k, v in sorted(self.prompts.items())) or "-"
        return (f"{self.calls} call(s), {self.prompt_tokens}/{self.completion_tokens} tokens, ${self.cost_usd:.4f}, "
                f"{self.seconds:.1f}s, {self.steps} step(s) for {self.accepted} accepted "
                f"({self.steps_per_accepted} per function), rejected: {rejected}, items served "
                f"{self.items_served}/declined {self.items_declined}, {self.cells_changed} cells changed; "
                f"prompts {prompts}")


def learning_metrics(traces: Sequence[ChunkTrace], states: Sequence[ItemState] = (), *, cells_changed: int = 0,
                     seconds: float = 0.0, prompts: dict[str, str] | None = None) -> LearningMetrics:
    """The figures of a learning run from its chunks' traces and the instruction items as it left them."""
    calls = cached = tokens_in = tokens_out = steps = accepted = unusable = 0
    cost = 0.0
    reasons: Counter[str] = Counter()
    for trace in traces:
        for s in trace.steps:
            if isinstance(s, ProposalStep):
                steps += 1
                calls += s.usage.calls
                cached += s.usage.cached_calls
                tokens_in += s.usage.prompt_tokens
                tokens_out += s.usage.completion_tokens
                cost += s.usage.cost_usd
                unusable += s.error is not None
            elif isinstance(s, VerdictStep):
                if s.accepted:
                    accepted += 1
                else:
                    reasons[rejection_kind(s.reason)] += 1
    return LearningMetrics(
        chunks=len(traces), calls=calls, cached_calls=cached, prompt_tokens=tokens_in, completion_tokens=tokens_out,
        cost_usd=round(cost, 6), seconds=round(seconds, 2), steps=steps, accepted=accepted, rejections=dict(reasons),
        unusable_replies=unusable, items_served=sum(1 for s in states if s.state == "served"),
        items_declined=sum(1 for s in states if s.state == "declined"),
        items_open=sum(1 for s in states if s.state == "open"), cells_changed=cells_changed, prompts=prompts or {},
    )


def rejection_kind(reason: str) -> str:
    """A rejection reason's kind, for counting (`too slow`, `not idempotent`, ...)."""
    for kind, pattern in _REASONS:
        if re.search(pattern, reason, flags=re.IGNORECASE):
            return kind
    return "other"


def _slug(text: str) -> str:
    return re.sub(r"\W+", "_", text).strip("_")
