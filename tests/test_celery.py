"""Beyond one machine: the learning flow's runs with their steps on Celery workers (dagster-celery), a Redis
broker and two workers, all on this machine; the code location and the executor configuration are the
documented ones in deploy/celery/."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from local_servers import redis_server, stop_group
from smolclean_dagster import DatasetSettings
from smolclean_dagster.learning.runs import LEARNING_RUN_TAG, WAVE_TAG
from smolclean_dagster.settings import save_settings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "celery"
BIN = Path(sys.executable).parent
WORKERS = ("smolclean-w1", "smolclean-w2")


@pytest.fixture
def celery_env(tmp_path: Path):
    """Redis, a Dagster home, a workdir with one dataset, and two Celery workers serving deploy/celery/."""
    if shutil.which("dagster-celery", path=str(BIN)) is None:
        pytest.skip("dagster-celery is not installed (it is in requirements.txt)")
    with redis_server() as redis:
        home = tmp_path / "dagster_home"
        home.mkdir()
        # The queue looked at every second, as in the instance `smolclean ui` makes: each stage of learning is a run.
        (home / "dagster.yaml").write_text(
            "telemetry:\n  enabled: false\nrun_coordinator:\n  module: dagster.core.run_coordinator\n"
            "  class: QueuedRunCoordinator\n  config:\n    dequeue_interval_seconds: 1\n", encoding="utf-8")
        # Create the instance's SQLite storage once, before three processes open it at the same moment and
        # each stamps its own schema version (a race of SQLite storage only; PostgreSQL is the shared set-up).
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.get_runs(limit=1)
        env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # dagster-celery starts `celery` by name
            "DAGSTER_HOME": str(home),
            "SMOLCLEAN_WORKDIR": str(tmp_path / "work"),
            "SMOLCLEAN_CELERY_BROKER": f"{redis}/0",
            "SMOLCLEAN_CELERY_BACKEND": f"{redis}/1",
        }
        workers, logs = [], []
        try:
            for name in WORKERS:
                log = tmp_path / f"{name}.log"
                logs.append(log)
                workers.append(subprocess.Popen(
                    [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                     "-y", str(DEPLOY / "celery.yaml"), "-n", name, "--", "--concurrency=1"],
                    env=env, cwd=tmp_path, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                ))
            deadline = time.monotonic() + 90
            while not all(" ready." in log.read_text(errors="replace") for log in logs):
                assert all(w.poll() is None for w in workers), "a Celery worker exited:\n" + _tail(logs)
                assert time.monotonic() < deadline, "the Celery workers did not get ready within 90 s:\n" + _tail(logs)
                time.sleep(0.5)
            yield env, tmp_path, logs
        finally:
            for w in workers:
                stop_group(w, signal.SIGTERM)  # Celery's warm shutdown


def _tail(logs: list[Path]) -> str:
    return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]) for p in logs)


#: Seconds a learning started by the drop folder sensor may take, run by run through the daemon, to its lesson.
LEARNED_WITHIN_S = 420


def test_a_drop_is_learned_through_the_learning_sensor_with_its_chunk_steps_on_the_celery_workers(celery_env, messy_csv):
    """The deployment as documented in deploy/celery/: the daemon ticks the sensors and launches the queued runs
    (each in its own process, the default run launcher); every step goes to a Celery worker. The first drop of a
    dataset without a module starts a learning run, whose steps the sensor `people_learning` submits."""
    env, root, logs = celery_env
    settings = DatasetSettings(name="people", workdir=Path(env["SMOLCLEAN_WORKDIR"]), chunk_size=10, chunk_budget=2,
                               sensor_interval_s=5, stable_ticks=1)
    save_settings(settings)  # the code location serves the datasets of the workdir
    settings.drops_dir.mkdir(parents=True)
    daemon_log = root / "daemon.log"
    daemon = subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-f", str(DEPLOY / "definitions.py")],
                              env=env, cwd=root, stdout=daemon_log.open("w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    lesson_key = dg.AssetKey(["people", "drop_learning"])
    try:
        shutil.copy(messy_csv, settings.drops_dir / "people.csv")
        deadline = time.monotonic() + LEARNED_WITHIN_S
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            while not instance.fetch_materializations(lesson_key, limit=1).records:
                failed = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]), limit=1)
                assert not failed, f"run {failed[0].job_name} failed:\n" + _tail([daemon_log, *logs])
                assert daemon.poll() is None, "the daemon exited:\n" + _tail([daemon_log])
                assert time.monotonic() < deadline, (
                    f"people.csv was not learned within {LEARNED_WITHIN_S} s:\n" + _tail([daemon_log, *logs]))
                time.sleep(2)
            [lesson] = instance.fetch_materializations(lesson_key, limit=1).records
            learning_run = lesson.asset_materialization.metadata["learning_run"].value
            runs = instance.get_runs(dg.RunsFilter(tags={LEARNING_RUN_TAG: learning_run}))
            start = instance.get_run_by_id(learning_run)
            hosts = {}
            for run in runs:
                for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
                    data = entry.dagster_event.engine_event_data
                    if "Celery worker" in data.metadata:
                        hosts[(run.run_id, entry.step_key)] = data.metadata["Celery worker"].value
    finally:
        stop_group(daemon, signal.SIGINT)

    # The drop folder sensor started the learning run; the learning sensor submitted every run of it.
    assert start.job_name == "people_learn_from_drop" and start.tags["dagster/sensor_name"] == "people_drop_folder"
    steps = [r for r in runs if r.run_id != learning_run]
    assert steps and all(r.tags["dagster/sensor_name"] == "people_learning" for r in steps)
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    # One wave of two chunks: two runs, each chunk's agent loop a step on a Celery worker.
    chunk_runs = [r for r in steps if r.job_name == "people_learn_chunk"]
    assert len(chunk_runs) == 2 and {r.tags[WAVE_TAG] for r in chunk_runs} == {"1"}
    assert all((r.run_id, "people__chunk_functions") in hosts for r in chunk_runs), hosts
    assert {"people__validation", "people__cleaned_data"} <= {step for _, step in hosts}
    assert {host.split("@")[0] for host in hosts.values()} == set(WORKERS)  # both workers took steps
    assert lesson.partition_key == "people.csv" and lesson.asset_materialization.metadata["chunks_analysed"].value == 2
    module = settings.module_dir / "clean_people.py"
    assert module.exists() and "def clean(" in module.read_text(encoding="utf-8")
    assert len(pd.read_parquet(settings.cleaned_path("people.csv"))) == 60


def test_every_job_of_the_celery_code_location_uses_the_celery_executor(tmp_path, monkeypatch):
    """The sensor-launched cleaning and learning runs go to the workers too, not just the asset runs."""
    import runpy

    save_settings(DatasetSettings(name="people", workdir=tmp_path / "work"))
    monkeypatch.setenv("SMOLCLEAN_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("SMOLCLEAN_CELERY_BROKER", "redis://127.0.0.1:9/0")
    monkeypatch.setenv("SMOLCLEAN_CELERY_BACKEND", "redis://127.0.0.1:9/1")
    defs = runpy.run_path(str(DEPLOY / "definitions.py"))["defs"]
    jobs = {job.name: job.executor_def.name for job in defs.resolve_all_job_defs()}
    assert {"people_clean_drop", "people_learn_from_drop"} <= set(jobs)
    assert set(jobs.values()) == {"celery"}, jobs
