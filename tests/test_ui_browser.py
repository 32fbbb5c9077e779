"""The Dagster UI as the trace viewer, checked as a person would: headless Chromium (Debian's) driven by
Playwright opens the asset graph, a chunk partition's trace and the exported module's page after a
`smolclean learn`, and what the metadata promises must be on screen. Screenshots land in the test's tmp folder."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from local_servers import free_port, stop_group
from test_sensors import _shipments

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]
#: Chromium as root in a closed network: no sandbox, no GPU, no calls home.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)")


def _graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())


@pytest.fixture
def ui(tmp_path: Path, messy_csv: Path):
    """`smolclean learn` on a small messy CSV, then `smolclean ui` on its workdir (own process group)."""
    workdir = tmp_path / "work"
    proc = subprocess.run([*SMOLCLEAN, "learn", str(messy_csv), "--name", "people", "--workdir", str(workdir),
                           "--chunk-size", "10", "--chunk-budget", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with _serving(workdir, tmp_path, ["people", "cleaning_module"]) as base:
        yield base, workdir


@contextlib.contextmanager
def _serving(workdir: Path, tmp_path: Path, asset: list[str]):
    """`smolclean ui` on `workdir` until the code location serves `asset`; its address."""
    port = free_port()
    log = (tmp_path / "ui.log").open("w")
    server = subprocess.Popen([*SMOLCLEAN, "ui", "--workdir", str(workdir), "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while True:  # up, and the code location loaded with our assets
            try:
                nodes = _graphql(port, "{ assetNodes { assetKey { path } } }").get("data", {}).get("assetNodes") or []
                if any(n["assetKey"]["path"] == asset for n in nodes):
                    break
            except OSError:
                pass
            assert server.poll() is None, "smolclean ui exited: " + (tmp_path / "ui.log").read_text()[-2000:]
            assert time.monotonic() < deadline, ("the UI did not serve the assets within 150 s: "
                                                 + (tmp_path / "ui.log").read_text()[-2000:])
            time.sleep(1)
        # Without this the UI greets localhost visitors with a "join the community" modal over every page.
        assert _graphql(port, "mutation { setNuxSeen }")["data"]["setNuxSeen"] is True
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(server)
        log.close()


def _open_markdown(page, label: str) -> str:
    """Open the [Show Markdown] dialog of metadata entry `label` and return what it renders."""
    row = page.locator("tr").filter(has=page.locator("td", has_text=re.compile(rf"^\s*{label}\s*$"))).first
    row.get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for(timeout=20_000)
    page.wait_for_timeout(600)  # let the dialog's fade-in finish before a screenshot
    # The dialog focuses its Close button, scrolling long markdown to the end: show the beginning.
    page.evaluate("document.querySelectorAll('[role=dialog] *').forEach(e => { e.scrollTop = 0; })")
    return dialog.inner_text()


def _close_dialog(page) -> None:
    page.keyboard.press("Escape")
    page.get_by_role("dialog").wait_for(state="detached", timeout=10_000)


def test_the_ui_shows_graph_traces_module_and_checks(ui, tmp_path: Path):
    from playwright.sync_api import sync_playwright

    base, workdir = ui
    shots = tmp_path / "screenshots"
    shots.mkdir()
    chunks = sorted(p.stem for p in (workdir / "storage" / "people" / "chunk_functions").glob("*.json"))
    assert len(chunks) == 2

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)

            # The asset graph: every stage of the dataset is a node.
            page.goto(f"{base}/asset-groups", wait_until="networkidle")
            page.get_by_text("Global asset lineage").wait_for()
            page.get_by_text("cleaning_module").first.wait_for()
            text = page.inner_text("body")
            for asset in ("raw_data", "chunks", "chunk_issues", "chunk_functions", "registry", "validation",
                          "cleaning_module", "cleaned_data"):
                assert asset in text, asset
            assert "Join the Dagster community" not in text
            page.screenshot(path=shots / "1-asset-graph.png")

            # A chunk partition: what the detectors found in it ...
            chunk = chunks[-1]
            page.goto(f"{base}/assets/people/chunk_issues?view=partitions&partition={chunk}", wait_until="networkidle")
            page.get_by_text("whitespace").first.wait_for()  # short markdown renders inline
            issues = page.inner_text("body")
            assert "stray whitespace" in issues and "findings" in issues.lower()
            page.screenshot(path=shots / "2-chunk-issues.png")

            # ... and its trace: each step's proposal, verdict and reason, and the code.
            page.goto(f"{base}/assets/people/chunk_functions?view=partitions&partition={chunk}",
                      wait_until="networkidle")
            page.get_by_text(f"{chunk}").first.wait_for()
            assert "accepted_functions" in page.inner_text("body")
            page.screenshot(path=shots / "3-chunk-partition.png")
            trace = _open_markdown(page, "trace")
            page.screenshot(path=shots / "4-chunk-trace.png")
            assert f"Chunk {chunk} of people.csv" in trace
            assert "verdict" in trace and "reason" in trace and "no rows lost" in trace
            assert re.search(r"Step 1: \w+ \(accepted\)", trace)  # each proposal's code under its verdict
            assert "def " in trace and "(df: pd.DataFrame) -> pd.DataFrame" in trace
            _close_dialog(page)

            # The exported module: its code on the asset page ...
            page.goto(f"{base}/assets/people/cleaning_module", wait_until="networkidle")
            text = page.inner_text("body")
            assert "clean_people.py" in text and "registry_revision" in text
            code = _open_markdown(page, "code")
            page.screenshot(path=shots / "5-module-code.png")
            assert "def clean(" in code and "FUNCTIONS" in code
            _close_dialog(page)

            # ... and the blocking checks that let it out, all passed.
            page.goto(f"{base}/assets/people/validation?view=checks", wait_until="networkidle")
            page.get_by_text("quality_not_worse").first.wait_for()
            text = page.inner_text("body")
            page.screenshot(path=shots / "6-validation-checks.png")
            for check in ("module_compiles", "no_row_lost", "idempotent", "quality_not_worse"):
                assert check in text, check
            assert text.count("Succeeded") >= 4 and "blocking" in text
        finally:
            browser.close()

    assert all(p.stat().st_size > 10_000 for p in shots.glob("*.png")) and len(list(shots.glob("*.png"))) == 6


def _shipments_with_open_conventions(path: Path, start: int, *, status: bool) -> Path:
    """`_shipments`, with columns whose conventions the file leaves open (as in test_questions.py): a quantity
    written "12 oz" on three rows in five and "12" on the others, and "N/A" for a missing email or phone on many
    rows beside empty cells. Learning with no instructions leaves them as written and asks about them."""
    lines = _shipments(path, start, status=status).read_text(encoding="utf-8").splitlines()
    rows = [lines[0] + ",quantity,email,phone"]
    for i, line in enumerate(lines[1:], start):
        size = (6, 8, 12, 16, 24)[i % 5]
        email = "N/A" if i % 6 == 1 else "" if i % 11 == 2 else f"desk{i}@example.com"
        phone = "N/A" if i % 7 == 3 else "" if i % 13 == 4 else f"555-{i:04d}"
        rows.append(f"{line},{f'{size} oz' if i % 5 < 3 else size},{email},{phone}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _metadata_value(page, label: str) -> str:
    """The text of metadata entry `label`'s row on an asset's overview (key, timestamp, value)."""
    row = page.locator("tr").filter(has=page.locator("td", has_text=re.compile(rf"^\s*{label}\s*$"))).first
    row.wait_for()
    return " ".join(row.inner_text().split())


def test_the_ui_shows_a_proposed_versions_diff(tmp_path: Path):
    """Learning twice proposes version 2; its page shows it proposed, with the cells it would change, waiting for
    approval and why (also as its warning check); the module's page shows the questions learning asked."""
    from playwright.sync_api import sync_playwright

    workdir = tmp_path / "work"
    for month, start, status in (("march", 0, False), ("april", 1000, True)):
        drop = _shipments_with_open_conventions(tmp_path / f"{month}.csv", start, status=status)
        proc = subprocess.run([*SMOLCLEAN, "learn", str(drop), "--name", "shipments", "--workdir", str(workdir),
                               "--chunk-budget", "2", "--concurrency", "1"], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert "version: 2, proposed" in proc.stdout and "questions: " in proc.stdout, proc.stdout
    shots = tmp_path / "screenshots"
    shots.mkdir()
    waits = "version 2: promote is 'manual' (the default): every new version waits for a person to review its diff"
    with _serving(workdir, tmp_path, ["shipments", "module_version"]) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/assets/shipments/module_version", wait_until="networkidle")
            page.get_by_text("before (live)").first.wait_for()  # the diff table is short: rendered inline
            page.screenshot(path=shots / "1-shadow-diff.png")
            text = page.inner_text("body")
            assert "proposed" in text and "shadow_changed_share" in text
            diff = text[text.index("shadow_diff"):text.index("shadow_cells")]
            assert "cleaned differently than by live version 1" in diff and "after (proposed)" in diff
            assert re.search(r'status\s+"Lost "\s+"Lost"', diff)  # a cell before -> after, per function
            # The latest materialization is the versions' state: 1 live, 2 proposed and waiting, and why.
            assert _metadata_value(page, "state").endswith(" proposed")
            assert _metadata_value(page, "live_version").endswith(" 1")
            assert _metadata_value(page, "waiting_for_approval").endswith(waits)

            # Its check warns while version 2 waits: why, and how to approve it.
            page.goto(f"{base}/assets/shipments/module_version?view=checks", wait_until="networkidle")
            page.get_by_text("Latest execution").first.wait_for()
            page.get_by_text("version 2 waits for approval").first.wait_for()
            page.screenshot(path=shots / "2-approval-check.png")
            text = page.inner_text("body")
            assert "nothing_awaits_approval" in text and "non-blocking" in text
            assert "version 2 waits for approval: promote is 'manual' (the default)" in text
            assert "launch the job shipments_approve_version with version: 2, or run `smolclean approve shipments 2`" in text
            # failed with severity WARN: Dagster shows "Failed" in a yellow tag with a warning icon, not an error's
            result = page.locator("div").filter(has=page.get_by_text("Evaluation result", exact=True)).last
            assert result.locator("[role=img][aria-label^=warning]").count() == 1, result.inner_html()
            assert "Failed" in result.inner_text()

            # The questions the learning ended with: what is open, with counts, and the options, with the cells
            # each changes and the instruction it becomes.
            page.goto(f"{base}/assets/shipments/cleaning_module", wait_until="networkidle")
            page.get_by_text("questions_open").first.wait_for()
            assert int(_metadata_value(page, "questions_open").split()[-1]) >= 2
            questions = " ".join(_open_markdown(page, "questions").split())
            page.screenshot(path=shots / "3-questions.png")
            assert ("\"No value\" is written out in columns 'email' and 'phone' and left as written: "
                    "'email': 'N/A' on 25 rows beside 11 empty cells; 'phone': 'N/A' on 21 rows beside 10 empty "
                    "cells. Which way should the module write a missing value?") in questions, questions
            assert ("1) write them as empty cells (a real null) (46): \"Write 'N/A' as empty in columns 'email' "
                    "and 'phone'.\"") in questions
            assert "2) keep them as written (0): \"Keep 'N/A' as written in columns 'email' and 'phone'.\"" in questions
            assert "Column 'quantity' writes 'oz' on 90 numbers (e.g. '12 oz'" in questions
            assert "and no unit on 60 (e.g. " in questions
            assert ("1) write the numbers without their unit (90): \"Write the numbers of column 'quantity' "
                    "without their unit ('oz').\"") in questions
            assert "2) keep them as written (0): \"Keep the numbers of column 'quantity' as written" in questions
            assert re.search(r"\bopen\b", questions) and "Answer with the job shipments_answer" in questions
            _close_dialog(page)
        finally:
            browser.close()
    assert all(p.stat().st_size > 10_000 for p in shots.glob("*.png")) and len(list(shots.glob("*.png"))) == 3
