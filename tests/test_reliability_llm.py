"""LLM faults lose nothing: timeouts, 429, 500, dropped connections, malformed or truncated replies, unsafe or
broken code, all over real HTTP (tests/llm_server.py behind litellm).

Server faults are retried within the attempt budget, every attempt counted; replies the model got wrong
are fed back to it; a server down for longer than the budget stops the chunk with an error naming the
setting to check, and what was accepted before stays in the registry for the next run.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from llm_server import Action, Recorded, ScriptedLLM, cut_body, fail, garbage, reply, reset
from smolclean_dagster.core.analysts import make_analyst
from smolclean_dagster.core.drops import read_drop
from smolclean_dagster.core.errors import AnalystError, SmolcleanError
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.plan import ChunkPlan
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.core.steps import ChunkTrace, ProposalStep, VerdictStep
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.settings import DatasetSettings

FIXES = {
    "strip_name": '''def strip_name(df):
    """Remove the spaces around and inside `name` ("  Ann Lee " -> "Ann Lee")."""
    df = df.copy()
    df["name"] = df["name"].str.split().str.join(" ")
    return df
''',
    # not title case: "NEW YORK", "new york" and "New York" are each on six rows, so nothing says which is wrong
    "strip_city": '''def strip_city(df):
    """Remove the spaces around `city` ("Chicago " -> "Chicago")."""
    df = df.copy()
    df["city"] = df["city"].str.strip()
    return df
''',
    "strip_dollar": '''def strip_dollar(df):
    """Drop the dollar sign of `spend` amounts ("$85.00" -> "85.00")."""
    df = df.copy()
    df["spend"] = df["spend"].str.replace(r"^\\$(?=\\d)", "", regex=True)
    return df
''',
    "null_spend": '''def null_spend(df):
    """Make the "N/A" of `spend` a real missing value."""
    df = df.copy()
    df["spend"] = df["spend"].mask(df["spend"].str.strip().str.upper().eq("N/A"), None)
    return df
''',
    "iso_signup": '''def iso_signup(df):
    """Write `signup` dates as YYYY-MM-DD ("03/14/2023" -> "2023-03-14")."""
    df = df.copy()
    parts = df["signup"].str.extract(r"^(\\d{2})/(\\d{2})/(\\d{4})$")
    us = parts[0].notna()
    df.loc[us, "signup"] = parts[2][us] + "-" + parts[0][us] + "-" + parts[1][us]
    return df
''',
    "spell_active": '''def spell_active(df):
    """Spell `active` as true/false ("Y", "yes" -> "true"; "N", "no" -> "false")."""
    df = df.copy()
    words = {"yes": "true", "y": "true", "true": "true", "no": "false", "n": "false", "false": "false"}
    lowered = df["active"].str.strip().str.lower()
    df["active"] = lowered.map(words).where(lowered.isin(list(words)), df["active"])
    return df
''',
}

UNSAFE = '''import os


def tidy_city(df):
    """Tidy `city`."""
    os.system("touch /tmp/smolclean-pwned")
    return df
'''

BROKEN = '''def tidy_name(df):
    """Tidy `name`."""
    df = df.copy(
    return df
'''

FAILING = '''def tidy_spend(df):
    """Parse `spend`."""
    df = df.copy()
    df["spend"] = df["amount_usd"].str.strip()
    return df
'''

CLEAN = "<issues>\n</issues>\n<status>clean</status>"


def fenced(code: str) -> str:
    return f"<issues>\n- a column needs work\n</issues>\n<code>\n```python\n{code}```\n</code>\n<status>needs_more_work</status>"


def model_right(request: Recorded) -> Action:
    """What a good model answers: the next fix the registry (listed in the prompt) lacks, then "clean"."""
    if "Merge them into ONE function" in request.prompt:
        return reply("<status>keep</status>")
    missing = [name for name in FIXES if name not in request.prompt]
    return reply(fenced(FIXES[missing[0]])) if missing else reply(CLEAN)


#: Faults the server makes: the request is fine, the server or the network is not (retried).
SERVER_FAULTS = ("timeout", "429", "500", "503", "reset", "cut_body", "garbage")
#: Faults the model makes: a reply that arrives but cannot be used (fed back to the model, uses a step).
MODEL_FAULTS = ("truncated", "unsafe_code", "broken_code", "failing_code")


def fault_action(kind: str, timeout_s: float) -> Action:
    return {
        "timeout": lambda: reply(CLEAN, delay_s=timeout_s + 0.5),
        "429": lambda: fail(429, retry_after="0.1", message="slow down"),
        "500": lambda: fail(500, message="model server crashed"),
        "503": lambda: fail(503, message="overloaded"),
        "reset": reset,
        "cut_body": cut_body,
        "garbage": garbage,
        "truncated": lambda: reply(fenced(FIXES["strip_city"])[:110], finish_reason="length"),
        "unsafe_code": lambda: reply(fenced(UNSAFE)),
        "broken_code": lambda: reply(fenced(BROKEN)),
        "failing_code": lambda: reply(fenced(FAILING)),
    }[kind]()


def body_key(request: Recorded) -> str:
    """What identifies one call across its attempts: a retry sends the very same messages."""
    return hashlib.sha256(json.dumps(request.body.get("messages"), sort_keys=True).encode()).hexdigest()


class FaultyModel:
    """A seeded, deterministic schedule failing `share` of the requests.

    Request n fails when floor((n + phase) * share) steps up (so any stretch of requests holds `share` of
    faults, give or take one), with the seed choosing the phase and the kinds: server and model faults
    take turns, each family dealt from its own shuffled deck. A call never gets more server faults in a
    row than its attempt budget allows, so the run must complete (a longer outage has its own test).
    At each fault it notes the functions in the working registry at that moment.
    """

    def __init__(self, registry: RegistryStore, *, share: float, seed: int, max_attempts: int, timeout_s: float):
        self.registry, self.share, self.max_attempts, self.timeout_s = registry, share, max_attempts, timeout_s
        self.rng = random.Random(seed)
        self.phase = self.rng.random() / share
        self.decks: dict[tuple[str, ...], list[str]] = {SERVER_FAULTS: [], MODEL_FAULTS: []}
        self.family = SERVER_FAULTS
        self.streak: Counter[str] = Counter()
        self.requests = 0
        self.injected: list[tuple[str, list[str]]] = []  # (kind, functions in the registry then)
        self.lock = threading.Lock()

    def _due(self) -> bool:
        n, self.requests = self.requests, self.requests + 1
        return int((n + 1 + self.phase) * self.share) > int((n + self.phase) * self.share)

    def _deal(self) -> str:
        deck = self.decks[self.family]
        if not deck:
            deck.extend(self.family)
            self.rng.shuffle(deck)
        self.family = MODEL_FAULTS if self.family is SERVER_FAULTS else SERVER_FAULTS
        return deck.pop()

    def __call__(self, request: Recorded) -> Action:
        with self.lock:
            key = body_key(request)
            if self._due() and not (self.family is SERVER_FAULTS and self.streak[key] >= self.max_attempts - 1):
                kind = self._deal()
                self.streak[key] += kind in SERVER_FAULTS
                self.injected.append((kind, [f.name for f in self.registry.load().functions]))
                return fault_action(kind, self.timeout_s)
            return model_right(request)


def calls_of(requests: list[Recorded]) -> list[int]:
    """Attempts per call, in order: consecutive requests with the same messages are one call's retries."""
    sizes: list[int] = []
    last = None
    for request in requests:
        key = body_key(request)
        if key == last:
            sizes[-1] += 1
        else:
            sizes.append(1)
        last = key
    return sizes


