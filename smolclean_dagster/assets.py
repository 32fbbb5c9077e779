"""The learning flow and the cleaning of drops as Dagster assets, one group per dataset.

raw_data -> chunks -> chunk_issues -> chunk_functions -> registry -> validation -> cleaning_module
(per drop)  (per drop) (per chunk)     (per chunk: the agent loop)
    -> module_version (module_versions.py: proposed or live) -> cleaned_data (per drop, by the live version)
"""


from functools import partial
from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import BaseModel, ConfigDict

from .checks import cleaned_check_results, cleaned_check_specs
from .core.analysts.base import Usage
from .core.analysts.rules import RulesAnalyst
from .core.apply import apply_module, read_module_version
from .core.consolidate import consolidate
from .core.drops import drop_key, read_drop
from .core.errors import SmolcleanError
from .core.export import write_module
from .core.functions import CleaningFunction
from .core.loop import ChunkWork, LoopSettings, clean_with, run_chunk
from .core.instructions import open_items, split_instructions
from .core.plan import ChunkPlan, StepBudget, plan_chunks
from .core.profile import Finding, detect_issues
from .core.quality import ValidationReport, keep_what_holds, validate_registry
from .core.registry import Registry
from .core.report import write_report
from .core.shipped_tests import write_tests
from .core.steps import ChunkTrace
from .core.storage import DatasetStore
from .core.validate import COST_ROWS
from .core.watch import FileState
from .live_module import VERSION_TAG, CleanConfig, cleaning_module_for
from .metadata import consolidation_metadata, coverage_metadata, frame_preview, findings_metadata, plan_metadata, registry_metadata, trace_metadata, validation_metadata
from .module_versions import learning_run_metrics
from .partitions import chunks_partitions, drops_partitions
from .resources import LLMResource, SandboxResource
from .settings import DatasetSettings

LLM_POOL = "smolclean_llm"
#: Most rows of a drop shown to the analyst for whole-column statistics (an even spread beyond that).
REFERENCE_ROWS = 20_000


class ChunkFindings(BaseModel):
    """The detector findings on one chunk's raw rows."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    drop: str
    chunk_id: str
    rows: int
    findings: tuple[Finding, ...]


def find_drop_file(settings: DatasetSettings, key: str) -> Path:
    """The file in the dataset's drop folder whose partition key is `key`."""
    folder = settings.drops_dir
    candidates = [p for p in folder.glob("*") if p.is_file() and drop_key(p) == key] if folder.is_dir() else []
    if not candidates:
        raise SmolcleanError(f"drop {key!r}: no such file in {folder}; put the file there or remove the partition")
    return candidates[0]


def locate_chunk(store: DatasetStore, chunk: str) -> ChunkPlan:
    """The plan of the drop that holds chunk `chunk`."""
    for plan in store.models("chunks", ChunkPlan):
        if chunk in plan.selected:
            return plan
    raise SmolcleanError(f"chunk {chunk!r} of {store.dataset!r}: no drop plan holds it; materialize the drop's chunks first")


