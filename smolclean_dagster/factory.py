"""build_defs(...): Definitions for one or more datasets."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import dagster as dg

from .learning.answers import build_answer_job
from .assets import build_dataset_assets
from .learning.drop_learning import build_drop_learning
from .cleaning.drop_runs import drop_jobs
from .io_managers import FramesIOManager, RecordsIOManager
from .learning.runs import learning_jobs
from .cleaning.module_versions import build_approve_job, build_module_version, build_rollback_job
from .resources import LLMResource, SandboxResource
from .operations.schedules import build_reclean_schedule
from .operations.sensors import build_sensors
from .settings import DatasetSettings


def build_defs(
    *datasets: DatasetSettings | Mapping[str, object],
    sandbox: SandboxResource | None = None,
    executor: dg.ExecutorDefinition | dg.Executor | None = None,
    llm: LLMResource | None = None,
) -> dg.Definitions:
    """Definitions for the learning flow and the cleaning of drops of each dataset.

    `llm` is the LLM connection for datasets whose settings name no model (default: none, so those use
    the offline rules analyst). `executor` runs the steps of every run (default: Dagster's multiprocess executor); e.g.
    `dagster_celery.celery_executor` to spread them over Celery workers (see deploy/ and docs/deployment.md).

    Example:
        >>> from smolclean_dagster import DatasetSettings, build_defs
        >>> defs = build_defs(DatasetSettings(name="customers", workdir="work"))
        >>> sorted(k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys())[:2]
        ['customers/chunk_functions', 'customers/chunk_issues']
    """
    settings = [d if isinstance(d, DatasetSettings) else DatasetSettings.load(**dict(d)) for d in datasets]
    names = [s.name for s in settings]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        from .core.errors import SettingsError

        raise SettingsError(f"setting 'name': dataset(s) {dupes} configured twice; names must be unique")
    assets: list[dg.AssetsDefinition] = []
    checks: list[dg.AssetChecksDefinition] = []
    resources: dict[str, object] = {
        "smolclean_sandbox": sandbox or _shared_sandbox(any(s.require_strong_sandbox for s in settings)),
        "smolclean_llm": llm or _no_llm(),
    }
    jobs: list[dg.UnresolvedAssetJobDefinition | dg.JobDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    schedules: list[dg.ScheduleDefinition] = []
    for s in settings:
        a, c = build_dataset_assets(s)
        assets += [*a, build_drop_learning(s), build_module_version(s)]
        checks += c
        # Operations: new drops cleaned by a sensor, stale ones by a schedule, dirty ones taught back (a learning
        # run's steps submitted by a sensor too).
        ops_jobs, learn_jobs = drop_jobs(s, deployment_executor=executor is not None), learning_jobs(s)
        jobs += [*ops_jobs, *learn_jobs, build_approve_job(s), build_rollback_job(s), build_answer_job(s)]
        sensors += build_sensors(s, ops_jobs, learn_jobs)
        schedules.append(build_reclean_schedule(s, ops_jobs[0]))
        resources[f"{s.name}_frames"] = FramesIOManager(storage_dir=str(s.storage_dir), dataset=s.name)
        resources[f"{s.name}_records"] = RecordsIOManager(storage_dir=str(s.storage_dir), dataset=s.name)
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs, sensors=sensors, schedules=schedules,
                          resources=resources, executor=executor)


@cache
def _shared_sandbox(require_strong: bool) -> SandboxResource:
    """One default sandbox resource object per strictness: Definitions.merge accepts a resource key twice only
    when it is the same object, so the Definitions of several datasets (several Components) merge."""
    return SandboxResource(require_strong=require_strong)


@cache
def _no_llm() -> LLMResource:
    """The default LLM resource (no connection): one object, for the same reason as the sandbox's."""
    return LLMResource()
