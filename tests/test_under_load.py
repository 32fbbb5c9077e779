"""A busy machine does not change what is learned: `smolclean learn` run on a drop with the machine idle, then again
in a fresh workdir with a busy loop spinning on every core (at normal priority), exports the same module byte for
byte, and rejects no function for time. The real CLI in a process of its own: real Dagster runs, chunk workers and
sandbox processes, all competing with the busy loops for the cores. A scripted model over real HTTP writes the
functions for the user's two instructions (a model's code is judged for its CPU cost per cell, the rules'
templates are not) and adopts the rules' candidates for the rest.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from instructed_model import InstructedModel
from llm_server import ScriptedLLM
from smolclean_dagster.core.steps import ChunkTrace, VerdictStep
from smolclean_dagster.core.storage import DatasetStore

NAME = "stores"
#: What a user would diff between two runs: the module, its tests and report, the registry in both forms.
OUTPUTS = (f"modules/{NAME}/clean_{NAME}.py", f"modules/{NAME}/test_clean_{NAME}.py", f"modules/{NAME}/report.md",
           f"storage/{NAME}/working_registry.json", f"storage/{NAME}/registry/_.json")
#: How a rejection for time is worded: the per-run CPU limit and the cost per cell (core/validate.py), the
#: sandbox's CPU limit and its wall-clock deadline (core/sandbox/process.py).
FOR_TIME = re.compile(r"too slow|CPU time|did not finish within|SandboxTimeout", re.IGNORECASE)

FIRST = ["Anna", "Ben", "Carla", "David", "Eva", "Frank", "Grace", "Hugo", "Iris", "Jon", "Kara", "Liam"]
LAST = ["Smith", "Jones", "Brown", "Miller", "Davis", "Garcia", "Wilson", "Moore"]
PLACES = [("Sacramento", "CA"), ("Portland", "OR"), ("Seattle", "WA"), ("Denver", "CO"), ("Austin", "TX"),
          ("Phoenix", "AZ")]
INSTRUCTIONS = "Write N/A and n/a as real nulls. Write the weights without their unit (kg)."
#: What the scripted model writes for each instruction (keyed by a word of the item's text).
CODE = {
    "N/A": '''import pandas as pd


def null_na_tokens(df: pd.DataFrame) -> pd.DataFrame:
    """Write "N/A" and "n/a" in `email` and `phone` as real nulls."""
    df = df.copy()
    for column in ("email", "phone"):
        df[column] = df[column].where(~df[column].isin(["N/A", "n/a"]), None)
    return df
''',
    "weights": '''import pandas as pd


def weights_without_unit(df: pd.DataFrame) -> pd.DataFrame:
    """Write `weight` without its unit ("10 kg" -> "10")."""
    df = df.copy()
    text = df["weight"].astype("string").str.replace(r"\\s*kg$", "", regex=True)
    df["weight"] = text.astype(object).where(df["weight"].notna(), None)
    return df
''',
}
SLIPS = {"Sacramento": "Sacramneto", "Seattle": "Seatle", "Denver": "Denvr", "Phoenix": "Pheonix"}


def store_list(path: Path, rows: int = 300) -> Path:
    """A list of stores as a user's system exports it: stray spaces around managers' names, a state written in
    lower or title case now and then, misspelt cities, "N/A" or "n/a" for a missing email or phone, and weights
    written "10 kg" on two rows in five and "10" on the others."""
    records = []
    for i in range(rows):
        city, state = PLACES[i % len(PLACES)]
        manager = f"{FIRST[i % len(FIRST)]} {LAST[(i * 3) % len(LAST)]}"
        record = {"store_id": f"S{1000 + i}", "manager": manager, "city": city, "state": state,
                  "email": f"{manager.split()[0].lower()}{i}@example.com", "phone": f"555-{1000 + i:04d}",
                  "weight": str([2, 5, 10, 20, 25][(i * 7) % 5])}
        if i % 7 == 2:
            record["manager"] = f"  {manager} "
        if i % 29 == 4:
            record["state"] = state.lower()
        elif i % 31 == 6:
            record["state"] = state.title()
        if i % 23 == 5 and city in SLIPS:
            record["city"] = SLIPS[city]
        if i % 6 == 1:
            record["email"] = "N/A"
        if i % 11 == 3:
            record["phone"] = "n/a"
        if i % 5 < 2:
            record["weight"] += " kg"
        records.append(record)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return path


def learn(drop: Path, workdir: Path, api_base: str) -> float:
    """`smolclean learn` as a user runs it with a model, in a process of its own: two chunks of 50 rows side by side
    on two worker processes; its wall-clock seconds."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "smolclean_dagster.cli", "learn", str(drop), "--name", NAME, "--workdir", str(workdir),
         "--chunk-size", "50", "--chunk-budget", "4", "--concurrency", "2", "--max-steps", "8",
         "--instructions", INSTRUCTIONS, "--analyst", "hybrid", "--model", "openai/test-model",
         "--api-base", api_base, "--api-key", "k"],
        capture_output=True, text=True, timeout=600, cwd=workdir.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return time.monotonic() - started


