"""One Dagster instance for the UI and the commands: what the UI's jobs did, the commands list, and what the
commands did, the UI shows; after a restart of the UI nothing is cleaned or learned from again.

The first test restarts the way the UI's processes come back: a new instance object on the same DAGSTER_HOME,
and the daemon's sensor ticks with their cursors lost (harder than a real restart, which keeps them). The second
stops the real `smolclean ui` (webserver and daemon) and starts it again. The third is the dg project's case:
the scaffold writes DAGSTER_HOME into the project's `.env`, which `dg dev` and the commands both read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.cli import main
from smolclean_dagster.instance import dagster_home, is_temporary, keep_project_instance, workdir_instance
from smolclean_dagster.cleaning.module_versions import current_user
from smolclean_dagster.settings import save_settings

from learning_ticks import Daemon
from local_servers import free_port, stop_group
from test_sensors import _shipments

VERSION = dg.AssetKey(["shipments", "module_version"])
APPROVAL = dg.AssetCheckKey(VERSION, "nothing_awaits_approval")
SENSORS = ("shipments_drop_folder", "shipments_learn_on_residual", "shipments_labels_folder", "shipments_learning")
SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]


def _state(instance: dg.DagsterInstance) -> dict[str, object]:
    """What the UI shows on `shipments/module_version`: its latest materialization's state and its check."""
    md = instance.fetch_materializations(VERSION, limit=1).records[0].asset_materialization.metadata
    check = instance.event_log_storage.get_latest_asset_check_execution_by_key([APPROVAL])[APPROVAL]
    evaluation = check.event.dagster_event.event_specific_data
    return {"live": md["live_version"].value, "waiting": md["waiting_for_approval"].value,
            "history": md["history"].value, "check_passed": evaluation.passed, "check": evaluation.description}


def _learned_and_cleaned(instance: dg.DagsterInstance) -> list[tuple[str, str, str]]:
    """Every run that cleaned a drop or started learning from one: (job, drop, module version that cleaned it)."""
    return sorted((r.job_name, r.tags.get("smolclean/drop", ""), r.tags.get("smolclean/module_version", ""))
                  for r in instance.get_runs() if r.job_name.endswith(("_clean_drop", "_learn_from_drop", "_read_drop")))


def _nothing_twice(runs: list[tuple[str, str, str]]) -> None:
    """No drop learned from twice, none cleaned twice by one version."""
    assert len(set(runs)) == len(runs), runs
    learned = [drop for job, drop, _ in runs if job.endswith("_read_drop")]
    assert sorted(learned) == ["april.csv", "march.csv"], runs


@pytest.fixture(scope="module")
def learned_twice(tmp_path_factory) -> Path:
    """A workdir with its instance in `dagster_home/`: version 1 learned from march's drop, version 2 proposed
    from april's (it has a status column); each test works on a copy."""
    from smolclean_dagster.learning.embedded import learn

    folder = tmp_path_factory.mktemp("learned")
    settings = _settings(folder / "work")
    with workdir_instance(settings.workdir) as instance:
        learn(settings, _shipments(folder / "march.csv", 0, status=False), instance)
        learn(settings, _shipments(folder / "april.csv", 1000, status=True), instance)
    return folder / "work"


def _settings(workdir: Path) -> DatasetSettings:
    return DatasetSettings(name="shipments", workdir=workdir, chunk_budget=2, concurrency=1, sensor_interval_s=5)


