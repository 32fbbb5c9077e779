"""One decision per column and concern. A function that a later version, a later wave or a chunk running beside
writes for a column and concern the module already has is merged into the one there, under its name. Two
functions never decide one value two ways: where the merge cannot decide a value as the module did, the earlier
function stays and the later one is taken out, with the reason.

The functions are learned by the rules analyst through the agent loop in the sandbox, and consolidated as
publishing a wave does (`registry_assets`).
"""

from __future__ import annotations

from functools import partial

import pandas as pd

from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.consolidate import consolidate, find_conflicts
from smolclean_dagster.core.export import render_module
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, clean_with, run_chunk, summarise_registry
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry, RegistryStore
from smolclean_dagster.core.steps import VerdictStep
from smolclean_dagster.sandbox import check_module
from test_next_drop import CITIES, customers

RULES = RulesAnalyst()


def learn(drop: pd.DataFrame, name: str, store: RegistryStore, sandbox, *, chunk: list[int] | None = None,
          beside: frozenset[str] = frozenset()) -> list[VerdictStep]:
    """The rules learning from `drop` through the agent loop: one chunk (by default the rows showing its dirt
    first, as the planner picks them), the drop's first 1,600 rows as reference and the rest held out."""
    if chunk is None:
        cities = {c for c, _, _ in CITIES}
        dirty = [i for i in range(1600) if drop.at[i, "city"] not in cities or drop.at[i, "state"] in ("ca", "tx")]
        chunk = (dirty + [i for i in range(1600) if i not in set(dirty)])[:50]
    work = ChunkWork(dataset="customers", drop=name, chunk_id=f"{name}:{chunk[0]}",
                     rows=drop.loc[chunk].reset_index(drop=True), holdout=drop.iloc[1600:].reset_index(drop=True),
                     reference=drop.iloc[:1600].reset_index(drop=True), hidden=beside)
    steps = list(run_chunk(work, RULES, store, sandbox, LoopSettings(max_steps=6)))
    return [s for s in steps if isinstance(s, VerdictStep)]


def publish(registry: Registry, rows: pd.DataFrame, sandbox):
    """Consolidation as publishing a wave runs it."""
    return consolidate(registry, rows, sandbox, rule_key=RULES.merge_key,
                       rule_merger=partial(RULES.merge, column_order=tuple(rows.columns)))


def decisions(function: CleaningFunction, rows: pd.DataFrame, column: str, sandbox) -> dict[str, set[str]]:
    """What `function` alone makes of each value of `column`."""
    out = sandbox.run(function.code, rows, entry=function.name)
    return {v: set(out.loc[rows[column] == v, column]) for v in rows[column].unique()}


def test_two_versions_functions_on_one_column_become_one_with_one_decision_per_value(sandbox, tmp_path):
    # Version 1 keeps "ca" (on a fifth of California's rows: a way the file writes it) and fixes "tx"; on the next
    # drop, "ca" on 3 rows of 300 is a slip, so version 2 adds a case function of its own on the same column.
    first, _ = customers(1, [("state", "ca", "CA", 70), ("state", "tx", "TX", 1)])
    second, _ = customers(2, [("state", "ca", "CA", 3)])
    store = RegistryStore(tmp_path / "registry.json", "customers")
    learn(first, "first.csv", store, sandbox)
    learn(second, "second.csv", store, sandbox)
    learned = store.load()
    assert [e.function.name for e in learned.entries if e.function.columns == ("state",)] == [
        "unify_case_state", "unify_case_state_2"]
    rows = pd.concat([first.iloc[:1600], second.iloc[:1600]], ignore_index=True)
    before = clean_with(learned, rows, sandbox)
    kept_by_first, fixed_by_second = (decisions(e.function, rows, "state", sandbox)["ca"] for e in learned.entries[:2])
    assert (kept_by_first, fixed_by_second) == ({"ca"}, {"CA"})  # opposite decisions about one value

    result = publish(learned, rows, sandbox)

    (case,) = [e for e in result.registry.entries if e.function.columns == ("state",)]
    assert case.function.name == "unify_case_state"
    assert case.merged_from == ("unify_case_state", "unify_case_state_2")
    # one function, one decision per value: the one the module of the two made, alone
    assert {v: d for v, d in decisions(case.function, rows, "state", sandbox).items() if len(d) != 1} == {}
    assert decisions(case.function, rows, "state", sandbox)["ca"] == {"CA"}
    assert "ca" not in case.function.rule.context["keep"]
    assert "state 'ca': `unify_case_state` keeps it, `unify_case_state_2` makes it 'CA'" in result.merged[0].reason
    pd.testing.assert_frame_equal(clean_with(result.registry, rows, sandbox), before)
    assert not find_conflicts(result.registry, rows, sandbox)
    check_module(render_module(result.registry))  # the exported module stays valid