def build_dataset_assets(s: DatasetSettings) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every asset and check of one dataset, keys prefixed by its name."""
    name = s.name
    drops, chunk_parts = drops_partitions(name), chunks_partitions(name)
    store = DatasetStore(s.storage_dir, name)
    frames, records = f"{name}_frames", f"{name}_records"

    def key(asset: str) -> dg.AssetKey:
        return dg.AssetKey([name, asset])

    @dg.asset(key=key("raw_data"), partitions_def=drops, io_manager_key=frames, group_name=name, kinds={"pandas"})
    def raw_data(context: dg.AssetExecutionContext) -> pd.DataFrame:
        """The drop as read raw: every cell a string exactly as written."""
        path = find_drop_file(s, context.partition_key)
        df = read_drop(path)
        context.add_output_metadata(
            {
                "source": dg.MetadataValue.path(str(path)),
                "rows": dg.MetadataValue.int(len(df)),
                "columns": dg.MetadataValue.text(", ".join(df.columns)),
                "preview": frame_preview(df),
            }
        )
        return df

    @dg.asset(
        key=key("chunks"), partitions_def=drops, io_manager_key=records, group_name=name,
        ins={"raw_data": dg.AssetIn(key("raw_data"))},
    )
    def chunks(
        context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, raw_data: pd.DataFrame
    ) -> ChunkPlan:
        """Held-out rows, the drop's chunks, and the next wave of chunks for the analyst (registered as
        partitions): chunks whose dirt the current registry leaves and no chosen chunk has shown yet."""
        try:
            previous = store.load_model("chunks", ChunkPlan, context.partition_key)
        except SmolcleanError:
            previous = None
        registry = store.registry.load()
        sandbox = smolclean_sandbox.get()
        traces = [t for t in store.models("chunk_functions", ChunkTrace) if t.drop == context.partition_key]
        used, tokens = sum(t.steps_taken for t in traces), sum(t.tokens_used for t in traces)
        items = registry.items_for(s.instructions) if s.reads_instructions else ()
        plan = plan_chunks(
            raw_data, dataset=name, drop=context.partition_key, chunk_size=s.chunk_size,
            budget=s.chunk_budget, holdout_fraction=s.holdout_fraction, wave_size=s.planning_interval,
            clean=lambda rows: clean_with(registry, rows, sandbox), previous=previous,
            steps=StepBudget(total=s.step_budget, per_chunk=s.max_steps, used=used,
                             tokens=s.token_budget if s.reads_instructions else 0, tokens_used=tokens),
            open_items=tuple(i.number for i in open_items(registry.coverage(items))),
            first_wave=1 if s.reads_instructions else s.planning_interval,
            ask_model=s.reads_instructions,
        )
        new = [c for c in plan.selected if not context.instance.has_dynamic_partition(chunk_parts.name, c)]
        if new:
            context.instance.add_dynamic_partitions(chunk_parts.name, new)
        context.add_output_metadata({**plan_metadata(plan), "registry_version": dg.MetadataValue.int(registry.version)})
        return plan

    @dg.asset(key=key("chunk_issues"), partitions_def=chunk_parts, io_manager_key=records, group_name=name,
              deps=[key("chunks")])
    def chunk_issues(context: dg.AssetExecutionContext) -> ChunkFindings:
        """What the detectors find in the chunk's raw rows (held-out rows excluded)."""
        plan = locate_chunk(store, context.partition_key)
        rows = plan.chunk_rows(store.load_frame("raw_data", plan.drop), context.partition_key)
        findings = detect_issues(rows)
        context.add_output_metadata(findings_metadata(findings))
        return ChunkFindings(dataset=name, drop=plan.drop, chunk_id=context.partition_key, rows=len(rows),
                             findings=tuple(findings))

    @dg.asset(key=key("chunk_functions"), partitions_def=chunk_parts, io_manager_key=records, group_name=name,
              ins={"chunk_issues": dg.AssetIn(key("chunk_issues"))}, pool=LLM_POOL)
    def chunk_functions(
        context: dg.AssetExecutionContext,
        smolclean_sandbox: SandboxResource,
        smolclean_llm: LLMResource,
        chunk_issues: ChunkFindings,
    ) -> ChunkTrace:
        """The agent loop on one chunk: functions proposed, checked in the sandbox, accepted or rejected."""
        plan = locate_chunk(store, context.partition_key)
        df = store.load_frame("raw_data", plan.drop)
        wave = plan.chunk(context.partition_key).wave
        work = ChunkWork(
            dataset=name, drop=plan.drop, chunk_id=context.partition_key,
            rows=plan.chunk_rows(df, context.partition_key), holdout=plan.holdout_rows(df),
            reference=plan.visible_rows(df, limit=REFERENCE_ROWS), sample=plan.visible_rows(df, limit=COST_ROWS),
            hidden=frozenset(c.id for c in plan.chunks if c.wave == wave and c.reason and c.id != context.partition_key),
            why=plan.chunk(context.partition_key).reason,
        )
        sandbox = smolclean_sandbox.get()
        steps = []
        chosen = plan.chunk(context.partition_key)
        allowance = chosen.steps or s.max_steps
        loop_settings = _loop_settings(s, allowance, chosen.tokens)
        for step in run_chunk(work, smolclean_llm.analyst_for(s), store.registry, sandbox, loop_settings):
            context.log.info(f"{context.partition_key}: {step.kind} {step.model_dump(exclude={'code', 'issues'})}")
            steps.append(step)
        trace = ChunkTrace(dataset=name, drop=plan.drop, chunk_id=context.partition_key, rows=len(work.rows),
                           steps=tuple(steps))
        context.add_output_metadata({**trace_metadata(trace), "sandbox": dg.MetadataValue.text(sandbox.level.describe())})
        return trace

    @dg.asset(key=key("registry"), io_manager_key=records, group_name=name, deps=[key("chunk_functions")])
    def registry(
        context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, smolclean_llm: LLMResource
    ) -> Registry:
        """Consolidation: functions doing the same job merged (proved to give the same output), then the
        registry published with every function in order, its provenance and evidence."""
        # A wave's chunks ran side by side: their functions go in the chunks' order, named in that order.
        wave = [c for plan in store.models("chunks", ChunkPlan) for c in plan.last_wave]
        current = store.registry.update(lambda reg: reg.in_chunk_order(wave))
        frames = [plan.visible_rows(store.load_frame("raw_data", plan.drop), limit=REFERENCE_ROWS)
                  for plan in store.models("chunks", ChunkPlan)]
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
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
        kept, dropped = keep_what_holds(published, _holdout_rows(store), smolclean_sandbox.get())
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

    @dg.asset(key=key("validation"), io_manager_key=records, group_name=name,
              ins={"registry": dg.AssetIn(key("registry"))})
    def validation(
        context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, registry: Registry
    ) -> ValidationReport:
        """The module run on held-out rows of every learned drop: blocking checks and quality before/after."""
        sandbox = smolclean_sandbox.get()
        report = validate_registry(registry, _holdout_rows(store), sandbox)
        context.add_output_metadata({**validation_metadata(report), "sandbox": dg.MetadataValue.text(sandbox.level.describe())})
        return report

    @dg.asset(key=key("cleaning_module"), group_name=name,
              ins={"registry": dg.AssetIn(key("registry")), "validation": dg.AssetIn(key("validation"))})
    def cleaning_module(context: dg.AssetExecutionContext, registry: Registry,
                        validation: ValidationReport) -> dg.MaterializeResult:
        """The exported module with its tests (held-out rows replayed) and its report: readable,
        reviewable, runnable without smolclean."""
        path = write_module(registry, s.module_dir)
        tests = write_tests(name, registry.version, len(registry.entries), validation, s.module_dir)
        report = write_report(registry, validation, s.module_dir, plans=store.models("chunks", ChunkPlan),
                              traces=store.models("chunk_functions", ChunkTrace),
                              items=registry.items_for(s.instructions), reads_instructions=s.reads_instructions,
                              metrics=learning_run_metrics(context, s, registry, validation))
        source = path.read_text(encoding="utf-8")
        chart = s.module_dir / "quality.png"
        return dg.MaterializeResult(
            metadata={
                "module": dg.MetadataValue.path(str(path)),
                "tests": dg.MetadataValue.path(str(tests)),
                "report": dg.MetadataValue.path(str(report)),
                **({"chart": dg.MetadataValue.path(str(chart))} if chart.exists() else {}),
                "registry_version": dg.MetadataValue.int(registry.version),
                "functions": dg.MetadataValue.int(len(registry.entries)),
                "code": dg.MetadataValue.md(f"```python\n{source}\n```"),
            }
        )

    @dg.asset(key=key("cleaned_data"), partitions_def=drops, group_name=name, deps=[key("module_version")],
              check_specs=cleaned_check_specs(key("cleaned_data"), drops), kinds={"pandas", s.cleaned_format})
    def cleaned_data(context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource,
                     config: CleanConfig) -> dg.MaterializeResult:
        """The drop cleaned by the live module version (or the one the run's config names) in parallel sandbox
        batches, named after the drop, with the version that cleaned it and the issues the detectors still find
        (checks: every row kept, residual issues under the threshold)."""
        module, number = cleaning_module_for(s, config.version)
        context.instance.add_run_tags(context.run.run_id, {VERSION_TAG: str(number) if number else "unversioned"})
        src = find_drop_file(s, context.partition_key)
        source, state = module.read_text(encoding="utf-8"), FileState.of(src)
        sandbox = smolclean_sandbox.get()
        try:
            result = apply_module(
                source, src, s.cleaned_path(src), sandbox=sandbox, batch_size=s.apply_batch_size,
                workers=s.apply_workers,
                on_batch=lambda n, rows: context.log.info(f"{src.name}: batch {n} done, {rows} rows"),
            )
        except SmolcleanError as exc:  # the drop cannot be read, or cannot be cleaned where the settings say
            raise dg.Failure(description=str(exc), metadata={"file": dg.MetadataValue.path(str(src)),
                                                            "reason": dg.MetadataValue.text(str(exc))}) from exc
        report, version = result.residual, read_module_version(source)
        return dg.MaterializeResult(
            metadata={
                "output": dg.MetadataValue.path(str(result.output)),
                "source": dg.MetadataValue.path(str(src)),
                "source_fingerprint": dg.MetadataValue.text(state.fingerprint),
                "rows_in": dg.MetadataValue.int(result.rows_in),
                "rows_out": dg.MetadataValue.int(result.rows_out),
                "batches": dg.MetadataValue.int(result.batches),
                "workers": dg.MetadataValue.int(result.workers),
                "seconds": dg.MetadataValue.float(result.seconds),
                "rows_per_s": dg.MetadataValue.float(result.rows_per_s),
                "module_version": dg.MetadataValue.int(version if version is not None else -1),
                "version": dg.MetadataValue.int(number or -1),
                "module": dg.MetadataValue.path(str(module)),
                "residual_share": dg.MetadataValue.float(report.share),
                "residual_passed": dg.MetadataValue.bool(report.passes(s.residual_threshold)),
                "residual_rows_sampled": dg.MetadataValue.int(report.rows_sampled),
                **{f"residual_{k}": v for k, v in findings_metadata(list(report.findings)).items()},
                "sandbox": dg.MetadataValue.text(sandbox.level.describe()),
            },
            check_results=cleaned_check_results(result, s.residual_threshold),
        )

    checks = _validation_checks(key("validation"))
    return [raw_data, chunks, chunk_issues, chunk_functions, registry, validation, cleaning_module, cleaned_data], checks


