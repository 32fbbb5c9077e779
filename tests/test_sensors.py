"""The drop folder sensor, the residual sensor and the re-cleaning schedule, evaluated the way the daemon
does (build_sensor_context / build_schedule_context on a real instance), and the runs they request."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.export import module_filename
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.core.watch import FileState, probe_drop
from smolclean_dagster.cleaning.drop_runs import LEARNED_FROM_TAG, latest_cleanings

from learning_ticks import Daemon, drive_learning
from test_apply import MODULE

NAME = "people"
CLEANED = dg.AssetKey([NAME, "cleaned_data"])


def _csv(path: Path, rows: int = 30, city: str = " Oslo") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"id": [f"P{i:03d}" for i in range(rows)], "city": [city] * rows}).to_csv(path, index=False)
    return path


class Folder:
    """A dataset's drop folder and its sensors, ticked like the daemon ticks them (cursor kept, partitions added)."""

    def __init__(self, settings: DatasetSettings, instance: dg.DagsterInstance, *, module: bool = True):
        self.settings = settings
        self.instance = instance
        self.defs = build_defs(settings)
        self.cursors: dict[str, str | None] = {}
        settings.drops_dir.mkdir(parents=True, exist_ok=True)
        if module:
            self.write_module(3)

    def write_module(self, revision: int) -> None:
        path = self.settings.module_dir / module_filename(NAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MODULE.replace("Registry revision: 3", f"Registry revision: {revision}"), encoding="utf-8")

    def tick(self, sensor: str = "drop_folder") -> dg.SensorResult:
        name = f"{NAME}_{sensor}"
        result = self.defs.resolve_sensor_def(name)(dg.build_sensor_context(instance=self.instance, cursor=self.cursors.get(name)))
        self.cursors[name] = result.cursor
        for request in result.dynamic_partitions_requests or []:
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def run(self, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        job = self.defs.resolve_job_def(request.job_name)
        return job.execute_in_process(instance=self.instance, partition_key=request.partition_key, tags=request.tags,
                                      raise_on_error=False)

    def put(self, name: str, **kw) -> Path:
        return _csv(self.settings.drops_dir / name, **kw)


@pytest.fixture
def settings(tmp_path: Path) -> DatasetSettings:
    return DatasetSettings(name=NAME, workdir=tmp_path / "work", apply_workers=2)


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def folder(settings, instance) -> Folder:
    return Folder(settings, instance)


def test_a_new_file_is_picked_up_once_it_has_stopped_changing(folder):
    f = folder.put("june.csv")
    first = folder.tick()
    assert not first.run_requests and "stop changing: june.csv" in first.skip_reason.skip_message
    second = folder.tick()
    [request] = second.run_requests
    fingerprint = FileState.of(f).fingerprint
    assert request.partition_key == "june.csv" and request.job_name == f"{NAME}_clean_drop"
    assert request.run_key == f"clean:june.csv@{fingerprint}"
    assert [list(r.partition_keys) for r in second.dynamic_partitions_requests] == [["june.csv"]]


def test_the_same_file_is_not_handled_twice_but_a_new_version_is(folder):
    f = folder.put("june.csv")
    folder.tick()
    [first] = folder.tick().run_requests
    for _ in range(3):
        again = folder.tick()
        assert not again.run_requests and again.skip_reason is not None
    # the same name with other content: a new version of the same drop, cleaned again under a new run key
    _csv(f, rows=40)
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert not folder.tick().run_requests  # changed: it has to settle again
    [second] = folder.tick().run_requests
    assert second.partition_key == first.partition_key == "june.csv"
    assert second.run_key != first.run_key
    assert not folder.tick().run_requests


def test_a_file_still_being_written_is_left_alone(folder):
    f = folder.put("big.csv", rows=10)
    for rows in (20, 30, 40):  # it grows between every two looks
        assert not folder.tick().run_requests
        _csv(f, rows=rows)
    assert not folder.tick().run_requests
    [request] = folder.tick().run_requests
    assert request.run_key.endswith(FileState.of(f).fingerprint)


def test_hidden_and_temporary_names_are_ignored(folder):
    for name in (".june.csv", "june.csv.part", "june.csv.tmp", "june.csv.crdownload"):
        folder.put(name)
    for _ in range(3):
        result = folder.tick()
        assert not result.run_requests and not result.asset_events
    assert '"files":{}' in folder.cursors[f"{NAME}_drop_folder"]


def test_an_unreadable_file_is_reported_with_its_reason_and_the_others_go_on(folder):
    (folder.settings.drops_dir / "latin1.csv").write_bytes("id,city\n1,Z\xfcrich\n".encode("latin-1"))
    (folder.settings.drops_dir / "export.xlsx").write_bytes(b"PK\x03\x04")
    (folder.settings.drops_dir / "empty.csv").write_bytes(b"")
    folder.put("good.csv")
    folder.tick()
    result = folder.tick()
    assert [r.partition_key for r in result.run_requests] == ["good.csv"]
    reasons = {e.metadata["file"].value: e.metadata["reason"].value for e in result.asset_events}
    assert set(reasons) == {"latin1.csv", "export.xlsx", "empty.csv"}
    assert "not valid UTF-8" in reasons["latin1.csv"]
    assert "unknown file extension '.xlsx'" in reasons["export.xlsx"]
    assert "empty" in reasons["empty.csv"]
    assert all(e.asset_key == CLEANED for e in result.asset_events)
    assert not folder.tick().asset_events  # reported once per version, not at every tick


def test_a_drop_unreadable_deep_inside_fails_its_run_with_the_reason(folder):
    f = folder.put("broken.csv", rows=5)
    with f.open("a", encoding="utf-8") as fh:
        fh.write("P9,Oslo,one too many\n")  # the start looks fine, so the sensor passes it on
    folder.tick()
    [request] = folder.tick().run_requests
    result = folder.run(request)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    data = failure.step_failure_data
    assert "broken.csv" in data.error.message and data.user_failure_data.metadata["reason"].value


def test_the_cleaning_run_writes_the_drop_and_its_checks(folder, instance):
    folder.put("june.csv", rows=120)
    folder.tick()
    [request] = folder.tick().run_requests
    assert folder.run(request).success
    out = folder.settings.cleaned_path("june.csv")
    assert out.name == "june.parquet"
    cleaned = pd.read_parquet(out)
    assert cleaned["id"].tolist() == [f"P{i:03d}" for i in range(120)] and set(cleaned["city"]) == {"Oslo"}
    mat = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=CLEANED, asset_partitions=["june.csv"]),
                                          limit=1).records[0].asset_materialization
    assert mat.metadata["registry_revision"].value == 3 and "module_version" not in mat.metadata
    assert mat.metadata["rows_out"].value == 120 and mat.metadata["residual_passed"].value is True
    for check in ("rows_preserved", "residual_issues"):
        key = dg.AssetCheckKey(CLEANED, check)
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
        assert record.status.value == "SUCCEEDED" and record.partition == "june.csv", check
    # once cleaned, that version is not cleaned again even by a sensor that lost its cursor
    folder.cursors.clear()
    folder.tick()
    assert not folder.tick().run_requests


