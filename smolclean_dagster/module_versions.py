"""Module versions in Dagster: the `module_version` asset that proposes a version at the end of a learning run
(with its shadow check and figures), and the job that approves one from the UI. The versions themselves live
in core/versions.py; which module cleans a drop, in live_module.py.
"""

import getpass
import time

import dagster as dg

from .core.analysts.prompts import template_versions
from .core.export import module_filename
from .core.instructions import open_items, split_instructions
from .core.quality import ValidationReport
from .core.registry import Registry
from .core.registry_changes import RegistryChanges, registry_changes
from .core.shadow import latest_drops, shadow_check
from .core.steps import ChunkTrace
from .core.storage import DatasetStore
from .core.trajectory import LearningMetrics, learning_metrics
from .core.versions import ModuleVersion, VersionHistory, VersionStore, why_not_promoted
from .drop_runs import DROP_TAG
from .learning_runs import LEARNING_RUN_TAG
from .live_module import versions
from .resources import SandboxResource
from .settings import DatasetSettings

#: Changes of state shown on the asset, newest first.
HISTORY_ROWS = 20
#: Who promotes under `promote: auto`.
POLICY = "policy promote: auto"


def version_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([name, "module_version"])


def approve_job_name(name: str) -> str:
    return f"{name}_approve_version"


def learning_run_metrics(context: dg.AssetExecutionContext, s: DatasetSettings, registry: Registry,
                         validation: ValidationReport) -> LearningMetrics:
    """The figures of the learning run this export ends (its drop's chunk traces, wall time since its first run)."""
    store = DatasetStore(s.storage_dir, s.name)
    drop = context.run.tags.get(DROP_TAG)
    traces = [t for t in store.models("chunk_functions", ChunkTrace) if drop is None or t.drop == drop]
    seconds = 0.0
    learning_run = context.run.tags.get(LEARNING_RUN_TAG)
    if learning_run:
        records = context.instance.get_run_records(dg.RunsFilter(tags={LEARNING_RUN_TAG: learning_run}))
        starts = [r.start_time for r in records if r.start_time]
        parent = context.instance.get_run_record_by_id(learning_run)  # a sensor's learning run names itself
        if parent is not None and parent.start_time:
            starts.append(parent.start_time)
        seconds = time.time() - min(starts) if starts else 0.0
    states = registry.coverage(split_instructions(s.instructions)) if s.reads_instructions else ()
    return learning_metrics(traces, states, cells_changed=validation.cells_changed, seconds=seconds,
                            prompts=template_versions())


def build_module_version(s: DatasetSettings) -> dg.AssetsDefinition:
    """The `module_version` asset: a learning run's export becomes a version (live if first, else proposed)."""
    name = s.name

    @dg.asset(key=version_key(name), group_name=name,
              ins={"registry": dg.AssetIn(dg.AssetKey([name, "registry"])),
                   "validation": dg.AssetIn(dg.AssetKey([name, "validation"]))},
              deps=[dg.AssetKey([name, "cleaning_module"])], kinds={"python"})
    def module_version(context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, registry: Registry,
                       validation: ValidationReport) -> dg.MaterializeResult:
        """The exported module as a version: the first goes live at once, a later one is proposed and runs
        beside the live one on the latest drops (the shadow check: every cell it would clean differently, per
        function); it goes live when approved (`smolclean approve`, or the job `<name>_approve_version`), or
        on its own with `promote: auto` within the limit."""
        store = versions(s)
        before = store.load()
        source = (s.module_dir / module_filename(name)).read_text(encoding="utf-8")
        live = before.live
        previous = store.registry(live.number) if live is not None else Registry(dataset=name)
        changes = registry_changes(previous, registry)
        metrics = learning_run_metrics(context, s, registry, validation)
        version = store.propose(registry, source, changes, learning_run=context.run.tags.get(LEARNING_RUN_TAG, ""),
                                drop=context.run.tags.get(DROP_TAG, ""), metrics=metrics)
        if version.state == "proposed" and live is not None and version.shadow is None:
            version = _shadow(s, store, version, live, changes, smolclean_sandbox)
            version = _maybe_promote(s, store, version, registry, validation, context)
        history = store.load()
        return dg.MaterializeResult(metadata={**version_metadata(history, history.get(version.number)),
                                              **_numbers(metrics)})

    return module_version


def _shadow(s: DatasetSettings, store: VersionStore, version: ModuleVersion, live: ModuleVersion,
            changes: RegistryChanges, sandbox: SandboxResource) -> ModuleVersion:
    diff = shadow_check(
        store.module_path(live.number).read_text(encoding="utf-8"),
        store.module_path(version.number).read_text(encoding="utf-8"),
        latest_drops(s.drops_dir, s.glob), sandbox.get(), changes, live_version=live.number,
    )
    return store.record_shadow(version.number, diff)


