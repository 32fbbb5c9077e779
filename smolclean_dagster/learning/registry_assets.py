"""The module a learning run ends with, as assets: the registry consolidated, validated on held-out rows
(with its blocking checks) and exported.

chunk_functions -> registry -> validation (+ blocking checks) -> cleaning_module
"""

# No `from __future__ import annotations`: Dagster reads the asset functions' type hints as classes.
from functools import partial

import dagster as dg
import pandas as pd

from ..asset_keys import DatasetKeys
from ..cleaning.drop_runs import DROP_TAG
from ..cleaning.module_versions import learning_run_metrics
from ..core.analysts.base import Usage
from ..core.analysts.rules import RulesAnalyst
from ..core.consolidate import consolidate
from ..core.drops import is_text_drop
from ..core.errors import SmolcleanError
from ..core.export import write_module
from ..core.functions import CleaningFunction
from ..core.label_store import every_label
from ..core.labels import keep_what_labels_allow
from ..core.plan import ChunkPlan
from ..core.quality import ValidationReport, keep_what_agrees, keep_what_holds, validate_registry
from ..core.questions import ask_after_learning
from ..core.registry import Registry
from ..core.report import write_report
from ..core.shipped_tests import write_tests
from ..core.steps import ChunkTrace
from ..core.storage import DatasetStore
from ..metadata import (consolidation_metadata, coverage_metadata, questions_metadata, registry_metadata,
                       validation_metadata)
from ..resources import LLMResource, SandboxResource
from ..settings import DatasetSettings
from .chunk_assets import REFERENCE_ROWS

#: The blocking checks on the validation report: a failing one stops the module from being exported.
BLOCKING_CHECKS = (
    ("module_compiles", "The module parses and passes the code gate."),
    ("no_row_lost", "The module returns every held-out row."),
    ("idempotent", "Cleaning twice gives the same rows as cleaning once."),
    ("quality_not_worse", "No column has more detector findings after cleaning."),
)


def registry_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/registry`: the functions of the last wave consolidated and published."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=keys.key("registry"), io_manager_key=keys.records, group_name=keys.group,
              deps=[keys.key("chunk_functions")])
    def registry(
        context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, smolclean_llm: LLMResource
    ) -> Registry:
        """Consolidation: functions doing the same job merged (proved to give the same output), then the
        registry published with every function in order, its provenance and evidence."""
        # A wave's chunks ran side by side: their functions go in the chunks' order, named in that order.
        wave = [c for plan in store.models("chunks", ChunkPlan) for c in plan.last_wave]
        current = store.registry.update(lambda reg: reg.in_chunk_order(wave))
        drops = {plan.drop: plan.visible_rows(store.load_frame("raw_data", plan.drop), limit=REFERENCE_ROWS)
                 for plan in store.models("chunks", ChunkPlan)}
        rows = pd.concat(list(drops.values()), ignore_index=True) if drops else pd.DataFrame()
        rules = RulesAnalyst()
        model_merger = _ModelMerger.for_analyst(smolclean_llm.analyst_for(s), s)
        result = consolidate(current, rows, smolclean_sandbox.get(), rule_key=rules.merge_key,
                             rule_merger=partial(rules.merge, column_order=tuple(rows.columns)), model_merger=model_merger)
        if result.merged:
            # Chunks may have accepted more functions meanwhile: then this round is skipped, not forced.
            published = store.registry.update(lambda reg: result.registry if reg.version == current.version else reg)
        else:
            published = current
        # A learning run always ends with a module: what breaks a blocking check on held-out rows is taken out.
        # So is a function whose changes over the learned drops' rows the entity's other rows contradict: one
        # learned from an earlier drop may meet forms there it never saw (core/agreement.py).
        # And whatever breaks a row the user labelled: the user's corrections are ground truth (core/labels.py).
        for keep in (partial(keep_what_holds, holdout=_holdout_rows(store)[0]),
                     partial(keep_what_agrees, drops=drops, instructions=s.instructions),
                     partial(keep_what_labels_allow, labels=every_label(store))):
            kept, dropped = keep(published, runner=smolclean_sandbox.get())
            if dropped:
                for d in dropped:
                    context.log.warning(f"{d.name} taken out of the module: {d.reason}")
                published = store.registry.update(lambda reg: kept if reg.version == published.version else reg)
        try:
            previous = store.load_model("registry", Registry)
        except SmolcleanError:
            previous = None
        usage = model_merger.usage if model_merger is not None else None
        context.add_output_metadata({**registry_metadata(published, previous), **consolidation_metadata(result, usage),
                                     **coverage_metadata(published.coverage(published.items_for(s.instructions)))})
        return published

    return registry


def validation_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/validation`: the module run on held-out rows."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=keys.key("validation"), io_manager_key=keys.records, group_name=keys.group,
              ins={"registry": dg.AssetIn(keys.key("registry"))})
    def validation(
        context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, registry: Registry
    ) -> ValidationReport:
        """The module run on held-out rows of every learned drop: blocking checks and quality before/after."""
        sandbox = smolclean_sandbox.get()
        holdout, text_rows = _holdout_rows(store)
        report = validate_registry(registry, holdout, sandbox, text_rows=text_rows)
        context.add_output_metadata({**validation_metadata(report), "sandbox": dg.MetadataValue.text(sandbox.level.describe())})
        return report

    return validation


