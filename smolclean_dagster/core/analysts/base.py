"""What every analyst sees and answers: the contract between the agent loop and rules or LLM analysts."""

from __future__ import annotations

from functools import lru_cache
from collections.abc import Callable
from typing import Literal, Protocol

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ..functions import CleaningFunction, constants_of
from ..instructions import ItemState
from ..labels import Labels
from ..profile import Finding


class Issue(BaseModel):
    """One problem the analyst sees in the chunk, and whether the registry already solves it."""

    model_config = ConfigDict(frozen=True)

    description: str
    column: str | None = None
    solved: bool = False


class RegisteredSummary(BaseModel):
    """What the analyst is told about one accepted function: its name, docstring and columns."""

    model_config = ConfigDict(frozen=True)

    name: str
    docstring: str
    columns: tuple[str, ...] = ()
    constants: tuple[str, ...] = Field(default=(), description="its module constants: names no other function may reuse")

    @classmethod
    def of(cls, function: CleaningFunction) -> RegisteredSummary:
        """What the analyst is told about `function`.

        Example:
            >>> fn = CleaningFunction.from_code("CITY_NAMES = {'nyc': 'New York'}\\ndef f(df):\\n    'Fix city.'\\n    return df\\n")
            >>> RegisteredSummary.of(fn).constants
            ('CITY_NAMES',)
        """
        return cls(name=function.name, docstring=function.docstring, columns=function.columns,
                   constants=_constant_names(function.code))


@lru_cache(maxsize=1024)
def _constant_names(code: str) -> tuple[str, ...]:
    """The module constants `code` defines (kept by code: every step summarises the same registry again)."""
    return tuple(constants_of(code))


class Candidate(BaseModel):
    """A ready-made function (from the rules) the model may adopt by name instead of writing code."""

    model_config = ConfigDict(frozen=True)

    name: str
    docstring: str
    columns: tuple[str, ...] = ()
    evidence: str = Field(default="", description="what the rule acted on, with support counts")
    on_labels: str = Field(default="", description="what it does to the rows the user corrected")


class ItemDecline(BaseModel):
    """The analyst declines instruction item `number`, and says why."""

    model_config = ConfigDict(frozen=True)

    number: int
    reason: str


class AnalysisRequest(BaseModel):
    """Everything the analyst may see for one step of one chunk.

    `chunk` is the chunk AS CLEANED by the registry so far; `reference` is rows of the same drop the
    analyst may use for whole-column statistics (never the held-out rows); `feedback` is what became of the
    previous reply (why it was rejected or could not be used, notes on its plan and declines); `answer` is the
    query it asked and the answer, which is no rejection.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    dataset: str
    chunk_id: str
    step: int
    chunk: pd.DataFrame
    findings: tuple[Finding, ...] = ()
    instructions: str = ""
    registry: tuple[RegisteredSummary, ...] = ()
    feedback: str | None = None
    rejected: tuple[str, ...] = Field(default=(), description="names of functions rejected for this chunk")
    taken_out: tuple[tuple[str, str], ...] = Field(
        default=(), description="functions validation took out of the module after they joined, and why (name, why)")
    reference: pd.DataFrame | None = None
    items: tuple[ItemState, ...] = Field(default=(), description="the instruction items and where each stands")
    planned: bool = Field(default=False, description="no instructions: the items are the model's own plan, if any")
    candidates: tuple[Candidate, ...] = Field(default=(), description="ready-made functions the model may adopt")
    why: str = Field(default="", description="why the planner chose this chunk")
    earlier_queries: tuple[tuple[str, str], ...] = Field(
        default=(), description="the chunk's earlier queries and their answers, before the one just answered")
    labels: Labels | None = Field(default=None, description="rows the user corrected: ground truth")
    answer: tuple[str, str] | None = Field(default=None, description="the query the previous reply asked, and its answer")
    sent_back: str | None = Field(default=None, description="the function the previous reply sent, when it was rejected")
    entities: dict[str, str] | None = Field(
        default=None, description="column -> the column naming its entity (entities.entity_keys over `reference`); "
        "None: found from `reference` when the prompt is written")
    on_labels: Callable[[CleaningFunction], tuple[CleaningFunction, str]] | None = Field(
        default=None, exclude=True, description="a ready-made function as the model is offered it, and what it does "
        "to the rows the user corrected (run in the sandbox on them as the module so far leaves them): a rule that "
        "breaks a labelled cell is offered with the values it broke left as written, where that keeps every label")


class Usage(BaseModel):
    """LLM usage for one proposal (all zero for the rules analyst)."""

    calls: int = 0
    cached_calls: int = 0
    attempts: int = Field(default=0, description="HTTP requests made, retries included (calls + failed attempts)")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0

    def plus(self, other: Usage) -> Usage:
        """Both usages together (counts, tokens, cost and time added)."""
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class Proposal(BaseModel):
    """The analyst's answer for one step: the issues it sees, its new function(s), and a status."""

    model_config = ConfigDict(frozen=True)

    issues: tuple[Issue, ...] = ()
    function: CleaningFunction | None = None
    status: Literal["clean", "needs_more_work"] = "needs_more_work"
    serves: tuple[int, ...] = Field(default=(), description="instruction items the function carries out")
    declines: tuple[ItemDecline, ...] = Field(default=(), description="instruction items declined, with reasons")
    adopt: str | None = Field(default=None, description="the name of a ready-made candidate the model took")
    query: str | None = Field(default=None, description="a read-only pandas expression over the drop the model asks")
    plan: tuple[str, ...] = Field(default=(), description="with no instructions: the items the model plans to do")
    more: tuple[tuple[CleaningFunction, tuple[int, ...]], ...] = Field(
        default=(), description="the reply's further functions, each with the items it serves: judged in order, "
        "each as its own step, with no call in between")
    adopted: tuple[tuple[str, tuple[int, ...]], ...] = Field(
        default=(), description="ready-made candidates taken besides `adopt` or the reply's code, each with the items "
        "it serves: judged after them, in the order named")
    model: str | None = None
    prompt_hash: str | None = None
    reply_hash: str | None = Field(default=None, description="hash of the model's raw reply (see replies.reply_hash)")
    usage: Usage = Field(default_factory=Usage)
    error: str | None = Field(
        default=None, description="why the reply could not be used (the model's fault): fed back in the next step"
    )
    transcript: str | None = Field(default=None, description="file holding the request and the raw reply, if kept")


class Analyst(Protocol):
    """Anything that can look at a chunk and propose one cleaning function at a time."""

    name: str

    def propose(self, request: AnalysisRequest) -> Proposal:
        """Answer one step of the agent loop."""
        ...