def test_what_the_ui_and_the_commands_do_is_one_history_and_a_restart_repeats_nothing(learned_twice, tmp_path,
                                                                                       monkeypatch, capsys):
    workdir, home = tmp_path / "work", tmp_path / "dagster_home"
    shutil.copytree(learned_twice, workdir)
    (workdir / "dagster_home").rename(home)
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # a deployment's instance: the commands must use it too
    monkeypatch.chdir(tmp_path)
    settings = _settings(workdir)
    instance = workdir_instance(workdir)
    assert Path(instance.root_directory) == home and not (workdir / "dagster_home").exists()
    assert _state(instance)["waiting"].startswith("version 2: promote is 'manual'")
    assert not _state(instance)["check_passed"] and "version 2 waits for approval" in _state(instance)["check"]

    defs = build_defs(settings)
    ui = Daemon(defs, instance)
    for _ in range(2):  # both drops seen finished: cleaned already, learned from already
        assert not any(ui.tick(sensor).run_requests for sensor in SENSORS)

    # approved in the UI: the job, launched by a user Dagster knows (Dagster+ tags the run with its email)
    approve = defs.resolve_job_def("shipments_approve_version")
    result = approve.execute_in_process(instance=instance, tags={"user": "ann@shop.example"}, run_config={
        "ops": {"shipments_approve": {"config": {"version": 2, "reason": "diff reviewed"}}}})
    assert result.success
    state = _state(instance)
    assert (state["live"], state["waiting"], state["check_passed"]) == (2, "none", True)
    assert f"| ann@shop.example (run {result.run_id[:8]}) |" in state["history"]
    # the drops cleaned by version 1 are cleaned again by the live one, once
    for request in defs.resolve_schedule_def("shipments_reclean_stale")(dg.build_schedule_context(instance=instance)):
        ui.run(request)
    again = approve.execute_in_process(instance=instance, run_config={
        "ops": {"shipments_approve": {"config": {"version": 2}}}})
    assert again.success  # approving the live version says so and changes nothing
    said = [e.message for e in instance.all_logs(again.run_id) if e.user_message]
    assert any(m.endswith("version 2 of 'shipments' is live already: nothing to change") for m in said)
    before = _learned_and_cleaned(instance)
    _nothing_twice(before)
    instance.dispose()

    # the UI's processes start again: a new instance object on the same DAGSTER_HOME, the sensors' cursors gone
    with dg.DagsterInstance.get() as restarted:
        daemon = Daemon(build_defs(settings), restarted)
        for _ in range(3):
            assert not any(daemon.tick(sensor).run_requests for sensor in SENSORS)
        schedule = daemon.defs.resolve_schedule_def("shipments_reclean_stale")
        assert isinstance(schedule(dg.build_schedule_context(instance=restarted)), dg.SkipReason)
        assert _learned_and_cleaned(restarted) == before

        # the command lists what the UI did ...
        assert main(["versions", "shipments", "--workdir", str(workdir)]) == 0
        listed = capsys.readouterr().out
        assert "   2  live" in listed and f"approved by: ann@shop.example (run {result.run_id[:8]})" in listed
        assert f"proposed -> live, by ann@shop.example (run {result.run_id[:8]}): diff reviewed" in listed
        # ... and the UI shows what the commands did
        assert main(["rollback", "shipments", "--reason", "bad dates", "--workdir", str(workdir)]) == 0
        state = _state(restarted)
        assert state["live"] == 1 and state["check_passed"]
        assert "(command line) | " in state["history"] and "bad dates" in state["history"]

        # rolled forward in the UI by a run Dagster knows no user of: the account it ran as, with the reason
        rolled = daemon.defs.resolve_job_def("shipments_rollback_version").execute_in_process(
            instance=restarted, run_config={"ops": {"shipments_rollback": {"config": {"to": 2, "reason": "fixed"}}}})
        assert rolled.success and _state(restarted)["live"] == 2
        assert main(["versions", "shipments", "--workdir", str(workdir)]) == 0
        assert f"retired -> live, by {current_user()} (account of run {rolled.run_id[:8]}): fixed" in capsys.readouterr().out


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql",
                                 data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())["data"]


