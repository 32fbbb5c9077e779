"""Module versions in Dagster: the `module_version` asset, whose latest materialization is the versions' current
state (the live version, and which version waits for approval and why, also as its `nothing_awaits_approval`
check), and the jobs that approve a version and roll back from the UI. The versions themselves live in
core/versions.py; which module cleans a drop, in live_module.py.
"""

import getpass
import time
from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg

from ..core.analysts.prompts import template_versions
from ..core.export import module_filename
from ..core.instructions import open_items, split_instructions
from ..core.quality import ValidationReport
from ..core.registry import Registry
from ..core.registry_changes import RegistryChanges, registry_changes
from ..core.shadow import latest_drops, shadow_check
from ..core.steps import ChunkTrace
from ..core.storage import DatasetStore
from ..core.trajectory import LearningMetrics, learning_metrics
from ..core.versions import AlreadyLive, ModuleVersion, VersionError, VersionHistory, VersionStore, why_not_promoted
from ..learning.runs import LEARNING_RUN_TAG
from ..resources import SandboxResource
from ..settings import DatasetSettings
from .drop_runs import DROP_TAG
from .live_module import versions

#: Changes of state shown on the asset, newest first.
HISTORY_ROWS = 20
#: Who promotes under `promote: auto`.
POLICY = "policy promote: auto"
#: The check on `<name>/module_version` that warns while a proposed version waits for a person.
APPROVAL_CHECK = "nothing_awaits_approval"
APPROVAL_DESCRIPTION = ("Warns while a proposed version waits for a person to approve it, saying why it waits and "
                        "how to approve it; passes when no version waits.")
#: Run tags naming the user who launched a run: Dagster+ sets `user` (the launching user's email).
USER_TAG = "user"
DAGSTER_USER_TAG = "dagster/user"


def version_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([name, "module_version"])


def approve_job_name(name: str) -> str:
    return f"{name}_approve_version"


def rollback_job_name(name: str) -> str:
    return f"{name}_rollback_version"


def learning_run_metrics(context: dg.AssetExecutionContext, s: DatasetSettings, registry: Registry,
                         validation: ValidationReport) -> LearningMetrics:
    """The figures of the learning run this export ends (its drop's chunk traces, wall time since its first run).

    The instruction items are counted whichever analyst ran, as the report's summary of them counts them: the
    user's items, or the model's own plan (an item the rules analyst cannot read stays open, and is counted so)."""
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
    states = registry.coverage(registry.items_for(s.instructions))
    return learning_metrics(traces, states, cells_changed=validation.cells_changed, seconds=seconds,
                            prompts=template_versions())


def build_module_version(s: DatasetSettings) -> dg.AssetsDefinition:
    """The `module_version` asset: a learning run's export becomes a version (live if first, else proposed)."""
    name = s.name

    @dg.asset(key=version_key(name), group_name=name,
              ins={"registry": dg.AssetIn(dg.AssetKey([name, "registry"])),
                   "validation": dg.AssetIn(dg.AssetKey([name, "validation"]))},
              deps=[dg.AssetKey([name, "cleaning_module"])], kinds={"python"},
              check_specs=[dg.AssetCheckSpec(APPROVAL_CHECK, asset=version_key(name), description=APPROVAL_DESCRIPTION)])
    def module_version(context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource, registry: Registry,
                       validation: ValidationReport) -> dg.MaterializeResult:
        """The module versions' current state: which version is live, and which waits for approval and why.

        A learning run's export becomes a version: the first goes live at once, a later one is proposed and runs
        beside the live one on the latest drops (the shadow check: every cell it would clean differently, per
        function); it goes live when approved (the job `<name>_approve_version`, or `smolclean approve`), or on
        its own with `promote: auto` within the limit. Every change of state (approve, roll back) records the
        state again, so the latest materialization is the current state."""
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
            why = _why_it_waits(s, version, registry, validation)
            if why is None:
                context.log.info(f"version {version.number} goes live: {version.shadow.summary()}")
                version = store.approve(version.number, by=POLICY, why=f"validation passed, no item open, "
                                        f"{version.shadow.summary()} (under {s.promote_max_changed_share:.2%})")
            else:
                version = store.record_waiting(version.number, why)
        if version.state == "proposed":
            context.log.info(f"version {version.number} waits for approval: {waits_because(version)}. "
                             f"{approve_hint(name, version.number)}")
        history = store.load()
        check = approval_check(history)
        return dg.MaterializeResult(
            metadata={**version_metadata(history, history.get(version.number)), **_numbers(metrics)},
            check_results=[dg.AssetCheckResult(check_name=APPROVAL_CHECK, passed=check.passed,
                                               severity=dg.AssetCheckSeverity.WARN, description=check.description,
                                               metadata=check.metadata)],
        )

    return module_version


