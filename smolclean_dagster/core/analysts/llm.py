"""LLMAnalyst: one model call per step of the agent loop, through any litellm model.

The model sees the chunk as cleaned so far, its profile and findings, the user's instructions and every
registered function (prompts.py), and answers in the reply format (replies.py). A reply it cannot use
is the model's fault: it comes back as a Proposal with no function and an `error`, which the loop shows
the model in the next step (and which uses up a step). A server or key that cannot be used is ours or
the configuration's: the client raises AnalystError.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..functions import CleaningFunction
from .base import AnalysisRequest, Proposal, Usage
from .client import Completion, LLMClient
from .prompts import REGISTRY_BUDGET, ROWS_BUDGET, analysis_messages, merge_messages, prompt_hash
from .replies import ReplyError, parse_analysis_reply, parse_merge_reply, reply_hash

log = logging.getLogger("smolclean.analysts.llm")


@dataclass(frozen=True)
class MergeProposal:
    """The model's answer to "merge these functions": one function, None to keep them apart, or an error."""

    function: CleaningFunction | None
    model: str
    prompt_hash: str
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    transcript: str | None = None


class LLMAnalyst:
    """The analyst that asks a model: one call per step, any litellm model.

    It never trusts the detectors to say a chunk is clean (`trusts_detectors = False`): the user's
    instructions may ask for what no detector sees, so the model is asked at least once per chunk.

    Example:
        >>> from smolclean_dagster.core.analysts.client import LLMClient, LLMSettings
        >>> analyst = LLMAnalyst(LLMClient(LLMSettings(model="openai/gpt-4o-mini", cache_dir="work/llm_cache")))
        >>> for step in run_chunk(work, analyst, store, sandbox):   # doctest: +SKIP
        ...     print(step.kind)
    """

    name = "llm"
    trusts_detectors = False
    reads_instructions = True

    def __init__(
        self,
        client: LLMClient,
        *,
        allow_row_drops: bool = False,
        registry_budget: int = REGISTRY_BUDGET,
        rows_budget: int = ROWS_BUDGET,
    ):
        self.client = client
        self.allow_row_drops = allow_row_drops
        self.registry_budget = registry_budget
        self.rows_budget = rows_budget

    @property
    def model(self) -> str:
        return self.client.settings.model

    def propose(self, request: AnalysisRequest) -> Proposal:
        """Ask the model for the issues it sees and its functions; a bad reply becomes an `error`."""
        messages = analysis_messages(
            request, allow_row_drops=self.allow_row_drops, registry_budget=self.registry_budget,
            rows_budget=self.rows_budget,
        )
        digest = prompt_hash(messages)
        completion = self.client.complete(messages)
        context = {
            "model": self.model, "prompt_hash": digest, "reply_hash": reply_hash(completion.text),
            "usage": completion.usage,
            "transcript": str(completion.transcript) if completion.transcript else None,
        }
        try:
            reply = parse_analysis_reply(completion.text, columns=[str(c) for c in request.chunk.columns])
        except ReplyError as exc:
            error = self._explain(exc, completion)
            log.info("chunk %s step %d: unusable reply from %s: %s", request.chunk_id, request.step, self.model, error)
            return Proposal(status="needs_more_work", error=error, **context)
        return Proposal(
            issues=reply.issues, function=reply.function, status=reply.status, serves=reply.serves,
            declines=reply.declines, adopt=reply.adopt, query=reply.query, plan=reply.plan, more=reply.more,
            adopted=reply.adopted,
            **context,
        )

    def merge(self, dataset: str, functions: Sequence[CleaningFunction], instructions: str = "") -> MergeProposal:
        """Ask the model to merge `functions` (in module order) into one; the caller validates the result."""
        messages = merge_messages(dataset, functions, instructions)
        digest = prompt_hash(messages)
        completion = self.client.complete(messages)
        transcript = str(completion.transcript) if completion.transcript else None
        try:
            function = parse_merge_reply(completion.text)
        except ReplyError as exc:
            return MergeProposal(None, self.model, digest, completion.usage, self._explain(exc, completion), transcript)
        return MergeProposal(function, self.model, digest, completion.usage, None, transcript)

    def _explain(self, exc: ReplyError, completion: Completion) -> str:
        """The feedback for an unusable reply; a reply cut at the token limit says so."""
        message = f"your reply could not be used: {exc}"
        if completion.finish_reason == "length":
            message += (
                f" (the reply was cut off at the limit of {self.client.settings.max_tokens} tokens: keep it "
                "short, one function and no long explanations)"
            )
        return message
