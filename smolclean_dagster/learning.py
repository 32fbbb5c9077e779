"""Drive the learning flow of a drop through the Dagster assets, run by run, on a workdir's instance.

This is what `smolclean learn` and `smolclean demo` do; in the UI the same assets are materialized by hand
or by sensors. Each chunk is its own run, so every chunk partition carries its own trace.
"""

from __future__ import annotations

import logging
import shutil
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from .assets import build_dataset_assets
from .core.drops import drop_format, drop_key
from .core.errors import SmolcleanError
from .core.export import module_filename
from .core.plan import ChunkPlan
from .core.quality import ValidationReport
from .core.storage import DatasetStore
from .factory import build_defs
from .partitions import drops_partitions
from .settings import DatasetSettings, save_settings

log = logging.getLogger("smolclean.learning")

_DAGSTER_YAML = """\
telemetry:
  enabled: false
python_logs:
  managed_python_loggers: [smolclean]
"""


def workdir_instance(workdir: Path) -> dg.DagsterInstance:
    """The Dagster instance kept under `<workdir>/dagster_home` (created on first use)."""
    home = (Path(workdir) / "dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(_DAGSTER_YAML, encoding="utf-8")
    return dg.DagsterInstance.from_config(str(home))


@dataclass(frozen=True)
class LearnOutcome:
    """Where the results of a learning run are."""

    dataset: str
    drop: str
    module: Path
    report: Path
    cleaned: Path
    functions: int
    chunks: int
    validation: ValidationReport


def place_drop(settings: DatasetSettings, source: Path) -> Path:
    """The drop's file inside the dataset's drop folder (copied there when it is elsewhere)."""
    source = Path(source)
    drop_format(source)  # unknown extensions fail here, before anything is stored
    if not source.is_file():
        raise SmolcleanError(f"{source}: no such file")
    folder = settings.check_drop_folder()
    folder.mkdir(parents=True, exist_ok=True)
    if source.resolve().parent == folder.resolve():
        return source
    target = folder / source.name
    if not target.exists() or target.read_bytes() != source.read_bytes():
        tmp = folder / f".{source.name}.tmp"
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    return target


def learn(
    settings: DatasetSettings,
    source: Path,
    instance: dg.DagsterInstance | None = None,
    *,
    log_level: str = "WARNING",
) -> LearnOutcome:
    """Learn (or extend) the dataset's cleaning module from one drop, and clean that drop with it.

    Example:
        >>> learn(DatasetSettings(name="customers", workdir="work"), Path("customers.csv"))  # doctest: +SKIP
    """
    instance = instance or workdir_instance(settings.workdir)
    save_settings(settings)
    path = place_drop(settings, source)
    key = drop_key(path)
    drops = drops_partitions(settings.name)
    if not instance.has_dynamic_partition(drops.name, key):
        instance.add_dynamic_partitions(drops.name, [key])
    assets, checks = build_dataset_assets(settings)
    resources = build_defs(settings).resources

    def run(asset_names: list[str], partition: str | None) -> dg.ExecuteInProcessResult:
        selection = dg.AssetSelection.assets(*[dg.AssetKey([settings.name, a]) for a in asset_names])
        return dg.materialize(
            [*assets, *checks], selection=selection, partition_key=partition, instance=instance,
            resources=resources, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
        )

    _ok(run(["raw_data"], key), f"reading drop {path}")
    store = DatasetStore(settings.storage_dir, settings.name)

    def finish_wave(plan: ChunkPlan) -> list[str]:
        """Run the chosen chunks that have no stored trace yet (finished chunks are never redone)."""
        pending = [c for c in plan.selected if not store.path("chunk_functions", c, "json").exists()]
        if pending:
            log.info("wave %d: %d chunk(s), %d at a time", plan.waves, len(pending), settings.concurrency)
            _run_wave(pending, lambda cid: _ok(run(["chunk_issues", "chunk_functions"], cid), f"chunk {cid}"),
                      settings.concurrency, settings, instance, log_level)
        return pending

    # An interrupted run (killed, or a chunk that failed) left a wave unfinished: finish it and publish the
    # registry before choosing more chunks, so the next wave is chosen from the same registry as in a run
    # that was never interrupted, and the module comes out the same.
    interrupted = _stored_plan(store, key)
    if interrupted is not None and not interrupted.done:
        finish_wave(interrupted)
        _ok(run(["registry"], None), "publishing the registry")
    chosen = -1
    while True:
        _ok(run(["chunks"], key), f"choosing chunks of {path}")
        plan = store.load_model("chunks", ChunkPlan, key)
        grew, chosen = len(plan.selected) > chosen, len(plan.selected)
        pending = finish_wave(plan)
        if pending:
            _ok(run(["registry"], None), "publishing the registry")
        if plan.done or not (pending or grew):
            break
    result = run(["registry", "validation", "cleaning_module"], None)
    validation = store.load_model("validation", ValidationReport)
    if not validation.passed:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in validation.checks if not c.passed)
        raise SmolcleanError(f"validation of {settings.name!r} failed, the module was not exported: {failed}")
    _ok(result, "validating and exporting the module")
    _ok(run(["cleaned_data"], key), f"cleaning drop {path}")
    return LearnOutcome(
        dataset=settings.name,
        drop=key,
        module=settings.module_dir / module_filename(settings.name),
        report=settings.module_dir / "report.md",
        cleaned=settings.cleaned_path(path),
        functions=len(store.registry.load().entries),
        chunks=len(plan.selected),
        validation=validation,
    )


