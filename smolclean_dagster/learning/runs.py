"""The runs of a learning flow: a named job per step, the tags tying each run to its dataset, drop, wave and
learning run, and which runs a learning needs next.

A learning run (`smolclean learn`, or the `drop_learning` asset) is many Dagster runs: reading the drop,
choosing each wave's chunks, one run per chunk, publishing the registry after each wave, validating and
exporting the module, cleaning the drop. Each is a job of the dataset's code location, so the runs page can be
filtered by job, and by the tags below (e.g. `smolclean/learning_run` for every run of one learning run).

Which runs come next is read from the instance (the runs of the learning run, by their tags) and the store (the
chunk plan, the chunk traces), through `core/learning_flow.py`; so the CLI's embedded driver (embedded.py) and
the sensor of a deployment (sensor.py) drive the same flow with the same run requests, and either
can pick up where a stopped one left off.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import dagster as dg

from ..cleaning.drop_runs import DROP_TAG, LEARNING_TAG, clean_job_name
from ..core.learning_flow import FinishedStep, FlowStep, next_step
from ..core.storage import DatasetStore
from ..settings import DatasetSettings

DATASET_TAG = "smolclean/dataset"
WAVE_TAG = "smolclean/wave"
LEARNING_RUN_TAG = "smolclean/learning_run"
#: The step of the learning flow a run is (a `FlowStep` value).
STEP_TAG = "smolclean/step"

UNFINISHED = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)
_FAILED = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
#: Dagster's tags: a run's partition, and a failed run that the instance's run retries will run again.
PARTITION_TAG = "dagster/partition"
WILL_RETRY_TAG = "dagster/will_retry"


@dataclass(frozen=True)
class LearningStep:
    """One kind of run of the learning flow: its job (named after the dataset) and the assets it materializes."""

    suffix: str
    assets: tuple[str, ...]
    description: str
    step: FlowStep

    def job_name(self, dataset: str) -> str:
        return f"{dataset}_{self.suffix}"


READ_DROP = LearningStep("learn_read_drop", ("raw_data",), "Read a drop raw (learning flow).", FlowStep.READ_DROP)
CHOOSE_CHUNKS = LearningStep(
    "learn_choose_chunks", ("chunks",), "Choose the next wave of chunks of a drop (learning flow).",
    FlowStep.CHOOSE_CHUNKS,
)
ANALYSE_CHUNK = LearningStep(
    "learn_chunk", ("chunk_issues", "chunk_functions"), "The agent loop on one chunk (learning flow).",
    FlowStep.ANALYSE_CHUNKS,
)
PUBLISH_REGISTRY = LearningStep(
    "learn_publish_registry", ("registry",), "Consolidate and publish the registry after a wave (learning flow).",
    FlowStep.PUBLISH_REGISTRY,
)
EXPORT_MODULE = LearningStep(
    "learn_export_module", ("registry", "validation", "cleaning_module", "module_version"),
    "Validate the registry on held-out rows, export the module and propose it as a version (learning flow).",
    FlowStep.EXPORT_MODULE,
)
STEPS = (READ_DROP, CHOOSE_CHUNKS, ANALYSE_CHUNK, PUBLISH_REGISTRY, EXPORT_MODULE)
_BY_FLOW_STEP = {s.step: s for s in STEPS}


def learning_jobs(s: DatasetSettings) -> list[dg.UnresolvedAssetJobDefinition]:
    """The dataset's jobs for the steps of its learning flow (the drop is then cleaned by `<name>_clean_drop`,
    the job the drop folder sensor launches)."""
    return [
        dg.define_asset_job(
            step.job_name(s.name), description=step.description,
            selection=dg.AssetSelection.assets(*[dg.AssetKey([s.name, a]) for a in step.assets]),
        )
        for step in STEPS
    ]


def step_job_name(dataset: str, step: FlowStep) -> str:
    """The job that runs `step`: the flow's last step cleans the drop with the job every drop is cleaned with."""
    return clean_job_name(dataset) if step is FlowStep.CLEAN_DROP else _BY_FLOW_STEP[step].job_name(dataset)


def learning_tags(dataset: str, drop: str, wave: int, learning_run: str) -> dict[str, str]:
    """The tags of one run of a learning flow."""
    return {DATASET_TAG: dataset, DROP_TAG: drop, WAVE_TAG: str(wave), LEARNING_RUN_TAG: learning_run}


def new_learning_run_id() -> str:
    """An id for one learning run that sorts by time and reads as one: `20261123-203812-3f2a`."""
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"


@dataclass(frozen=True)
class Advance:
    """What a learning run needs now: runs to start (one step: one run, or a wave's chunk runs side by side),
    nothing yet (`waiting`: some of its runs are unfinished), nothing more (`done`), or it stopped (`failed`)."""

    step: FlowStep | None = None
    requests: tuple[dg.RunRequest, ...] = ()
    waiting: tuple[str, ...] = ()
    failed: dg.DagsterRun | None = None

    @property
    def done(self) -> bool:
        return self.step is FlowStep.DONE


