"""Runs a person can read: every run of a learning flow is a named job of the dataset, tagged with the
dataset, the drop, the wave and the learning run; chunk partitions read as their drop and rows."""

from __future__ import annotations

import re

import dagster as dg

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.cleaning.drop_runs import DROP_TAG
from smolclean_dagster.learning.embedded import WORKER_TAG, learn
from smolclean_dagster.learning.runs import DATASET_TAG, LEARNING_RUN_TAG, WAVE_TAG
from smolclean_dagster.partitions import chunks_partitions

DROP = "customer_orders_export_north_region_2024-11-01_part1.csv"


def _drop(path, rows: int = 200):
    cities = [" Oslo", "oslo", "Bergen ", "BERGEN", "N/A"]
    path.write_text("id,city,spend\n" + "".join(f"{i},{cities[i % 5]},${i}.00\n" for i in range(rows)),
                    encoding="utf-8")
    return path


def test_every_run_of_a_learning_flow_is_a_named_job_tagged_with_its_drop_wave_and_learning_run(tmp_path):
    settings = DatasetSettings(name="orders", workdir=tmp_path / "work", chunk_size=40, chunk_budget=4,
                               concurrency=2, planning_interval=2)
    with dg.instance_for_test() as instance:
        learn(settings, _drop(tmp_path / DROP), instance, learning_run="lr-1")
        runs = instance.get_runs()
        chunk_keys = instance.get_dynamic_partitions(chunks_partitions("orders").name)
    jobs = {j.name for j in build_defs(settings).resolve_all_job_defs()}
    assert len(runs) >= 6
    for run in runs:
        assert run.job_name in jobs, run.job_name  # a job of the code location, never __ephemeral_asset_job__
        assert run.tags[DATASET_TAG] == "orders" and run.tags[DROP_TAG] == DROP and run.tags[LEARNING_RUN_TAG] == "lr-1"
        assert run.tags[WAVE_TAG].isdigit()
    by_job: dict[str, list[dg.DagsterRun]] = {}
    for run in runs:
        by_job.setdefault(run.job_name, []).append(run)
    assert {"orders_learn_read_drop", "orders_learn_choose_chunks", "orders_learn_chunk",
            "orders_learn_publish_registry", "orders_learn_export_module", "orders_clean_drop"} <= set(by_job)
    chunk_runs = by_job["orders_learn_chunk"]
    assert len(chunk_runs) >= 2 and all(int(r.tags[WAVE_TAG]) >= 1 for r in chunk_runs)
    assert any(WORKER_TAG in r.tags for r in chunk_runs)  # parallel chunks, run by the worker pool, are tagged too
    assert by_job["orders_learn_read_drop"][0].tags[WAVE_TAG] == "0"
    assert {r.tags[WAVE_TAG] for r in by_job["orders_learn_choose_chunks"]} >= {"1"}
    # Chunk partitions read as the drop's name (its start and its end) and the rows.
    assert chunk_keys and all(k.startswith("customer~2024-11-01_part1~") for k in chunk_keys)
    assert any(re.search(r"@0+-0*40$", k) for k in chunk_keys)

