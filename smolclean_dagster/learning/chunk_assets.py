"""Learning a drop chunk by chunk, as assets: the drop read raw, its chunks chosen, each chunk's findings and
each chunk's agent loop.

raw_data (per drop) -> chunks (per drop; registers chunk partitions) -> chunk_issues (per chunk)
-> chunk_functions (per chunk: the agent loop, in the LLM pool)
"""

# No `from __future__ import annotations`: Dagster reads the asset functions' type hints as classes.

import dagster as dg
import pandas as pd
from pydantic import BaseModel, ConfigDict

from ..asset_keys import DatasetKeys
from ..core.analysts.asked import asks_the_rules, asks_to_normalise_whitespace, left_as_written
from ..core.drops import read_drop
from ..core.errors import SmolcleanError
from ..core.instructions import open_items, split_instructions
from ..core.label_store import stored_labels
from ..core.labels import Labels
from ..core.loop import ChunkWork, LoopSettings, clean_with, run_chunk
from ..core.plan import ChunkPlan, StepBudget, plan_chunks
from ..core.profile import Finding, detect_issues
from ..core.steps import ChunkTrace
from ..core.storage import DatasetStore
from ..core.validate import SAMPLE_ROWS
from ..drop_folder import find_drop_file
from ..metadata import findings_metadata, frame_preview, plan_metadata, trace_metadata
from ..partitions import chunks_partitions, drops_partitions
from ..resources import LLM_POOL, LLMResource, SandboxResource
from ..settings import DatasetSettings

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


def locate_chunk(store: DatasetStore, chunk: str) -> ChunkPlan:
    """The plan of the drop that holds chunk `chunk`."""
    for plan in store.models("chunks", ChunkPlan):
        if chunk in plan.selected:
            return plan
    raise SmolcleanError(f"chunk {chunk!r} of {store.dataset!r}: no drop plan holds it; materialize the drop's chunks first")


def raw_data_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/raw_data`: the drop as read raw, per drop."""

    @dg.asset(key=keys.key("raw_data"), partitions_def=drops_partitions(s.name), io_manager_key=keys.frames,
              group_name=keys.group, kinds={"pandas"})
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

    return raw_data


def chunks_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/chunks`: a drop's chunks and the next wave of them, per drop."""
    store, chunk_parts = DatasetStore(s.storage_dir, s.name), chunks_partitions(s.name)

    @dg.asset(
        key=keys.key("chunks"), partitions_def=drops_partitions(s.name), io_manager_key=keys.records,
        group_name=keys.group, ins={"raw_data": dg.AssetIn(keys.key("raw_data"))},
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
        labels = stored_labels(store, context.partition_key, raw_data)
        plan = plan_chunks(
            raw_data, dataset=s.name, drop=context.partition_key, chunk_size=s.chunk_size,
            budget=s.chunk_budget, holdout_fraction=s.holdout_fraction, wave_size=s.planning_interval,
            clean=lambda rows: clean_with(registry, rows, sandbox), previous=previous,
            steps=StepBudget(total=s.step_budget, per_chunk=s.max_steps, used=used,
                             tokens=s.token_budget if s.reads_instructions else 0, tokens_used=tokens),
            open_items=tuple(i.number for i in open_items(registry.coverage(items))),
            first_wave=1 if s.reads_instructions else s.planning_interval,
            ask_model=s.reads_instructions,
            left_alone=left_as_written(s.instructions),
            taught=labels is not None and bool(labels.corrections),
            asked=not s.reads_instructions and asks_the_rules(s.instructions, [str(c) for c in raw_data.columns]),
            spacing_asked=asks_to_normalise_whitespace(s.instructions),
        )
        new = [c for c in plan.selected if not context.instance.has_dynamic_partition(chunk_parts.name, c)]
        if new:
            context.instance.add_dynamic_partitions(chunk_parts.name, new)
        context.add_output_metadata({**plan_metadata(plan), "registry_revision": dg.MetadataValue.int(registry.version)})
        return plan

    return chunks


def chunk_issues_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/chunk_issues`: what the detectors find in a chunk, per chunk."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=keys.key("chunk_issues"), partitions_def=chunks_partitions(s.name), io_manager_key=keys.records,
              group_name=keys.group, deps=[keys.key("chunks")])
    def chunk_issues(context: dg.AssetExecutionContext) -> ChunkFindings:
        """What the detectors find in the chunk's raw rows (held-out rows excluded)."""
        plan = locate_chunk(store, context.partition_key)
        rows = plan.chunk_rows(store.load_frame("raw_data", plan.drop), context.partition_key)
        findings = detect_issues(rows)
        context.add_output_metadata(findings_metadata(findings))
        return ChunkFindings(dataset=s.name, drop=plan.drop, chunk_id=context.partition_key, rows=len(rows),
                             findings=tuple(findings))

    return chunk_issues


def chunk_functions_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/chunk_functions`: the agent loop on a chunk, per chunk, in the LLM pool."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=keys.key("chunk_functions"), partitions_def=chunks_partitions(s.name), io_manager_key=keys.records,
              group_name=keys.group, ins={"chunk_issues": dg.AssetIn(keys.key("chunk_issues"))}, pool=LLM_POOL)
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
        reference = plan.visible_rows(df, limit=REFERENCE_ROWS)
        # one frame when the drop is small enough for both: the registry then cleans it once per step, not twice
        sample = reference if len(reference) <= SAMPLE_ROWS else plan.visible_rows(df, limit=SAMPLE_ROWS)
        work = ChunkWork(
            dataset=s.name, drop=plan.drop, chunk_id=context.partition_key,
            rows=plan.chunk_rows(df, context.partition_key), holdout=plan.holdout_rows(df),
            reference=reference, sample=sample,
            hidden=frozenset(c.id for c in plan.chunks if c.wave == wave and c.reason and c.id != context.partition_key),
            why=plan.chunk(context.partition_key).reason,
        )
        sandbox = smolclean_sandbox.get()
        steps = []
        chosen = plan.chunk(context.partition_key)
        loop_settings = _loop_settings(s, chosen.steps or s.max_steps, chosen.tokens,
                                       labels=stored_labels(store, plan.drop, df))
        for step in run_chunk(work, smolclean_llm.analyst_for(s), store.registry, sandbox, loop_settings):
            context.log.info(f"{context.partition_key}: {step.kind} {step.model_dump(exclude={'code', 'issues'})}")
            steps.append(step)
        trace = ChunkTrace(dataset=s.name, drop=plan.drop, chunk_id=context.partition_key, rows=len(work.rows),
                           steps=tuple(steps))
        context.add_output_metadata({**trace_metadata(trace), "sandbox": dg.MetadataValue.text(sandbox.level.describe())})
        return trace

    return chunk_functions


def _loop_settings(s: DatasetSettings, max_steps: int, max_tokens: int = 0, *, labels: Labels | None = None) -> LoopSettings:
    return LoopSettings(max_steps=max_steps, instructions=s.instructions, timeout_s=s.timeout_s,
                        items=split_instructions(s.instructions), max_tokens=max_tokens, labels=labels)
