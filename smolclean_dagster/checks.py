"""Asset checks on a cleaned drop: every row came back, and little dirt is left.

The checks are evaluated by the `cleaned_data` asset itself (check specs with the drops partitions), so
each drop partition shows its own results in the UI next to its materialization.
"""

from __future__ import annotations

import warnings

import dagster as dg

from .core.apply import ApplyResult
from .metadata import findings_metadata

ROWS_PRESERVED = "rows_preserved"
RESIDUAL_ISSUES = "residual_issues"


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
        ]


def cleaned_check_results(result: ApplyResult, threshold: float) -> list[dg.AssetCheckResult]:
    """The outcome of both checks for one cleaned drop."""
    report = result.residual
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
            metadata={
                "share_flagged": dg.MetadataValue.float(report.share),
                "worst_column_share": dg.MetadataValue.float(report.worst_share),
                "threshold": dg.MetadataValue.float(threshold),
                "rows_sampled": report.rows_sampled,
                **findings_metadata(list(report.findings)),
            },
        ),
    ]