def test_csv_output_on_request(settings, instance):
    folder = Folder(settings.model_copy(update={"cleaned_format": "csv"}), instance)
    folder.put("june.csv")
    folder.tick()
    [request] = folder.tick().run_requests
    assert folder.run(request).success
    assert pd.read_csv(folder.settings.cleaned_dir / "june.csv")["city"].eq("Oslo").all()


def test_the_cleaning_run_never_writes_over_the_drop(settings, instance):
    """A drop folder that is also the cleaned folder, with CSV output: the cleaned drop would be the drop
    itself. The run fails saying so, and the drop is left as it was."""
    cleaned_dir = settings.workdir / "cleaned" / NAME
    folder = Folder(settings.model_copy(update={"cleaned_format": "csv", "drop_folder": cleaned_dir}), instance)
    drop = folder.put("june.csv")
    before = drop.read_bytes()
    folder.tick()
    [request] = folder.tick().run_requests
    result = folder.run(request)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert "is the input file" in failure.step_failure_data.error.message
    assert drop.read_bytes() == before and sorted(p.name for p in cleaned_dir.iterdir()) == ["june.csv"]


def test_without_a_module_files_wait_or_teach_the_agent(settings, instance):
    waiting = Folder(settings.model_copy(update={"learn_on_residual": "on_request"}), instance, module=False)
    waiting.put("a.csv")
    waiting.put("b.csv")
    waiting.tick()
    result = waiting.tick()
    assert not result.run_requests
    assert "no cleaning module" in result.skip_reason.skip_message and f"{NAME}_learn_from_drop" in result.skip_reason.skip_message

    auto = Folder(settings, instance, module=False)
    auto.tick()
    [request] = auto.tick().run_requests  # one drop teaches the agent; the other waits for the module
    assert request.job_name == f"{NAME}_learn_from_drop" and request.partition_key == "a.csv"
    assert request.tags[LEARNED_FROM_TAG].startswith("a.csv@")
    auto.write_module(1)
    [later] = auto.tick().run_requests
    assert later.job_name == f"{NAME}_clean_drop" and later.partition_key == "b.csv"


