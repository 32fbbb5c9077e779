"""The next drop: a module learned from one drop of a source cleans the next one, whose slips it never saw.

A made-up source of customers (2,000 rows a drop, fifteen cities at realistic frequencies, their states, a plan,
an amount) sends two drops. The rules learn from the first through the agent loop, in the sandbox, as a learning
run does; the exported module then cleans the second drop. Its new typos and case slips ("Colubus", "COLUMBUS",
"denver", "Los nAgeles", "PREMIUM") are fixed because the functions carry the column (its valid values, its case
convention), not a table of the slips seen; its new real values ("Dayton" on 40 rows, "Dalton" beside "Dallas")
are left as they are, and no row's result depends on the batch it is cleaned in. A column's case is read from how
each of its values is mostly written, so slips spread over many values ("ny", "tx", "il" beside "NY", "TX", "IL";
"basic" on a seventh of the "Basic" rows) neither hide the convention nor pass for a way of writing.

Real cities one letter from a frequent one ("Irvine", CA, beside "Irving", TX; the next drop's "Layton", UT, beside
its own "Dayton", OH) are other places, as their rows' states say: they stay, in both drops, while "Irvig" in TX and
"Daytn" in OH are fixed.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.drop_counts import drop_counts
from smolclean_dagster.core.export import drop_groups, render_module
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.registry import Registry, RegistryStore
from smolclean_dagster.core.steps import VerdictStep

#: (city, state, rows of a drop): the source's customers by city.
CITIES = [("New York", "NY", 370), ("Los Angeles", "CA", 210), ("Chicago", "IL", 220), ("Houston", "TX", 180),
          ("Phoenix", "AZ", 150), ("Philadelphia", "PA", 130), ("San Antonio", "TX", 110), ("San Diego", "CA", 100),
          ("Dallas", "TX", 95), ("Columbus", "OH", 90), ("Denver", "CO", 85), ("Atlanta", "GA", 80),
          ("Seattle", "WA", 70), ("Boston", "MA", 60), ("Portland", "OR", 50)]
PLANS = ["Basic"] * 6 + ["Premium"] * 3 + ["Business"] * 2 + ["Enterprise"]

#: (column, as written, as meant, rows): each drop's dirt. The first drop's is what the rules learn from.
FIRST_SLIPS = [("city", "Atlantta", "Atlanta", 1), ("city", "Housten", "Houston", 1),
               ("city", "Philadelpia", "Philadelphia", 1), ("city", "Seatle", "Seattle", 1),
               ("city", "BOSTON", "Boston", 1), ("city", "phoenix", "Phoenix", 1), ("plan", "basic", "Basic", 1),
               ("city", "Irvig", "Irving", 1), ("state", "ca", "CA", 9), ("state", "ny", "NY", 8),
               ("state", "tx", "TX", 6), ("state", "il", "IL", 5), ("state", "oh", "OH", 3), ("state", "ga", "GA", 3),
               ("plan", "basic", "Basic", 140), ("plan", "premium", "Premium", 70),
               ("plan", "business", "Business", 45)]
NEXT_SLIPS = [("city", "Colubus", "Columbus", 2), ("city", "COLUMBUS", "Columbus", 3), ("city", "denver", "Denver", 2),
              ("city", "Los nAgeles", "Los Angeles", 1), ("city", "Atlantta", "Atlanta", 1),
              ("plan", "PREMIUM", "Premium", 2), ("plan", "business", "Business", 1), ("state", "ca", "CA", 7),
              ("city", "Daytn", "Dayton", 1), ("state", "ut", "UT", 1), ("state", "ny", "NY", 4)]
#: A city of the first drop, and a real city one letter from it in another state, on a few rows.
FIRST_CITIES = [("Irving", "TX", 60), ("Irvine", "CA", 4)]
#: Real cities the first drop never held: one on many rows, one beside "Dallas" (three letters apart), one a letter
#: from the new "Dayton" (in another state); and the first drop's two again.
NEW_CITIES = [("Dayton", "OH", 40), ("Dalton", "GA", 3), ("Layton", "UT", 3), ("Irving", "TX", 55), ("Irvine", "CA", 2)]


def customers(seed: int, slips: list[tuple[str, str, str, int]],
              new_cities: list[tuple[str, str, int]] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One drop of 2,000 customers as written, and as meant."""
    rng = random.Random(seed)
    places = [(c, s) for c, s, n in CITIES for _ in range(n)]
    extra = [(c, s) for c, s, n in new_cities for _ in range(n)]
    rng.shuffle(places)
    places = places[len(extra):] + extra
    rng.shuffle(places)
    truth = pd.DataFrame({"id": [f"C{seed}{i:05d}" for i in range(len(places))], "city": [c for c, _ in places],
                          "state": [s for _, s in places], "plan": [rng.choice(PLANS) for _ in places],
                          "amount": [f"{rng.randint(5, 900)}.{rng.randint(0, 99):02d}" for _ in places]}, dtype=object)
    written = truth.copy()
    taken: set[int] = set()
    for column, dirty, meant, n in slips:
        rows = [i for i in rng.sample(range(len(truth)), len(truth))
                if truth.at[i, column] == meant and i not in taken][:n]
        taken.update(rows)
        written.loc[rows, column] = dirty
    return written, truth


