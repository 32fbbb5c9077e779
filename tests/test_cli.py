"""The command line as a user runs it: learn on an unseen file, the module on its own, apply, and the UI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from local_servers import session_processes, stop_group

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> tuple[Path, Path]:
    """A workdir where `smolclean learn` has run on a CSV the project has never seen."""
    root = tmp_path_factory.mktemp("cli")
    data = root / "shipments.csv"
    rows = ["ref,carrier,weight,shipped,fragile"]
    carriers = ["DHL", "UPS", "FedEx"] * 3 + ["dhl", " UPS", "ups ", "FEDEX"]  # a few rows in another spelling
    for i in range(180):
        weight = f"{(i % 40) + 0.5} kg" if i % 3 else f"{(i % 40) + 0.5}"
        shipped = f"2024-03-{(i % 28) + 1:02d}" if i % 5 else f"{(i % 12) + 1}/{(i % 28) + 1}/2024"
        fragile = ["yes", "no", "Y", "N", "n/a"][i % 5]
        ref = f"S{i:04d}" + (" " if i >= 150 and i % 2 else "")  # dirt only the last rows show
        rows.append(f"{ref},{carriers[i % len(carriers)]},{weight},{shipped},{fragile}")
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    workdir = root / "work"
    proc = subprocess.run([*SMOLCLEAN, "learn", str(data), "--name", "shipments", "--workdir", str(workdir)],
                          capture_output=True, text=True, timeout=300, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert "module:" in proc.stdout
    (root / "learn.out").write_text(proc.stdout, encoding="utf-8")
    return data, workdir


def test_a_person_sees_every_change_each_function_makes_on_held_out_rows(learned):
    data, workdir = learned
    summary = (data.parent / "learn.out").read_text(encoding="utf-8")
    per_function = next(line for line in summary.splitlines() if "cells changed per function" in line)
    assert "strip_whitespace" in per_function
    report = (workdir / "modules" / "shipments" / "report.md").read_text(encoding="utf-8")
    section = report.split("## Changes per function on held-out rows")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, section
    # each row: the function, its changed cells, the columns, and before -> after pairs a reviewer can check
    assert any("ref: `S" in row and "` -> `S" in row for row in rows), rows


def test_learned_module_runs_alone_and_keeps_every_row(learned, tmp_path):
    data, workdir = learned
    module = workdir / "modules" / "shipments" / "clean_shipments.py"
    out = tmp_path / "out.csv"
    proc = subprocess.run([sys.executable, "-I", str(module), str(data), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    before = pd.read_csv(data, dtype=str, keep_default_na=False)
    after = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(after) == len(before) and after["ref"].tolist() == before["ref"].str.strip().tolist()
    assert after["carrier"].nunique() < before["carrier"].nunique()


def test_the_files_people_commit_are_readable_by_everyone(learned):
    """Under the usual umask 022 the module, its tests, report, chart and saved settings are 0644, not 0600."""
    _, workdir = learned
    module_dir = workdir / "modules" / "shipments"
    names = {"clean_shipments.py", "test_clean_shipments.py", "report.md", "quality.png"}
    assert names <= {p.name for p in module_dir.iterdir()}
    for path in [*(module_dir / n for n in names), workdir / "datasets" / "shipments.yaml"]:
        assert oct(path.stat().st_mode & 0o777) == oct(0o644), path
    assert not [p for p in module_dir.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_apply_cleans_in_batches_in_the_sandbox(learned, tmp_path):
    data, workdir = learned
    module = workdir / "modules" / "shipments" / "clean_shipments.py"
    out = tmp_path / "out.parquet"
    proc = subprocess.run([*SMOLCLEAN, "apply", str(module), str(data), "-o", str(out), "--batch-size", "50"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "4 batch(es)" in proc.stdout
    revision = next(line for line in module.read_text().splitlines() if line.startswith("Registry revision: "))
    assert f"({module}, registry revision {revision.split(': ')[1]})" in proc.stdout
    cleaned = pd.read_parquet(out)
    assert cleaned["ref"].tolist() == [f"S{i:04d}" for i in range(180)]


def test_learn_on_an_unreadable_file_names_it(tmp_path):
    bad = tmp_path / "export.xlsx"
    bad.write_bytes(b"PK\x03\x04")
    proc = subprocess.run([*SMOLCLEAN, "learn", str(bad), "--name", "x", "--workdir", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "export.xlsx" in proc.stderr and "unknown file extension" in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())["data"]


def test_ui_serves_the_asset_graph_and_each_chunk_trace(learned):
    _, workdir = learned
    port = _free_port()
    proc = subprocess.Popen([*SMOLCLEAN, "ui", "--workdir", str(workdir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "the UI did not start within 120 s"
                assert proc.poll() is None, "smolclean ui exited"
                time.sleep(1)
        nodes = _graphql(port, "{ assetNodes { assetKey { path } } }")["assetNodes"]
        paths = {"/".join(n["assetKey"]["path"]) for n in nodes}
        assert {"shipments/chunk_functions", "shipments/cleaning_module", "shipments/cleaned_data"} <= paths
        data = _graphql(
            port,
            '{ assetOrError(assetKey: {path: ["shipments", "chunk_functions"]}) { ... on Asset { '
            "assetMaterializations(limit: 50) { partition metadataEntries { label ... on MarkdownMetadataEntry { mdStr } } } } } }",
        )
        mats = data["assetOrError"]["assetMaterializations"]
        assert len({m["partition"] for m in mats}) == len(mats) >= 1  # one trace per chunk partition
        traces = [e["mdStr"] for m in mats for e in m["metadataEntries"] if e["label"] == "trace"]
        assert len(traces) == len(mats)
        assert any("| accepted |" in t and "```python" in t for t in traces)
    finally:
        stop_group(proc)


def _wait_for_ui(proc: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
            return
        except OSError:
            assert time.monotonic() < deadline, "the UI did not start within 120 s"
            assert proc.poll() is None, "smolclean ui exited"
            time.sleep(1)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job of a shell


def test_ui_stops_with_everything_it_started_on_sigterm(learned):
    """As a service manager runs it: its own session, SIGINT ignored, stopped with SIGTERM to its group."""
    _, workdir = learned
    port = _free_port()
    proc = subprocess.Popen([*SMOLCLEAN, "ui", "--workdir", str(workdir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ignore_sigint)
    try:
        _wait_for_ui(proc, port)
        started = session_processes(proc.pid)
        assert len(started) >= 3, started  # smolclean, dg dev, the webserver, the daemon, code servers
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_processes(proc.pid) == [], "processes of `smolclean ui` alive 15 s after SIGTERM"
        assert proc.wait(1) == 0
        stderr = proc.stderr.read()
        assert "SIGTERM received" in stderr
        assert "SupersessionWarning" not in stderr and "superseded" not in stderr  # started with the current `dg dev`
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        for pid in session_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.wait(10)