def _cleaning(instance, drop: Path, *, revision: int, passed: bool, key: str = "registry_revision",
              version: int = -1) -> None:
    """Record a cleaning of `drop` by the module of registry revision `revision` (under the metadata `key`), of
    approved version `version` (-1: a module from before versions)."""
    instance.add_dynamic_partitions(f"{NAME}_drops", [drop.name])
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key=CLEANED, partition=drop.name,
        metadata={key: revision, "version": version, "residual_passed": passed,
                  "residual_share": 0.3 if not passed else 0.0, "source_fingerprint": FileState.of(drop).fingerprint},
    ))


def test_a_failing_residual_check_asks_the_agent_to_learn_from_that_drop_once(folder, instance):
    dirty, fine = folder.put("dirty.csv"), folder.put("fine.csv")
    _cleaning(instance, fine, revision=3, passed=True)
    _cleaning(instance, dirty, revision=3, passed=False)
    [request] = folder.tick("learn_on_residual").run_requests
    assert request.job_name == f"{NAME}_learn_from_drop" and request.partition_key == "dirty.csv"
    assert not folder.tick("learn_on_residual").run_requests  # the cursor moved on

    # a drop version is learned from at most once, even when its next cleaning fails again
    @dg.op
    def noop():
        return None

    @dg.job
    def learned():
        noop()

    learned.execute_in_process(instance=instance, tags=request.tags)
    _cleaning(instance, dirty, revision=3, passed=False)
    assert not folder.tick("learn_on_residual").run_requests


def test_a_drop_cleaned_by_an_older_module_is_cleaned_again_before_learning(folder, instance, capfd):
    dirty = folder.put("dirty.csv")
    _cleaning(instance, dirty, revision=2, passed=False)
    [request] = folder.tick("learn_on_residual").run_requests
    assert request.job_name == f"{NAME}_clean_drop" and request.run_key.endswith(":v3")
    # the tick's log says which number it means: a module from before versions has a registry revision only
    log = capfd.readouterr().err
    assert "dirty.csv: cleaned by registry revision 2, cleaning it again with the live registry revision 3" in log


def test_the_schedule_cleans_again_the_drops_an_older_module_made(folder, instance):
    old, current, gone = folder.put("old.csv"), folder.put("current.csv"), folder.put("gone.csv")
    _cleaning(instance, old, revision=2, passed=True)
    _cleaning(instance, current, revision=3, passed=True)
    _cleaning(instance, gone, revision=1, passed=True)
    gone.unlink()
    schedule = folder.defs.resolve_schedule_def(f"{NAME}_reclean_stale")
    requests = schedule(dg.build_schedule_context(instance=instance))
    assert [(r.partition_key, r.run_key) for r in requests] == [
        ("old.csv", f"clean:old.csv@{FileState.of(old).fingerprint}:v3")]
    _cleaning(instance, old, revision=3, passed=True)
    skip = schedule(dg.build_schedule_context(instance=instance))
    assert skip.skip_message == f"every cleaned drop of {NAME!r} was made by registry revision 3"


def test_cleanings_recorded_before_the_revision_had_its_name_are_not_all_cleaned_again(folder, instance):
    """Metadata from an older release calls the registry revision `module_version`: it still counts."""
    current, old = folder.put("current.csv"), folder.put("old.csv")
    _cleaning(instance, current, revision=3, passed=True, key="module_version", version=1)
    _cleaning(instance, old, revision=2, passed=True, key="module_version")
    schedule = folder.defs.resolve_schedule_def(f"{NAME}_reclean_stale")
    assert [r.partition_key for r in schedule(dg.build_schedule_context(instance=instance))] == ["old.csv"]
    assert [c.module for c in latest_cleanings(instance, NAME)] == ["version 1 (registry revision 3)",
                                                                    "registry revision 2"]


def test_sensors_and_schedule_are_on_by_default(folder):
    assert folder.defs.resolve_sensor_def(f"{NAME}_drop_folder").default_status == dg.DefaultSensorStatus.RUNNING
    assert folder.defs.resolve_sensor_def(f"{NAME}_learn_on_residual").default_status == dg.DefaultSensorStatus.RUNNING
    assert folder.defs.resolve_schedule_def(f"{NAME}_reclean_stale").default_status == dg.DefaultScheduleStatus.RUNNING
    on_request = build_defs(folder.settings.model_copy(update={"learn_on_residual": "on_request"}))
    assert on_request.resolve_sensor_def(f"{NAME}_learn_on_residual").default_status == dg.DefaultSensorStatus.STOPPED


