"""HybridAnalyst: the rules first (free, deterministic), then the LLM on what the rules left."""

from __future__ import annotations

from .base import AnalysisRequest, Analyst, Proposal


class HybridAnalyst:
    """Rules first, then the LLM: each step takes the rules' function while they have one not yet rejected
    for this chunk, and asks the LLM otherwise (nothing left for the rules, or only rejected functions).

    The LLM is asked at least once per chunk (`trusts_detectors = False`), since the user's instructions
    may ask for what no detector and no rule sees. Functions from the rules carry no model in their
    provenance, so the registry still tells which ones an LLM wrote.

    Example:
        >>> analyst = HybridAnalyst(RulesAnalyst(), LLMAnalyst(client))   # doctest: +SKIP
        >>> for step in run_chunk(work, analyst, store, sandbox):          # doctest: +SKIP
        ...     print(step.kind)
    """

    name = "hybrid"
    trusts_detectors = False

    def __init__(self, rules: Analyst, llm: Analyst):
        self.rules = rules
        self.llm = llm

    def propose(self, request: AnalysisRequest) -> Proposal:
        """The rules' next function if they have a fresh one, else the LLM's answer."""
        proposal = self.rules.propose(request)
        if proposal.function is not None and proposal.function.name not in request.rejected:
            return proposal
        return self.llm.propose(request)