def _stored_plan(store: DatasetStore, key: str) -> ChunkPlan | None:
    """The chunk plan a previous run stored for drop `key`, if any."""
    try:
        return store.load_model("chunks", ChunkPlan, key)
    except SmolcleanError:
        return None


def _run_wave(chunks: list[str], run_one, concurrency: int, settings: DatasetSettings, instance, log_level: str) -> None:
    """Run the chunks of a wave, `concurrency` at a time.

    Dagster's in-process execution is not thread-safe (its log capture deadlocks across threads), so
    parallel chunks run in spawned processes on the same instance; one at a time they run right here.
    """
    if concurrency <= 1 or len(chunks) == 1:
        for cid in chunks:
            run_one(cid)
        return
    ctx = multiprocessing.get_context("spawn")
    payload = settings.model_dump_json()
    with ProcessPoolExecutor(max_workers=min(concurrency, len(chunks)), mp_context=ctx) as pool:
        futures = [pool.submit(_chunk_process, payload, instance.get_ref(), cid, log_level) for cid in chunks]
        errors = [f.result() for f in futures]
    failed = [e for e in errors if e]
    if failed:
        raise SmolcleanError(failed[0])


def _chunk_process(settings_json: str, instance_ref, cid: str, log_level: str) -> str | None:
    """One chunk's run in a worker process; returns the error text instead of raising across processes."""
    settings = DatasetSettings.model_validate_json(settings_json)
    assets, checks = build_dataset_assets(settings)
    with dg.DagsterInstance.from_ref(instance_ref) as instance:
        result = dg.materialize(
            [*assets, *checks],
            selection=dg.AssetSelection.assets(
                dg.AssetKey([settings.name, "chunk_issues"]), dg.AssetKey([settings.name, "chunk_functions"])
            ),
            partition_key=cid, instance=instance, resources=build_defs(settings).resources, raise_on_error=False,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
        )
        try:
            _ok(result, f"chunk {cid}")
        except SmolcleanError as exc:
            return str(exc)
    return None


def _ok(result: dg.ExecuteInProcessResult, what: str) -> None:
    if result.success:
        return
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            err = event.step_failure_data.error
            cause = err.cause or err
            raise SmolcleanError(f"{what} failed in step {event.step_key}: {cause.message.strip()}")
    raise SmolcleanError(f"{what} failed (run {result.run_id}); see the run in `smolclean ui`")