def _holdout_rows(store: DatasetStore) -> pd.DataFrame:
    """The held-out rows of every learned drop: what validation runs the module on."""
    frames = [plan.holdout_rows(store.load_frame("raw_data", plan.drop)) for plan in store.models("chunks", ChunkPlan)]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _validation_checks(validation_key: dg.AssetKey) -> list[dg.AssetChecksDefinition]:
    """Blocking checks on the validation report: a failing one stops the module from being exported."""
    out = []
    for check_name, description in (
        ("module_compiles", "The module parses and passes the code gate."),
        ("no_row_lost", "The module returns every held-out row."),
        ("idempotent", "Cleaning twice gives the same rows as cleaning once."),
        ("quality_not_worse", "No column has more detector findings after cleaning."),
    ):
        out.append(_make_check(validation_key, check_name, description))
    return out


def _make_check(validation_key: dg.AssetKey, check_name: str, description: str) -> dg.AssetChecksDefinition:
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


class _ModelMerger:
    """The LLM's merge for functions it wrote, adding up what its calls cost."""

    def __init__(self, llm, s: DatasetSettings) -> None:
        self.llm, self.settings, self.usage = llm, s, Usage()

    @classmethod
    def for_analyst(cls, analyst, s: DatasetSettings) -> "_ModelMerger | None":
        """One when the dataset's analyst has a model; None for the rules analyst."""
        llm = getattr(analyst, "llm", analyst)
        return cls(llm, s) if hasattr(llm, "merge") else None

    def __call__(self, functions: list[CleaningFunction]) -> CleaningFunction | None:
        proposal = self.llm.merge(self.settings.name, functions, self.settings.instructions)
        self.usage = self.usage.plus(proposal.usage)
        return proposal.function


def _loop_settings(s: DatasetSettings, max_steps: int, max_tokens: int = 0) -> LoopSettings:
    return LoopSettings(max_steps=max_steps, instructions=s.instructions, timeout_s=s.timeout_s,
                        items=split_instructions(s.instructions), max_tokens=max_tokens)

