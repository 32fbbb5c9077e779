"""Names as people read them in the Dagster UI: chunk partition keys that are short and start with their drop,
and one name for a function in its chunk's trace, the chunk's accepted functions and the registry."""

from __future__ import annotations

import pandas as pd
import pytest

from smolclean_dagster.core.analysts.base import AnalysisRequest, Proposal
from smolclean_dagster.core.functions import CleaningFunction, RuleSpec
from smolclean_dagster.core.loop import ChunkWork, run_chunk
from smolclean_dagster.core.plan import ChunkPlan, plan_chunks, split_drop
from smolclean_dagster.core.registry import Provenance, RegistryEntry, RegistryStore
from smolclean_dagster.core.steps import ChunkTrace, ProposalStep, VerdictStep
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.learning.chunk_assets import locate_chunk
from smolclean_dagster.metadata import trace_metadata

ALIKE = ("daily_orders_export_north_region_warehouse_2024-11-01_part1.csv",
         "daily_orders_export_north_region_warehouse_2024-11-01_part2.csv")


def _ids(drop: str, rows: int, chunk_size: int = 50) -> list[str]:
    frame = pd.DataFrame({"a": [str(i) for i in range(rows)]}, dtype=object)
    return [c.id for c in split_drop(frame, dataset="d", drop=drop, chunk_size=chunk_size, holdout_fraction=0.1).chunks]


def test_chunk_keys_of_drops_with_long_alike_names_are_short_and_differ_near_their_start():
    """The UI cuts a long key in the middle: each key stays short, and two drops' keys differ early."""
    first, second = _ids(ALIKE[0], 12_000), _ids(ALIKE[1], 12_000)
    for one, other in zip(first, second):
        assert len(one) <= 42 and len(other) <= 42, (one, other)
        assert one[:30] != other[:30], (one, other)
        assert len(one.rsplit("@", 1)[1]) <= 12  # the rows, e.g. 00100-00150
    assert first[2].endswith("@00100-00150") and "2024-11-01_part1" in first[2]
    # a short drop key is kept whole, first: the chunk key reads as its drop's partition key and the rows
    assert _ids("customers_2024-11-03.csv", 120)[2] == "customers_2024-11-03.csv@100-120"


def test_chunk_keys_are_unique_and_sort_in_row_order_within_a_drop():
    for rows in (9, 10, 999, 1000, 12_345):
        ids = _ids("orders.csv", rows, chunk_size=7)
        assert sorted(ids) == ids and len(set(ids)) == len(ids), rows
        assert {len(i.rsplit("@", 1)[1]) for i in ids} == {2 * len(str(rows)) + 1}  # padded no wider than needed
    assert set(_ids("a.csv", 100)).isdisjoint(_ids("a.jsonl", 100))  # one name, two drops: still apart
    long_csv, long_jsonl = (f"{'x' * 40}.{ext}" for ext in ("csv", "jsonl"))
    assert set(_ids(long_csv, 100)).isdisjoint(_ids(long_jsonl, 100))


def test_a_drop_planned_by_the_previous_release_keeps_its_old_chunk_keys(tmp_path):
    """Stored plans and traces name chunks by the keys of the release that made them: those still resolve, and
    a plan carried on keeps them, so a dataset learned before still loads and goes on."""
    frame = pd.DataFrame({"city": ["Oslo", " oslo", "Bergen ", "N/A"] * 25}, dtype=object)
    old = split_drop(frame, dataset="d", drop="orders.csv", chunk_size=50, holdout_fraction=0.1)
    old_ids = ("orders-3a1c5e-r0000000-0000050", "orders-3a1c5e-r0000050-0000100")
    old = old.model_copy(update={"chunks": tuple(c.model_copy(update={"id": i}) for c, i in zip(old.chunks, old_ids)),
                                 "selected": old_ids[:1], "waves": 1})
    store = DatasetStore(tmp_path, "d")
    store.save_model("chunks", old, "orders.csv")
    assert locate_chunk(store, old_ids[0]).drop == "orders.csv"
    assert old.chunk_rows(frame, old_ids[1]).shape[0] > 0
    later = plan_chunks(frame, dataset="d", drop="orders.csv", chunk_size=50, budget=4, holdout_fraction=0.1,
                        previous=store.load_model("chunks", ChunkPlan, "orders.csv"))
    assert [c.id for c in later.chunks] == list(old_ids) and set(later.selected) <= set(old_ids)


class Proposes:
    """Answers with one function, then "clean"."""

    name = "scripted"
    trusts_detectors = False

    def __init__(self, function: CleaningFunction):
        self.function = function

    def propose(self, request: AnalysisRequest) -> Proposal:
        function, self.function = self.function, None
        return Proposal(function=function) if function else Proposal(status="clean")


UNIFY = 'def unify_city(df):\n    """Write `oslo` as `Oslo`."""\n    return df.replace({"city": {"oslo": "Oslo"}})\n'
OTHER = 'def unify_city(df):\n    """Write `bergen` as `Bergen`."""\n    return df.replace({"city": {"bergen": "Bergen"}})\n'


@pytest.mark.parametrize("collision", ["a chunk of the same wave", "a rule's earlier function"])
def test_a_function_the_registry_renames_keeps_that_name_in_the_trace_and_the_registry(tmp_path, sandbox, collision):
    """`unify_city` is taken when the chunk's own `unify_city` is accepted, so the registry stores it as
    `unify_city_2`: the proposal, the verdict, the accepted functions and the registry all say `unify_city_2`."""
    beside = collision == "a chunk of the same wave"
    store = RegistryStore(tmp_path / "registry.json", "people")
    store.update(lambda reg: reg.with_entry(RegistryEntry(
        function=CleaningFunction.from_code(OTHER, columns=["city"]),
        provenance=Provenance(drop="people.csv", chunk="c9" if beside else "c0", step=1, analyst="scripted"))))
    rule = None if beside else RuleSpec(template="unify_case.py.j2", context={"column": "city"})
    mine = CleaningFunction.from_code(UNIFY, columns=["city"], rule=rule)
    df = pd.DataFrame({"id": [str(i) for i in range(40)],
                       "city": ["oslo" if i % 10 == 3 else "Oslo" for i in range(40)]}, dtype=object)
    work = ChunkWork(dataset="people", drop="people.csv", chunk_id="c1", rows=df.iloc[:30].reset_index(drop=True),
                     holdout=df.iloc[30:].reset_index(drop=True), hidden=frozenset({"c9"}) if beside else frozenset())
    trace = ChunkTrace(dataset="people", drop="people.csv", chunk_id="c1", rows=30,
                       steps=tuple(run_chunk(work, Proposes(mine), store, sandbox)))

    verdict = next(s for s in trace.steps if isinstance(s, VerdictStep))
    proposal = next(s for s in trace.steps if isinstance(s, ProposalStep) and s.function_name)
    assert verdict.accepted, verdict.reason
    names = [f.name for f in store.load().functions]
    assert names == ["unify_city", "unify_city_2"]
    assert verdict.function_name == proposal.function_name == "unify_city_2"
    assert "def unify_city_2(df):" in proposal.code and proposal.code == store.load().functions[1].code
    assert trace.accepted == ["unify_city_2"]
    shown = trace_metadata(trace)
    assert shown["accepted_functions"].value == "unify_city_2"
    assert "`unify_city`" not in shown["trace"].value and "`unify_city_2`" in shown["trace"].value
