"""Module versions: a learned change cleans production drops only once approved, its shadow diff shown, and it
can be rolled back. On a real Dagster instance (sensors ticked as the daemon does, jobs run in process) and
through the command line as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.registry import Registry
from smolclean_dagster.core.registry_changes import RegistryChanges
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.core.versions import VersionError, VersionStore
from smolclean_dagster.cleaning.live_module import VERSION_TAG

from learning_ticks import drive_learning
from test_sensors import _shipments

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]
CLEANED = dg.AssetKey(["shipments", "cleaned_data"])
VERSION = dg.AssetKey(["shipments", "module_version"])


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _latest(instance, key: dg.AssetKey, partition: str | None = None) -> dg.EventLogRecord:
    return instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1).records[0]


def _approval(instance) -> dg.AssetCheckEvaluation:
    """The latest outcome of the check that warns while a version waits for approval."""
    key = dg.AssetCheckKey(VERSION, "nothing_awaits_approval")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    return record.event.dagster_event.event_specific_data


def test_the_first_version_goes_live_later_ones_wait_and_every_change_is_audited(tmp_path):
    store = VersionStore(tmp_path / "versions", "people")
    for n in (1, 2, 3):
        store.propose(Registry(dataset="people", version=n), f"# module {n}\n", RegistryChanges(n - 1, n), drop=f"d{n}")
    history = store.load()
    assert [v.state for v in history.versions] == ["live", "proposed", "proposed"]
    assert store.live_module().read_text() == "# module 1\n"
    store.propose(Registry(dataset="people", version=3), "# module 3\n", RegistryChanges(3, 3))  # same registry
    assert len(store.load().versions) == 3
    store.approve(3, by="ann", why="diff reviewed")
    assert store.live_module().read_text() == "# module 3\n"
    assert store.rollback(by="bob", why="bad dates").number == 1  # 2 never went live: skipped
    with pytest.raises(VersionError, match="no version 9 .*versions: 1, 2, 3"):
        store.approve(9, by="ann")
    with pytest.raises(VersionError, match="none to roll back to"):
        store.rollback(by="bob")
    trail = [(c.version, c.previous, c.state, c.by, c.why) for c in store.load().changes][-4:]
    assert trail == [(1, "live", "retired", "ann", "version 3 went live"), (3, "proposed", "live", "ann", "diff reviewed"),
                     (3, "live", "retired", "bob", "version 1 went live"), (1, "retired", "live", "bob", "bad dates")]
    assert all(c.at for c in store.load().changes)


def test_a_drop_teaches_a_proposed_version_that_cleans_nothing_until_approved(tmp_path, instance):
    """A drop triggers learning; the new version is proposed with its shadow diff (beyond promote: auto's limit,
    so it waits); the next drop is cleaned by the old version; approving makes the new one live and the schedule
    cleans again; rollback returns to the old; a drop can be cleaned with a chosen version."""
    from smolclean_dagster.learning.embedded import learn

    settings = DatasetSettings(name="shipments", workdir=tmp_path / "work", chunk_budget=2, concurrency=1,
                               promote="auto", promote_max_changed_share=0.01)
    learn(settings, _shipments(tmp_path / "march.csv", 0, status=False), instance)
    defs = build_defs(settings)
    store = DatasetStore(settings.storage_dir, "shipments").versions
    cursors: dict[str, str | None] = {}

    def tick(sensor: str) -> list[dg.RunRequest]:
        result = defs.resolve_sensor_def(sensor)(dg.build_sensor_context(instance=instance, cursor=cursors.get(sensor)))
        cursors[sensor] = result.cursor
        for r in result.dynamic_partitions_requests or []:
            instance.add_dynamic_partitions(r.partitions_def_name, list(r.partition_keys))
        return list(result.run_requests or [])

    def run(job: str, partition: str | None = None, tags=None, config=None) -> dg.ExecuteInProcessResult:
        result = defs.resolve_job_def(job).execute_in_process(instance=instance, partition_key=partition, tags=tags,
                                                              run_config=config)
        assert result.success
        return result

    def cleaned_by(drop: str) -> int:
        record = _latest(instance, CLEANED, drop)
        assert instance.get_run_by_id(record.run_id).tags[VERSION_TAG] == str(record.asset_materialization.metadata["version"].value)
        return record.asset_materialization.metadata["version"].value

    _shipments(settings.drops_dir / "april.csv", 1000, status=True)
    tick("shipments_drop_folder")
    [clean] = tick("shipments_drop_folder")
    run(clean.job_name, clean.partition_key, clean.tags)
    assert cleaned_by("april.csv") == 1
    [teach] = tick("shipments_learn_on_residual")  # april's status column is dirt version 1 never saw
    assert teach.job_name == "shipments_learn_from_drop"
    run(teach.job_name, teach.partition_key, teach.tags)  # starts the learning run
    drive_learning(defs, instance, "shipments")  # the sensor `shipments_learning` submits its runs

    history = store.load()
    assert [(v.number, v.state) for v in history.versions] == [(1, "live"), (2, "proposed")]
    lesson = _latest(instance, dg.AssetKey(["shipments", "drop_learning"])).asset_materialization.metadata
    assert (lesson["module_version"].value, lesson["module_version_state"].value) == (2, "proposed")
    assert cleaned_by("april.csv") == 1  # learning cleaned it again, with the live version
    md = _latest(instance, VERSION).asset_materialization.metadata
    assert md["state"].value == "proposed" and md["version"].value == 2
    assert md["shadow_changed_share"].value > 0.01 and md["shadow_cells_changed"].value > 0
    diff = md["shadow_diff"].value
    assert "| function | cells |" in diff and "`\"Lost \"` | `\"Lost\"`" in diff
    assert md["run_steps"].value > 0 and "run_prompt_tokens" in md and md["prompt_versions"].value
    assert "proposed" in md["history"].value
    assert md["live_version"].value == 1 and md["waiting_for_approval"].value.startswith("version 2: promote: auto")
    check = _approval(instance)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "version 2 waits for approval: promote: auto leaves it to a person: its shadow check changes" in check.description

    # the next drop is cleaned by the old version: its status column is left as it came
    _shipments(settings.drops_dir / "may.csv", 2000, status=True)
    tick("shipments_drop_folder")
    [clean] = tick("shipments_drop_folder")
    run(clean.job_name, clean.partition_key, clean.tags)
    assert cleaned_by("may.csv") == 1
    may = settings.cleaned_path("may.csv")
    assert "Lost " in set(pd.read_parquet(may)["status"])

    # approving in the UI (the job takes the version) makes version 2 live; the schedule cleans the drops again
    run("shipments_approve_version", config={"ops": {"shipments_approve": {"config": {"version": 2, "reason": "ok"}}}})
    assert store.load().live.number == 2
    reclean = defs.resolve_schedule_def("shipments_reclean_stale")(dg.build_schedule_context(instance=instance))
    assert sorted(r.partition_key for r in reclean) == ["april.csv", "march.csv", "may.csv"]
    request = next(r for r in reclean if r.partition_key == "may.csv")
    run(request.job_name, request.partition_key, request.tags)
    assert cleaned_by("may.csv") == 2
    assert not {"Lost ", " delivered"} & set(pd.read_parquet(may)["status"])
    now = _latest(instance, VERSION).asset_materialization.metadata  # the asset shows the state after approval
    assert (now["live_version"].value, now["state"].value, now["waiting_for_approval"].value) == (2, "live", "none")
    assert "ok" in now["history"].value
    assert _approval(instance).passed

    # rollback returns to version 1; a drop can still be cleaned with a chosen version
    assert store.rollback(by="test", why="back").number == 1
    run("shipments_clean_drop", "may.csv")
    assert cleaned_by("may.csv") == 1
    run("shipments_clean_drop", "may.csv", config={"ops": {"shipments__cleaned_data": {"config": {"version": 2}}}})
    assert cleaned_by("may.csv") == 2


def test_the_commands_learn_twice_list_approve_and_roll_back(tmp_path):
    workdir = tmp_path / "work"

    def smolclean(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*SMOLCLEAN, *args, "--workdir", str(workdir)], capture_output=True, text=True,
                              timeout=300)

    for month, start, status in (("march", 0, False), ("april", 1000, True)):
        proc = smolclean("learn", str(_shipments(tmp_path / f"{month}.csv", start, status=status)), "--name",
                         "shipments", "--chunk-budget", "2", "--concurrency", "1")
        assert proc.returncode == 0, proc.stderr
    assert "version: 2, proposed; drops are cleaned by live version 1" in proc.stdout

    listed = smolclean("versions", "shipments")
    assert listed.returncode == 0, listed.stderr
    assert "live: 1" in listed.stdout
    assert "   2  proposed" in listed.stdout and "   1  live" in listed.stdout
    assert "drop april.csv" in listed.stdout and "shadow: " in listed.stdout and "learning: " in listed.stdout
    diff = smolclean("versions", "shipments", "--diff", "2")
    assert diff.returncode == 0 and '"Lost " -> "Lost"' in diff.stdout

    approved = smolclean("approve", "shipments", "2")
    assert approved.returncode == 0 and "version 2 of shipments is live" in approved.stdout
    applied = subprocess.run([*SMOLCLEAN, "apply", str(tmp_path / "april.csv"), "--name", "shipments", "--workdir",
                              str(workdir), "-o", str(tmp_path / "out.csv"), "--workers", "1"],
                             capture_output=True, text=True, timeout=120)
    assert applied.returncode == 0 and "module: version 2 of 'shipments'" in applied.stdout
    assert "Lost \n" not in (tmp_path / "out.csv").read_text()

    rolled = smolclean("rollback", "shipments")
    assert rolled.returncode == 0 and "version 1 of shipments is live again" in rolled.stdout
    listed = smolclean("versions", "shipments").stdout
    assert "   1  live" in listed and "   2  retired" in listed and "proposed -> live" in listed

    for args, message in ((("approve", "shipments", "7"), "has no version 7 (versions: 1, 2)"),
                          (("versions", "nope"), "dataset 'nope' is not in workdir"),
                          (("rollback", "shipments", "--to", "1"), "version 1 of 'shipments' is live already")):
        proc = smolclean(*args)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)


def test_a_learning_runs_figures_count_its_steps_rejections_and_items():
    from smolclean_dagster.core.analysts.base import Usage
    from smolclean_dagster.core.instructions import ItemState
    from smolclean_dagster.core.report import learning_run_section
    from smolclean_dagster.core.steps import ChunkTrace, ProposalStep, VerdictStep
    from smolclean_dagster.core.trajectory import learning_metrics

    usage = Usage(calls=1, prompt_tokens=1000, completion_tokens=200, cost_usd=0.01)
    steps = (ProposalStep(step=1, findings=2, status="needs_more_work", usage=usage),
             VerdictStep(step=1, function_name="f", accepted=False, reason="too slow for real drops: 30 us per row"),
             ProposalStep(step=2, findings=2, status="needs_more_work", usage=usage),
             VerdictStep(step=2, function_name="f", accepted=False, reason="not idempotent on the chunk: ..."),
             ProposalStep(step=3, findings=2, status="needs_more_work", usage=usage),
             VerdictStep(step=3, function_name="f", accepted=True, reason="changed 4 cell(s)"))
    states = (ItemState(number=1, text="a", state="served", functions=("f",)),
              ItemState(number=2, text="b", state="declined", reason="needs other rows"))
    metrics = learning_metrics([ChunkTrace(dataset="d", drop="x.csv", chunk_id="c", rows=5, steps=steps)], states,
                               cells_changed=4, seconds=12.5, prompts={"analysis": "1"})
    numbers = metrics.numbers()
    assert (numbers["llm_calls"], numbers["prompt_tokens"], numbers["completion_tokens"]) == (3, 3000, 600)
    assert numbers["steps_per_accepted"] == 3.0 and numbers["rejected_too_slow"] == 1
    assert numbers["rejected_not_idempotent"] == 1 and (numbers["items_served"], numbers["items_declined"]) == (1, 1)
    report = "\n".join(learning_run_section(metrics))
    assert "| prompt / completion tokens | 3000 / 600 |" in report and "analysis v1" in report


STRIP = '''def strip_city(df):
    """Strip surrounding spaces from `city`."""
    df = df.copy()
    df["city"] = df["city"].str.strip()
    return df
'''
BROKEN = '''def broken_city(df):
    """Fails on every row."""
    raise ValueError("no")
'''


def test_the_shadow_check_counts_the_cells_a_version_changes_per_function_with_examples(tmp_path, sandbox):
    from smolclean_dagster.core.export import render_module
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.registry import Provenance, RegistryEntry
    from smolclean_dagster.core.registry_changes import registry_changes
    from smolclean_dagster.core.shadow import latest_drops, shadow_check

    def registry(*codes: str) -> Registry:
        reg = Registry(dataset="people")
        for code in codes:
            reg = reg.with_entry(RegistryEntry(function=CleaningFunction.from_code(code, columns=["city"]),
                                               provenance=Provenance(drop="d", chunk="c", step=1, analyst="rules")))
        return reg

    folder = tmp_path / "drops"
    folder.mkdir()
    pd.DataFrame({"id": range(30), "city": [" Oslo", "Oslo"] * 15}).to_csv(folder / "old.csv", index=False)
    pd.DataFrame({"id": range(40), "city": ["Bergen "] * 40}).to_csv(folder / "new.csv", index=False)
    (folder / ".hidden.csv").write_text("id\n1\n")
    drops = latest_drops(folder)
    assert {p.name for p in drops} == {"old.csv", "new.csv"}

    live, proposed = registry(), registry(STRIP)
    diff = shadow_check(render_module(live), render_module(proposed), drops, sandbox,
                        registry_changes(live, proposed), live_version=1)
    assert (diff.rows, diff.cells, diff.changed) == (70, 140, 55) and diff.share == round(55 / 140, 6)
    [function] = diff.functions
    assert function.function == "strip_city" and function.cells == 55 and len(function.examples) == 10
    assert any(x.before == '"Bergen "' and x.after == '"Bergen"' for x in function.examples)
    assert "| `strip_city` | 55 |" in diff.markdown()

    failing = registry(STRIP, BROKEN)
    diff = shadow_check(render_module(live), render_module(failing), drops, sandbox,
                        registry_changes(live, failing), live_version=1)
    assert diff.share == 1.0 and len(diff.failures) == 2 and "no" in diff.failures[0]
    assert "**Fails** on" in diff.markdown()


def test_promote_auto_lets_a_version_go_live_only_within_its_limit_with_nothing_open():
    from smolclean_dagster.core.shadow import ShadowDiff
    from smolclean_dagster.core.versions import why_not_promoted

    small, large = ShadowDiff(live_version=1, cells=1000, changed=20), ShadowDiff(live_version=1, cells=1000, changed=80)
    assert why_not_promoted(validation_passed=True, open_items=(), shadow=small, limit=0.05) is None
    assert "8.00% of the cells, not under the limit of 5.00%" in why_not_promoted(
        validation_passed=True, open_items=(), shadow=large, limit=0.05)
    assert "#3 still open" in why_not_promoted(validation_passed=True, open_items=(3,), shadow=small, limit=0.05)
    assert why_not_promoted(validation_passed=False, open_items=(), shadow=small, limit=0.05) == "validation failed"
    failing = ShadowDiff(live_version=1, cells=1000, changed=0, failures=("may.csv: FunctionFailed: no",))
    assert why_not_promoted(validation_passed=True, open_items=(), shadow=failing, limit=0.5) is not None


def test_the_learning_run_table_counts_the_items_the_instructions_summary_counts(tmp_path):
    """With the rules analyst (it reads no instructions), report.md's "Learning run" table counts the items served
    and open as the summary of the instructions above it does, not 0 / 0 / 0."""
    from types import SimpleNamespace

    from smolclean_dagster.cleaning.module_versions import learning_run_metrics
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.quality import ValidationReport
    from smolclean_dagster.core.registry import Provenance, RegistryEntry
    from smolclean_dagster.core.report import render_report

    settings = DatasetSettings(name="people", workdir=tmp_path,
                               instructions="- strip the spaces around city\n- translate the notes to French")
    assert not settings.reads_instructions
    registry = Registry(dataset="people").with_entry(RegistryEntry(
        function=CleaningFunction.from_code(STRIP, columns=["city"]), serves=("strip the spaces around city",),
        provenance=Provenance(drop="people.csv", chunk="c", step=1, analyst="rules")))
    validation = ValidationReport(dataset="people", registry_version=registry.version, holdout_rows=0, cells_changed=0,
                                  checks=(), quality=())
    export_run = SimpleNamespace(run=SimpleNamespace(tags={}))  # an export outside a learning run: no traces
    metrics = learning_run_metrics(export_run, settings, registry, validation)
    report = render_report(registry, None, items=registry.items_for(settings.instructions),
                           reads_instructions=settings.reads_instructions, metrics=metrics)
    assert "2 instructions: 1 served, 1 open (#2)." in report
    assert "| instruction items served / declined / open | 1 / 0 / 1 |" in report


BLANK = '''def blank_note_to_null(df):
    """Empty notes as null."""
    df = df.copy()
    df["note"] = df["note"].where(df["note"] != "", None)
    return df
'''


def test_an_empty_field_turned_null_changes_no_cell_of_a_csv_drop_but_one_of_a_json_drop(tmp_path, sandbox):
    """Validation counts the cells changed as the output file shows them: in a CSV drop an empty field and a null
    are written alike; in a JSON drop `""` and `null` are two values."""
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.plan import split_drop
    from smolclean_dagster.core.quality import validate_registry
    from smolclean_dagster.core.registry import Provenance, RegistryEntry
    from smolclean_dagster.learning.registry_assets import _holdout_rows

    store = DatasetStore(tmp_path, "people")
    for drop in ("june.csv", "july.jsonl"):
        rows = pd.DataFrame({"city": [" Oslo", "Oslo"] * 10, "note": ["", "ok", "ok", "ok"] * 5})
        store.save_frame("raw_data", rows, drop)
        store.save_model("chunks", split_drop(rows, dataset="people", drop=drop, chunk_size=10, holdout_fraction=0.5),
                         drop)
    registry, made = Registry(dataset="people"), Provenance(drop="d", chunk="c", step=1, analyst="rules")
    for code, column in ((STRIP, "city"), (BLANK, "note")):
        registry = registry.with_entry(RegistryEntry(function=CleaningFunction.from_code(code, columns=[column]),
                                                     provenance=made))
    holdout, text_rows = _holdout_rows(store)
    report = validate_registry(registry, holdout, sandbox, text_rows=text_rows)

    text = pd.Series(text_rows)
    blank = holdout["note"].eq("")
    assert (blank & text).any() and (blank & ~text).any()  # empty notes in both drops' held-out rows
    spaces = int(holdout["city"].eq(" Oslo").sum())
    assert report.cells_changed == spaces + int((blank & ~text).sum())  # the JSON drop's empty notes only
    cells = {f.name: f.cells for f in report.functions}
    assert cells == {"strip_city": spaces, "blank_note_to_null": int((blank & ~text).sum())}
