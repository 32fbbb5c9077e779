"""Parallel waves run on one pool of warm worker processes, kept for the whole `learn()` call and ended with it.

A worker costs seconds to start (it imports dagster, its storage and litellm), so the workers that run the first
parallel wave run every later wave too; and none outlives `learn()`, whether it returns, fails or is interrupted.
A scripted model that always answers "clean" learns nothing, so every wave finds new dirt: one column per chunk.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from llm_server import ScriptedLLM, fail, reply
from smolclean_dagster.learning import embedded as learning
from smolclean_dagster.core.errors import SmolcleanError
from smolclean_dagster.core.plan import ChunkPlan
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.settings import DatasetSettings

CHUNKS, ROWS = 6, 20
CLEAN = "<issues>\n</issues>\n<status>clean</status>"


def _drop(folder: Path) -> Path:
    """Six chunks of 20 rows; column cNN is padded with spaces only inside chunk NN."""
    n = CHUNKS * ROWS
    df = pd.DataFrame({"id": [str(i) for i in range(n)]})
    for c in range(CHUNKS):
        df[f"c{c:02d}"] = [f" v{i % 5} " if c * ROWS <= i < (c + 1) * ROWS and i % 3 == 0 else f"v{i % 5}"
                           for i in range(n)]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "columns.csv"
    df.to_csv(path, index=False)
    return path


def _settings(tmp_path: Path, api_base: str) -> DatasetSettings:
    # With a model the first wave is one chunk (run in this process); then two chunks per wave, two at a time,
    # five in all: two parallel waves.
    return DatasetSettings(name="columns", workdir=tmp_path / "work", analyst="llm", model="openai/test-model",
                           api_base=api_base, api_key="test-key", llm_cache=False, chunk_size=ROWS, chunk_budget=5,
                           planning_interval=2, concurrency=2, max_steps=2)


@pytest.fixture
def pool_workers(monkeypatch) -> list[int]:
    """The PIDs of the pool's worker processes, as they are when the pool is closed."""
    seen: list[int] = []
    close = learning._ChunkPool.close

    def recording_close(pool: learning._ChunkPool) -> None:
        if pool._executor is not None:
            seen.extend(pool._executor._processes)
        close(pool)

    monkeypatch.setattr(learning._ChunkPool, "close", recording_close)
    return seen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_successive_waves_run_on_the_same_workers_which_end_with_learn(tmp_path, pool_workers):
    with ScriptedLLM(responder=lambda r: reply(CLEAN)) as llm, dg.instance_for_test() as instance:
        settings = _settings(tmp_path, llm.api_base)
        outcome = learning.learn(settings, _drop(tmp_path / "input"), instance)

        plan = DatasetStore(settings.storage_dir, settings.name).load_model("chunks", ChunkPlan, outcome.drop)
        waves = {w: {c.id for c in plan.chunks if c.reason and c.wave == w} for w in (1, 2, 3)}
        assert plan.waves >= 3 and [len(waves[w]) for w in (1, 2, 3)] == [1, 2, 2], waves
        worker_of = {run.tags["dagster/partition"]: int(run.tags[learning.WORKER_TAG])
                     for run in instance.get_runs() if learning.WORKER_TAG in run.tags}
        assert set(worker_of) == waves[2] | waves[3]  # each parallel chunk its own run, every one in a worker
        first, second = ({worker_of[c] for c in waves[w]} for w in (2, 3))

    # The second wave ran on workers of the first: one pool of at most `concurrency` processes.
    assert first & second and len(first | second) <= settings.concurrency
    assert set(pool_workers) >= first | second and len(pool_workers) <= settings.concurrency
    assert os.getpid() not in first | second
    assert not [pid for pid in pool_workers if _alive(pid)]


def test_a_failing_chunk_is_named_and_leaves_no_worker_behind(tmp_path, pool_workers):
    answered = []

    def respond(request):  # the first chunk (alone in its wave) is answered; the key is refused from then on
        answered.append(request)
        return reply(CLEAN) if len(answered) == 1 else fail(401, message="bad key")

    with ScriptedLLM(responder=respond) as llm, dg.instance_for_test() as instance:
        settings = _settings(tmp_path, llm.api_base)
        with pytest.raises(SmolcleanError, match=r"chunk columns\S*@\d+-\d+ failed.*API key"):
            learning.learn(settings, _drop(tmp_path / "input"), instance)
    assert pool_workers and not [pid for pid in pool_workers if _alive(pid)]


def test_an_interrupted_wave_stops_its_workers_and_a_rerun_finishes_it(tmp_path, pool_workers, monkeypatch):
    def interrupted(futures):
        raise KeyboardInterrupt  # Ctrl-C while the wave's chunks are running

    with ScriptedLLM(responder=lambda r: reply(CLEAN)) as llm, dg.instance_for_test() as instance:
        settings = _settings(tmp_path, llm.api_base)
        drop = _drop(tmp_path / "input")
        monkeypatch.setattr(learning, "wait", interrupted)
        with pytest.raises(KeyboardInterrupt):
            learning.learn(settings, drop, instance)
        assert pool_workers and not [pid for pid in pool_workers if _alive(pid)]

        monkeypatch.undo()
        outcome = learning.learn(settings, drop, instance)
    assert outcome.chunks == 5 and outcome.validation.passed
