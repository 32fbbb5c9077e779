"""The next drop: a function learned on one drop meets forms that drop never held, and fixes their form into the
wrong value. The cleaned drop's entity check says so, the drop goes back to learning, and learning takes the
function out of the next module version, which waits for review. Real Dagster runs on a temporary instance, the
model over real HTTP, the module in real sandbox processes."""

from __future__ import annotations

import random
import re
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from llm_server import ScriptedLLM, reply
from learning_ticks import Daemon, drive_learning
from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.agreement import agreement_report
from smolclean_dagster.core.entities import _amounts, entity_keys
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.quality import keep_what_agrees
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.cleaning.live_module import cleaning_module_for

NAME = "flights"
CLEANED = dg.AssetKey([NAME, "cleaned_data"])
CHECK = dg.AssetCheckKey(CLEANED, "entity_agreement")

# The model's function: bare "7:16a" times, and times with a date glued on ("7:02aDec 1"), as "7:16 a.m.".
UNIFY_DEPARTURE = '''import re

import pandas as pd

TIME = re.compile(r"^(\\d{1,2}):(\\d{2})([ap])(?:[A-Z][a-z]{2} \\d{1,2})?$")


def unify_departure(df: pd.DataFrame) -> pd.DataFrame:
    """Write the "7:16a" and "7:02aDec 1" times of `departure` as "7:16 a.m."."""
    df = df.copy()
    df["departure"] = df["departure"].str.replace(TIME, lambda m: f"{int(m[1])}:{m[2]} {m[3]}.m.", regex=True)
    return df
'''


def flight_reports(path: Path, flights: int, seed: int, *, glued: bool) -> Path:
    """Sources report each flight's departure: four in the usual form, one the same time bare ("7:16a"); with
    `glued`, a sixth source writes a time of its own with a date stuck on ("7:02aDec 1"), a form the first month
    never held."""
    rng = random.Random(seed)
    rows = []
    for f in range(flights):
        hour, minute, half = rng.randint(1, 12), rng.randrange(0, 60), rng.choice("ap")
        number = f"{rng.choice(['AA', 'UA', 'DL', 'CO'])}-{1000 + f}"
        gate = f"{rng.choice('ABCD')}{rng.randint(1, 40)}"
        for source in ("flightview", "orbitz", "flightstats", "airline"):
            rows.append((source, number, gate, f"{hour}:{minute:02d} {half}.m."))
        rows.append(("travelocity", number, gate, f"{hour}:{minute:02d}{half}"))
        if glued:
            rows.append(("mytripandmore", number, gate, f"{hour}:{(minute + rng.randint(5, 25)) % 60:02d}{half}Dec 1"))
    rng.shuffle(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["src", "flight", "gate", "departure"]).to_csv(path, index=False)
    return path


def test_a_function_whose_changes_on_the_next_drop_the_entity_contradicts_fails_the_check_and_learning_takes_it_out(
        tmp_path):
    asked: list[str] = []

    def model(recorded):
        # the first question gets the function; every later one finds nothing more to do
        asked.append(recorded.prompt)
        if len(asked) == 1:
            return reply("<plan>\n- departure: write every time in the usual form\n</plan>\n"
                         f"<issues>\n- departure: several forms\n</issues>\n<code>\n```python\n{UNIFY_DEPARTURE}```\n"
                         "</code>\n<serves>1</serves>\n<status>needs_more_work</status>")
        return reply("<issues>\n</issues>\n<status>clean</status>")

    with ScriptedLLM(responder=model) as llm, dg.instance_for_test() as instance:
        settings = DatasetSettings(name=NAME, workdir=tmp_path / "work", model="openai/test-model",
                                   api_base=llm.api_base, api_key="test", analyst="llm", concurrency=1,
                                   chunk_budget=2)
        first = learn(settings, flight_reports(tmp_path / "march.csv", 80, seed=3, glued=False), instance)
        store = DatasetStore(settings.storage_dir, NAME)
        [entry] = store.registry.load().entries
        # it serves the model's own plan, which is no permission to write values the entity contradicts
        assert entry.function.name == "unify_departure" and entry.serves
        module_v1 = first.module.read_text()

        defs = build_defs(settings)
        daemon = Daemon(defs, instance)
        run = daemon.run

        def tick(sensor: str) -> dg.SensorResult:
            return daemon.tick(f"{NAME}_{sensor}")

        # April brings a source the module never saw: its glued times become the usual form, with its own time.
        april = flight_reports(settings.drops_dir / "april.csv", 80, seed=4, glued=True)
        tick("drop_folder")
        [clean] = tick("drop_folder").run_requests
        run(clean)
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([CHECK])[CHECK]
        assert record.status.value == "FAILED" and record.partition == "april.csv"
        evaluation = record.event.dagster_event.event_specific_data
        assert evaluation.severity == dg.AssetCheckSeverity.WARN  # the cleaned drop is written all the same
        described = evaluation.description
        found = re.search(r"departure: (\d+) of the module's (\d+) changes write a value the other rows of the same "
                          r"flight contradict, e.g. '\d+:\d\d[ap]Dec 1' -> '\d+:\d\d [ap]\.m\.' where they hold",
                          described)
        assert found, described
        assert int(found[1]) == 80 and int(found[2]) == 160  # the 80 glued times wrong, the 80 bare ones right
        assert settings.cleaned_path("april.csv").exists()
        residual = dg.AssetCheckKey(CLEANED, "residual_issues")
        assert instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [residual])[residual].status.value == "SUCCEEDED"  # no dirt left to see: only the entity knows

        # The drop goes back to learning, which takes the function out; the new version waits for review.
        [teach] = tick("learn_on_residual").run_requests
        assert teach.job_name == f"{NAME}_learn_from_drop" and teach.partition_key == "april.csv"
        run(teach)
        drive_learning(defs, instance, NAME)
        registry = store.registry.load()
        assert "unify_departure" not in [e.function.name for e in registry.entries]
        [dropped] = [d for d in registry.dropped if d.name == "unify_departure"]
        assert "other rows of the same flight contradict" in dropped.reason, dropped.reason
        history = store.versions.load()
        assert [(v.number, v.state) for v in history.versions] == [(1, "live"), (2, "proposed")]
        live = cleaning_module_for(settings, None)[0]
        assert live.read_text() == module_v1  # production still cleans with the reviewed version
        assert "unify_departure" not in store.versions.module_path(2).read_text()
    assert llm.requests, "the model was asked"