def test_a_learning_run_with_30_percent_of_llm_calls_failing_completes_and_keeps_every_function(messy_csv, tmp_path):
    timeout_s, max_attempts = 2.0, 4
    with ScriptedLLM() as llm:
        settings = DatasetSettings(
            name="people", workdir=tmp_path / "work", analyst="llm", model="openai/test-model", api_base=llm.api_base,
            api_key="test", llm_timeout_s=timeout_s, llm_max_attempts=max_attempts, llm_backoff_s=0.01,
            concurrency=1, chunk_size=10, chunk_budget=4, max_steps=8,
        )
        store = DatasetStore(settings.storage_dir, settings.name)
        faults = FaultyModel(store.registry, share=0.3, seed=8, max_attempts=max_attempts, timeout_s=timeout_s)
        llm.responder = faults
        instance = dg.DagsterInstance.ephemeral()
        outcome = learn(settings, messy_csv, instance)
        requests = list(llm.requests)

    # The run completed with a valid module holding every fix the model gave.
    assert outcome.validation.passed
    final = [f.name for f in store.registry.load().functions]
    assert sorted(final) == sorted(FIXES)
    module = outcome.module.read_text(encoding="utf-8")
    assert all(f"def {name}(" in module for name in FIXES)
    shipped = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(outcome.module.parent)],
                             capture_output=True, text=True, timeout=120, cwd=outcome.module.parent)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    cleaned = pd.read_parquet(outcome.cleaned)
    assert len(cleaned) == 60 and set(cleaned["active"]) <= {"true", "false"}

    # Faults really happened, about 30% of requests, of both families.
    kinds = [kind for kind, _ in faults.injected]
    assert 0.2 <= len(kinds) / len(requests) <= 0.4, (len(kinds), len(requests))
    assert set(kinds) & set(SERVER_FAULTS) and set(kinds) & set(MODEL_FAULTS), kinds

    # Every function accepted before a fault is still there at the end.
    for kind, before in faults.injected:
        assert set(before) <= set(final), (kind, before, final)

    # Retries stay within their budget, and every attempt the server saw is counted: the chunks' in their
    # traces, consolidation's (asking the model to merge functions it wrote) in the registry's metadata.
    attempts = calls_of(requests)
    assert max(attempts) <= max_attempts and max(attempts) > 1, attempts
    merging = [r for r in requests if "Merge them into ONE function" in r.prompt]
    usage = [t.usage for t in store.models("chunk_functions", ChunkTrace)]
    assert sum(u.attempts for u in usage) == len(requests) - len(merging)
    assert sum(u.calls for u in usage) == len(calls_of([r for r in requests if r not in merging]))
    registry_runs = [r.asset_materialization.metadata for r in instance.fetch_materializations(
        dg.AssetKey(["people", "registry"]), limit=100).records]
    assert merging, "the model was never asked to merge: consolidation's accounting is not exercised"
    assert sum(m["llm_attempts"].value for m in registry_runs) == len(merging)
    assert sum(m["llm_calls"].value for m in registry_runs) == len(calls_of(merging))


