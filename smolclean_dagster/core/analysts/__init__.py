"""Analysts: they read a chunk and propose cleaning functions (rules offline, or an LLM)."""

from .base import AnalysisRequest, Analyst, Issue, Proposal, RegisteredSummary, Usage

__all__ = ["AnalysisRequest", "Analyst", "Issue", "Proposal", "RegisteredSummary", "Usage", "make_analyst"]


def make_analyst(kind: str, *, model: str | None = None) -> Analyst:
    """The analyst for a dataset: "rules" (offline, deterministic) is the only one built in so far."""
    from ..errors import SettingsError

    if kind == "rules":
        from .rules import RulesAnalyst

        return RulesAnalyst()
    raise SettingsError(f"setting 'analyst': {kind!r} is not available in this version; use 'rules'")