def learned_from(drop: pd.DataFrame, sandbox, path) -> Registry:
    """The functions the rules learn from `drop`: one chunk of 50 rows showing the drop's dirt (as the planner
    picks it), the drop's first 1,600 rows as reference and the last 400 held out, through the agent loop."""
    cities = {c for c, _, _ in CITIES + FIRST_CITIES}
    places = [i for i in range(1600) if drop.at[i, "city"] not in cities or drop.at[i, "state"].islower()]
    plans = [i for i in range(1600) if drop.at[i, "plan"] not in PLANS]
    clean = [i for i in range(1600) if i not in set(places + plans)]
    chunk = drop.loc[(places + plans[:8] + clean)[:50]].reset_index(drop=True)
    work = ChunkWork(dataset="customers", drop="first.csv", chunk_id="c0", rows=chunk,
                     holdout=drop.iloc[1600:].reset_index(drop=True), reference=drop.iloc[:1600].reset_index(drop=True))
    store = RegistryStore(path, "customers")
    steps = list(run_chunk(work, RulesAnalyst(), store, sandbox, LoopSettings(max_steps=8)))
    rejected = [s.reason for s in steps if isinstance(s, VerdictStep) and not s.accepted]
    assert not rejected, rejected
    return store.load()


def applied(registry: Registry, whole: pd.DataFrame, batches: list[pd.DataFrame], sandbox) -> list[pd.DataFrame]:
    """Each of `batches` of the drop `whole` cleaned as `smolclean apply` cleans a drop's batches: the exported
    module in the sandbox, every batch with the counts of the whole drop (what a new drop's own rows say)."""
    counts = drop_counts(whole, drop_groups(registry))
    with sandbox.batch_runner(render_module(registry, with_main=False), drop=counts) as runner:
        return [runner.run(batch).reset_index(drop=True) for batch in batches]


@pytest.fixture(scope="module")
def two_drops(sandbox, tmp_path_factory):
    first, _ = customers(1, FIRST_SLIPS, FIRST_CITIES)
    written, truth = customers(2, NEXT_SLIPS, NEW_CITIES)
    registry = learned_from(first, sandbox, tmp_path_factory.mktemp("next_drop") / "registry.json")
    [cleaned] = applied(registry, written, [written], sandbox)
    return registry, written, truth, cleaned


def changes(before: pd.DataFrame, after: pd.DataFrame, column: str) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for b, a in zip(before[column], after[column]):
        if b != a:
            out[(b, a)] = out.get((b, a), 0) + 1
    return out


def test_the_next_drops_slips_the_first_never_showed_are_fixed(two_drops, sandbox):
    registry, written, truth, cleaned = two_drops
    names = [e.function.name for e in registry.entries]
    assert {"unify_case_city", "fix_misspellings_city", "unify_case_state", "unify_case_plan"} <= set(names), names
    assert changes(written, cleaned, "city") == {("Colubus", "Columbus"): 2, ("COLUMBUS", "Columbus"): 3,
                                                 ("denver", "Denver"): 2, ("Los nAgeles", "Los Angeles"): 1,
                                                 ("Atlantta", "Atlanta"): 1, ("Daytn", "Dayton"): 1}
    # on the first drop too: "Irvig" in Texas is a slip of "Irving", "Irvine" in California another city
    first, _ = customers(1, FIRST_SLIPS, FIRST_CITIES)
    [again] = applied(registry, first, [first], sandbox)
    assert changes(first, again, "city")[("Irvig", "Irving")] == 1 and (again["city"] == "Irvine").sum() == 4
    [spelling] = [e.function.code for e in registry.entries if e.function.name == "fix_misspellings_city"]
    assert "'Irvine': 'Irving'" not in spelling and "COMPANION = 'state'" in spelling
    # the plan column has four values (no case convention to learn): its known spellings carry over; each value is
    # written in lower case on a seventh of its rows, slips the first drop shows by their share, not a way of its own
    assert changes(written, cleaned, "plan") == {("PREMIUM", "Premium"): 2, ("business", "Business"): 1}
    assert changes(first, again, "plan") == {("basic", "Basic"): 141, ("premium", "Premium"): 70,
                                             ("business", "Business"): 45}
    # "ca" on 7 rows here (9 in the first drop, beside 301 "CA") is a slip, not a spelling of the source's own; the
    # first drop wrote every code in capitals but its slips, so "ut", a code it never held, follows them too
    assert changes(written, cleaned, "state") == {("ca", "CA"): 7, ("ny", "NY"): 4, ("ut", "UT"): 1}


def test_the_next_drop_comes_out_as_meant_and_its_new_real_values_stay(two_drops):
    _, written, truth, cleaned = two_drops
    assert (cleaned["city"] == "Dayton").sum() == 40 and (cleaned["city"] == "Dalton").sum() == 3
    assert (cleaned["city"] == "Layton").sum() == 3 and (cleaned["city"] == "Irvine").sum() == 2
    wrong = {c: changes(truth, cleaned, c) for c in truth.columns if changes(truth, cleaned, c)}
    assert wrong == {}, "cells that differ from what the source meant"


def test_a_rows_result_does_not_depend_on_the_batch_it_is_cleaned_in(two_drops, sandbox):
    registry, written, _, cleaned = two_drops
    # the new city alone in a batch (every row of it "Dayton"), and the drop cut in uneven pieces
    dayton = written.index[written["city"] == "Dayton"]
    batches = [written.loc[dayton], written.iloc[:7], written.iloc[7:1300], written.iloc[1300:]]
    pieces = applied(registry, written, batches, sandbox)
    pd.testing.assert_frame_equal(pieces[0].reset_index(drop=True), cleaned.loc[dayton].reset_index(drop=True))
    pd.testing.assert_frame_equal(pd.concat(pieces[1:], ignore_index=True), cleaned)