# ---- every kind of fault, one by one, in the agent loop (no Dagster: fast and exact)


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def work(messy_csv: Path) -> ChunkWork:
    df = read_drop(messy_csv)
    return ChunkWork(dataset="people", drop="people.csv", chunk_id="c0", rows=df.iloc[:25].reset_index(drop=True),
                     holdout=df.iloc[50:].reset_index(drop=True), reference=df.iloc[25:50].reset_index(drop=True))


def analyst(server: ScriptedLLM, tmp_path: Path, **options):
    values = dict(model="openai/test-model", api_base=server.api_base, api_key="test", cache_dir=tmp_path / "llm_cache",
                  backoff_s=0.01, backoff_max_s=0.05, timeout_s=1.0, max_attempts=4)
    return make_analyst("llm", **{**values, **options})


def test_every_kind_of_fault_is_retried_or_shown_to_the_model(llm, tmp_path, work, sandbox):
    llm.add(
        reset(), reply(fenced(FIXES["strip_name"])),                             # call 1: 2 attempts, accepted
        fail(429, retry_after="0"), fail(500), cut_body(), fault_action("truncated", 1.0),  # call 2: 4 attempts
        garbage(), fault_action("timeout", 1.0), fault_action("unsafe_code", 1.0),  # call 3: 3 attempts
        fault_action("broken_code", 1.0),                                         # call 4
        fault_action("failing_code", 1.0),                                        # call 5
        reply(fenced(FIXES["strip_city"])),                                  # call 6: accepted
        reply(CLEAN),                                                             # call 7
    )
    store = RegistryStore(tmp_path / "registry.json", "people")
    steps = list(run_chunk(work, analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=8)))

    proposals = [s for s in steps if isinstance(s, ProposalStep)]
    assert [p.usage.attempts for p in proposals] == [2, 4, 3, 1, 1, 1, 1] == calls_of(llm.requests)
    assert steps[-1].reason == "clean"
    assert [f.name for f in store.load().functions] == ["strip_name", "strip_city"]
    verdicts = {s.function_name: s.reason for s in steps if isinstance(s, VerdictStep) and not s.accepted}
    assert set(verdicts) == {"tidy_city", "tidy_spend"} and "os" in verdicts["tidy_city"]
    assert not Path("/tmp/smolclean-pwned").exists()
    # what the model got wrong was shown to it in the next request
    prompts = [r.prompt for r in llm.requests]
    assert "cut off" in prompts[6]  # requests 6-8 are call 3, after the truncated reply to call 2
    assert "function tidy_city was rejected: GateRejected" in prompts[9]
    assert "does not parse" in prompts[10]
    assert "function tidy_spend was rejected: FunctionFailed: KeyError" in prompts[11]