@contextmanager
def busy_cores() -> Iterator[list[subprocess.Popen]]:
    """A busy loop on every core, each a process at normal priority, killed however the block ends."""
    spinners: list[subprocess.Popen] = []
    try:
        for _ in range(os.cpu_count() or 1):
            spinners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a live process has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def verdicts(workdir: Path) -> list[tuple[str, int, str, bool, str]]:
    """Every candidate the learning checked, chunk by chunk: (chunk, step, function, accepted, reason)."""
    traces = DatasetStore(workdir / "storage" / NAME, NAME).models("chunk_functions", ChunkTrace)
    assert traces
    return [(t.chunk_id, s.step, s.function_name, s.accepted, s.reason)
            for t in traces for s in t.steps if isinstance(s, VerdictStep)]


def test_learning_on_a_machine_busy_on_every_core_gives_the_module_an_idle_machine_gives(tmp_path):
    drop = store_list(tmp_path / "stores.csv")
    idle, loaded = tmp_path / "idle", tmp_path / "loaded"
    idle.mkdir()
    loaded.mkdir()

    model = InstructedModel(code=CODE, adopt=("",))
    with ScriptedLLM(responder=model) as llm:
        idle_s = learn(drop, idle, llm.api_base)
        with busy_cores() as spinners:
            time.sleep(0.5)  # every spinner is spinning before learning starts
            assert all(s.poll() is None for s in spinners)
            loaded_s = learn(drop, loaded, llm.api_base)
            spun = [cpu_seconds(s.pid) for s in spinners]
            assert all(s.poll() is None for s in spinners)  # they spun all the way through
    # The load was real: every busy loop computed while the learning ran (how big a share of the cores they got
    # depends on what else the machine runs; with nothing else, nearly all of them).
    assert all(s >= 1.0 for s in spun) and sum(spun) >= 0.1 * loaded_s, (spun, loaded_s)
    print(f"learning took {idle_s:.1f} s idle, {loaded_s:.1f} s with {len(spinners)} busy loop(s) "
          f"(their CPU seconds: {', '.join(f'{s:.1f}' for s in spun)})")

    # None of the candidates was sent back for time, idle or busy, and the same ones were accepted or rejected alike.
    for workdir in (idle, loaded):
        for_time = [v for v in verdicts(workdir) if not v[3] and FOR_TIME.search(v[4])]
        assert not for_time, (workdir.name, for_time)
    checked = verdicts(idle)
    assert [v[:4] for v in checked] == [v[:4] for v in verdicts(loaded)]
    assert sum(accepted for *_, accepted, _ in checked) >= 5
    for name in OUTPUTS:
        assert (idle / name).read_bytes() == (loaded / name).read_bytes(), name
    module = (idle / OUTPUTS[0]).read_text(encoding="utf-8")
    assert module.count("\ndef ") >= 5, module  # the learning did something: several functions besides clean()
    # the model's own code was judged (for its cost too) and kept, under load as when idle
    assert "def null_na_tokens(" in module and "def weights_without_unit(" in module