def _start_ui(workdir: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([*SMOLCLEAN, "ui", "--workdir", str(workdir), "--port", str(port)],
                            stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while True:  # up, and the code location loaded
        try:
            if _graphql(port, "{ assetNodes { id } }")["assetNodes"]:
                return proc
        except OSError:
            pass
        assert proc.poll() is None, "smolclean ui exited:\n" + log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the UI did not serve the assets within 120 s:\n" + log.read_text()[-3000:]
        time.sleep(0.5)


LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""


def _ticks_after(instance: dg.DagsterInstance, since: float) -> dict[str, int]:
    """How many times each sensor ticked since `since` (the daemon's ticks, read from the instance)."""
    from dagster._core.scheduler.instigation import InstigatorType

    return {state.instigator_name: len(instance.get_ticks(state.instigator_origin_id, state.selector_id, after=since))
            for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)}


def test_a_restarted_ui_cleans_and_learns_nothing_it_did_already(learned_twice, tmp_path):
    """The real processes: version 2 approved through the UI's job, `smolclean ui` stopped and started again,
    its daemon's sensors ticking on the same folders: no drop is cleaned or learned from again."""
    workdir = tmp_path / "work"
    shutil.copytree(learned_twice, workdir)
    save_settings(_settings(workdir))  # the sensors look every 5 s
    port, log = free_port(), tmp_path / "ui.log"
    ui = _start_ui(workdir, port, log)
    try:
        location = _graphql(port, "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }")
        params = {"selector": {"repositoryLocationName": location["workspaceOrError"]["locationEntries"][0]["name"],
                               "repositoryName": "__repository__", "jobName": "shipments_approve_version"},
                  "runConfigData": {"ops": {"shipments_approve": {"config": {"version": 2, "reason": "looks right"}}}},
                  "executionMetadata": {"tags": [{"key": "user", "value": "ann@shop.example"}]}}
        launched = _graphql(port, LAUNCH, {"params": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        with workdir_instance(workdir) as instance:
            deadline = time.monotonic() + 90
            run = instance.get_run_by_id(run_id)  # read once per look: it may end between two reads
            while run.status != dg.DagsterRunStatus.SUCCESS:
                assert not run.is_finished, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the approve run did not end within 90 s"
                time.sleep(0.5)
                run = instance.get_run_by_id(run_id)
            assert _state(instance)["live"] == 2
        stop_group(ui)

        restarted = time.time()
        ui = _start_ui(workdir, port, log)
        with workdir_instance(workdir) as instance:
            deadline = time.monotonic() + 60
            while min(_ticks_after(instance, restarted).get(s, 0) for s in SENSORS) < 2:
                assert time.monotonic() < deadline, "the sensors did not tick twice within 60 s:\n" + log.read_text()[-3000:]
                time.sleep(1)
            # (the schedule may clean the drops once with version 2, on a quarter hour: not again)
            _nothing_twice(_learned_and_cleaned(instance))
    finally:
        stop_group(ui)
    listed = subprocess.run([*SMOLCLEAN, "versions", "shipments", "--workdir", str(workdir)], capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and f"by ann@shop.example (run {run_id[:8]}): looks right" in listed.stdout


def test_a_dg_project_keeps_its_instance_in_the_workdir_where_the_commands_find_it(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    project = tmp_path / "shop"
    project.mkdir()
    (project / ".env").write_text("OPENAI_API_KEY=sk-test\n", encoding="utf-8")
    home = keep_project_instance(project, project / "smolclean-work")
    assert home == project / "smolclean-work" / "dagster_home" and (home / "dagster.yaml").is_file()
    assert (project / ".env").read_text().splitlines()[0] == "OPENAI_API_KEY=sk-test"
    assert dagster_home("elsewhere", folder=project) == home  # what `dg dev` reads there, the commands read too
    assert keep_project_instance(project, project / "other") is None  # one instance per project: kept
    monkeypatch.chdir(project)
    with workdir_instance("smolclean-work") as instance:
        assert Path(instance.root_directory) == home and not is_temporary(instance)


def test_a_new_workdirs_instance_starts_from_the_empty_storage_made_once(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    first = workdir_instance(tmp_path / "one")
    [template] = [p for p in (tmp_path / "cache" / "smolclean").iterdir() if p.is_dir()]
    assert (template / "history" / "runs.db").is_file(), "made once, in the user's cache"
    second = workdir_instance(tmp_path / "two")
    # each instance is its own: what one stores the other does not see
    first.add_dynamic_partitions("drops", ["a.csv"])
    second.add_dynamic_partitions("drops", ["b.csv"])
    assert first.get_dynamic_partitions("drops") == ["a.csv"] and second.get_dynamic_partitions("drops") == ["b.csv"]
    first.dispose(), second.dispose()
    assert workdir_instance(tmp_path / "one").get_dynamic_partitions("drops") == ["a.csv"], "reopened, as stored"


def test_a_run_of_the_learning_stores_what_dagster_stores_without_its_per_run_set_up(tmp_path, monkeypatch):
    # Runs made by smolclean's own processes start their event log from a copy of an empty one, and keep each
    # step's output in Dagster's files, shown as it comes without `tail` processes: another process (the UI)
    # reads all of it.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)

    terminal = tmp_path / "terminal.txt"  # this process's output, as a file the test reads by its name
    output, sys.stdout = sys.stdout, open(terminal, "w", buffering=1, encoding="utf-8")

    @dg.op
    def shout(context):
        print("the step's own output", flush=True)
        deadline = time.monotonic() + 30  # shown while the step runs, as Dagster's own `tail` shows it
        while "the step's own output" not in terminal.read_text(encoding="utf-8") and time.monotonic() < deadline:
            time.sleep(0.05)
        context.log.info("a structured event")
        return "the step's own output" in terminal.read_text(encoding="utf-8")

    @dg.job
    def loud():
        shout()

    instance = workdir_instance(tmp_path / "work")
    manager = instance.compute_log_manager
    assert "capture_logs" in vars(manager) and "_initdb" in vars(instance.event_log_storage)
    spawned = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: spawned.append(a) or real_popen(*a, **k))
    try:
        result = loud.execute_in_process(instance=instance)
    finally:
        sys.stdout.close()
        sys.stdout = output
    assert result.success
    assert spawned == [], "no tail or watcher process per step"
    assert result.output_for_node("shout"), "shown on this process's output while the step ran"
    run_db = Path(instance.event_log_storage.path_for_shard(result.run_id))
    [template] = (tmp_path / "cache" / "smolclean").glob("dagster-*-run-events.db")
    assert run_db.stat().st_size >= template.stat().st_size
    instance.dispose()
    # as the UI opens the same instance: Dagster's own storage and compute log manager, nothing of ours
    ui = dg.DagsterInstance.from_config(str(dagster_home(tmp_path / "work")))
    assert "_initdb" not in vars(ui.event_log_storage)
    events = ui.all_logs(result.run_id)
    assert "a structured event" in [e.user_message for e in events]
    assert "STEP_SUCCESS" in [e.dagster_event.event_type_value for e in events if e.dagster_event]
    # the UI finds a step's output through the run's LOGS_CAPTURED event, as for any run
    [captured_event] = [e.dagster_event for e in ui.all_logs(result.run_id)
                        if e.dagster_event and e.dagster_event.event_type_value == "LOGS_CAPTURED"]
    log_key = [result.run_id, "compute_logs", captured_event.event_specific_data.file_key]
    assert ui.compute_log_manager.is_capture_complete(log_key)
    captured = ui.compute_log_manager.get_log_data(log_key)
    assert b"the step's own output" in captured.stdout
    ui.dispose()
