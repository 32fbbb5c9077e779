"""Labels in Dagster: `<name>/label_sample` writes a drop's label sample where a person can open it, and a corrected
file saved into the dataset's labels folder starts a learning held to it (the sensor `<name>_labels_folder`), whose
version waits for approval; a bad file starts nothing and stores nothing. Real Dagster instance, temporary workdir,
the daemon's part played by learning_ticks.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from learning_ticks import Daemon, drive_learning
from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.errors import LabelError
from smolclean_dagster.core.labels import ROW
from smolclean_dagster.core.labels_folder import drop_of_label, sample_name
from smolclean_dagster.core.watch import FileState
from smolclean_dagster.cleaning.drop_runs import LABELS_TAG, learning_request
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.cleaning.live_module import cleaning_module_for, versions
from test_labels import products

NAME = "products"
SAMPLE = dg.AssetKey([NAME, "label_sample"])


def _settings(tmp_path: Path) -> DatasetSettings:
    return DatasetSettings(name=NAME, workdir=tmp_path / "work", chunk_budget=2, concurrency=1)


def _materialize_sample(defs: dg.Definitions, instance: dg.DagsterInstance, drop: str) -> dg.AssetMaterialization:
    assets = [defs.resolve_assets_def(dg.AssetKey([NAME, a])) for a in ("raw_data", "label_sample")]
    result = dg.materialize(assets, partition_key=drop, instance=instance)
    assert result.success
    return result.asset_materializations_for_node(f"{NAME}__label_sample")[0]


def _tick_until_decided(daemon: Daemon) -> dg.SensorResult:
    """Tick the labels folder sensor until a finished file is decided on (it is taken once it stopped changing)."""
    for _ in range(3):
        result = daemon.tick(f"{NAME}_labels_folder")
        if result.run_requests or result.asset_events:
            return result
    return result


def test_the_label_sample_asset_writes_the_drops_sample_into_the_workdir_and_shows_where(tmp_path):
    settings = _settings(tmp_path)
    settings.drops_dir.mkdir(parents=True)
    drop = products(settings.drops_dir / "products.csv")
    records = pd.read_csv(drop, dtype=str).head(40).to_dict("records")
    (settings.drops_dir / "orders.json").write_text(json.dumps(records), encoding="utf-8")
    defs = build_defs(settings)
    assert defs.resolve_assets_def(SAMPLE).group_names_by_key[SAMPLE] == NAME
    # written on demand (from the UI), never by a job of the learning or of the cleaning
    assert not any(SAMPLE in defs.resolve_job_def(j.name).asset_layer.executable_asset_keys for j in defs.jobs)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(f"{NAME}_drops", ["products.csv", "orders.json"])
        md = _materialize_sample(defs, instance, "products.csv").metadata
        jsonl = Path(_materialize_sample(defs, instance, "orders.json").metadata["path"].value)

    path = Path(md["path"].value)
    assert path == settings.labels_dir / "to_label" / "products.csv" and path.is_file()
    assert md["hand_back"].value == str(settings.labels_dir / "products.csv")
    sample = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(sample.columns)[0] == ROW and len(sample) == md["rows"].value == 20
    assert md["row_numbers"].value == ", ".join(sample[ROW])
    assert f"| {ROW} |" in md["preview"].value
    # a JSON drop's sample is JSON lines, named after the drop
    assert jsonl == settings.labels_dir / "to_label" / "orders.jsonl"
    assert list(json.loads(jsonl.read_text().splitlines()[0]))[0] == ROW


def test_a_corrected_file_saved_into_the_labels_folder_proposes_a_version_held_to_it(tmp_path):
    settings = _settings(tmp_path)
    with dg.instance_for_test() as instance:
        first = learn(settings, products(tmp_path / "products.csv"), instance)
        assert first.validation.passed
        live = cleaning_module_for(settings, None)
        assert live[1] is not None
        assert sum(size.endswith(" oz") for size in _cleaned_sizes(live[0], settings)) == 300, "nothing says which"
        defs = build_defs(settings)
        daemon = Daemon(defs, instance)
        assert not daemon.tick(f"{NAME}_labels_folder").run_requests  # an empty labels folder: nothing to do

        sample_path = Path(_materialize_sample(defs, instance, "products.csv").metadata["path"].value)
        sample = pd.read_csv(sample_path, dtype=str, keep_default_na=False)
        # two sizes written without their unit (rows without a stray space, so no other cell is in question)
        units = sample.index[sample["size"].str.endswith(" oz") & ~sample["city"].str.startswith(" ")][:2]
        assert len(units) == 2
        corrected = sample.loc[units].assign(size=lambda f: f["size"].str.removesuffix(" oz"))
        hand_back = settings.labels_dir / sample_name("products.csv")
        corrected.to_csv(hand_back, index=False)

        decided = _tick_until_decided(daemon)
        [request] = decided.run_requests
        assert request.job_name == f"{NAME}_learn_from_drop" and request.partition_key == "products.csv"
        assert request.tags[LABELS_TAG] == str(hand_back)
        assert not daemon.tick(f"{NAME}_labels_folder").run_requests  # this version of the file is taken once
        daemon.run(request)  # starts the learning; the sensor `products_learning` submits its runs
        (settings.labels_dir / "late.csv").write_text(f"{ROW},sku\n1,P-1\n", encoding="utf-8")
        waiting = _tick_until_decided(daemon)  # one learning at a time: a file handed in meanwhile waits
        assert not waiting.asset_events and "late.csv waits for learning run" in waiting.skip_reason.skip_message
        drive_learning(defs, instance, NAME)

        history = versions(settings).load()
        assert [(v.number, v.state) for v in history.versions] == [(1, "live"), (2, "proposed")]
        assert (settings.storage_dir / "labels" / "products.csv.parquet").is_file()
        proposed, live_now = cleaning_module_for(settings, 2)[0], cleaning_module_for(settings, None)
        assert live_now == (live[0], live[1])  # version 1 stays live until version 2 is approved
        assert set(_cleaned_sizes(proposed, settings)) == {"12", "16", "22"}, "the labels ask for sizes without units"
        # then the file that waited is looked at (and is no drop's labels); the corrected file is not taken again
        after = _tick_until_decided(daemon)
        assert not after.run_requests and [e.metadata["file"].value for e in after.asset_events] == [
            str(settings.labels_dir / "late.csv")]


def test_a_bad_label_file_starts_nothing_stores_nothing_and_says_which_row(tmp_path):
    settings = _settings(tmp_path)
    settings.drops_dir.mkdir(parents=True)
    drop = products(settings.drops_dir / "products.csv")
    defs = build_defs(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(f"{NAME}_drops", ["products.csv"])
        sample = pd.read_csv(Path(_materialize_sample(defs, instance, "products.csv").metadata["path"].value),
                             dtype=str, keep_default_na=False)
        sample.loc[sample.index[3], ROW] = "5000"
        settings.labels_dir.mkdir(parents=True, exist_ok=True)
        sample.to_csv(settings.labels_dir / "products.csv", index=False)
        (settings.labels_dir / "customers.csv").write_text(f"{ROW},id\n1,C1\n", encoding="utf-8")
        daemon = Daemon(defs, instance)

        decided = _tick_until_decided(daemon)
        assert not decided.run_requests and not instance.get_runs(dg.RunsFilter(job_name=f"{NAME}_learn_from_drop"))
        said = {e.metadata["file"].value: e for e in decided.asset_events}
        bad = said[str(settings.labels_dir / "products.csv")]
        assert bad.asset_key == SAMPLE and bad.partition == "products.csv"
        reason = bad.metadata["reason"].value
        assert "labelled row 4, column '_row'" in reason and "has no row 5000 (its rows are 1-600)" in reason
        assert len(reason.splitlines()) == 1 and reason in decided.skip_reason.skip_message
        nameless = said[str(settings.labels_dir / "customers.csv")].metadata["reason"].value
        assert "no drop is named 'customers'" in nameless and "products.csv" in nameless
        for event in decided.asset_events:  # the observations are ones the instance takes
            instance.report_runless_asset_event(event)
        assert len(instance.fetch_observations(SAMPLE, limit=5).records) == 2
        assert not (settings.storage_dir / "labels").exists(), "nothing is stored from a rejected file"
        assert not _tick_until_decided(daemon).asset_events  # reported once per version of the file

        # a file that goes bad between the tick and its run fails the learning's start, and nothing is stored
        request = learning_request(NAME, "products.csv", FileState.of(drop).fingerprint,
                                   labels=settings.labels_dir / "products.csv")
        start = defs.resolve_job_def(request.job_name).execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False)
        assert not start.success
        failure = start.get_step_failure_events()[0].step_failure_data.error
        assert "labelled row 4, column '_row'" in str(failure)
    assert not (settings.storage_dir / "labels").exists() and not (settings.storage_dir / "learning_starts").exists()


def test_the_labels_setting_goes_with_the_learning_the_drop_folder_starts_for_its_drop(tmp_path):
    labels = tmp_path / "handed_back" / "products.csv"
    settings = _settings(tmp_path).model_copy(update={"labels": labels})
    settings.drops_dir.mkdir(parents=True)
    drop = products(settings.drops_dir / "products.csv")
    (settings.drops_dir / "zeta.csv").write_bytes(drop.read_bytes())
    labels.parent.mkdir()
    pd.read_csv(drop, dtype=str).head(3).assign(**{ROW: ["1", "2", "3"]}).to_csv(labels, index=False)
    with dg.instance_for_test() as instance:
        daemon = Daemon(build_defs(settings), instance)
        requests = []
        for _ in range(3):
            requests += daemon.tick(f"{NAME}_drop_folder").run_requests
            if requests:
                break
        # a dataset with no module learns from one drop at a time: its first, products.csv, with the labels
        assert [r.tags.get(LABELS_TAG) for r in requests] == [str(labels)], requests
    assert settings.labels_of("zeta.csv") is None and settings.labels_of("products.csv") == labels


def test_a_corrected_file_names_its_drop_by_its_stem():
    assert drop_of_label("people.csv", ["people.csv", "orders.json"]) == "people.csv"
    assert drop_of_label("orders.jsonl", ["people.csv", "orders.json"]) == "orders.json"
    with pytest.raises(LabelError, match=r"people.csv: drops people.csv, people.json all have the stem 'people'"):
        drop_of_label("people.csv", ["people.json", "people.csv"])
    with pytest.raises(LabelError, match=r"customers.csv: no drop is named 'customers'.*\(no drop yet\)"):
        drop_of_label("customers.csv", [])


def _cleaned_sizes(module: Path, settings: DatasetSettings) -> list[str]:
    """The sizes of the drop as `module` cleans it."""
    out = settings.workdir / f"out-{module.parent.name}.csv"
    ran = subprocess.run([sys.executable, str(module), str(settings.drops_dir / "products.csv"), str(out)],
                         capture_output=True, text=True, env={**os.environ})
    assert ran.returncode == 0, ran.stderr
    return pd.read_csv(out, dtype=str, keep_default_na=False)["size"].tolist()
