"""Asset checks on a cleaned drop: every row came back, little dirt is left, and the module's changes agree
with the other rows of their entity.

The checks are evaluated by the `cleaned_data` asset itself (check specs with the drops partitions), so
each drop partition shows its own results in the UI next to its materialization.
"""

from __future__ import annotations

import warnings

import dagster as dg

from ..core.agreement import CHECK_ROWS, AgreementReport, describe
from ..core.apply import ApplyResult
from ..core.questions import Question, Questions, questions_behind
from ..metadata import findings_metadata

ROWS_PRESERVED = "rows_preserved"
RESIDUAL_ISSUES = "residual_issues"
ENTITY_AGREEMENT = "entity_agreement"


def cleaned_check_specs(asset: dg.AssetKey, partitions_def: dg.PartitionsDefinition) -> list[dg.AssetCheckSpec]:
    """The checks every cleaned drop gets, partitioned like the drops."""
    # Partitioned checks are a preview feature of Dagster 1.12.14+; they are what makes each drop show its
    # own results, so we use them and keep the load quiet.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(ROWS_PRESERVED, asset=asset, partitions_def=partitions_def,
                              description="The cleaned drop has exactly as many rows as the drop."),
            dg.AssetCheckSpec(RESIDUAL_ISSUES, asset=asset, partitions_def=partitions_def,
                              description="In no column do the detectors flag more than `residual_threshold` of the "
                              "sampled cleaned cells; when this fails the agent can learn from the drop (see "
                              "`learn_on_residual`)."),
            dg.AssetCheckSpec(ENTITY_AGREEMENT, asset=asset, partitions_def=partitions_def,
                              description="In no column do more than a fifth of the module's changes (in the drop's "
                              f"first {CHECK_ROWS:,} rows) write a value the other rows of the same entity contradict "
                              "(a flight's other reports, a hospital's other rows); when this fails the agent can "
                              "learn from the drop, which takes out the function that did it."),
        ]


def cleaned_check_results(result: ApplyResult, threshold: float, agreement: AgreementReport,
                          questions: Questions | None = None) -> list[dg.AssetCheckResult]:
    """The outcome of the checks for one cleaned drop. A residual check that fails only on what open `questions`
    ask about says so, naming them: the module leaves those cells as written until a person answers."""
    report = result.residual
    behind = questions_behind(report, threshold, questions) if questions is not None else ()
    return [
        dg.AssetCheckResult(
            check_name=ROWS_PRESERVED,
            passed=result.rows_out == result.rows_in,
            metadata={"rows_in": result.rows_in, "rows_out": result.rows_out},
        ),
        dg.AssetCheckResult(
            check_name=RESIDUAL_ISSUES,
            passed=report.passes(threshold),
            # A warning, not an error: the drop is cleaned as well as the module can; what is left is for
            # the agent to learn, not a reason to distrust what was written.
            severity=dg.AssetCheckSeverity.WARN,
            description=_asked_about(behind, questions.dataset) if behind else None,
            metadata={
                **({"questions": dg.MetadataValue.md("\n".join(f"- {q.number}. {q.text}" for q in behind))}
                   if behind else {}),
                "share_flagged": dg.MetadataValue.float(report.share),
                "worst_column_share": dg.MetadataValue.float(report.worst_share),
                "threshold": dg.MetadataValue.float(threshold),
                "rows_sampled": report.rows_sampled,
                **findings_metadata(list(report.findings)),
            },
        ),
        dg.AssetCheckResult(
            check_name=ENTITY_AGREEMENT,
            passed=agreement.passed,
            # A warning: the drop stays as the module cleaned it (a row's result never depends on its batch);
            # learning from the drop takes the function out of the next module version, for review.
            severity=dg.AssetCheckSeverity.WARN,
            description=agreement.describe(),
            metadata=agreement_metadata(agreement),
        ),
    ]


def _asked_about(behind: tuple[Question, ...], dataset: str) -> str:
    which = " and ".join(f"question {q.number} ({', '.join(q.columns)})" for q in behind)
    return (f"Fails only on what the last learning asked about, {which}: the file does not say which way is right, "
            f"so the module leaves those cells as written. Answer with the job `{dataset}_answer` or "
            f"`smolclean answer {dataset}`, then learn the drop again.")


def agreement_metadata(agreement: AgreementReport) -> dict[str, dg.MetadataValue]:
    """What the entity check saw, for the check and the cleaned drop's materialization."""
    if agreement.entity is None:  # nothing was compared
        return {"rows_checked": dg.MetadataValue.int(agreement.rows_checked),
                "entity_column": dg.MetadataValue.text("none found")}
    return {
        "rows_checked": dg.MetadataValue.int(agreement.rows_checked),
        "entity_column": dg.MetadataValue.text(agreement.entity),
        "cells_changed": dg.MetadataValue.int(agreement.cells_changed),
        "cells_contradicted": dg.MetadataValue.int(agreement.contradicted),
        "columns": dg.MetadataValue.md("\n".join(f"- {describe(c)}" for c in agreement.columns) or "none"),
    }
