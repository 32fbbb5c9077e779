"""Core objects rendered as Dagster metadata: this is the trace people read in the UI."""

from __future__ import annotations

import dagster as dg

from .core.analysts.base import Usage
from .core.consolidate import Consolidation
from .core.instructions import coverage_line
from .core.plan import ChunkPlan
from .core.profile import Finding
from .core.quality import ValidationReport
from .core.questions import Questions
from .core.registry import Registry
from .core.steps import ChunkTrace, FinalStep, ProposalStep, VerdictStep


def _cell(text: object, limit: int = 160) -> str:
    s = "" if text is None else str(text).replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def frame_preview(df, rows: int = 5) -> dg.MetadataValue:
    """The first rows of a frame as a markdown table, every value shown as written."""
    head = df.head(rows)
    lines = ["| " + " | ".join(_cell(c, 40) for c in head.columns) + " |", "|" + "---|" * len(head.columns)]
    lines += ["| " + " | ".join(_cell(repr(v) if v is not None else "null", 40) for v in row) + " |"
              for row in head.itertuples(index=False)]
    return dg.MetadataValue.md("\n".join(lines))


def findings_metadata(findings: list[Finding]) -> dict[str, dg.MetadataValue]:
    """The detector findings of a chunk, as a table and a count."""
    rows = ["| kind | column | cells | message | examples |", "|---|---|---|---|---|"]
    rows += [
        f"| {f.kind} | {_cell(f.column)} | {f.count} | {_cell(f.message)} | {_cell(', '.join(map(repr, f.examples)))} |"
        for f in findings
    ]
    return {
        "findings": dg.MetadataValue.int(len(findings)),
        "issues": dg.MetadataValue.md("\n".join(rows) if findings else "No issues found."),
    }