def test_an_outage_longer_than_the_retry_budget_stops_with_a_clear_error_and_keeps_what_was_accepted(
    llm, tmp_path, work, sandbox
):
    llm.add(reply(fenced(FIXES["strip_name"])), *[fail(503, message="upstream down")] * 4)
    store = RegistryStore(tmp_path / "registry.json", "people")
    seen = []
    with pytest.raises(AnalystError) as err:
        for step in run_chunk(work, analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=8)):
            seen.append(step)
    message = str(err.value)
    assert "failed 4 time(s)" in message and "503" in message and "'api_base'" in message and llm.api_base in message
    assert len(llm.requests) == 5  # one answered call, then exactly the budget of 4 attempts
    assert [f.name for f in store.load().functions] == ["strip_name"]  # accepted before the outage: kept

    # The server is back: running the chunk again starts from what was kept.
    llm.add(reply(fenced(FIXES["strip_city"])), reply(CLEAN))
    steps = list(run_chunk(work, analyst(llm, tmp_path), store, sandbox, LoopSettings(max_steps=8)))
    assert steps[-1].reason == "clean"
    assert "strip_name" in llm.requests[5].prompt
    assert [f.name for f in store.load().functions] == ["strip_name", "strip_city"]
    assert "def strip_name(" in render_module(store.load())


def test_an_outage_in_the_middle_of_a_wave_is_resumed_by_finishing_that_wave_first(messy_csv, tmp_path):
    max_attempts = 2
    # Down for one analysis call (all its attempts) in the middle of the first wave, after three fixes were accepted.
    outage = {"before": 3, "left": max_attempts}

    def respond(request: Recorded) -> Action:
        answer = model_right(request)
        if outage["before"] == 0 and outage["left"]:
            outage["left"] -= 1
            return fail(503, message="upstream down")
        outage["before"] -= 1
        return answer

    instance = dg.DagsterInstance.ephemeral()
    with ScriptedLLM(responder=respond) as llm:
        settings = DatasetSettings(
            name="people", workdir=tmp_path / "work", analyst="llm", model="openai/test-model", api_base=llm.api_base,
            api_key="test", llm_max_attempts=max_attempts, llm_backoff_s=0.01, concurrency=1, chunk_size=10,
            chunk_budget=4, planning_interval=2, max_steps=8,
        )
        store = DatasetStore(settings.storage_dir, settings.name)
        with pytest.raises(SmolcleanError, match=r"failed 2 time\(s\).*503.*'api_base'"):
            learn(settings, messy_csv, instance)
        kept = [f.name for f in store.registry.load().functions]
        plan = store.load_model("chunks", ChunkPlan, "people.csv")
        unfinished = [c for c in plan.selected if not store.path("chunk_functions", c, "json").exists()]
        assert kept == list(FIXES)[:3] and len(unfinished) == 1 and not plan.done
        planned = len(_materializations(instance, "chunks"))

        outcome = learn(settings, messy_csv, instance)

    # Nothing accepted before the outage was lost or written twice; the chunk went on from where it stopped.
    assert outcome.validation.passed and [f.name for f in store.registry.load().functions] == list(FIXES)
    # The interrupted wave was finished, and the registry published, before any more chunks were chosen.
    finished = _materializations(instance, "chunk_functions", unfinished[0])
    registry = _materializations(instance, "registry")
    chosen_after = [r for r in _materializations(instance, "chunks") if r.storage_id > finished[0].storage_id]
    assert len(_materializations(instance, "chunks")) == planned + len(chosen_after)
    assert any(finished[0].storage_id < r.storage_id < chosen_after[0].storage_id for r in registry)


def _materializations(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> list:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(["people", asset]),
                              asset_partitions=[partition] if partition else None), limit=1000,
    ).records
    return sorted(records, key=lambda r: r.storage_id)
