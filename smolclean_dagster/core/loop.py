"""The per-chunk agent loop: a generator of typed steps.

Each step shows the analyst the chunk AS CLEANED BY THE CURRENT REGISTRY (so solved problems do not
look present), the detector findings that remain, the instructions and every accepted function's
name and docstring; takes at most one new function; checks it in the sandbox on the chunk and on
held-out rows; and accepts it into the registry or feeds the reason back. It stops when the analyst
says "clean", the detectors find nothing, or `max_steps` is used up.

Errors that are the model's fault (unsafe, failing or useless code) become rejections shown to the
analyst; errors that are ours (storage, configuration) raise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from .analysts.base import AnalysisRequest, Analyst, RegisteredSummary
from .errors import SmolcleanError
from .profile import detect_issues
from .registry import Provenance, Registry, RegistryEntry, RegistryStore
from .sandbox import GateRejected, SandboxCrashed, SandboxError, SandboxTimeout, ResourceLimitExceeded, FunctionFailed
from .steps import FinalStep, ProposalStep, Step, VerdictStep
from .validate import CodeRunner, check_candidate

log = logging.getLogger("smolclean.loop")

#: Sandbox errors caused by the proposed code itself: shown back to the analyst, never raised.
MODEL_FAULTS = (GateRejected, FunctionFailed, SandboxTimeout, ResourceLimitExceeded, SandboxCrashed)


@dataclass(frozen=True)
class ChunkWork:
    """One chunk to work on: its rows and the held-out rows of the same drop (both raw)."""

    dataset: str
    drop: str
    chunk_id: str
    rows: pd.DataFrame
    holdout: pd.DataFrame
    reference: pd.DataFrame | None = None


@dataclass(frozen=True)
class LoopSettings:
    """The knobs of the loop, from the dataset's settings."""

    max_steps: int = 5
    instructions: str = ""
    timeout_s: float = 10.0
    allow_row_drops: bool = False


def clean_with(registry: Registry, df: pd.DataFrame, runner: CodeRunner, *, timeout_s: float = 30.0) -> pd.DataFrame:
    """`df` cleaned by every function of `registry`, run in the sandbox as the exported module."""
    if not registry.entries or df.empty:
        return df.reset_index(drop=True)
    from .export import render_module

    try:
        return runner.run(render_module(registry), df, entry="clean", module=True, timeout_s=timeout_s)
    except MODEL_FAULTS as exc:
        raise SmolcleanError(
            f"the registry of {registry.dataset!r} (version {registry.version}) fails on new rows: {exc}; "
            "fix or remove the failing function in the registry file"
        ) from exc


def summarise_registry(registry: Registry) -> tuple[RegisteredSummary, ...]:
    """Every accepted function for the analyst: nothing is evicted, since a function the analyst cannot
    see is a function it writes again (the LLM analyst fits them to its prompt budget itself)."""
    return tuple(
        RegisteredSummary(name=e.function.name, docstring=e.function.docstring, columns=e.function.columns)
        for e in registry.entries
    )


def run_chunk(
    work: ChunkWork,
    analyst: Analyst,
    store: RegistryStore,
    runner: CodeRunner,
    settings: LoopSettings = LoopSettings(),
) -> Iterator[Step]:
    """Run the agent loop on one chunk, yielding each step as it happens.

    Example:
        >>> for step in run_chunk(work, RulesAnalyst(), store, Sandbox()):   # doctest: +SKIP
        ...     print(step.kind, getattr(step, "reason", ""))
    """
    feedback: str | None = None
    rejected: list[str] = []
    accepted: list[str] = []
    step = 0
    while True:
        registry = store.load()
        chunk = clean_with(registry, work.rows, runner)
        findings = detect_issues(chunk)
        if not findings and getattr(analyst, "trusts_detectors", True):
            yield FinalStep(step=step, reason="no_findings", accepted=tuple(accepted))
            return
        if step >= settings.max_steps:
            yield FinalStep(step=step, reason="max_steps", accepted=tuple(accepted), residual_findings=len(findings))
            return
        step += 1
        started = time.perf_counter()
        proposal = analyst.propose(
            AnalysisRequest(
                dataset=work.dataset,
                chunk_id=work.chunk_id,
                step=step,
                chunk=chunk,
                findings=tuple(findings),
                instructions=settings.instructions,
                registry=summarise_registry(registry),
                feedback=feedback,
                rejected=tuple(rejected),
                reference=None if work.reference is None else clean_with(registry, work.reference, runner),
            )
        )
        fn = proposal.function
        yield ProposalStep(
            step=step,
            findings=len(findings),
            issues=proposal.issues,
            status=proposal.status,
            function_name=fn.name if fn else None,
            code=fn.code if fn else None,
            usage=proposal.usage,
            error=proposal.error,
            transcript=proposal.transcript,
            seconds=round(time.perf_counter() - started, 4),
        )
        if fn is None:
            if proposal.status == "clean":
                yield FinalStep(step=step, reason="clean", accepted=tuple(accepted), residual_findings=len(findings))
                return
            # a reply the analyst could not use (the model's fault) is shown back to it, and uses up a step
            feedback = proposal.error or "you said the chunk needs more work but proposed no function; propose one function"
            continue
        started = time.perf_counter()
        holdout = clean_with(registry, work.holdout, runner)
        try:
            verdict = check_candidate(
                fn, chunk, holdout, runner, timeout_s=settings.timeout_s, allow_row_drops=settings.allow_row_drops
            )
        except MODEL_FAULTS as exc:
            verdict_reason, ok, evidence = f"{type(exc).__name__}: {exc}", False, None
        except SandboxError:
            raise  # the sandbox itself is broken: our fault
        else:
            verdict_reason, ok, evidence = verdict.reason, verdict.accepted, verdict.evidence
        name = fn.name
        if ok:
            entry = RegistryEntry(
                function=fn,
                provenance=Provenance(
                    drop=work.drop,
                    chunk=work.chunk_id,
                    step=step,
                    analyst=analyst.name,
                    model=proposal.model,
                    prompt_hash=proposal.prompt_hash,
                ),
                evidence=evidence,
            )
            after = store.update(lambda reg: reg.with_entry(entry))
            stored = after.find(fn)  # its name in the registry: suffixed when another function had the name
            name = stored.function.name if stored is not None else name
            accepted.append(name)
            feedback = None
            log.info("chunk %s step %d: accepted %s", work.chunk_id, step, name)
        else:
            rejected.append(fn.name)
            feedback = f"function {fn.name} was rejected: {verdict_reason}"
            log.info("chunk %s step %d: rejected %s: %s", work.chunk_id, step, fn.name, verdict_reason)
        yield VerdictStep(
            step=step,
            function_name=name,
            accepted=ok,
            reason=verdict_reason,
            evidence=evidence,
            seconds=round(time.perf_counter() - started, 4),
        )
