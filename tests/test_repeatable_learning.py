"""Learning is a function of its inputs: the same drop learned twice, at concurrency 2, gives the same module,
report and registry byte for byte, whichever chunk of a wave finishes first.

Each run goes through `slowed_learning.py`, which holds back one chunk of every parallel wave until the others
have finished: the first in one run, the last in the other, so the waves finish in opposite orders.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from instructed_model import InstructedModel
from llm_server import ScriptedLLM, fail
from smolclean_dagster.core.plan import ChunkPlan
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.settings import DatasetSettings

SLOWED = Path(__file__).with_name("slowed_learning.py")
#: What a user would diff between two runs: the module, its tests and report, the registry in both forms.
OUTPUTS = ("modules/contacts/clean_contacts.py", "modules/contacts/test_clean_contacts.py",
           "modules/contacts/report.md", "storage/contacts/working_registry.json", "storage/contacts/registry/_.json")


def contacts(rows: int = 2000) -> pd.DataFrame:
    """A contacts export whose dirt moves from block to block of 50 rows: stray spaces in name, company or
    relationship, city case, null tokens, misspelt companies, US dates, yes/no spellings."""
    chance = random.Random(7)
    out = []
    for i in range(rows):
        block = i // 50
        row = {"id": str(i), "name": chance.choice(["Ann Lee", "Bob Stone", "Cara Diaz", "Dan Roe", "Eve Park"]),
               "company": chance.choice(["Acme Corp", "Globex", "Initech", "Umbrella", "Hooli"]),
               "relationship": chance.choice(["customer", "supplier", "partner", "reseller"]),
               "city": chance.choice(["Boston", "Chicago", "Denver", "Austin"]),
               "signup": f"2023-{chance.randint(1, 12):02d}-{chance.randint(1, 28):02d}",
               "spend": f"{chance.randint(1, 900)}.{chance.randint(0, 99):02d}",
               "active": chance.choice(["true", "false"])}
        if i % 3 == 0:
            column = ("name", "company", "relationship")[(block // 6) % 3]
            kind = block % 6
            if kind == 0:
                row[column] = f"  {row[column]} "
            elif kind == 1:
                row["city"] = row["city"].upper() if i % 2 else row["city"].lower()
            elif kind == 2:
                row[("spend", "relationship", "city")[(block // 6) % 3]] = chance.choice(["N/A", "null", "-"])
            elif kind == 3:
                row["company"] = {"Acme Corp": "Acme Crop", "Globex": "Glbex", "Initech": "Initceh"}.get(row["company"],
                                                                                                      row["company"])
            elif kind == 4:
                year, month, day = row["signup"].split("-")
                row["signup"] = f"{month}/{day}/{year}"
            else:
                row["active"] = chance.choice(["yes", "no", "Y", "N"])
        out.append(row)
    return pd.DataFrame(out, dtype=object)


@pytest.fixture(scope="module")
def drop(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("drop") / "contacts.csv"
    contacts().to_csv(path, index=False)
    return path


def _learn(*runs: tuple[DatasetSettings, str], drop: Path) -> list[list[str]]:
    """Learn `drop` once per (settings, held_back) in `runs`, each in a process of its own and all at the same
    time, holding back the `held_back` chunk of each wave; for each run, its chunks in the order they finished."""
    procs = []
    for settings, held_back in runs:
        finished = settings.workdir.parent / f"{settings.workdir.name}.finished"
        procs.append((finished, subprocess.Popen(
            [sys.executable, str(SLOWED), settings.model_dump_json(), str(drop), held_back, str(finished)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=settings.workdir.parent)))
    orders = []
    for finished, proc in procs:
        try:
            _, stderr = proc.communicate(timeout=600)
        finally:
            proc.kill()
        assert proc.returncode == 0, stderr[-3000:]
        orders.append(finished.read_text(encoding="utf-8").split())
    return orders


def _parallel_waves(settings: DatasetSettings) -> list[list[str]]:
    """The chunks of each wave that ran side by side, in the drop's order."""
    plan = DatasetStore(settings.storage_dir, settings.name).load_model("chunks", ChunkPlan, "contacts.csv")
    waves = [[c.id for c in plan.chunks if c.reason and c.wave == w] for w in range(1, plan.waves + 1)]
    return [wave for wave in waves if len(wave) > 1]


