"""The embedded driver of the learning flow: `learn()` runs a drop's learning runs in this process, on a workdir's
instance, each parallel wave's chunks on a local pool of worker processes.

This is what `smolclean learn` and `smolclean demo` do. In a deployment (`smolclean ui`, Celery, Kubernetes) the
same runs are submitted to the instance by the sensor `<name>_learning` instead (sensor.py); both ask
`learning_runs.advance_learning` which runs come next. Each chunk is its own run, so every chunk partition
carries its own trace.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.util
import os
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import dagster as dg

from ..assets import LLM_POOL
from ..cleaning.drop_runs import LEARNED_FROM_TAG
from ..core.analysts.client import AWAITING_REPLY, prefetch_litellm, use_local_price_map
from ..core.drops import drop_format, drop_key, read_drop
from ..core.errors import DropReadError, LabelError, SmolcleanError
from ..core.export import module_filename
from ..core.instructions import ItemState, stop_reason
from ..core.label_store import forget_learning, save_labels
from ..core.labels import read_labels
from ..core.labels_folder import sample_name
from ..core.learning_flow import FlowStep, forget_for_new_items
from ..core.plan import ChunkPlan
from ..core.quality import ValidationReport
from ..core.questions import Questions, load_questions
from ..core.steps import ChunkTrace, FinalStep
from ..core.storage import DatasetStore
from ..core.watch import FileState
from ..factory import build_defs
from ..instance import quick_runs, workdir_instance
from ..partitions import drops_partitions
from ..settings import DatasetSettings, save_settings
from .runs import ANALYSE_CHUNK, WAVE_TAG, Advance, advance_learning, ensure_pool_limit, new_learning_run_id

if TYPE_CHECKING:
    from dagster._core.instance.ref import InstanceRef

log = logging.getLogger("smolclean.learning")


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
    instructions: tuple[ItemState, ...] = ()
    stopped: str = ""
    #: The labels learned with, in one line ("20 labelled rows from ...: 3 cells corrected, ..."), if any.
    labels: str = ""
    #: What the drop leaves open that the instructions do not settle: asked, not guessed (`smolclean answer`).
    questions: Questions | None = None


def check_learnable(source: Path) -> None:
    """Refuse a drop that cannot be read, or holds no rows to learn from, naming the file as the user gave it."""
    source = Path(source)
    drop_format(source)
    if not source.exists():
        raise DropReadError(f"{source}: no such file; check the path")
    df = read_drop(source)
    if df.empty:
        raise DropReadError(
            f"{source}: no rows to learn from (only a header: {', '.join(map(str, df.columns))}); "
            "learn from a file that holds data rows"
        )


def place_drop(settings: DatasetSettings, source: Path) -> Path:
    """The drop's file inside the dataset's drop folder (copied there when it is elsewhere).

    The drop is read first: one that cannot be read is never copied into the drop folder.
    """
    source = Path(source)
    check_learnable(source)
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
    learning_run: str | None = None,
    labels: Path | None = None,
) -> LearnOutcome:
    """Learn (or extend) the dataset's cleaning module from one drop, and clean that drop with it.

    This is the embedded driver of the learning flow: it asks for the runs the learning needs next
    (`learning_runs.advance_learning`, as the sensor of a deployment does) and runs them here, in-process, each
    parallel wave's chunks on a local pool of worker processes. Every run is a job of the dataset
    (`<name>_learn_chunk`, ...) tagged with the dataset, the drop, the wave and `learning_run` (default: a new
    id), so the runs page groups them.

    With `concurrency` above 1, the chunks of a wave run in worker processes that import the caller's main
    module, as any Python multiprocessing does: call `learn()` from a script under `if __name__ == "__main__":`.

    `labels` (rows of the drop the user corrected, see `core.labels`; default: the `labels` setting when it is
    this drop's) hold every candidate function to them.

    Example:
        >>> learn(DatasetSettings(name="customers", workdir="work"), Path("customers.csv"))  # doctest: +SKIP
    """
    # Settings, the drop and its labels first: nothing (instance, settings file, a copy of the drop) is stored
    # when the analyst cannot be made (a missing model), the drop cannot be read or its labels are not its own.
    settings.make_analyst()
    if settings.analyst_kind != "rules":
        prefetch_litellm()  # its import runs while the instance opens and the drop is profiled
    if labels is None and settings.labels is not None:  # the `labels` setting, named after the drop it labels
        labels = settings.labels_of(source)
        if labels is None:
            raise LabelError(f"labels={settings.labels}: the setting's file is named after drop "
                             f"{Path(settings.labels).stem!r}, not {source.stem!r}; name it {sample_name(source)}, "
                             "as `smolclean label` writes it, or pass the file with --labels")
    labelled = read_labels(labels, source) if labels is not None else None
    path = place_drop(settings, source)
    if settings.concurrency > 1 and min(settings.planning_interval, settings.chunk_budget) > 1:
        _warm_up_workers(settings)
    instance = instance or workdir_instance(settings.workdir)
    save_settings(settings)
    key = drop_key(path)
    drops = drops_partitions(settings.name)
    if not instance.has_dynamic_partition(drops.name, key):
        instance.add_dynamic_partitions(drops.name, [key])
    learning_run = learning_run or new_learning_run_id()
    store = DatasetStore(settings.storage_dir, settings.name)
    if labelled is not None and save_labels(store, key, labelled):
        forget_learning(store, key)  # a drop learned before is learned again, held to its new labels
    if settings.reads_instructions:
        forget_for_new_items(store, key, settings.instructions)  # a drop learned before, asked for new items
    with _ChunkPool(settings, instance, log_level) as pool:
        runs = _EmbeddedRuns(settings, instance, path, pool, log_level)
        while not (advance := advance_learning(instance, settings, key, learning_run)).done:
            runs.run(advance)
    plan = store.load_model("chunks", ChunkPlan, key)
    validation = store.load_model("validation", ValidationReport)
    registry = store.registry.load()
    states = registry.coverage(registry.items_for(settings.instructions))
    traces = [t for t in store.models("chunk_functions", ChunkTrace) if t.drop == key]
    said_clean = any(isinstance(s, FinalStep) and s.reason == "clean" for t in traces for s in t.steps)
    return LearnOutcome(
        dataset=settings.name,
        drop=key,
        module=settings.module_dir / module_filename(settings.name),
        report=settings.module_dir / "report.md",
        cleaned=settings.cleaned_path(path),
        functions=len(registry.entries),
        chunks=len(plan.selected),
        validation=validation,
        instructions=states,
        stopped=stop_reason(states, selection=plan.stopped, said_clean=said_clean,
                            reads=settings.reads_instructions),
        labels=labelled.summary() if labelled is not None else "",
        questions=load_questions(store),
    )


class _EmbeddedRuns:
    """Runs a learning step's runs in this process, and the chunks of a parallel wave on the local pool, raising
    the first failure with its reason (the sensor of a deployment submits the same runs to the instance instead)."""

    def __init__(self, settings: DatasetSettings, instance: dg.DagsterInstance, path: Path, pool: _ChunkPool,
                 log_level: str):
        self.settings, self.instance, self.path, self.pool, self.log_level = settings, instance, path, pool, log_level
        self._defs = build_defs(settings)
        self._jobs: dict[str, dg.JobDefinition] = {}

    def run(self, advance: Advance) -> None:
        if advance.step is None:  # a learning run id given again: one of its runs failed, or others are running
            which = advance.failed.run_id if advance.failed is not None else ", ".join(advance.waiting)
            raise SmolcleanError(f"this learning run cannot go on: its run(s) {which} failed or are still going; "
                                 "learn again without naming the learning run to resume its unfinished wave")
        if advance.step is FlowStep.ANALYSE_CHUNKS:
            self._wave(advance.requests)
            return
        [request] = advance.requests
        if advance.step is FlowStep.READ_DROP:
            # Marks this version of the drop as learned from, as a learning the sensors start is: the residual
            # sensor of `smolclean ui` then does not learn from it again.
            fingerprint = FileState.of(self.path).fingerprint
            request = request.with_replaced_attrs(
                tags={**request.tags, LEARNED_FROM_TAG: f"{request.partition_key}@{fingerprint}"})
        result = self._execute(request)
        if advance.step is FlowStep.EXPORT_MODULE:
            validation = DatasetStore(self.settings.storage_dir, self.settings.name).load_model("validation",
                                                                                               ValidationReport)
            if not validation.passed:
                failed = "; ".join(f"{c.name}: {c.detail}" for c in validation.checks if not c.passed)
                raise SmolcleanError(
                    f"validation of {self.settings.name!r} failed, the module was not exported: {failed}")
        _ok(result, self._what(advance.step))

    def _wave(self, requests: tuple[dg.RunRequest, ...]) -> None:
        chunks = [r.partition_key for r in requests]
        log.info("wave %s: %d chunk(s), %d at a time", requests[0].tags[WAVE_TAG], len(chunks),
                 self.settings.concurrency)
        if self.settings.concurrency > 1 and len(chunks) > 1:
            self.pool.run(chunks, requests[0].tags)  # a wave's requests differ only in their chunk
            return
        for request in requests:
            _ok(self._execute(request), f"chunk {request.partition_key}")

    def _execute(self, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        if request.job_name not in self._jobs:
            self._jobs[request.job_name] = self._defs.resolve_job_def(request.job_name)
        return self._jobs[request.job_name].execute_in_process(
            partition_key=request.partition_key, instance=self.instance, raise_on_error=False, tags=request.tags,
            run_config={"loggers": {"console": {"config": {"log_level": self.log_level}}}},
        )

    def _what(self, step: FlowStep) -> str:
        """The step as a failure names it."""
        return {
            FlowStep.READ_DROP: f"reading drop {self.path}", FlowStep.CHOOSE_CHUNKS: f"choosing chunks of {self.path}",
            FlowStep.PUBLISH_REGISTRY: "publishing the registry",
            FlowStep.EXPORT_MODULE: "validating and exporting the module",
            FlowStep.CLEAN_DROP: f"cleaning drop {self.path}",
        }[step]


#: Run tag naming the worker process that ran a chunk, so the UI shows which chunks shared a process.
WORKER_TAG = "smolclean/worker_pid"

#: Dagster's storage layer, which opening the instance in a worker imports (seconds of CPU): whatever the
#: instance's storage, its classes build on these packages.
_DAGSTER_PRELOAD = ("dagster._core.storage.runs", "dagster._core.storage.event_log", "dagster._core.storage.schedules")

#: Modules an LLM chunk imports on its first call beyond litellm itself (litellm loads its OpenAI client and
#: HTTP stack lazily): preloaded in the fork server so that workers do not each import them again. A name
#: a later litellm no longer has is skipped by the fork server, costing time, never correctness.
_LLM_PRELOAD = ("litellm", "openai.resources", "httpcore", "h11", "h2")

#: Seconds an interrupted worker gets to end its chunk's run before it is killed.
_STOP_GRACE_S = 10.0


class _ChunkPool:
    """The worker processes that run the chunks of parallel waves, for one `learn()` call.

    Dagster's in-process execution is not thread-safe (its log capture deadlocks across threads), so
    parallel chunks run in other processes on the same instance. A cold process costs far more than a
    chunk's run: importing dagster, its storage and litellm takes seconds of CPU. So the workers are forked
    from Python's fork server, which imports those modules once for all of them (it is single-threaded, so
    forking it is safe where forking this process, with Dagster's threads, is not); the pool is started on
    the first parallel wave, every later wave reuses its warm workers, and it is shut down when `learn()`
    ends, also when it fails or is interrupted. The fork server itself stays for the life of this process
    (as Python's multiprocessing keeps it), so a later `learn()` here starts its workers at once.
    """

    def __init__(self, settings: DatasetSettings, instance: dg.DagsterInstance, log_level: str):
        self.settings, self.instance, self.log_level = settings, instance, log_level
        self._executor: ProcessPoolExecutor | None = None
        self._futures: list[Future[str | None]] = []

    def __enter__(self) -> _ChunkPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def run(self, chunks: list[str], tags: Mapping[str, str]) -> None:
        """Run `chunks`, `settings.concurrency` at a time, each its own Dagster run (tagged `tags`) on the instance.

        Every chunk is waited for before a failure is raised, so the chunks that succeeded keep their
        stored traces and a resumed run does not redo them.
        """
        executor = self._start()
        self._futures = []
        for cid in chunks:
            self._futures.append(executor.submit(_worker_chunk, cid, dict(tags)))
        wait(self._futures)
        failures = []
        for cid, future in zip(chunks, self._futures):
            try:
                error = future.result()
            except BrokenProcessPool:
                error = f"chunk {cid} failed: its worker process died (killed, out of memory or crashed)"
            except Exception as exc:
                error = f"chunk {cid} failed: {type(exc).__name__}: {exc}"
            if error:
                failures.append(error)
        if failures:
            raise SmolcleanError(failures[0])

    def close(self) -> None:
        """Stop the workers: at once when chunks are still running (interrupted), else once they are idle."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        workers = list(executor._processes.values())
        if all(f.done() for f in self._futures):
            executor.shutdown(wait=True)
            return
        executor.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            if worker.is_alive() and worker.pid is not None:
                os.kill(worker.pid, signal.SIGINT)  # Dagster records the chunk's run as failed, not left started
        for worker in workers:
            worker.join(_STOP_GRACE_S)
            if worker.is_alive():
                worker.kill()
                worker.join()

    def _start(self) -> ProcessPoolExecutor:
        if self._executor is None:
            ensure_pool_limit(self.instance, LLM_POOL)
            self._executor = ProcessPoolExecutor(
                max_workers=self.settings.concurrency, mp_context=_worker_context(self.settings),
                initializer=_start_worker,
                initargs=(self.settings.model_dump_json(), self.instance.get_ref(), dict(os.environ), self.log_level),
            )
        return self._executor


def _warm_up_workers(settings: DatasetSettings) -> None:
    """Start the fork server before the first parallel wave needs workers, so that its imports (seconds of CPU)
    run while the cores are otherwise idle: offline, now, on the core this process leaves while it opens the
    instance, reads the drop and plans the chunks; with a model, once a reply is slow to come (the model process
    takes that core at first, importing litellm, and this process works between replies). With replies that
    come at once, it starts when the first parallel wave needs it."""
    if _worker_context(settings).get_start_method() != "forkserver":
        return
    if settings.analyst_kind == "rules":
        multiprocessing.forkserver.ensure_running()
        return

    with _IDLE_WAITER_LOCK:  # one waiter per process, as the fork server is one per process
        if _IDLE_WAITER:
            return
        _IDLE_WAITER.append(threading.Thread(target=_start_fork_server_when_idle, name="smolclean-fork-server-start",
                                             daemon=True))
    _IDLE_WAITER[0].start()


def _start_fork_server_when_idle() -> None:
    while True:
        AWAITING_REPLY.wait()
        time.sleep(_IDLE_AFTER_S)
        if AWAITING_REPLY.is_set():
            multiprocessing.forkserver.ensure_running()
            return


#: Seconds a model's reply is awaited before the cores count as idle for start-up work.
_IDLE_AFTER_S = 0.5
_IDLE_WAITER: list[threading.Thread] = []
_IDLE_WAITER_LOCK = threading.Lock()


def _worker_context(settings: DatasetSettings) -> multiprocessing.context.BaseContext:
    """The fork server, preloading what every chunk's run imports, where the platform has one; else spawn.

    The preload list counts only if the fork server is not running yet: one started by an earlier
    `learn()` in this process keeps its own, and workers import whatever it lacks themselves.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    preload = [__name__, *_DAGSTER_PRELOAD]
    if settings.analyst_kind != "rules":
        use_local_price_map()  # the fork server imports litellm
        preload += _LLM_PRELOAD
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    return ctx


@dataclass(frozen=True)
class _Worker:
    """What a worker process builds once and every chunk it runs reuses."""

    settings: DatasetSettings
    job: dg.JobDefinition
    instance: dg.DagsterInstance
    log_level: str


#: In a worker process: what it built, or why it could not start (told with the first chunk it takes).
_worker: _Worker | str | None = None


def _start_worker(settings_json: str, instance_ref: InstanceRef, environ: dict[str, str], log_level: str) -> None:
    """Pool initializer: build the assets and open the instance once for every chunk this process runs.

    A forked worker has the environment the fork server started with; it takes this process's current one
    instead, as a spawned process would (the instance's configuration may read variables set since).
    """
    global _worker
    os.environ.clear()
    os.environ.update(environ)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent,), name="smolclean-orphan-watch", daemon=True).start()
    try:
        settings = DatasetSettings.model_validate_json(settings_json)
        job = build_defs(settings).resolve_job_def(ANALYSE_CHUNK.job_name(settings.name))
        instance = dg.DagsterInstance.from_ref(instance_ref)
        quick_runs(instance)
    except Exception as exc:  # a failing initializer would only break the pool, without saying why
        _worker = f"{type(exc).__name__}: {exc}"
        return
    multiprocessing.util.Finalize(instance, instance.dispose, exitpriority=0)
    _worker = _Worker(settings, job, instance, log_level)


def _exit_with(parent: multiprocessing.process.BaseProcess) -> None:
    """End this worker as soon as the `learn()` process is gone (killed): an orphan would wait for chunks for
    ever, holding its instance and sandbox. Stored files stay whole, as when the whole run is killed."""
    parent.join()
    os._exit(1)


def _worker_chunk(cid: str, tags: dict[str, str]) -> str | None:
    """One chunk's run in a worker process; returns the error text instead of raising across processes."""
    w = _worker
    if not isinstance(w, _Worker):
        return f"chunk {cid} failed: its worker process could not start: {w}"
    result = w.job.execute_in_process(
        partition_key=cid, instance=w.instance, raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": w.log_level}}}},
        tags={**tags, WORKER_TAG: str(os.getpid())},
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