def advance_learning(instance: dg.DagsterInstance, s: DatasetSettings, drop: str, learning_run: str) -> Advance:
    """The runs learning run `learning_run` of drop `drop` needs now, from its runs on `instance` and the store.

    Example:
        >>> advance_learning(instance, settings, "people.csv", "20261123-203812-3f2a").requests   # doctest: +SKIP
        (RunRequest(job_name='people_learn_read_drop', partition_key='people.csv', ...),)
    """
    runs = _step_runs(instance, learning_run)
    failed = next((r for r in runs if _stopped(r)), None)
    if failed is not None:
        return Advance(failed=failed)
    running = tuple(r.run_id for r in runs if r.status in UNFINISHED or r.status in _FAILED)  # failed: retried soon
    if running:
        return Advance(waiting=running)
    last = FinishedStep(FlowStep(runs[0].tags[STEP_TAG]), int(runs[0].tags[WAVE_TAG])) if runs else None
    step = next_step(DatasetStore(s.storage_dir, s.name), drop, last)
    if step.step is FlowStep.DONE:
        return Advance(step=step.step)
    partitions: Sequence[str | None] = (
        step.chunks if step.step is FlowStep.ANALYSE_CHUNKS
        else [None] if step.step in (FlowStep.PUBLISH_REGISTRY, FlowStep.EXPORT_MODULE) else [drop]
    )
    tags = {**learning_tags(s.name, drop, step.wave, learning_run), STEP_TAG: step.step.value}
    job = step_job_name(s.name, step.step)
    return Advance(step=step.step, requests=tuple(
        dg.RunRequest(job_name=job, partition_key=p, tags=tags,
                      run_key=f"{learning_run}:{step.step.value}:{step.wave}:{p or ''}")
        for p in partitions
    ))


def _step_runs(instance: dg.DagsterInstance, learning_run: str) -> list[dg.DagsterRun]:
    """The latest run of each of the learning run's steps (a chunk of a wave is a step of its own), newest first:
    a run re-executed (by hand, or by the run retries of the instance) counts by its latest attempt."""
    latest: dict[tuple[str, str, str | None], dg.DagsterRun] = {}
    for run in instance.get_runs(dg.RunsFilter(tags={LEARNING_RUN_TAG: learning_run})):
        if STEP_TAG in run.tags:
            latest.setdefault((run.tags[STEP_TAG], run.tags[WAVE_TAG], run.tags.get(PARTITION_TAG)), run)
    return list(latest.values())


def _stopped(run: dg.DagsterRun) -> bool:
    """Whether a step's run failed or was canceled, with no retry of it to come."""
    return run.status in _FAILED and run.tags.get(WILL_RETRY_TAG) != "true"


def learning_starts(instance: dg.DagsterInstance, name: str, limit: int = 5) -> list[dg.DagsterRun]:
    """The latest runs that start a learning of the dataset (`drop_learning`), newest first: each one's id is its
    learning run's id, which it tags itself with once it has run."""
    return list(instance.get_runs(dg.RunsFilter(tags={LEARNING_TAG: name}), limit=limit))


def started(start: dg.DagsterRun) -> bool:
    """Whether a learning start's run has succeeded, so its learning run's steps follow (a start from before
    learning was driven step by step ran its whole learning inside its own run, and is not one)."""
    return start.status == dg.DagsterRunStatus.SUCCESS and start.tags.get(LEARNING_RUN_TAG) == start.run_id


def learning_ended(instance: dg.DagsterInstance, learning_run: str) -> bool:
    """Whether a learning run has finished (its drop cleaned by the new module) or stopped (a run failed)."""
    runs = _step_runs(instance, learning_run)
    if any(_stopped(r) for r in runs):
        return True
    last = runs[0] if runs else None
    return last is not None and last.tags[STEP_TAG] == FlowStep.CLEAN_DROP.value \
        and last.status == dg.DagsterRunStatus.SUCCESS


def learning_in_progress(instance: dg.DagsterInstance, name: str, *, besides: str | None = None) -> str | None:
    """The id of a learning run of the dataset that has not ended (its start queued or running, or its flow not
    finished), other than `besides`, if there is one."""
    for start in learning_starts(instance, name):
        if start.run_id == besides:
            continue
        if start.status in UNFINISHED:
            return start.run_id
        if started(start) and not learning_ended(instance, start.run_id):
            return start.run_id
    return None


def ensure_pool_limit(instance: dg.DagsterInstance, pool: str) -> None:
    """Give `pool` its default limit now, as Dagster does when a step first claims a slot in it.

    Dagster creates that row on first use; two runs doing it at the same moment on PostgreSQL make one of them
    fail (the second insert aborts its transaction). The chunks of a wave start at the same moment, so the
    row is created once, before they do.
    """
    storage = instance.event_log_storage
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    if storage.supports_global_concurrency_limits and default is not None \
            and pool not in {limit.name for limit in storage.get_pool_limits()}:
        storage.initialize_concurrency_limit_to_default(pool)