def test_probe_reads_only_the_start_of_each_format(tmp_path):
    (tmp_path / "ok.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    (tmp_path / "list.jsonl").write_text("[1, 2]\n")
    (tmp_path / "obj.json").write_text('{"a": 1}')
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    assert probe_drop(tmp_path / "ok.jsonl") is None
    assert "expected an object" in probe_drop(tmp_path / "list.jsonl")
    assert "JSON array" in probe_drop(tmp_path / "obj.json")
    assert "Parquet" in probe_drop(tmp_path / "bad.parquet")


def _shipments(path: Path, start: int, *, status: bool) -> Path:
    carriers = ["DHL", "dhl", " UPS", "ups ", "FedEx", "FEDEX"]
    statuses = [" delivered", "DELIVERED", "in transit ", "In Transit", "lost", "Lost "]
    rows = ["ref,carrier,weight" + (",status" if status else "")]
    for i in range(start, start + 150):
        rows.append(f"S{i:04d},{carriers[i % 6]},{(i % 40) + 0.5} kg" + (f",{statuses[i % 6]}" if status else ""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_new_dirt_in_a_drop_teaches_the_agent_a_new_module_version(tmp_path, instance):
    """The whole loop in-process: learn, a drop with dirt the module never saw, its residual check fails,
    the agent learns from it, the drop is cleaned again and passes, and the schedule re-cleans the first drop."""
    from smolclean_dagster.core.apply import read_registry_revision
    from smolclean_dagster.learning.embedded import learn

    # promote: auto within its limit: the version learned from the drop goes live on its own (its shadow check
    # changes about 12% of the sampled cells; test_versions.py has it wait beyond the limit)
    settings = DatasetSettings(name="shipments", workdir=tmp_path / "work", chunk_budget=2, concurrency=1,
                               promote="auto", promote_max_changed_share=0.5)
    first = learn(settings, _shipments(tmp_path / "march.csv", 0, status=False), instance)
    module = first.module
    revision = read_registry_revision(module.read_text())
    defs = build_defs(settings)
    daemon = Daemon(defs, instance)
    tick, run = daemon.tick, daemon.run

    tick("shipments_learn_on_residual")  # the learned drop passes: nothing to do
    _shipments(settings.drops_dir / "april.csv", 1000, status=True)
    tick("shipments_drop_folder")
    [clean] = tick("shipments_drop_folder").run_requests  # march.csv was cleaned by `learn` already
    run(clean)
    check = dg.AssetCheckKey(dg.AssetKey(["shipments", "cleaned_data"]), "residual_issues")
    assert instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check].status.value == "FAILED"

    [teach] = tick("shipments_learn_on_residual").run_requests
    assert teach.job_name == "shipments_learn_from_drop" and teach.partition_key == "april.csv"
    names_before = {e.function.name for e in DatasetStore(settings.storage_dir, "shipments").registry.load().entries}
    run(teach)  # starts the learning run; the sensor `shipments_learning` submits its runs
    drive_learning(defs, instance, "shipments")
    new_revision = read_registry_revision(module.read_text())
    assert new_revision > revision and "status" in module.read_text()
    lesson = instance.fetch_materializations(dg.AssetKey(["shipments", "drop_learning"]), limit=1).records[0]
    md = lesson.asset_materialization.metadata
    assert md["residual_share_after"].value < md["residual_share_before"].value
    # The metadata tells what really happened to the module: versions and every function added or removed.
    assert (md["registry_revision_before"].value, md["registry_revision_after"].value) == (revision, new_revision)
    names_after = {e.function.name for e in DatasetStore(settings.storage_dir, "shipments").registry.load().entries}
    assert md["functions_added"].value == len(names_after - names_before) >= 1
    assert md["functions_removed"].value == len(names_before - names_after)
    changes = md["changes"].value
    assert all(f"added `{n}`" in changes for n in names_after - names_before)
    assert all(f"removed `{n}`" in changes for n in names_before - names_after)
    assert instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check].status.value == "SUCCEEDED"
    assert not tick("shipments_learn_on_residual").run_requests
    history = DatasetStore(settings.storage_dir, "shipments").versions.load()
    assert [(v.number, v.state) for v in history.versions] == [(1, "retired"), (2, "live")]
    assert history.changes[-1].by == "policy promote: auto" and "under 50.00%" in history.changes[-1].why

    schedule = defs.resolve_schedule_def("shipments_reclean_stale")
    [again] = schedule(dg.build_schedule_context(instance=instance))
    assert again.partition_key == "march.csv" and again.run_key.endswith(f":v{new_revision}")