def _assert_opposite_orders(first: DatasetSettings, second: DatasetSettings, orders: list[list[str]]) -> None:
    """Both runs chose the same parallel waves, whose chunks finished first to last in one, last to first in
    the other (what the hold-back is for)."""
    waves = _parallel_waves(first)
    assert waves and waves == _parallel_waves(second)
    for wave in waves:
        assert [c for c in orders[0] if c in wave] == wave
        assert [c for c in orders[1] if c in wave] == wave[::-1]


def _assert_same_outputs(first: Path, second: Path, names: tuple[str, ...] = OUTPUTS) -> None:
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def _offline(workdir: Path) -> DatasetSettings:
    # asked for real nulls, so the null tokens are one more rule that every chunk may write
    return DatasetSettings(name="contacts", workdir=workdir, chunk_size=50, chunk_budget=6, planning_interval=2,
                           concurrency=2, max_steps=8, instructions="Write N/A, null and - as real nulls.")


def test_learning_a_drop_twice_offline_gives_byte_identical_outputs_whichever_chunk_finishes_first(drop, tmp_path):
    first, second = _offline(tmp_path / "first"), _offline(tmp_path / "second")
    # Side by side: each run loads the machine the other runs on.
    orders = _learn((first, "last"), (second, "first"), drop=drop)

    _assert_opposite_orders(first, second, orders)
    assert len(_parallel_waves(first)) >= 2
    _assert_same_outputs(first.workdir, second.workdir)
    module = (first.workdir / OUTPUTS[0]).read_text(encoding="utf-8")
    assert module.count("\ndef ") >= 5 and "def strip_whitespace_name_company_relationship(" in module


def test_a_model_s_cached_replies_replayed_give_a_byte_identical_module(drop, tmp_path):
    """A scripted model over HTTP adopts the ready-made functions offered; the second run, in a fresh workdir
    holding only the first run's reply cache, asks the server nothing and gets the same module."""
    model = InstructedModel(code={}, adopt=("",))
    with ScriptedLLM(responder=model) as llm:
        # Four chunks of four steps each: waves side by side, a few dozen calls to cache and replay.
        first = _offline(tmp_path / "first").model_copy(update={
            "analyst": "hybrid", "model": "openai/test-model", "api_base": llm.api_base, "api_key": "k",
            "chunk_budget": 4, "max_steps": 4})
        orders = _learn((first, "last"), drop=drop)
        calls = len(llm.requests)
    assert calls > 0 and model.calls > 0
    second = first.model_copy(update={"workdir": tmp_path / "second"})
    shutil.copytree(first.storage_dir / "llm_cache", second.storage_dir / "llm_cache")
    with ScriptedLLM(responder=lambda request: fail(400, message="not cached")) as llm:
        # The same settings but the server: one that refuses every call, so the replay must come from the cache.
        second = second.model_copy(update={"api_base": llm.api_base})
        orders += _learn((second, "first"), drop=drop)
        assert llm.requests == []

    _assert_opposite_orders(first, second, orders)
    # The report says how many calls the cache answered: all of them in the replay, none the first time.
    _assert_same_outputs(first.workdir, second.workdir, tuple(n for n in OUTPUTS if not n.endswith("report.md")))
    module = (first.workdir / OUTPUTS[0]).read_text(encoding="utf-8")
    assert "hybrid (openai/test-model)" in module and module.count("\ndef ") >= 3
    # What a model may vary is on record: each function names the prompt and the reply that wrote it.
    registry = DatasetStore(first.storage_dir, first.name).registry.load()
    assert all(e.provenance.prompt_hash and e.provenance.reply_hash for e in registry.entries)