def _maybe_promote(s: DatasetSettings, store: VersionStore, version: ModuleVersion, registry: Registry,
                   validation: ValidationReport, context: dg.AssetExecutionContext) -> ModuleVersion:
    """Under `promote: auto`, the version goes live when the policy lets it; otherwise it waits for a person, and
    the log says why."""
    if s.promote != "auto":
        return version
    left = open_items(registry.coverage(split_instructions(s.instructions))) if s.reads_instructions else ()
    why = why_not_promoted(validation_passed=validation.passed, open_items=[i.number for i in left],
                           shadow=version.shadow, limit=s.promote_max_changed_share)
    if why is not None:
        context.log.info(f"version {version.number} waits for approval: {why}")
        return version
    context.log.info(f"version {version.number} goes live: {version.shadow.summary()}")
    return store.approve(version.number, by=POLICY, why=f"validation passed, no item open, {version.shadow.summary()} "
                         f"(under {s.promote_max_changed_share:.2%})")


def version_metadata(history: VersionHistory, version: ModuleVersion) -> dict[str, dg.MetadataValue]:
    """One version as the UI shows it: its state, what changed, its shadow diff, and the audit trail."""
    live = history.live
    out: dict[str, dg.MetadataValue] = {
        "version": dg.MetadataValue.int(version.number),
        "state": dg.MetadataValue.text(version.state),
        "live_version": dg.MetadataValue.int(live.number if live else -1),
        "registry_version": dg.MetadataValue.int(version.registry_version),
        "changes": dg.MetadataValue.md(version_changes(version)),
        "history": dg.MetadataValue.md(history_markdown(history)),
    }
    if version.shadow is not None:
        out["shadow_diff"] = dg.MetadataValue.md(version.shadow.markdown())
        out["shadow_cells"] = dg.MetadataValue.int(version.shadow.cells)
        out["shadow_cells_changed"] = dg.MetadataValue.int(version.shadow.changed)
        out["shadow_changed_share"] = dg.MetadataValue.float(version.shadow.share)
    if version.metrics is not None and version.metrics.prompts:
        out["prompt_versions"] = dg.MetadataValue.text(
            ", ".join(f"{k} v{v}" for k, v in sorted(version.metrics.prompts.items())))
    return out


def _numbers(metrics: LearningMetrics) -> dict[str, dg.MetadataValue]:
    return {f"run_{k}": (dg.MetadataValue.float(float(v)) if isinstance(v, float) else dg.MetadataValue.int(v))
            for k, v in metrics.numbers().items()}


def version_changes(version: ModuleVersion) -> str:
    parts = [f"added {', '.join(version.added)}" if version.added else "",
             f"changed {', '.join(version.changed)}" if version.changed else "",
             f"removed {', '.join(version.removed)}" if version.removed else ""]
    return "; ".join(p for p in parts if p) or "no function changed"


def history_markdown(history: VersionHistory) -> str:
    """The latest changes of state, newest first: who, when and why (`smolclean versions` lists them all)."""
    rows = ["| version | state | was | by | when | why |", "|---|---|---|---|---|---|"]
    rows += [f"| {c.version} | {c.state} | {c.previous or '-'} | {c.by} | {c.at} | {c.why.replace('|', '/')} |"
             for c in list(reversed(history.changes))[:HISTORY_ROWS]]
    return "\n".join(rows)


def record_state_change(instance: dg.DagsterInstance, s: DatasetSettings, version: ModuleVersion) -> None:
    """Show a change of state made outside a run (`smolclean approve`, `rollback`) on the asset in the UI."""
    history = versions(s).load()
    instance.report_runless_asset_event(dg.AssetObservation(
        asset_key=version_key(s.name), description=f"version {version.number} is {version.state}",
        metadata=version_metadata(history, history.get(version.number)),
    ))


def current_user() -> str:
    """Who is running this, for the audit trail."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown user"


class ApproveConfig(dg.Config):
    """Which version to make live, and why (the audit trail keeps both)."""

    version: int
    reason: str = "approved in the UI"
    by: str = ""


def build_approve_job(s: DatasetSettings) -> dg.JobDefinition:
    """The job `<name>_approve_version`: launch it in the UI with the version to make live (also an older one,
    to roll back). Its run records the change on `<name>/module_version`."""
    name = s.name

    @dg.op(name=f"{name}_approve", out=dg.Out(dg.Nothing))
    def approve(context: dg.OpExecutionContext, config: ApproveConfig) -> None:
        by = config.by or f"the UI (run {context.run_id[:8]})"
        version = versions(s).approve(config.version, by=by, why=config.reason)
        history = versions(s).load()
        context.log.info(f"version {version.number} of {name!r} is live")
        context.log_event(dg.AssetObservation(
            asset_key=version_key(name), description=f"version {version.number} is live",
            metadata=version_metadata(history, version),
        ))

    @dg.job(name=approve_job_name(name),
            description=f"Make a version of {name!r}'s module live: give its number in the run config "
            f"(ops: {name}_approve: config: version). Drops are then cleaned by it.")
    def approve_version() -> None:
        approve()

    return approve_version