def test_chunks_side_by_side_keep_the_name_their_traces_record_and_publish_one_function(sandbox, tmp_path):
    """The name a chunk's trace gives a function is the one the published module holds: two chunks beside each
    other, neither seeing the other's functions, both fix the case of `state`; no `_2` appears later."""
    drop, _ = customers(3, [("state", "ca", "CA", 4), ("state", "tx", "TX", 3)])
    ca = list(drop.index[drop["state"] == "ca"][:2]) + list(range(40, 88))
    tx = list(drop.index[drop["state"] == "tx"][:2]) + list(range(100, 148))
    chunks = [f"wave.csv:{ca[0]}", f"wave.csv:{tx[0]}"]
    store = RegistryStore(tmp_path / "registry.json", "customers")
    traced = []
    for rows in (ca, tx):
        beside = frozenset(chunks) - {f"wave.csv:{rows[0]}"}
        traced += [v.function_name for v in learn(drop, "wave.csv", store, sandbox, chunk=rows, beside=beside)
                   if v.accepted]
    assert traced.count("unify_case_state") == 2, traced

    published = publish(store.update(lambda reg: reg.in_chunk_order(chunks)), drop.iloc[:1600], sandbox).registry

    names = [e.function.name for e in published.entries]
    assert names.count("unify_case_state") == 1 and not any(n.endswith("_2") for n in names), names
    assert set(traced) <= set(names)


def test_two_functions_of_one_concern_that_cannot_merge_and_decide_a_value_two_ways_are_not_both_kept(sandbox):
    """Title case learned from one chunk, upper case from another chunk, on one column: the rule's two conventions
    cannot be one function, and they make "boston" two ways. The earlier stays; the later is taken out, and
    learning is told why."""
    title = ["New York", "Los Angeles", "Chicago", "Houston", "Phoenix", "Philadelphia", "San Antonio", "San Diego",
             "Dallas", "Columbus", "Denver", "Atlanta", "Seattle", "Portland"]
    written = pd.DataFrame({"city": title * 3 + ["boston"]}, dtype=object)
    shouted = pd.DataFrame({"city": [c.upper() for c in title] * 3 + ["boston"]}, dtype=object)
    registry = Registry(dataset="d")
    for i, chunk in enumerate((written, shouted)):
        proposal = RULES.propose(AnalysisRequest(dataset="d", chunk_id=f"c{i}", step=1, chunk=chunk,
                                                 registry=summarise_registry(registry)))
        registry = registry.with_entry(RegistryEntry(function=proposal.function, provenance=Provenance(
            drop="d.csv", chunk=f"c{i}", step=1, analyst="rules")))
    assert [e.function.name for e in registry.entries] == ["unify_case_city", "unify_case_city_2"]
    rows = pd.concat([written, shouted], ignore_index=True)

    result = publish(registry, rows, sandbox)

    assert [e.function.name for e in result.registry.entries] == ["unify_case_city"]
    (merge,) = result.merged
    assert merge.taken_out == ("unify_case_city_2",)
    assert "city 'boston': `unify_case_city` makes it 'Boston', `unify_case_city_2` makes it 'BOSTON'" in merge.reason
    (dropped,) = result.registry.dropped
    assert dropped.name == "unify_case_city_2" and "'boston'" in dropped.reason
    assert clean_with(result.registry, rows, sandbox)["city"].tolist()[-1] == "Boston"


def _written(name: str, body: str) -> CleaningFunction:
    return CleaningFunction.from_code(f'def {name}(df):\n    """Fix city."""\n    df = df.copy()\n'
                                      f'    df["city"] = {body}\n    return df\n', columns=["city"])


def test_model_written_functions_that_decide_a_value_two_ways_keep_the_earlier_and_say_why(sandbox):
    strip = _written("strip_city", 'df["city"].str.strip()')
    boston = _written("fix_city", 'df["city"].replace({"Bostn": "Boston", "boston": "Boston"})')
    austin = _written("spell_city", 'df["city"].replace({"Bostn": "Austin"})')
    lower = _written("lower_city", 'df["city"].str.lower()')
    registry = Registry(dataset="d")
    for fn in (strip, boston, austin, lower):
        registry = registry.with_entry(RegistryEntry(function=fn, provenance=Provenance(
            drop="d.csv", chunk="c0", step=1, analyst="llm", model="m")))
    rows = pd.DataFrame({"city": [" Bostn", "Boston", "Austin", "Bostn "]}, dtype=object)

    result = consolidate(registry, rows, sandbox, rule_merger=None)

    # stripping, then correcting what was stripped, is one decision carried on in two steps; "Bostn" made
    # "Austin" beside "Boston", and "Boston" lower-cased (undoing the earlier's work on "boston"), are two
    assert [e.function.name for e in result.registry.entries] == ["strip_city", "fix_city"]
    assert [(c.later, c.value) for c in result.conflicts] == [
        ("spell_city", "Bostn"), ("lower_city", "Bostn"), ("lower_city", "Boston")]
    assert result.conflicts[0].describe() == ("city 'Bostn': `fix_city` makes it 'Boston', `spell_city` makes it "
                                              "'Austin'")
    assert result.conflicts[2].describe() == "city 'Boston': `fix_city` keeps it, `lower_city` makes it 'boston'"
    assert [d.name for d in result.registry.dropped] == ["spell_city", "lower_city"]
    assert "it decides values of `fix_city` otherwise" in result.registry.dropped[0].reason
    assert clean_with(result.registry, rows, sandbox)["city"].tolist() == ["Boston", "Boston", "Austin", "Boston"]
