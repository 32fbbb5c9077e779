"""Dependencies between columns: learned over a drop, the cells that break them repaired by a rule whose
generated function does what the detector's reference repair does, row by row, without nulling anything."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.analysts.hybrid import _evidence as hybrid_evidence
from smolclean_dagster.core.analysts import rules
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.detectors import dependencies
from smolclean_dagster.core.drop_counts import drop_counts, with_drop
from smolclean_dagster.core.labels import pick_rows
from smolclean_dagster.core.sandbox.gate import check_function


def load(fn):
    namespace: dict = {}
    exec(compile(fn.code, fn.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[fn.name]


def hospitals(rows_per_key: int = 8) -> pd.DataFrame:
    """Three hospitals, each on several rows, with the usual typos and a gap."""
    keys = [("10018", "birmingham", "35233"), ("10019", "florence", "35631"), ("10021", "dothan", "36301")]
    rows = [{"provider": p, "city": c, "zip": z, "measure": f"m{i}"} for p, c, z in keys for i in range(rows_per_key)]
    df = pd.DataFrame(rows, dtype=object)
    df.loc[1, "city"] = "birminghxm"
    df.loc[9, "zip"] = "3563x"
    df.loc[17, "city"] = ""
    return df


def test_learns_the_majority_value_per_key_and_repairs_typos_but_fills_gaps_only_when_asked():
    df = hospitals()
    learned = dependencies.learn(df)
    city = next(d for d in learned.dependencies if d.dependent == "city" and d.determinant == "provider")
    assert city.mapping == {"10018": "birmingham", "10019": "florence", "10021": "dothan"}
    fixed = dependencies.repair(df, learned)
    assert fixed.loc[1, "city"] == "birmingham" and fixed.loc[9, "zip"] == "35631"
    assert fixed.loc[17, "city"] == "", "an empty cell is filled only when the user asks"
    assert (fixed != df).sum().sum() == 2
    filled = dependencies.repair(df, learned, fill_empty=True)
    assert filled.loc[17, "city"] == "dothan" and (filled != df).sum().sum() == 3
    assert not filled.isna().any().any()


def test_a_key_nobody_else_shares_and_an_unknown_key_are_left_alone():
    df = hospitals()
    learned = dependencies.learn(df)
    new = pd.DataFrame({"provider": ["99999", "10018"], "city": ["gary", "birmingham"], "zip": ["46401", "35233"],
                        "measure": ["m1", "m2"]}, dtype=object)
    assert dependencies.repair(new, learned).equals(new)


def test_a_key_with_a_second_real_value_repairs_nothing_while_a_typo_beside_another_key_is_repaired():
    # "Portland" is in Oregon for 60 breweries (enough to overwrite a valid value) and in Maine for six; Maine is
    # Bangor's and Augusta's state, so those six are a second place of the same name, not typos to overwrite
    rng = np.random.default_rng(1)
    places = [(f"town{i}", f"S{i % 7}") for i in range(30)] + [("Bangor", "ME"), ("Augusta", "ME")]
    rows = [(city, state) for city, state in places for _ in range(8)]
    rows += [("Portland", "OR")] * 60 + [("Portland", "ME")] * 6
    df = pd.DataFrame(rows, columns=["city", "state"], dtype=object).sample(frac=1, random_state=rng.integers(1e6))
    df = df.reset_index(drop=True)
    typo = df.index[df["city"] == "town3"][0]
    df.loc[typo, "state"] = "SX"
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert (fixed["state"][df["city"] == "Portland"] == df["state"][df["city"] == "Portland"]).all()
    # nothing else in the row backs the city, and a two-letter code one letter off is another code as likely as a typo
    assert fixed.equals(df)
    # a county the city names, held by the row, backs it: the typo is repaired, Portland's second state still stays
    df["county"] = df["city"].map(lambda c: f"county of {c}").where(df["city"] != "Portland", "")
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert (fixed["state"][df["city"] == "Portland"] == df["state"][df["city"] == "Portland"]).all()
    assert fixed.loc[typo, "state"] == "S3" and (fixed != df).sum().sum() == 1


def test_a_column_no_key_explains_better_than_its_most_common_value_is_not_repaired():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({
        "score": [str(v) for v in rng.integers(90, 100, 400)],
        "kind": np.where(rng.random(400) < 0.9, "acute care", "critical access").astype(object),
    }, dtype=object)
    assert not [d for d in dependencies.learn(df).dependencies if d.dependent == "kind"]


def test_sources_vote_on_an_entity_and_copies_count_once():
    # flight x website: three sites copy one wrong time; four report on their own, each wrong or silent on
    # a different quarter of the flights, so the truth is a minority of the rows of every flight
    rows = []
    for f in range(12):
        truth, wrong = f"{7 + f % 5}:{10 + f:02d} a.m.", f"{7 + f % 5}:{11 + f:02d} a.m."
        for s in ("copy1", "copy2", "copy3"):
            rows.append({"flight": f"AA-{f}", "src": s, "dep": wrong})
        for k, s in enumerate(("own1", "own2", "own3", "own4")):
            slip = f"{7 + f % 5}:{20 + f + k:02d} a.m." if k % 2 else ""
            rows.append({"flight": f"AA-{f}", "src": s, "dep": slip if f % 4 == k else truth})
    df = pd.DataFrame(rows, dtype=object)
    learned = dependencies.learn(df)
    assert set(learned.protected) == {"flight", "src"}
    dep = next(d for d in learned.dependencies if d.dependent == "dep")
    assert dep.source == "src"
    fixed = dependencies.repair(df, learned)
    for f in range(12):  # silent sources stay silent unless the user asks for gaps to be filled
        assert set(fixed.loc[fixed["flight"] == f"AA-{f}", "dep"]) - {""} == {f"{7 + f % 5}:{10 + f:02d} a.m."}
    filled = dependencies.repair(df, learned, fill_empty=True)
    for f in range(12):
        assert set(filled.loc[filled["flight"] == f"AA-{f}", "dep"]) == {f"{7 + f % 5}:{10 + f:02d} a.m."}
    assert fixed["flight"].equals(df["flight"]) and fixed["src"].equals(df["src"])


def test_a_value_off_the_default_implies_the_other_column():
    rng = np.random.default_rng(1)
    exemption = np.where(rng.random(600) < 0.5, "0", rng.choice(["300", "1000", "2400"], 600)).astype(object)
    has_child = np.where(exemption != "0", "Y", rng.choice(["Y", "N"], 600)).astype(object)
    has_child[[i for i in range(600) if exemption[i] != "0"][:4]] = "N"  # four rows break it
    df = pd.DataFrame({"child_exemp": exemption, "has_child": has_child}, dtype=object)
    learned = dependencies.learn(df)
    assert [(c.determinant, c.dependent, c.usual, c.value) for c in learned.conditions] == [
        ("child_exemp", "has_child", "0", "Y")
    ]
    fixed = dependencies.repair(df, learned)
    assert ((fixed["child_exemp"] != "0") <= (fixed["has_child"] == "Y")).all()
    assert (fixed["has_child"] != df["has_child"]).sum() == 4


def test_an_established_key_is_not_relabelled_by_a_coincidence():
    # provider -> city and city -> provider both hold; a row whose city is a typo must not move its
    # provider to another hospital, and the provider's other columns keep it where it is
    df = hospitals(rows_per_key=10)
    df.loc[2, "city"] = "florence"  # the wrong city for provider 10018, right for 10019
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert fixed.loc[2, "provider"] == "10018"
    # "florence" is valid on its own and ten rows are not many: kept; the typo "birminghxm" is repaired
    assert fixed.loc[2, "city"] == "florence" and fixed.loc[1, "city"] == "birmingham"
    # a key with many rows behind it may overwrite a valid value; the provider still identifies a hospital
    # (beside three big ones, twenty small ones: few rows per provider on average)
    big = hospitals(rows_per_key=dependencies.STRONG_SUPPORT + 5)
    small = pd.DataFrame([{"provider": f"2{k:04d}", "city": f"town{k}", "zip": f"4{k:04d}", "measure": f"m{i}"}
                          for k in range(20) for i in range(3)], dtype=object)
    big.loc[2, "city"] = "florence"
    many = pd.concat([big, small], ignore_index=True)
    assert dependencies.repair(many, dependencies.learn(many)).loc[2, "city"] == "birmingham"
    # a category (each value on hundreds of rows) identifies nothing: the same frame without the small keys
    assert dependencies.repair(big, dependencies.learn(big)).loc[2, "city"] == "florence"


def test_the_rule_finds_violations_only_the_drop_shows_and_its_function_matches_the_reference_repair():
    drop = hospitals(rows_per_key=12)
    drop.loc[1, "city"] = "birmingham"  # a typo the misspelling rule would fix first
    chunk = drop.iloc[[0, 12, 24]].reset_index(drop=True)  # clean rows: only the drop shows the dirt
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="h", chunk_id="c0", step=1, chunk=chunk, reference=drop))
    fn = proposal.function
    assert fn is not None and fn.name.startswith("repair_dependencies")
    check_function(fn.code)
    # a model offered it as a candidate reads how it repairs, and a repair it would make with its support
    assert "each takes the value the other rows of its key agree on" in fn.summary
    assert "(e.g. '3563x' -> '35233' (provider '10018' has it on 11 of its 12 rows with a value))" in hybrid_evidence(fn)
    repaired = load(fn)
    expected = dependencies.repair(drop, dependencies.learn(drop))
    out = repaired(drop)
    assert out.equals(expected)
    assert repaired(out).equals(out), "not idempotent"
    assert drop.loc[9, "zip"] == "3563x", "the input frame must not be modified"
    for i in range(0, len(drop), 5):  # batch-safe: any slice gives the rows the whole frame gives
        assert repaired(drop.iloc[i : i + 5]).equals(out.iloc[i : i + 5])


def test_rules_analyst_asks_for_no_dependency_work_on_a_clean_drop():
    drop = hospitals()
    fixed = dependencies.repair(drop, dependencies.learn(drop))
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="h", chunk_id="c0", step=1, chunk=fixed.head(5),
                                                      reference=fixed))
    assert proposal.function is None and proposal.status == "clean"


def test_docstring_examples_hold():
    import doctest

    assert doctest.testmod(dependencies).failed == 0


def test_a_key_whose_usual_value_is_out_of_the_columns_form_repairs_nothing_and_a_two_word_city_is_no_form():
    # most reports of flight UA-9 glue a date on ("8:41aDec 1"), where every other flight's time reads "7:16 a.m.":
    # the dependency knows the time, not how to write it, so it does not write the glued form over "8:41 a.m."
    rows = [(f"AA-{i}", f"{1 + i % 12}:{10 + i} {'ap'[i % 2]}.m.", f"gate {i}") for i in range(30) for _ in range(8)]
    rows += [("UA-9", "8:41aDec 1", "gate 99")] * 7 + [("UA-9", "8:41 a.m.", "gate 99")] * 2
    df = pd.DataFrame(rows, columns=["flight", "departure", "gate"], dtype=object)  # the gate backs the flight
    typo = df.index[df["flight"] == "AA-3"][0]
    df.loc[typo, "departure"] = "4:31 a.m."
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert (fixed["departure"][df["flight"] == "UA-9"] == df["departure"][df["flight"] == "UA-9"]).all()
    assert fixed.loc[typo, "departure"] == "4:13 p.m." and (fixed != df).sum().sum() == 1
    # "San Diego" is two words where most cities are one: that is no form, and its typo is repaired
    places = [(f"{90000 + i}", f"Town{i}") for i in range(30)] + [("92101", "San Diego")]
    df = pd.DataFrame([p for p in places for _ in range(8)], columns=["zip", "city"], dtype=object)
    typo = df.index[df["city"] == "San Diego"][0]
    df.loc[typo, "city"] = "San Deigo"
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert fixed.loc[typo, "city"] == "San Diego" and (fixed != df).sum().sum() == 1


def facilities(seed: int, names: list[str], first: int = 0) -> pd.DataFrame:
    """Facilities of a registry, each on several rows (one per measure), with its own code, street, city, state and
    zip; `names` may repeat, as real facility names do ("ST MARYS HOSPITAL" in several cities)."""
    rng = np.random.default_rng(seed)
    cities = [("ROCHESTER", "MN", "559"), ("DECATUR", "IL", "625"), ("ATHENS", "GA", "306"), ("SALEM", "OR", "973"),
              ("MADISON", "WI", "537"), ("DAYTON", "OH", "454"), ("TROY", "NY", "121"), ("AUBURN", "AL", "368")]
    rows = []
    for k, name in enumerate(names, start=first):
        city, state, zip3 = cities[int(rng.integers(len(cities)))]
        street = f"{int(rng.integers(100, 9999))} {rng.choice(['MAIN', 'OAK', 'LAKE SHORE', 'ELM', '2ND'])} ST"
        code, zipcode = f"{100000 + 37 * k}", f"{zip3}{int(rng.integers(10, 99))}"
        for m in range(int(rng.integers(6, 12))):
            rows.append({"code": code, "name": name, "street": street, "city": city, "state": state, "zip": zipcode,
                         "measure": f"M-{m}", "score": str(int(rng.integers(40, 100)))})
    return pd.DataFrame(rows, dtype=object)


def rules_function(drop: pd.DataFrame):
    """The dependency repair the rules analyst writes for `drop`, loaded as the exported module runs it."""
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="f", chunk_id="c0", step=1, chunk=drop.head(50),
                                                      reference=drop))
    fn = proposal.function
    assert fn is not None and fn.name.startswith("repair_dependencies"), proposal
    check_function(fn.code)
    return load(fn)


def test_a_name_several_facilities_share_is_no_key_and_a_new_facility_keeps_its_own_values():
    # the first drop holds "ST MARYS HOSPITAL" in two cities (two facilities with their own code, street and zip)
    names = [f"FACILITY {k}" for k in range(120)]
    names[7] = names[55] = "ST MARYS HOSPITAL"
    first = facilities(3, names)
    typo = first.index[first["code"] == first.loc[0, "code"]][2]
    first.loc[typo, "city"] = first.loc[0, "city"][:-1] + "X"
    learned = dependencies.learn(first)
    assert "name" not in {d.determinant for d in (*learned.dependencies, *learned.witnesses)}
    repaired = rules_function(first)
    out = repaired(first)
    assert out.loc[typo, "city"] == first.loc[0, "city"] and (out != first).sum().sum() == 1
    # the next drop brings facilities the first never held; one is named like a facility of the first drop, in
    # another city with its own street and zip: nothing in it is another facility's
    later = [f"FACILITY {k}" for k in range(120, 200)]
    later[3] = "FACILITY 12"
    second = facilities(4, later, first=120)
    known = first[first["name"] == "FACILITY 12"].iloc[0]
    assert (second[second["name"] == "FACILITY 12"]["city"] != known["city"]).all()
    assert repaired(second).equals(second)


def test_a_measurement_is_no_key_and_a_species_the_first_drop_never_held_stays():
    # penguins, as the field records list them: one species after the other; the first drop holds two species,
    # the next drop a third whose flipper lengths, culmen depths, body masses and dates the first drop had seen
    rng = np.random.default_rng(5)
    species = [("Adelie Penguin (Pygoscelis adeliae)", 190, 18.3, 3700, 150), ("Gentoo penguin (Pygoscelis papua)",
               217, 15.0, 5000, 60), ("Chinstrap penguin (Pygoscelis antarctica)", 196, 18.4, 3730, 70)]
    rows = []
    for name, flipper, depth, mass, n in species:
        for i in range(n):
            rows.append({"study": "PAL0708", "individual": f"N{len(rows)}A1", "species": name,
                         "island": rng.choice(["Torgersen", "Biscoe", "Dream"]),
                         "date_egg": f"{int(rng.integers(5, 28)):02d}.11.2008",
                         "flipper_mm": str(int(flipper + rng.integers(-8, 9))),
                         "culmen_depth_mm": f"{depth + rng.integers(-15, 16) / 10:.1f}",
                         "body_mass_g": str(int(mass + 25 * rng.integers(-20, 21)))})
    df = pd.DataFrame(rows, dtype=object)
    truth = df["species"].copy()
    for i in (3, 40, 95, 160):  # the hand-dirtied slips of the first drop
        df.loc[i, "species"] = df.loc[i, "species"].replace("Pygoscelis", "Pygoscellis")
    first, second = df.iloc[:172].reset_index(drop=True), df.iloc[172:].reset_index(drop=True)
    learned = dependencies.learn(first)
    assert "species" in learned.dependents
    keys = {d.determinant for d in (*learned.dependencies, *learned.witnesses)} | {c.determinant for c in
                                                                                  learned.conditions}
    assert not keys & {"culmen_depth_mm", "date_egg"}, "a measurement or a date identifies nothing"
    fixed = dependencies.repair(second, learned)
    assert (fixed["species"] == second["species"]).all()
    whole = dependencies.repair(df, dependencies.learn(df))
    changed = whole["species"] != df["species"]
    assert (whole["species"][changed] == truth[changed]).all(), "on the whole file only slips change, to their species"


def test_a_row_whose_key_is_the_wrong_cell_keeps_its_other_values():
    # three providers with many rows each, twenty small ones; one row of 10018 carries 10019's number: its city
    # is 10018's, and nothing else in the row says the number is right, so the city stays
    big = hospitals(rows_per_key=dependencies.STRONG_SUPPORT + 5).drop(columns=["zip"])
    big.loc[1, "city"] = "birmingham"
    small = pd.DataFrame([{"provider": f"2{k:04d}", "city": f"town{k}", "measure": f"m{i}"}
                          for k in range(20) for i in range(3)], dtype=object)
    df = pd.concat([big, small], ignore_index=True)
    df.loc[2, "provider"] = "10019"
    fixed = dependencies.repair(df, dependencies.learn(df))
    assert fixed.loc[2, "city"] == "birmingham" and fixed.loc[2, "provider"] == "10019"
    assert fixed.equals(df)


def test_a_number_far_from_its_keys_usual_one_is_the_items_own_and_stays():
    # a brewery cans most of its beers in 12 oz and one in 16.9 oz: the brewery's name and city back its id, and
    # still 16.9 is that beer's own size, not a slip of 12; a typed-over city of the same brewery is repaired
    rows = []
    for b in range(60):
        for i in range(8):
            rows.append({"beer_id": f"{b * 10 + i}", "brewery_id": f"B{b}", "brewery": f"Brewery number {b}",
                         "city": f"Springtown {b}", "ounces": "12" if b % 3 else "16"})
    df = pd.DataFrame(rows, dtype=object)
    df.loc[3, "ounces"] = "16.9"
    df.loc[12, "city"] = "Springtwon 1"
    learned = dependencies.learn(df)
    assert "ounces" in learned.dependents and learned.numeric == ("ounces",)
    fixed = dependencies.repair(df, learned)
    assert fixed.loc[3, "ounces"] == "16.9" and fixed.loc[12, "city"] == "Springtown 1"
    assert rules_function(df)(df).equals(fixed)


def test_tables_of_hundreds_of_keys_are_written_compactly_and_repair_as_the_reference_does():
    # 300 facilities: code -> state (8 states) is written grouped by state, code -> zip packed several to a line
    drop = facilities(11, [f"FACILITY {k}" for k in range(300)])
    rows = np.random.default_rng(2).choice(len(drop), 12, replace=False)
    for n, i in enumerate(rows):
        column = "zip" if n % 2 else "state"
        drop.loc[i, column] = drop.loc[i, column][:-1] + "x"
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="f", chunk_id="c0", step=1, chunk=drop.head(50),
                                                      reference=drop))
    fn = proposal.function
    assert fn is not None and fn.name == "repair_dependencies_state_zip"
    check_function(fn.code)
    assert "'MN': (" in fn.code and len(fn.code.splitlines()) < 400, "the 600 table entries one per line"
    out = load(fn)(drop)
    assert out.equals(dependencies.repair(drop, dependencies.learn(drop)))
    assert (out != drop).sum().sum() == len(rows)


def flight_reports(flights: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flight x website reports of an arrival time, and the times as they were. Three sites are right on nearly
    every flight; six others take their times from one feed that is wrong on most flights, each adding slips of
    its own (so they are no exact copies of each other): the majority of every flight's rows is wrong."""
    rng = np.random.default_rng(11)
    rows, truth = [], []
    for f in range(flights):
        right, feed = f"{1 + f % 11}:{10 + f:02d} p.m.", f"{1 + f % 11}:{12 + f:02d} p.m."
        for k, s in enumerate(("airline", "airport", "tracker")):
            rows.append({"flight": f"UA-{100 + f}", "src": s, "arr": right if (f + k) % 13 else feed})
        for k in range(6):
            wrong = feed if f % 5 else right  # the feed is right on one flight in five
            rows.append({"flight": f"UA-{100 + f}", "src": f"mirror{k}",
                         "arr": f"{1 + f % 11}:{40 + k:02d} p.m." if rng.random() < 0.15 else wrong})
        truth.append(right)
    return pd.DataFrame(rows, dtype=object), pd.DataFrame({"flight": [f"UA-{100 + f}" for f in range(flights)],
                                                           "arr": truth}, dtype=object)