def trace_metadata(trace: ChunkTrace) -> dict[str, dg.MetadataValue]:
    """A chunk's agent loop: every step with its verdict and reason, and the code of each proposal."""
    lines = [f"### Chunk `{trace.chunk_id}` of `{trace.drop}` ({trace.rows} rows)", ""]
    table = ["| step | findings | proposed | serves | verdict | reason | tokens in/out | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    verdicts = {s.step: s for s in trace.steps if isinstance(s, VerdictStep)}
    for s in trace.steps:
        if isinstance(s, ProposalStep):
            v = verdicts.get(s.step)
            verdict = "—" if v is None else ("accepted" if v.accepted else "rejected")
            reason = v.reason if v else (f"reply not usable: {s.error}" if s.error
                                         else "asked a query (below)" if s.query else f"analyst says {s.status}")
            secs = s.seconds + (v.seconds if v else 0.0)
            tokens = f"{s.usage.prompt_tokens}/{s.usage.completion_tokens}" + (" (cached)" if s.usage.cached_calls else "")
            proposed = f"`{s.function_name or '-'}`" + (" (adopted)" if s.adopted else "")
            serves = ", ".join(f"#{n}" for n in s.serves) + "".join(f" declines #{d.number}" for d in s.declines)
            table.append(
                f"| {s.step} | {s.findings} | {proposed} | {serves.strip() or '-'} | {verdict} | {_cell(reason)} | {tokens} | {secs:.2f} |"
            )
    lines += table
    for s in trace.steps:
        if isinstance(s, ProposalStep) and s.code:
            v = verdicts.get(s.step)
            verdict = "accepted" if v and v.accepted else "rejected"
            lines += ["", f"#### Step {s.step}: `{s.function_name}` ({verdict})", "", "```python", s.code.rstrip(), "```"]
            if v and not v.accepted:
                lines += ["", f"Rejected: {v.reason}"]
    for s in trace.steps:
        if isinstance(s, ProposalStep) and s.query:
            lines += ["", f"#### Step {s.step}: query", "", "```python", s.query, "```", "", "```",
                      (s.query_result or "").rstrip(), "```"]
    final = next((s for s in trace.steps if isinstance(s, FinalStep)), None)
    if final is not None and final.items:
        lines += ["", f"**Instructions:** {coverage_line(final.items)}"]
    if final:
        lines += ["", f"**Finished:** {final.reason} after {final.step} step(s)."]
    usage = trace.usage
    rejected = sum(1 for s in trace.steps if isinstance(s, VerdictStep) and not s.accepted)
    return {
        "trace": dg.MetadataValue.md("\n".join(lines)),
        "steps": dg.MetadataValue.int(sum(1 for s in trace.steps if isinstance(s, ProposalStep))),
        "accepted": dg.MetadataValue.int(len(trace.accepted)),
        "rejected": dg.MetadataValue.int(rejected),
        "queries": dg.MetadataValue.int(sum(1 for s in trace.steps if isinstance(s, ProposalStep) and s.query)),
        "accepted_functions": dg.MetadataValue.text(", ".join(trace.accepted) or "none"),
        **({"coverage": dg.MetadataValue.text(coverage_line(trace.items))} if trace.items else {}),
        "finish_reason": dg.MetadataValue.text(final.reason if final else "unfinished"),
        **usage_metadata(usage),
        **(
            {"transcripts": dg.MetadataValue.md("\n".join(f"- step {s.step}: `{s.transcript}`" for s in trace.steps
                                                        if isinstance(s, ProposalStep) and s.transcript))}
            if any(isinstance(s, ProposalStep) and s.transcript for s in trace.steps) else {}
        ),
    }


def coverage_metadata(states) -> dict[str, dg.MetadataValue]:
    """The instruction items and how each stands (served by which functions, declined and why, open)."""
    if not states:
        return {}
    rows = ["| # | instruction | state | by / why |", "|---|---|---|---|"]
    rows += [f"| {s.number} | {_cell(s.text, 120)} | {s.state} | {_cell(', '.join(s.functions) or s.reason, 120)} |"
             for s in states]
    return {
        "instructions": dg.MetadataValue.md("\n".join(rows)),
        "coverage": dg.MetadataValue.text(coverage_line(states)),
        "instructions_open": dg.MetadataValue.int(sum(1 for s in states if s.state == "open")),
    }


def plan_metadata(plan: ChunkPlan) -> dict[str, dg.MetadataValue]:
    """Which chunks were chosen for the analyst, in which wave, and why."""
    chosen = {c.id: c for c in plan.chunks if c.reason}
    rows = ["| wave | chunk | rows | reason |", "|---|---|---|---|"]
    rows += [
        f"| {chosen[cid].wave} | `{cid}` | {chosen[cid].start}-{chosen[cid].stop} | {_cell(chosen[cid].reason, 200)} |"
        for cid in plan.selected
    ]
    return {
        "rows": dg.MetadataValue.int(plan.rows),
        "chunks": dg.MetadataValue.int(len(plan.chunks)),
        "selected_chunks": dg.MetadataValue.int(len(plan.selected)),
        "new_chunks": dg.MetadataValue.int(len(plan.last_wave)),
        "wave": dg.MetadataValue.int(plan.waves),
        "selection_done": dg.MetadataValue.bool(plan.done),
        "holdout_rows": dg.MetadataValue.int(len(plan.holdout)),
        "selection": dg.MetadataValue.md("\n".join(rows)),
    }


def registry_metadata(registry: Registry, previous: Registry | None) -> dict[str, dg.MetadataValue]:
    """The registry's functions (with its revision), and what changed since the last published revision."""
    rows = ["| # | function | columns | from chunk | analyst | what it fixes |", "|---|---|---|---|---|---|"]
    for i, e in enumerate(registry.entries, 1):
        f = e.function
        rows.append(
            f"| {i} | `{f.name}` | {_cell(', '.join(f.columns))} | `{e.provenance.chunk}` | "
            f"{e.provenance.analyst} | {_cell(f.summary)} |"
        )
    before = {e.function.name for e in previous.entries} if previous else set()
    after = {e.function.name for e in registry.entries}
    merged_into = {n: e.function.name for e in registry.entries for n in e.merged_from if n != e.function.name}
    diff = [f"+ {n}" for n in sorted(after - before)] + [
        f"- {n}" + (f" (merged into {merged_into[n]})" if n in merged_into else "") for n in sorted(before - after)
    ]
    return {
        "registry_revision": dg.MetadataValue.int(registry.version),
        "functions": dg.MetadataValue.int(len(registry.entries)),
        "registry": dg.MetadataValue.md("\n".join(rows)),
        "diff": dg.MetadataValue.md("```diff\n" + ("\n".join(diff) or "(no change)") + "\n```"),
    }


def usage_metadata(usage: Usage) -> dict[str, dg.MetadataValue]:
    """What the LLM calls of a step cost: calls (and those answered from the cache), HTTP attempts, tokens."""
    return {
        "llm_calls": dg.MetadataValue.int(usage.calls),
        "llm_cached_calls": dg.MetadataValue.int(usage.cached_calls),
        "llm_attempts": dg.MetadataValue.int(usage.attempts),
        "prompt_tokens": dg.MetadataValue.int(usage.prompt_tokens),
        "completion_tokens": dg.MetadataValue.int(usage.completion_tokens),
        "llm_cost_usd": dg.MetadataValue.float(round(usage.cost_usd, 6)),
        "llm_latency_s": dg.MetadataValue.float(round(usage.latency_s, 3)),
    }


def consolidation_metadata(result: Consolidation, usage: Usage | None = None) -> dict[str, dg.MetadataValue]:
    """What consolidation merged, what it tried and left apart (with the reason), and, when it asked the
    model to merge functions, what those calls cost."""
    out = usage_metadata(usage) if usage is not None else {}
    if not result.merges:
        return {"merged": dg.MetadataValue.int(0), **out}
    rows = ["| functions | merged into | why |", "|---|---|---|"]
    rows += [f"| {', '.join(f'`{n}`' for n in m.names)} | {f'`{m.into}`' if m.into else '—'} | {_cell(m.reason)} |"
             for m in result.merges]
    return {"merged": dg.MetadataValue.int(len(result.merged)), "consolidation": dg.MetadataValue.md("\n".join(rows)),
            **out}


def validation_metadata(report: ValidationReport) -> dict[str, dg.MetadataValue]:
    """Blocking checks and quality before/after on held-out rows."""
    checks = ["| blocking check | passed | detail |", "|---|---|---|"]
    checks += [f"| {c.name} | {'yes' if c.passed else 'NO'} | {_cell(c.detail)} |" for c in report.checks]
    quality = ["| column | findings before | after |", "|---|---|---|"]
    quality += [f"| {_cell(q.column)} | {q.before} | {q.after} |" for q in report.quality]
    changes = ["| function | cells changed | columns | looked valid | undone | before -> after |", "|---|---|---|---|---|---|"]
    changes += [
        f"| {_cell(f.name)} | {f.cells} | {_cell(', '.join(f.columns))} | {f.valid_hits} | {f.undone} | "
        f"{_cell('; '.join(f'{c}: {b!r} -> {a!r}' for c, b, a in f.pairs))} |"
        for f in report.functions
    ]
    return {
        "changes": dg.MetadataValue.md("\n".join(changes)),
        "holdout_rows": dg.MetadataValue.int(report.holdout_rows),
        "cells_changed": dg.MetadataValue.int(report.cells_changed),
        "findings_before": dg.MetadataValue.int(sum(q.before for q in report.quality)),
        "findings_after": dg.MetadataValue.int(sum(q.after for q in report.quality)),
        "blocking_checks_passed": dg.MetadataValue.bool(report.passed),
        "checks": dg.MetadataValue.md("\n".join(checks)),
        "quality": dg.MetadataValue.md("\n".join(quality)),
        **left_metadata(report),
    }


def left_metadata(report: ValidationReport) -> dict[str, dg.MetadataValue]:
    """Per column, what the detectors still find on the cleaned held-out rows."""
    rows = ["| column | cells | what is left |", "|---|---|---|"]
    rows += [f"| {_cell(q.column)} | {q.after} | {_cell('; '.join(q.left))} |" for q in report.left]
    return {
        "columns_with_findings_left": dg.MetadataValue.int(len(report.left)),
        "left": dg.MetadataValue.md("\n".join(rows) if report.left else "nothing the detectors look for"),
    }


def questions_metadata(questions: Questions, dataset: str) -> dict[str, dg.MetadataValue]:
    """The questions a learning ends with (the conventions the drop leaves open), and how to answer them."""
    how = (f"Answer with the job `{dataset}_answer` (config: question, option) or `smolclean answer {dataset}`; "
           "the next learning of the drop serves the answer.") if questions.open else ""
    return {
        "questions_open": dg.MetadataValue.int(len(questions.open)),
        "questions": dg.MetadataValue.md("\n\n".join(x for x in (questions.markdown(), how) if x)),
    }