def _shadow(s: DatasetSettings, store: VersionStore, version: ModuleVersion, live: ModuleVersion,
            changes: RegistryChanges, sandbox: SandboxResource) -> ModuleVersion:
    diff = shadow_check(
        store.module_path(live.number).read_text(encoding="utf-8"),
        store.module_path(version.number).read_text(encoding="utf-8"),
        latest_drops(s.drops_dir, s.glob), sandbox.get(), changes, live_version=live.number,
    )
    return store.record_shadow(version.number, diff)


def _why_it_waits(s: DatasetSettings, version: ModuleVersion, registry: Registry,
                  validation: ValidationReport) -> str | None:
    """Why a new proposed version waits for a person; None when `promote: auto` lets it go live."""
    if s.promote != "auto":
        return "promote is 'manual' (the default): every new version waits for a person to review its diff"
    left = open_items(registry.coverage(split_instructions(s.instructions))) if s.reads_instructions else ()
    why = why_not_promoted(validation_passed=validation.passed, open_items=[i.number for i in left],
                           shadow=version.shadow, limit=s.promote_max_changed_share)
    return None if why is None else f"promote: auto leaves it to a person: {why}"


def approve_hint(name: str, number: int) -> str:
    """How to make version `number` live, in the UI and on the command line."""
    return (f"To make it live, launch the job {approve_job_name(name)} with version: {number}, "
            f"or run `smolclean approve {name} {number}`")


