"""Typed records of the agent loop: one model per kind of step, streamed by the loop and rendered by callers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .analysts.base import Issue, ItemDecline, Usage
from .instructions import ItemState
from .registry import Evidence


class ProposalStep(BaseModel):
    """The analyst looked at the chunk (as cleaned so far) and answered."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["proposal"] = "proposal"
    step: int
    findings: int = Field(description="detector findings on the chunk as cleaned so far")
    issues: tuple[Issue, ...] = ()
    status: str
    function_name: str | None = None
    code: str | None = None
    adopted: str | None = Field(default=None, description="the ready-made candidate the model adopted, if it did")
    query: str | None = Field(default=None, description="the read-only query the model asked of the drop")
    query_result: str | None = Field(default=None, description="its answer as the model read it (or the error)")
    serves: tuple[int, ...] = Field(default=(), description="instruction items the reply says the function serves")
    declines: tuple[ItemDecline, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    reply_hash: str | None = Field(default=None, description="hash of the model's raw reply: what varies between runs")
    error: str | None = Field(default=None, description="why the analyst's reply could not be used")
    transcript: str | None = Field(default=None, description="file with the request and the raw reply")
    seconds: float = 0.0


class VerdictStep(BaseModel):
    """A proposed function was checked: accepted into the registry or rejected with a reason."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["verdict"] = "verdict"
    step: int
    function_name: str
    accepted: bool
    reason: str
    evidence: Evidence | None = None
    serves: tuple[int, ...] = Field(default=(), description="instruction items an accepted function serves")
    seconds: float = 0.0


class FinalStep(BaseModel):
    """The chunk is finished, and why."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["final"] = "final"
    step: int
    reason: Literal["clean", "no_findings", "max_steps", "token_budget"]
    accepted: tuple[str, ...] = ()
    residual_findings: int = 0
    items: tuple[ItemState, ...] = Field(default=(), description="the instruction items as the chunk left them")


Step = ProposalStep | VerdictStep | FinalStep


class ChunkTrace(BaseModel):
    """Everything that happened to one chunk: what the Dagster layer stores and renders."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    drop: str
    chunk_id: str
    rows: int
    steps: tuple[Step, ...] = ()

    @property
    def accepted(self) -> list[str]:
        return [s.function_name for s in self.steps if isinstance(s, VerdictStep) and s.accepted]

    @property
    def steps_taken(self) -> int:
        """Analyst steps (proposals) this chunk took: what it spent of the drop's step budget."""
        return sum(1 for s in self.steps if isinstance(s, ProposalStep))

    @property
    def tokens_used(self) -> int:
        """Model tokens (prompt and reply) this chunk's steps took, replies from the cache included, so a re-run
        plans as the first run did: what it spent of the drop's token budget."""
        return sum(s.usage.prompt_tokens + s.usage.completion_tokens for s in self.steps if isinstance(s, ProposalStep))

    @property
    def items(self) -> tuple:
        """The instruction items as this chunk left them (empty when the analyst does not read them)."""
        final = next((s for s in reversed(self.steps) if isinstance(s, FinalStep)), None)
        return final.items if final is not None else ()

    @property
    def usage(self) -> Usage:
        total = Usage()
        for s in self.steps:
            if isinstance(s, ProposalStep):
                total = total.plus(s.usage)
        return total
