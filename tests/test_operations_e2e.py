"""End to end, as a user lives with it: `smolclean learn`, then `smolclean ui` running (webserver + daemon),
a CSV copied into the drop folder, and its cleaned Parquet appears on its own, with its checks."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pandas as pd
import yaml

from local_servers import stop_group

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]
UI_START_S = 90
CLEANED_WITHIN_S = 150


def _shipments(path: Path, start: int) -> Path:
    carriers = ["DHL", "UPS", "FedEx"] * 3 + ["dhl", " UPS", "ups ", "FEDEX"]  # a few rows in another spelling
    rows = ["ref,carrier,weight,fragile"]
    for i in range(start, start + 150):
        weight = f"{(i % 40) + 0.5} kg" if i % 3 else f"{(i % 40) + 0.5}"
        rows.append(f"S{i:04d},{carriers[i % len(carriers)]},{weight},{['yes', 'no', 'Y', 'N', 'n/a'][i % 5]}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())["data"]


def test_a_file_copied_into_the_drop_folder_is_cleaned_while_the_ui_runs(tmp_path):
    workdir = tmp_path / "work"
    learned = subprocess.run(
        [*SMOLCLEAN, "learn", str(_shipments(tmp_path / "march.csv", 0)), "--name", "shipments",
         "--workdir", str(workdir), "--chunk-budget", "2", "--concurrency", "1"],
        capture_output=True, text=True, timeout=240,
    )
    assert learned.returncode == 0, learned.stderr
    drops = workdir / "drops" / "shipments"
    assert f"drops:   {drops}/" in learned.stdout
    # A quicker look at the folder than the default 15 s, so the test waits less (still two looks in a row).
    config = workdir / "datasets" / "shipments.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text(encoding="utf-8")), "sensor_interval_s": 5}),
                      encoding="utf-8")

    port = _free_port()
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen([*SMOLCLEAN, "ui", "--workdir", str(workdir), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + UI_START_S
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, "smolclean ui exited:\n" + (tmp_path / "ui.log").read_text()[-3000:]
                assert time.monotonic() < deadline, f"the UI did not start within {UI_START_S} s"
                time.sleep(1)

        shutil.copy(_shipments(tmp_path / "april.csv", 1000), drops / "april.csv")
        out = workdir / "cleaned" / "shipments" / "april.parquet"
        cleaned_key = dg.AssetKey(["shipments", "cleaned_data"])
        deadline = time.monotonic() + CLEANED_WITHIN_S
        with dg.DagsterInstance.from_config(str(workdir / "dagster_home")) as instance:
            while True:
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=cleaned_key, asset_partitions=["april.csv"]), limit=1).records
                if out.exists() and records:
                    break
                assert proc.poll() is None, "smolclean ui exited:\n" + (tmp_path / "ui.log").read_text()[-3000:]
                assert time.monotonic() < deadline, (
                    f"april.csv was not cleaned within {CLEANED_WITHIN_S} s:\n" + (tmp_path / "ui.log").read_text()[-3000:])
                time.sleep(2)

            cleaned = pd.read_parquet(out)
            assert cleaned["ref"].tolist() == [f"S{i:04d}" for i in range(1000, 1150)]
            assert cleaned["carrier"].nunique() < 7  # seven spellings in the drop: stray spaces and rare cases unified
            run = instance.get_run_by_id(records[0].run_id)
            assert run.tags.get("dagster/sensor_name") == "shipments_drop_folder"
            for check in ("rows_preserved", "residual_issues"):
                key = dg.AssetCheckKey(cleaned_key, check)
                record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
                assert record is not None and record.partition == "april.csv", check

        # and the UI shows it: the materialization of that drop, with its metadata
        asset = _graphql(port, '{ assetOrError(assetKey: {path: ["shipments", "cleaned_data"]}) { ... on Asset { '
                               'assetMaterializations(partitions: ["april.csv"], limit: 1) { partition '
                               'metadataEntries { label } } } } }')["assetOrError"]
        [mat] = asset["assetMaterializations"]
        assert {"output", "registry_revision", "residual_share"} <= {e["label"] for e in mat["metadataEntries"]}
    finally:
        stop_group(proc)
        log.close()