def version_metadata(history: VersionHistory, version: ModuleVersion) -> dict[str, dg.MetadataValue]:
    """The versions' state as the UI shows it: the live version, what waits for approval and why, then `version`
    (the one this event is about) with its state, what changed, its shadow diff, and the audit trail."""
    live = history.live
    out: dict[str, dg.MetadataValue] = {
        "live_version": dg.MetadataValue.int(live.number if live else -1),
        "waiting_for_approval": dg.MetadataValue.text(waiting_text(history)),
        "version": dg.MetadataValue.int(version.number),
        "state": dg.MetadataValue.text(version.state),
        "registry_revision": dg.MetadataValue.int(version.registry_version),
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


def waits_because(version: ModuleVersion) -> str:
    """Why a proposed version waits (a version proposed before reasons were kept has none)."""
    return version.waits_because or "it was proposed and nobody approved it yet"


def waiting_text(history: VersionHistory) -> str:
    """The versions that wait for approval, each with why, in one line; "none" when nothing waits."""
    return "; ".join(f"version {v.number}: {waits_because(v)}" for v in history.waiting) or "none"


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


@dataclass(frozen=True)
class ApprovalCheck:
    """The `nothing_awaits_approval` check's outcome: a warning while a proposed version waits for a person."""

    passed: bool
    description: str
    metadata: dict[str, dg.MetadataValue]


def approval_check(history: VersionHistory) -> ApprovalCheck:
    """Whether a version waits for approval, and which, why and how to approve it."""
    live = history.live
    waiting = history.waiting
    if not waiting:
        return ApprovalCheck(True, f"nothing waits for approval; version {live.number if live else '-'} is live",
                             {"waiting": dg.MetadataValue.text("none")})
    newest = waiting[0]
    return ApprovalCheck(
        False, f"version {newest.number} waits for approval: {waits_because(newest)}",
        {"waiting": dg.MetadataValue.text(", ".join(str(v.number) for v in waiting)),
         "why": dg.MetadataValue.text(waiting_text(history)),
         "approve": dg.MetadataValue.text(approve_hint(history.dataset, newest.number)),
         "live_version": dg.MetadataValue.int(live.number if live else -1)},
    )


def state_events(s: DatasetSettings, version: ModuleVersion) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """A change of state (approve, roll back) as the events that make the UI show the new state: a
    materialization of `<name>/module_version` (its overview shows the latest) and its approval check."""
    history = versions(s).load()
    check = approval_check(history)
    return [
        dg.AssetMaterialization(asset_key=version_key(s.name), description=f"version {version.number} is {version.state}",
                                metadata=version_metadata(history, history.get(version.number))),
        dg.AssetCheckEvaluation(asset_key=version_key(s.name), check_name=APPROVAL_CHECK, passed=check.passed,
                                severity=dg.AssetCheckSeverity.WARN, description=check.description,
                                metadata=check.metadata),
    ]


def report_state_change(instance: dg.DagsterInstance, s: DatasetSettings, version: ModuleVersion) -> None:
    """Show a change of state made outside a run (`smolclean approve`, `rollback`) on the asset in the UI."""
    for event in state_events(s, version):
        instance.report_runless_asset_event(event)


def current_user() -> str:
    """The account running this process."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown user"


def command_line_user() -> str:
    """Who changes a version from the command line, for the audit trail."""
    return f"{current_user()} (command line)"


def run_user(run: dg.DagsterRun) -> str:
    """Who launched a run, for the audit trail: the user Dagster tagged it with (Dagster+ tags the launching
    user's email as `user`), else the account the run ran as, with the run's id either way."""
    user = run.tags.get(USER_TAG) or run.tags.get(DAGSTER_USER_TAG)
    if user:
        return f"{user} (run {run.run_id[:8]})"
    return f"{current_user()} (account of run {run.run_id[:8]})"


class ApproveConfig(dg.Config):
    """Which version to make live, and why (the audit trail keeps the reason with who launched the run)."""

    version: int
    reason: str = "approved in the UI"


class RollbackConfig(dg.Config):
    """Which version to make live again (none: the one live before the current one), and why."""

    to: int | None = None
    reason: str = "rolled back in the UI"


def build_approve_job(s: DatasetSettings) -> dg.JobDefinition:
    """The job `<name>_approve_version`: launch it in the UI with the version to make live. Its run records the
    change on `<name>/module_version`, with who launched it."""
    name = s.name

    @dg.op(name=f"{name}_approve", out=dg.Out(dg.Nothing))
    def approve(context: dg.OpExecutionContext, config: ApproveConfig) -> None:
        _change_state(context, s, lambda store, by: store.approve(config.version, by=by, why=config.reason),
                      done="is live")

    @dg.job(name=approve_job_name(name),
            description=f"Make a version of {name!r}'s module live (ops: {name}_approve: config: version: N, "
            "reason: ...). Drops are then cleaned by it.")
    def approve_version() -> None:
        approve()

    return approve_version


def build_rollback_job(s: DatasetSettings) -> dg.JobDefinition:
    """The job `<name>_rollback_version`: launch it in the UI to make the version live before the current one
    live again (or the version `to` names). Its run records the change on `<name>/module_version`."""
    name = s.name

    @dg.op(name=f"{name}_rollback", out=dg.Out(dg.Nothing))
    def rollback(context: dg.OpExecutionContext, config: RollbackConfig) -> None:
        _change_state(context, s, lambda store, by: store.rollback(config.to, by=by, why=config.reason),
                      done="is live again")

    @dg.job(name=rollback_job_name(name),
            description=f"Make the previous live version of {name!r}'s module live again, or the one named "
            f"(ops: {name}_rollback: config: to: N, reason: ...). Drops are then cleaned by it.")
    def rollback_version() -> None:
        rollback()

    return rollback_version


def _change_state(context: dg.OpExecutionContext, s: DatasetSettings,
                  change: Callable[[VersionStore, str], ModuleVersion], done: str) -> None:
    """Make the change, audited with who launched the run, and record the new state on the asset. Asking for the
    version that is live already changes nothing and says so; any other refusal fails the run with its reason."""
    try:
        version = change(versions(s), run_user(context.run))
    except AlreadyLive as exc:
        context.log.info(f"{exc}: nothing to change")
        return
    except VersionError as exc:
        raise dg.Failure(description=str(exc)) from None
    context.log.info(f"version {version.number} of {s.name!r} {done}")
    for event in state_events(s, version):
        context.log_event(event)