def validation_checks(keys: DatasetKeys) -> list[dg.AssetChecksDefinition]:
    """The blocking checks on `<name>/validation` (`BLOCKING_CHECKS`)."""
    return [_blocking_check(keys.key("validation"), name, description) for name, description in BLOCKING_CHECKS]


def _blocking_check(validation_key: dg.AssetKey, check_name: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=validation_key, name=check_name, description=description, blocking=True)
    def _check(validation: ValidationReport) -> dg.AssetCheckResult:
        try:
            outcome = validation.check(check_name)
        except StopIteration:
            # An earlier check failed so badly that this one could not run (e.g. the module does not compile).
            failed = next((c for c in validation.checks if not c.passed), None)
            detail = f"not run: {failed.name} failed" if failed else "not run"
            return dg.AssetCheckResult(passed=False, metadata={"detail": detail})
        return dg.AssetCheckResult(passed=outcome.passed, metadata={"detail": outcome.detail})

    return _check


def cleaning_module_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/cleaning_module`: the exported module, its tests and its report."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=keys.key("cleaning_module"), group_name=keys.group,
              ins={"registry": dg.AssetIn(keys.key("registry")), "validation": dg.AssetIn(keys.key("validation"))})
    def cleaning_module(context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, registry: Registry,
                        validation: ValidationReport) -> dg.MaterializeResult:
        """The exported module with its tests (held-out rows replayed) and its report: readable,
        reviewable, runnable without smolclean; and the questions the learning ends with (the conventions the drop
        leaves open)."""
        path = write_module(registry, s.module_dir)
        labels = every_label(store)
        questions = ask_after_learning(store, registry, s.instructions, smolclean_sandbox.get(),
                                       drop=context.run.tags.get(DROP_TAG))
        tests = write_tests(s.name, registry.version, len(registry.entries), validation, s.module_dir, labels=labels)
        report = write_report(registry, validation, s.module_dir, plans=store.models("chunks", ChunkPlan),
                              traces=store.models("chunk_functions", ChunkTrace),
                              items=registry.items_for(s.instructions), reads_instructions=s.reads_instructions,
                              metrics=learning_run_metrics(context, s, registry, validation), labels=labels,
                              questions=questions)
        source = path.read_text(encoding="utf-8")
        chart = s.module_dir / "quality.png"
        return dg.MaterializeResult(
            metadata={
                "module": dg.MetadataValue.path(str(path)),
                "tests": dg.MetadataValue.path(str(tests)),
                "report": dg.MetadataValue.path(str(report)),
                **({"chart": dg.MetadataValue.path(str(chart))} if chart.exists() else {}),
                "registry_revision": dg.MetadataValue.int(registry.version),
                "functions": dg.MetadataValue.int(len(registry.entries)),
                "code": dg.MetadataValue.md(f"```python\n{source}\n```"),
                **questions_metadata(questions, s.name),
            }
        )

    return cleaning_module


def _holdout_rows(store: DatasetStore) -> tuple[pd.DataFrame, list[bool]]:
    """The held-out rows of every learned drop (what validation runs the module on), and for each row whether it
    comes from a text drop (CSV/TSV, where an empty field and a null are written alike: see `output_changes`)."""
    frames: list[pd.DataFrame] = []
    text_rows: list[bool] = []
    for plan in store.models("chunks", ChunkPlan):
        rows = plan.holdout_rows(store.load_frame("raw_data", plan.drop))
        if len(rows):
            frames.append(rows)
            text_rows += [is_text_drop(plan.drop)] * len(rows)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), text_rows


class _ModelMerger:
    """The LLM's merge for functions it wrote, adding up what its calls cost."""

    def __init__(self, llm, s: DatasetSettings) -> None:
        self.llm, self.settings, self.usage = llm, s, Usage()

    @classmethod
    def for_analyst(cls, analyst, s: DatasetSettings) -> "_ModelMerger | None":
        """One when the dataset's analyst has a model; None for the rules analyst."""
        llm = getattr(analyst, "llm", analyst)
        return None if isinstance(llm, RulesAnalyst) or not hasattr(llm, "merge") else cls(llm, s)

    def __call__(self, functions: list[CleaningFunction]) -> CleaningFunction | None:
        proposal = self.llm.merge(self.settings.name, functions, self.settings.instructions)
        self.usage = self.usage.plus(proposal.usage)
        return proposal.function
