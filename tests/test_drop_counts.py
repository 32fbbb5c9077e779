"""The next drop's own evidence: a module learned from one drop of a source reads the whole of the next.

A made-up registry of facilities (a provider number, a name, a city, a zip code, a phone; one row per facility
and measure) sends two drops. The second brings thirty facilities the first never held, with typed slips in
their cells ("Brixton" for "Brinton"). The tables the first drop taught know none of their keys, so only the
new drop's own rows can say what each facility's values are: the module counts the whole drop first and
decides by it, and a row comes out the same whatever batch it is cleaned in.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from types import SimpleNamespace

from smolclean_dagster.core.analysts import rules
from smolclean_dagster.core.drop_counts import add_counts, drop_counts, with_drop

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]
STREETS = ["Main", "Oak", "Pine", "Maple", "Cedar", "Elm", "Lake", "Hill", "Park", "River"]
TOWNS = ["Ashford", "Brinton", "Caldwell", "Dunmore", "Elkridge", "Fairhaven", "Glenwood", "Hartwell", "Ironton",
         "Jasper", "Kingsley", "Lakemont", "Milford", "Northam", "Oakdale", "Pembroke", "Quinton", "Redfield",
         "Sheldon", "Thornbury", "Upland", "Vernon", "Westbury", "Yardley", "Zionsville", "Alder", "Beacon",
         "Clifton", "Dorset", "Easton", "Fenwick", "Granby", "Holbrook", "Ingram", "Jericho", "Kenmore", "Linden",
         "Marlow", "Newport", "Orland", "Preston", "Quarry", "Rosedale", "Stratton", "Tilden", "Unity", "Valley",
         "Warren", "Wexford", "Yorkton"]
MEASURES = [f"M-{i}" for i in range(1, 17)]


def facilities(first: int, count: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Facilities `first`..`first + count - 1`, 12-16 measure rows each, as written (one cell in twelve of the
    name, city and phone columns mistyped) and as meant."""
    rng = random.Random(seed)
    rows = []
    for f in range(first, first + count):
        town = TOWNS[f % len(TOWNS)]
        name = f"{town} {rng.choice(['General', 'Memorial', 'Community', 'Regional'])} Hospital"
        place = {"provider": f"P{10000 + f}", "name": name, "city": town, "zip": f"{30000 + 37 * f}",
                 "phone": f"555{1000000 + 7919 * f:07d}"}
        for measure in rng.sample(MEASURES, rng.randint(12, 16)):
            rows.append({**place, "measure": measure, "score": f"{rng.randint(40, 100)}%"})
    truth = pd.DataFrame(rows, dtype=object)
    written = truth.copy()
    for i in range(len(written)):
        if rng.random() < 1 / 12:
            column = rng.choice(["name", "city", "phone"])
            value = written.at[i, column]
            at = rng.randrange(1, len(value) - 1)
            written.at[i, column] = value[:at] + ("x" if column != "phone" else "0" if value[at] != "0" else "1") \
                + value[at + 1:]
    return written, truth


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> tuple[Path, Path, pd.DataFrame, pd.DataFrame]:
    """The module `smolclean learn` wrote for the first drop, the second drop's file, as written and as meant."""
    root = tmp_path_factory.mktemp("drop_counts")
    first, _ = facilities(0, 30, seed=1)
    second, truth = facilities(30, 30, seed=2)
    first.to_csv(root / "first.csv", index=False)
    second.to_csv(root / "second.csv", index=False)
    proc = subprocess.run([*SMOLCLEAN, "learn", str(root / "first.csv"), "--name", "facilities", "--workdir",
                           str(root / "work")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return root / "work" / "modules" / "facilities" / "clean_facilities.py", root / "second.csv", second, truth


def run_module(module: Path, source: Path, out: Path, *batch: str) -> pd.DataFrame:
    proc = subprocess.run([sys.executable, str(module), str(source), str(out), *batch], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return pd.read_csv(out, dtype=str, keep_default_na=False)


def test_the_new_drops_own_rows_repair_the_entities_the_first_drop_never_held(learned, tmp_path):
    module, second, written, truth = learned
    assert "DROP_GROUPS = [" in module.read_text(encoding="utf-8"), "the module's functions read the drop"
    cleaned = run_module(module, second, tmp_path / "out.csv")
    dirty = written != truth
    changed = cleaned != written
    wrong = changed & (cleaned != truth)
    assert not wrong.any().any(), cleaned[wrong.any(axis=1)]
    fixed = (dirty & (cleaned == truth)).sum()
    # every one of these facilities is new: the first drop's tables know no key of theirs
    for column in ("name", "city", "phone"):
        assert fixed[column] >= 0.8 * dirty[column].sum(), (column, int(fixed[column]), int(dirty[column].sum()))


def test_a_rows_result_is_the_same_whatever_batch_it_is_cleaned_in(learned, tmp_path):
    module, second, written, _ = learned
    whole = run_module(module, second, tmp_path / "whole.csv")
    # batches of 40 rows: no facility has all its rows in one, and many have two or three of them
    pd.testing.assert_frame_equal(run_module(module, second, tmp_path / "small.csv", "40", "2"), whole)
    proc = subprocess.run([*SMOLCLEAN, "apply", str(module), str(second), "-o", str(tmp_path / "apply.csv"),
                           "--batch-size", "40", "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "apply.csv", dtype=str, keep_default_na=False), whole)
    # the new facilities' cities are fixed in batches of 40 too: only the whole drop's counts can say what they are
    assert (whole["city"] != written["city"]).sum() >= 5


def test_the_counts_of_a_drops_parts_add_up_to_the_whole_drops():
    written, _ = facilities(0, 10, seed=3)
    groups = [("provider", "city"), ("city",), ("provider", "name", "zip")]
    parts: dict = {}
    for start in range(0, len(written), 17):
        add_counts(parts, drop_counts(written.iloc[start:start + 17], groups))
    assert parts == drop_counts(written, groups)
    assert sum(parts[("city",)].values()) == len(written)


def brewery_repair(known: dict[str, tuple[str, str, str]]):
    """The rules' dependency repair for a table of beers, as learning writes it from a first drop whose breweries
    are `known` ({name: (id, city, state)}): city and state by the brewery's name, the name's id as witness."""
    finding = SimpleNamespace(column="city", examples=["'Ashfrod' -> 'Ashford'"], params={
        "dependencies": [("brewery_name", "city", {n: c for n, (_, c, _) in known.items()}, False, ()),
                         ("brewery_name", "state", {n: s for n, (_, _, s) in known.items()}, False, ())],
        "conditions": [], "witnesses": [("brewery_name", "brewery_id", {n: i for n, (i, _, _) in known.items()})]})
    context = rules._dependencies([finding], [None], [])
    function = rules.RulesAnalyst()._render("repair_dependencies.py.j2", context, "repair_dependencies_city_state",
                                            ["city", "state"])
    namespace: dict = {}
    exec(compile(function.code, function.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[function.name], context["drop_counts"]


def test_a_name_two_breweries_share_in_the_next_drop_repairs_neither_ones_city_from_the_other():
    # The next drop brings breweries the first never held. "Fox Hollow Brewing" is two breweries of one state: id
    # 371 in Pottsburg on nine rows, id 163 in Phoenix Falls on one. The name's rows agree on Pottsburg and on the
    # state, which backs the name; its id 163 says the row is another brewery's, and its city is its own.
    repair, groups = brewery_repair({"Old Mill Brewing": ("100", "Ashford", "VT")})
    rows = [("371", "Fox Hollow Brewing", "Pottsburg", "PA")] * 8 + [("371", "Fox Hollow Brewing", "Pottsbrug", "PA")]
    rows += [("163", "Fox Hollow Brewing", "Phoenix Falls", "PA")]
    rows += [("372", "Kettle Rock Ales", "Dunmore", "OH")] * 9 + [("372", "Kettle Rock Ales", "Dunmroe", "OH")]
    drop = pd.DataFrame(rows, columns=["brewery_id", "brewery_name", "city", "state"], dtype=object)
    cleaned = repair(with_drop(drop, drop_counts(drop, groups)))
    assert cleaned.loc[drop["brewery_id"] == "163", "city"].tolist() == ["Phoenix Falls"]
    assert "Pottsbrug" not in cleaned["city"].tolist() and "Dunmroe" not in cleaned["city"].tolist(), \
        "the slips of each brewery's name are repaired from the drop's own rows"
