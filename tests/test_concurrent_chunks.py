"""Chunk steps running at the same time on one registry: every accepted function is kept, none twice.

Five real agent loops (rules analyst, real sandboxes) run in five processes on five chunks, and their first
accepts happen at the same moment. Each accepts the same null-token fix plus one of its own; two of them
learn a different fix under the same name. tests/test_registry.py races bare writers; this races the loop.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pandas as pd

from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, RegistryEntry, RegistryStore
from smolclean_dagster.core.steps import VerdictStep

CHUNKS = 5
ROWS = 20


def drop() -> pd.DataFrame:
    """Five chunks of 20 rows: "N/A" notes everywhere, and one kind of dirt of each chunk's own."""
    rows = []
    for c in range(CHUNKS):
        for i in range(ROWS):
            r = {"id": f"{c}-{i}", "note": "N/A" if i % 4 == 0 else f"note {i}", "city": "Oslo", "flag": "true",
                 "name": f"Ann {i}", "kind": "retail"}
            if c == 0:
                r["city"] = ["Oslo", "Oslo", "Oslo", "oslo", "Oslo", "Oslo", "OSLO", "Tromso"][i % 8]
            if c == 1:
                r["flag"] = ["yes", "Y", "no", "N"][i % 4]
            if c == 2:
                r["name"] = [f"  Ann {i}", f"Bob  {i} "][i % 2]
            if c == 3:
                r["kind"] = ["retail", "retail", "retail", "Retail", "retail", "RETAIL", "wholesale", "retail"][i % 8]
            if c == 4:  # the same kind of fix as chunk 0, on other values: a different function, the same name
                r["city"] = ["Bergen", "Bergen", "Bergen", "bergen", "Bergen", "BERGEN", "Tromso", "Bergen"][i % 8]
            rows.append(r)
    return pd.DataFrame(rows, dtype=object)


class TogetherStore(RegistryStore):
    """The registry store, whose first update in each process waits until every loop is about to accept a
    function: so the accepts really land at the same moment, not merely in the same few seconds."""

    def __init__(self, path: str, dataset: str, barrier):
        super().__init__(path, dataset)
        self.barrier, self.first = barrier, True

    def update(self, change):
        if self.first:
            self.first = False
            self.barrier.wait(timeout=120)
        return super().update(change)


def _run_chunk(c: int, registry: str, barrier, results) -> None:
    from smolclean_dagster.sandbox import Sandbox

    df = drop()
    rows = df.iloc[c * ROWS : (c + 1) * ROWS]
    work = ChunkWork(dataset="ds", drop="d.csv", chunk_id=f"c{c}", rows=rows.iloc[2:].reset_index(drop=True),
                     holdout=rows.iloc[:2].reset_index(drop=True))
    with Sandbox() as sandbox:
        store = TogetherStore(registry, "ds", barrier)
        steps = list(run_chunk(work, RulesAnalyst(), store, sandbox, LoopSettings(max_steps=6, instructions="Write N/A notes as real nulls.")))
    results.put((c, [s.function_name for s in steps if isinstance(s, VerdictStep) and s.accepted], steps[-1].reason))


def test_chunk_steps_accepting_functions_at_once_lose_none_and_duplicate_none(tmp_path: Path):
    registry = str(tmp_path / "working_registry.json")
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(CHUNKS), ctx.Queue()
    procs = [ctx.Process(target=_run_chunk, args=(c, registry, barrier, results)) for c in range(CHUNKS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0

    accepted = {name for _, names, _ in outcomes for name in names}
    assert all(reason == "clean" for _, _, reason in outcomes), outcomes
    reg = RegistryStore(registry, "ds").load()
    names = [f.name for f in reg.functions]
    # Nothing lost: every function a loop accepted is in the registry, and nothing else is.
    assert set(names) == accepted
    # Nothing duplicated: each name and each piece of code once; the shared fix once, whoever got there first.
    assert len(names) == len(set(names)) and len({f.code_hash for f in reg.functions}) == len(names)
    assert names.count("replace_null_tokens_note") == 1
    assert {"unify_case_city", "unify_case_city_2", "unify_booleans_flag", "strip_whitespace_name",
            "unify_case_kind"} <= set(names)
    # One saved version per accepted function: no update overwrote another.
    assert reg.version == len(names) == 6


def test_a_function_stored_under_a_suffixed_name_is_recognised_when_proposed_again(tmp_path: Path):
    def entry(city: str) -> RegistryEntry:
        code = f'def unify_city(df):\n    """Unify `city`."""\n    return df.replace({{"city": {{"x": "{city}"}}}})\n'
        return RegistryEntry(function=CleaningFunction.from_code(code, columns=["city"]),
                             provenance=Provenance(drop="d.csv", chunk="c", step=1, analyst="rules"))

    store = RegistryStore(tmp_path / "registry.json", "ds")
    store.update(lambda reg: reg.with_entry(entry("Oslo")))
    store.update(lambda reg: reg.with_entry(entry("Bergen")))  # same name, other code: stored as unify_city_2
    again = store.update(lambda reg: reg.with_entry(entry("Bergen")))  # another chunk proposes it once more
    assert [f.name for f in again.functions] == ["unify_city", "unify_city_2"] and again.version == 2
    assert again.find(entry("Bergen").function).function.name == "unify_city_2"