def test_labelled_entities_teach_which_sources_to_believe():
    reports, times = flight_reports()
    right = dict(zip(times["flight"], times["arr"]))

    def table(learned):
        found = [d for d in learned.dependencies if d.dependent == "arr"]
        return found[0].mapping if found else {}

    # Alone, the mirrors outvote the three sites: whatever the vote settles is mostly the feed's wrong time
    alone = table(dependencies.learn(reports))
    assert sum(right[k] == v for k, v in alone.items()) <= len(alone) // 2
    # Five flights a person labelled (one report of each, as the person wants it) show the sites right and the
    # mirrors wrong: the votes are weighed by that, and every flight's time comes out right
    labelled = reports[reports["flight"].isin(times["flight"][:5]) & (reports["src"] == "mirror0")].copy()
    labelled["arr"] = labelled["flight"].map(right)
    taught = table(dependencies.learn(reports, truth=labelled))
    assert len(taught) >= 35 and all(right[k] == v for k, v in taught.items())
    repaired = dependencies.repair(reports, dependencies.learn(reports, truth=labelled))
    settled = repaired["flight"].isin(list(taught))
    assert (repaired["arr"][settled] == repaired["flight"][settled].map(right)).all()


def train_reports(trains: int = 60, seed: int = 5) -> tuple[pd.DataFrame, dict[str, str]]:
    """Train x website reports of an arrival time, and the times as they were. Three sites are right on 80-90% of
    the trains, each wrong on its own; eight mirrors of one feed are wrong together on four trains in five (each
    with slips of its own, so no exact copies), and right together on the fifth."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for t in range(trains):
        hour, train = 1 + t % 11, f"RX-{300 + t}"
        right, feed = f"{hour}:{10 + t % 50:02d} p.m.", f"{hour}:{11 + t % 48:02d} p.m."
        for site, p in (("operator", 0.9), ("station", 0.85), ("tracker", 0.8)):
            rows.append({"train": train, "src": site,
                         "arr": right if rng.random() < p else f"{hour}:{rng.integers(0, 60):02d} p.m."})
        fed = feed if rng.random() < 0.8 else right
        for k in range(8):
            rows.append({"train": train, "src": f"mirror{k}",
                         "arr": fed if rng.random() < 0.85 else f"{hour}:{rng.integers(0, 60):02d} p.m."})
        truth[train] = right
    return pd.DataFrame(rows, dtype=object), truth


def test_a_value_one_source_alone_reports_is_not_voted_into_the_other_reports():
    # The operator is the site the labels show right most often; on twelve trains the station and the tracker
    # did not report, and the operator slipped. Only the mirrors (which count for nothing: they are wrong together
    # on most trains) report besides. One site's word is no vote: those trains are not repaired to its slip.
    reports, right = train_reports()
    labelled = reports[reports["train"].isin(list(right)[:12]) & (reports["src"] == "mirror0")].copy()
    labelled["arr"] = labelled["train"].map(right)
    trains = list(right)[12:24]
    reports = reports[~(reports["train"].isin(trains) & reports["src"].isin(["station", "tracker"]))].copy()
    reports.loc[reports["train"].isin(trains) & (reports["src"] == "operator"), "arr"] = "11:59 p.m."
    table = next(d for d in dependencies.learn(reports, truth=labelled).dependencies if d.dependent == "arr")
    assert not [t for t in trains if table.mapping.get(t) == "11:59 p.m."]
    assert len(table.mapping) >= 30 and all(right[k] == v for k, v in table.mapping.items())


def test_rows_to_label_in_a_table_of_sources_reports_hold_as_many_entities_as_rows():
    # A person's value for one train shows which of its eleven sources report it right; a second row of the same
    # train shows little more. Three trains' reports are written every which way, so their rows hold the most
    # kinds of dirt: they are labelled once each, not three times.
    reports, right = train_reports()
    odd = reports["train"].isin(["RX-300", "RX-301", "RX-302"])
    forms = ["Not Available", " {} ", "{}  ", "{} (Estimated)", "{}*", "--", "{} ET", "n/a"]
    reports.loc[odd, "arr"] = [forms[i % len(forms)].format(v) for i, v in enumerate(reports.loc[odd, "arr"])]
    assert dependencies.reporting_sources(reports) == {"train": "src"}
    picked = reports.iloc[pick_rows(reports, 20)]
    assert picked["train"].nunique() == 20
    assert {"RX-300", "RX-301", "RX-302"} <= set(picked["train"]), "the rows holding the most dirt are still taken"


def test_where_weighed_votes_settle_too_few_labelled_trains_the_clear_votes_still_repair_right():
    reports, right = train_reports()

    def table(learned):
        found = [d for d in learned.dependencies if d.dependent == "arr"]
        return found[0] if found else None

    alone = table(dependencies.learn(reports))
    assert sum(right[k] == v for k, v in alone.mapping.items()) < len(alone.mapping) / 2, "the mirrors outvote the sites"
    # Twelve trains a person labelled. Weighed by how often each source was right there, the votes still settle
    # some of them wrong: when the mirrors are right together, they outvote a site's slip. Only a source right more
    # often than wrong counts, each by the log of its odds, and a train whose value leads clearly is repaired.
    labelled = reports[reports["train"].isin(list(right)[:12]) & (reports["src"] == "mirror0")].copy()
    labelled["arr"] = labelled["train"].map(right)
    taught = table(dependencies.learn(reports, truth=labelled))
    assert taught is not None and taught.source == "src" and len(taught.mapping) >= 40
    assert all(right[k] == v for k, v in taught.mapping.items()), "every train the vote settles is settled right"

    # The module repairs the drop it learned from as voted: a plain count of the drop's rows (most of them the
    # mirrors') does not overrule the sources' weighed vote
    finding = SimpleNamespace(column="arr", examples=["a mirror's time -> the sites'"], params={
        "dependencies": [("train", "arr", taught.mapping, True, taught.strong)], "conditions": [], "witnesses": []})
    context = rules._dependencies([finding], [None], [])
    function = rules.RulesAnalyst()._render("repair_dependencies.py.j2", context, "repair_dependencies_arr", ["arr"])
    namespace: dict = {}
    exec(compile(function.code, function.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    cleaned = namespace[function.name](with_drop(reports, drop_counts(reports, context["drop_counts"])))
    changed = cleaned["arr"] != reports["arr"]
    settled = reports["train"].isin(list(taught.mapping))
    assert changed.sum() > 250 and (cleaned.loc[settled, "arr"] == reports.loc[settled, "train"].map(right)).all()
    assert not (changed & ~settled).any()