def price_reports(seed: int = 11) -> pd.DataFrame:
    """80 products priced by 12 comparison sites: 3 right on most, 5 on about half, 4 mirrors of a stale feed wrong
    together on most products; a few prices written "12.34 USD", with stray spaces or "N/A"."""
    rng = random.Random(seed)
    sites = [("shopcompare", .92), ("pricewatch", .88), ("dealfinder", .85), ("bargainhub", .6), ("cheapo", .55),
             ("valuenet", .5), ("buysmart", .6), ("pricely", .45)]

    def wrong(value: float) -> float:
        return value + rng.choice([-2, -1, -0.5, 0.5, 1, 3])

    def written(value: float) -> str:
        r = rng.random()
        return f"{value:.2f} USD" if r < .04 else f" ${value:.2f}" if r < .07 else "N/A" if r < .09 else f"${value:.2f}"

    rows = []
    for i in range(80):
        price = rng.choice([4.99, 7.49, 9.99, 12.99, 14.5, 19.99, 24.0, 29.95, 34.99, 49.0]) + rng.choice([0, 1, 2, 5])
        right = {"price": price, "list_price": price * rng.choice([1.0, 1.2, 1.25, 1.5])}
        stale = {c: wrong(v) if rng.random() < .7 else v for c, v in right.items()}
        reporters = [(site, p, right) for site, p in sites] + [(f"feedmirror{k}", .9, stale) for k in range(4)]
        for site, p, told in reporters:
            if rng.random() >= .1:
                rows.append({"sku": f"SKU-{4100 + i}", "site": site,
                             **{c: written(v if rng.random() < p else wrong(v)) for c, v in told.items()}})
    return pd.DataFrame(rows)


def test_a_price_is_no_entity_though_it_is_one_to_one_with_the_product_on_most_rows():
    # A product's list price is its own on most rows, and the other columns agree inside its groups as well as they
    # do inside the product's: the harm gate judged prices by the rows of the same list price, and the prompt told
    # the model that rows with the same list price describe one thing. An amount names no entity.
    reports = price_reports()
    assert set(entity_keys(reports).values()) == {"sku"}
    assert _amounts(reports["list_price"].unique()) and not _amounts(reports["sku"].unique())


def test_changes_that_agree_with_the_entity_pass_and_a_drop_without_entities_has_nothing_to_check(tmp_path):
    march = pd.read_csv(flight_reports(tmp_path / "m.csv", 40, seed=5, glued=True), dtype=str)
    bare_only = march.assign(departure=march["departure"].str.replace(r"^(\d+):(\d\d)([ap])$", r"\1:\2 \3.m.",
                                                                        regex=True))
    report = agreement_report(march, bare_only)
    assert report.passed and report.entity == "flight" and report.cells_changed == 40
    people = pd.DataFrame({"id": [str(i) for i in range(30)], "city": ["Oslo"] * 29 + ["Olso"]})
    report = agreement_report(people, people.assign(city="Oslo"))
    assert report.passed and report.entity is None and "nothing to check against" in report.describe()


def test_learning_keeps_a_function_the_users_words_ask_for_and_judges_the_models_own_plan(tmp_path, sandbox):
    april = pd.read_csv(flight_reports(tmp_path / "april.csv", 60, seed=6, glued=True), dtype=str)
    asked = "Write every departure time as 7:16 a.m., whatever the source wrote."
    entry = RegistryEntry(function=CleaningFunction.from_code(UNIFY_DEPARTURE),
                          provenance=Provenance(drop="march.csv", chunk="c0", step=1, analyst="llm"), serves=(asked,))
    registry = Registry(dataset=NAME).with_entry(entry)
    kept, dropped = keep_what_agrees(registry, {"april.csv": april}, sandbox, instructions=asked)
    assert kept is registry and dropped == ()  # the user asked for it: their words win
    kept, [dropped] = keep_what_agrees(registry, {"april.csv": april}, sandbox)  # the same words as its own plan
    assert kept.entries == () and kept.version == registry.version + 1 and kept.dropped == (dropped,)
    assert dropped.reason.startswith("on the rows of april.csv, in departure, 60 of its 120 changes write a value the "
                                     "other rows of the same flight contradict"), dropped.reason
