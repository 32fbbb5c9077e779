"""A learning run started in a deployment: `<name>_learn_from_drop` starts it and returns, and the sensor
`<name>_learning` submits its runs step by step (a wave's chunk runs together) until the drop is cleaned by the
new module and the lesson is recorded. The daemon's part is played by learning_ticks.py; the flow's order of
steps is checked on its own, without Dagster."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pandas as pd

from learning_ticks import drive_learning
from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.learning_flow import FinishedStep, FlowStep, NextStep, next_step
from smolclean_dagster.core.plan import split_drop
from smolclean_dagster.core.steps import ChunkTrace
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.learning.runs import LEARNING_RUN_TAG, STEP_TAG, WAVE_TAG, learning_in_progress

NAME = "people"


def test_a_started_learning_is_advanced_by_the_sensor_a_wave_at_a_time_until_its_lesson_is_recorded(tmp_path, messy_csv):
    settings = DatasetSettings(name=NAME, workdir=tmp_path / "work", chunk_size=10, chunk_budget=2)
    settings.drops_dir.mkdir(parents=True)
    shutil.copy(messy_csv, settings.drops_dir / "people.csv")
    defs = build_defs(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(f"{NAME}_drops", ["people.csv"])
        start = defs.resolve_job_def(f"{NAME}_learn_from_drop").execute_in_process(
            instance=instance, partition_key="people.csv")
        # The start returns at once: nothing learned yet, no run of the flow, the learning run still going.
        assert start.success and not start.asset_materializations_for_node(f"{NAME}__drop_learning")
        assert not (settings.module_dir / "clean_people.py").exists()
        assert [r.run_id for r in instance.get_runs()] == [start.run_id]
        assert learning_in_progress(instance, NAME) == start.run_id

        ticks = drive_learning(defs, instance, NAME)

        assert learning_in_progress(instance, NAME) is None
        steps = [{r.tags[STEP_TAG] for r in tick} for tick in ticks.requested]
        assert steps == [{"read_drop"}, {"choose_chunks"}, {"analyse_chunks"}, {"publish_registry"},
                         {"choose_chunks"}, {"export_module"}, {"clean_drop"}], steps
        wave = ticks.requested[2]
        assert len(wave) == 2 and {r.job_name for r in wave} == {f"{NAME}_learn_chunk"}  # requested together
        assert len({r.partition_key for r in wave}) == 2 and {r.tags[WAVE_TAG] for r in wave} == {"1"}
        runs = instance.get_runs()
        assert len(runs) == 9 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert all(r.tags[LEARNING_RUN_TAG] == start.run_id for r in runs)
        # every chunk partition carries its trace
        traces = instance.fetch_materializations(dg.AssetKey([NAME, "chunk_functions"]), limit=10).records
        assert {r.partition_key for r in traces} == {r.partition_key for r in wave}

        [lesson] = instance.fetch_materializations(dg.AssetKey([NAME, "drop_learning"]), limit=5).records
        md = lesson.asset_materialization.metadata
        assert lesson.partition_key == "people.csv" and md["learning_run"].value == start.run_id
        assert md["functions_added"].value >= 3 and md["chunks_analysed"].value == 2
        assert md["module_version"].value == 1 and md["held_out_check"].value == "passed"
        assert isinstance(md["residual_share_after"].value, float)
        # a later tick does nothing more
        assert not drive_learning(defs, instance, NAME).requested
    assert len(pd.read_parquet(settings.cleaned_path("people.csv"))) == 60


def _stopped_at_a_chunk(tmp_path: Path, messy_csv: Path, instance: dg.DagsterInstance):
    """A learning run whose first wave's first chunk run was canceled (as a person would, in the UI): the sensor
    requests nothing more for it. Returns the Definitions, the start's run id and the canceled chunk's request."""
    settings = DatasetSettings(name=NAME, workdir=tmp_path / "work", chunk_size=10, chunk_budget=2)
    settings.drops_dir.mkdir(parents=True)
    shutil.copy(messy_csv, settings.drops_dir / "people.csv")
    defs = build_defs(settings)
    instance.add_dynamic_partitions(f"{NAME}_drops", ["people.csv"])
    start = defs.resolve_job_def(f"{NAME}_learn_from_drop").execute_in_process(instance=instance,
                                                                              partition_key="people.csv")
    sensor, cursor, canceled = defs.resolve_sensor_def(f"{NAME}_learning"), None, None
    for _ in range(3):  # read the drop, choose the first wave, and its two chunks
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
        cursor = result.cursor
        for request in result.run_requests:
            job = defs.resolve_job_def(request.job_name)
            if request.tags[STEP_TAG] == "analyse_chunks" and canceled is None:
                tags = {**request.tags, "dagster/partition": request.partition_key}
                instance.report_run_canceled(instance.create_run_for_job(job, tags=tags))
                canceled = request
                continue
            assert job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                          tags=request.tags).success
    stopped = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
    assert not stopped.run_requests and learning_in_progress(instance, NAME) is None
    assert len(DatasetStore(settings.storage_dir, NAME).models("chunk_functions", ChunkTrace)) == 1  # the other chunk
    return settings, defs, start.run_id, canceled


def test_a_canceled_chunk_run_stops_the_learning_run_and_its_re_execution_lets_it_go_on(tmp_path, messy_csv):
    with dg.instance_for_test() as instance:
        settings, defs, learning_run, canceled = _stopped_at_a_chunk(tmp_path, messy_csv, instance)
        again = defs.resolve_job_def(canceled.job_name).execute_in_process(  # a re-execution keeps the run's tags
            instance=instance, partition_key=canceled.partition_key, tags=canceled.tags)
        assert again.success and learning_in_progress(instance, NAME) == learning_run
        ticks = drive_learning(defs, instance, NAME)
        assert [{r.tags[STEP_TAG] for r in tick} for tick in ticks.requested][0] == {"publish_registry"}
        [lesson] = instance.fetch_materializations(dg.AssetKey([NAME, "drop_learning"]), limit=5).records
        assert lesson.asset_materialization.metadata["learning_run"].value == learning_run
    assert (settings.module_dir / "clean_people.py").exists()


def test_a_new_learning_run_of_the_drop_finishes_the_wave_a_stopped_one_left(tmp_path, messy_csv):
    with dg.instance_for_test() as instance:
        settings, defs, first, canceled = _stopped_at_a_chunk(tmp_path, messy_csv, instance)
        second = defs.resolve_job_def(f"{NAME}_learn_from_drop").execute_in_process(instance=instance,
                                                                                   partition_key="people.csv")
        ticks = drive_learning(defs, instance, NAME)
        # The new learning run finishes the wave: only the chunk without a trace runs again.
        wave = [r for tick in ticks.requested for r in tick if r.tags[STEP_TAG] == "analyse_chunks"]
        assert [(r.partition_key, r.tags[LEARNING_RUN_TAG]) for r in wave][:1] == [(canceled.partition_key,
                                                                                     second.run_id)]
        assert len(wave) == 1
        [lesson] = instance.fetch_materializations(dg.AssetKey([NAME, "drop_learning"]), limit=5).records
        assert lesson.asset_materialization.metadata["learning_run"].value == second.run_id
    assert first != second.run_id and (settings.module_dir / "clean_people.py").exists()


def _store_with_plan(tmp_path: Path, *, selected: int, waves: int, done: bool, traces: int) -> DatasetStore:
    store = DatasetStore(tmp_path, "d")
    plan = split_drop(pd.DataFrame({"a": [str(i) for i in range(40)]}), dataset="d", drop="d.csv", chunk_size=10,
                      holdout_fraction=0.0)
    chosen = tuple(c.id for c in plan.chunks[:selected])
    store.save_model("chunks", plan.model_copy(update={"selected": chosen, "waves": waves, "done": done}), "d.csv")
    for cid in chosen[:traces]:
        store.path("chunk_functions", cid, "json").parent.mkdir(parents=True, exist_ok=True)
        store.path("chunk_functions", cid, "json").write_text("{}")
    return store


def test_the_flow_reads_the_drop_first_and_finishes_an_interrupted_wave_before_choosing_more(tmp_path):
    fresh = DatasetStore(tmp_path / "fresh", "d")
    assert next_step(fresh, "d.csv", None) == NextStep(FlowStep.READ_DROP)
    assert next_step(fresh, "d.csv", FinishedStep(FlowStep.READ_DROP)) == NextStep(FlowStep.CHOOSE_CHUNKS, 1)

    interrupted = _store_with_plan(tmp_path / "i", selected=3, waves=2, done=False, traces=1)
    step = next_step(interrupted, "d.csv", FinishedStep(FlowStep.READ_DROP))
    assert step.step is FlowStep.ANALYSE_CHUNKS and step.wave == 2 and len(step.chunks) == 2
    assert next_step(interrupted, "d.csv", FinishedStep(FlowStep.ANALYSE_CHUNKS, 2)) == NextStep(FlowStep.PUBLISH_REGISTRY, 2)
    assert next_step(interrupted, "d.csv", FinishedStep(FlowStep.PUBLISH_REGISTRY, 2)) == NextStep(FlowStep.CHOOSE_CHUNKS, 3)

    finished = _store_with_plan(tmp_path / "f", selected=3, waves=2, done=True, traces=3)
    assert next_step(finished, "d.csv", FinishedStep(FlowStep.CHOOSE_CHUNKS, 3)) == NextStep(FlowStep.EXPORT_MODULE, 3)
    assert next_step(finished, "d.csv", FinishedStep(FlowStep.PUBLISH_REGISTRY, 2)) == NextStep(FlowStep.EXPORT_MODULE, 2)
    assert next_step(finished, "d.csv", FinishedStep(FlowStep.EXPORT_MODULE, 2)) == NextStep(FlowStep.CLEAN_DROP, 2)
    assert next_step(finished, "d.csv", FinishedStep(FlowStep.CLEAN_DROP, 2)).step is FlowStep.DONE
