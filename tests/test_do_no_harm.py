"""Do no harm: on data nobody tuned for, a cell the rules change must come out right, or stay as it was.

Each test is one shape of damage seen on real files (made-up values of the same shape): the offline rules,
learned from a drop with its own rows as reference, must leave the valid values alone. The harm estimate
sends back a model's function that mostly rewrites valid-looking values, with the numbers.
"""

from __future__ import annotations

import doctest
import random
import re

import pandas as pd
import pytest

from llm_server import ScriptedLLM, reply
from smolclean_dagster.core import entities, harm
from smolclean_dagster.core.analysts import drop_findings as drop_findings_module
from smolclean_dagster.core.analysts import make_analyst
from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.detectors import dependencies
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.profile import detect_issues
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.core.steps import VerdictStep


def load(fn):
    namespace: dict = {}
    exec(compile(fn.code, fn.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[fn.name]


def module_of(drop: pd.DataFrame, chunk: pd.DataFrame | None = None, max_steps: int = 12, instructions: str = ""):
    """What the rules learn from `drop` (a chunk of it with the whole drop as reference), as one function
    applying every accepted function in order; and the names of those functions."""
    chunk = drop.head(50).reset_index(drop=True) if chunk is None else chunk
    analyst, functions, rejected = RulesAnalyst(), [], []
    for step in range(1, max_steps + 1):
        current = chunk
        for fn in functions:
            current = load(fn)(current)
        proposal = analyst.propose(AnalysisRequest(
            dataset="d", chunk_id="c0", step=step, chunk=current, findings=tuple(detect_issues(current)),
            reference=_cleaned(drop, functions), rejected=tuple(rejected), instructions=instructions))
        if proposal.function is None:
            break
        functions.append(proposal.function)
        rejected.append(proposal.function.name)

    def clean(df: pd.DataFrame) -> pd.DataFrame:
        return _cleaned(df, functions)

    return clean, [f.name for f in functions]


def _cleaned(df: pd.DataFrame, functions) -> pd.DataFrame:
    for fn in functions:
        df = load(fn)(df)
    return df


def changed(before: pd.DataFrame, after: pd.DataFrame, column: str) -> dict[str, str]:
    return {b: a for b, a in zip(before[column], after[column]) if b != a}


def test_a_free_text_column_is_not_case_converted_because_most_of_it_is_lower_case():
    rng = random.Random(1)
    roles = ["director", "secretary", "treasurer", "member", "president", "vice president", "agent", "manager",
             "clerk", "officer", "partner", "trustee", "founder"]
    values = [rng.choice(roles) for _ in range(400)] + ["CEO"] * 20 + ["Chairman, CEO"] * 8 + ["IT Consulting"] * 6
    rng.shuffle(values)
    drop = pd.DataFrame({"id": [str(i) for i in range(len(values))], "role": values}, dtype=object)
    clean, _ = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "role") == {}


def test_stray_letters_are_removed_not_case_mapped_and_codes_keep_out_of_domain_values():
    rng = random.Random(2)
    flags = [rng.choice(["TRUE", "FALSE"]) for _ in range(300)] + ["TRU\u0140E", "FAL\u00a4SE", "ESLAF"]
    codes = ["US", "TW", "DE", "FR", "GB", "JP", "CN", "IN", "BR", "MX", "CA", "IT", "ES"]
    countries = [rng.choice(codes) for _ in range(300)] + ["Taiwan", "us", "Germany"]
    drop = pd.DataFrame({"active": flags, "country": countries}, dtype=object)
    clean, _ = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "active") == {"TRU\u0140E": "TRUE", "FAL\u00a4SE": "FALSE", "ESLAF": "FALSE"}
    assert changed(drop, out, "country") == {"us": "US"}


def test_a_case_convention_is_not_learned_from_one_value():
    drop = pd.DataFrame({"id": [str(i) for i in range(200)], "country": ["USA"] * 198 + ["usa", "usa "]}, dtype=object)
    clean, _ = module_of(drop)
    next_drop = pd.DataFrame({"id": ["1", "2", "3"], "country": ["Thailand", "Federated States of Micronesia", "USA"]},
                             dtype=object)
    assert clean(next_drop).equals(next_drop)


def test_a_misspelling_common_in_the_chunk_does_not_become_the_spelling():
    # the chunk (the first 50 rows) holds "Pittsburg" ten times and "Pittsburgh" twice; the drop holds
    # "Pittsburgh" on 122 rows
    cities = ["Pittsburg"] * 10 + ["Pittsburgh"] * 2 + ["Erie", "Reading", "Altoona", "Scranton"] * 9 + ["Allentown"] * 2
    rest = ["Pittsburgh"] * 120 + ["Erie", "Reading", "Altoona", "Scranton", "Allentown"] * 30
    drop = pd.DataFrame({"id": [str(i) for i in range(len(cities) + len(rest))], "city": cities + rest}, dtype=object)
    clean, names = module_of(drop)
    out = clean(drop)
    assert "Pittsburgh" not in changed(drop, out, "city"), names


def test_a_date_column_written_one_way_stays_that_way_and_the_few_others_take_its_form():
    days = pd.date_range("2012-01-01", periods=400, freq="D")
    values = [d.strftime("%Y/%m/%d") for d in days]
    values[10], values[20] = "January 11, 2012", "01/21/2012"
    values[30] = "10/10/2102"  # "2012/01/01" written backwards parses as a date far outside the column's years
    drop = pd.DataFrame({"id": [str(i) for i in range(len(values))], "day": values}, dtype=object)
    clean, names = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "day") == {"January 11, 2012": "2012/01/11", "01/21/2012": "2012/01/21"}, names


def penguins(n: int, seed: int) -> pd.DataFrame:
    """Penguin nests: egg dates mostly ISO, some written month first with slashes ("11/16/2007"), some day first
    with dots ("16.11.2007"), a few with dashes whose numbers are all 12 or less ("03-04-2008")."""
    rng = random.Random(seed)
    days = pd.date_range("2007-11-09", "2009-12-01", freq="D")
    writings = ["%Y-%m-%d"] * 15 + ["%m/%d/%Y"] * 3 + ["%d.%m.%Y"] * 2
    dates = [days[rng.randrange(len(days))].strftime(rng.choice(writings)) for _ in range(n)]
    return pd.DataFrame({"Sample Number": [str(i + 1) for i in range(n)],
                         "Species": [rng.choice(["Adelie", "Gentoo", "Chinstrap"]) + " penguin" for _ in range(n)],
                         "Island": [rng.choice(["Torgersen", "Biscoe", "Dream"]) for _ in range(n)],
                         "Date Egg": dates}, dtype=object)


def test_a_layout_the_drop_shows_day_first_is_never_read_month_first():
    drop = penguins(344, seed=5)
    drop.loc[[7, 90, 201], "Date Egg"] = ["05.11.2008", "16.11.2007", "05.11.2008"]
    drop.loc[[30, 31, 32], "Date Egg"] = ["03-04-2008", "11-10-2008", "01-02-2009"]  # dashes: no number above 12
    clean, names = module_of(drop)
    fixed = changed(drop, clean(drop), "Date Egg")
    assert fixed["05.11.2008"] == "2008-11-05" and fixed["16.11.2007"] == "2007-11-16", names
    dotted = {v for v in drop["Date Egg"] if "." in v}
    assert all(fixed[v] == pd.to_datetime(v, format="%d.%m.%Y").strftime("%Y-%m-%d") for v in dotted), names
    slashed = {v for v in drop["Date Egg"] if "/" in v}
    assert all(fixed[v] == pd.to_datetime(v, format="%m/%d/%Y").strftime("%Y-%m-%d") for v in slashed), names
    assert not {"03-04-2008", "11-10-2008", "01-02-2009"} & set(fixed), "a date that reads two ways was rewritten"
    # the function carries each layout's order and reads the next drop's dates, never seen, by it
    chunk = drop.head(50)
    fn = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c0", step=1, chunk=chunk, reference=drop,
                                                findings=tuple(detect_issues(chunk)))).function
    assert "DAY_FIRST = {'NN.NN.NNNN': True, 'NN/NN/NNNN': False}" in fn.code
    unseen = ["03.12.2009", "13.05.2009", "04/05/2009", "06-07-2009"]
    next_drop = pd.DataFrame({"Sample Number": ["1", "2", "3", "4"], "Date Egg": unseen}, dtype=object)
    assert clean(next_drop)["Date Egg"].tolist() == ["2009-12-03", "2009-05-13", "2009-04-05", "06-07-2009"], names


def test_units_stay_where_the_column_is_written_with_them_and_rounded_ones_are_not_stripped():
    rng = random.Random(3)
    ounces = [rng.choice(["12.0 oz", "12.0 oz.", "12.0 ounce", "16.0 oz"]) for _ in range(300)]
    abv = [f"0.0{rng.randint(40, 99)}" for _ in range(240)] + [f"0.0{rng.randint(4, 9)}%" for _ in range(60)]
    drop = pd.DataFrame({"ounces": ounces, "abv": abv}, dtype=object)
    clean, names = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "ounces") == {} and changed(drop, out, "abv") == {}, names
    asked = RulesAnalyst().propose(AnalysisRequest(
        dataset="d", chunk_id="c0", step=1, chunk=drop.head(50), findings=tuple(detect_issues(drop.head(50))),
        reference=drop, instructions="Write numbers without units."))
    assert asked.function is not None and asked.function.name.startswith("normalize_numbers")


def breach_reports(n: int, seed: int) -> pd.DataFrame:
    """Breach reports: short entity names and states, some with stray spaces around them (" Boston Medical "),
    and a free-text summary of two or three sentences written with two spaces after each full stop, some
    ending in a line break."""
    rng = random.Random(seed)
    entities = ["Boston Medical Center", "Aetna", "Kaiser Foundation", "Walgreens", "Anthem", "CVS Health"]
    starts = ["A laptop holding patient records was stolen from an employee's car.",
              "An unencrypted backup tape went missing during a move between offices.",
              "A phishing email gave an intruder access to a staff mailbox.",
              "Paper files were left in a dumpster behind the clinic."]
    middles = [f"The records of {rng.randint(500, 90000)} patients were exposed." for _ in range(40)]
    ends = ["The entity notified every affected person and the media.", "Staff were retrained on the policy.",
            "The OCR closed the case after technical assistance."]
    summaries = []
    for _ in range(n):
        text = "  ".join([rng.choice(starts), rng.choice(middles)] + [rng.choice(ends)] * (rng.random() < 0.5))
        summaries.append(text + "\n" * (rng.random() < 0.3))
    names = [rng.choice(entities) for _ in range(n)]
    names = [f" {name} " if rng.random() < 0.1 else name for name in names]
    return pd.DataFrame({"Name of Covered Entity": names,
                         "State": [rng.choice(["MA", "CA", "NY", "TX", "IL "]) for _ in range(n)],
                         "summary": summaries}, dtype=object)


def test_free_text_keeps_its_own_spacing_unless_asked_and_short_values_are_still_stripped():
    drop = breach_reports(300, seed=6)
    clean, names = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "summary") == {}, names
    assert sum(v.endswith("\n") for v in out["summary"]) > 50 and all("  " in v for v in out["summary"])
    assert set(out["Name of Covered Entity"]) <= {"Boston Medical Center", "Aetna", "Kaiser Foundation", "Walgreens",
                                                "Anthem", "CVS Health"}, names
    assert changed(drop, out, "State") == {"IL ": "IL"}, names
    # asked, the summaries' spacing is normalised too: one space between sentences, no line break at the end
    asked, names = module_of(drop, instructions="Normalise whitespace in every column.")
    summaries = asked(drop)["summary"]
    assert not any("  " in v or v.endswith("\n") for v in summaries), names


def registry_rows(n: int, seed: int) -> pd.DataFrame:
    """Companies: each zip code names one city, county and state; each zip has a handful of companies."""
    rng = random.Random(seed)
    places = [("Springfield", "Sangamon", "IL"), ("Peoria", "Peoria", "IL"), ("Madison", "Dane", "WI"),
              ("Austin", "Travis", "TX"), ("Salem", "Marion", "OR"), ("Eugene", "Lane", "OR")]
    zips = {f"{10000 + 37 * i}": places[i % len(places)] for i in range(60)}
    rows = []
    for i in range(n):
        z = rng.choice(sorted(zips))
        city, county, state = zips[z]
        rows.append({"company": f"C{seed}{i:05d}", "zip": z, "city": city, "county": county, "state": state})
    return pd.DataFrame(rows, dtype=object)


def test_dependency_repair_on_the_next_drop_leaves_a_correct_city_whose_key_is_the_wrong_cell():
    drop = registry_rows(1200, seed=4)
    drop.loc[5, "city"] = "Springfeild"  # a typo the drop repairs from its zip code
    learned = dependencies.learn(drop)
    assert dependencies.repair(drop, learned).loc[5, "city"] == "Springfield"
    next_drop = registry_rows(300, seed=5)
    # companies in a city the first drop never held, whose zip code was typed as a known one: the city,
    # county and state are right and the zip code is the wrong cell
    moved = list(range(0, 40, 4))
    next_drop.loc[moved, ["city", "county", "state"]] = ["Boise", "Ada", "ID"]
    repaired = dependencies.repair(next_drop, learned)
    for column in ("city", "county", "state"):
        assert repaired[column].equals(next_drop[column]), column


def test_a_category_does_not_repair_the_values_beside_it():
    # city -> state holds on most rows, but a city is a category (Springfield is in many states), not an entity
    rng = random.Random(6)
    rows = [{"city": "Springfield", "state": rng.choice(["IL"] * 19 + ["MO"])} for _ in range(400)]
    rows += [{"city": "Salem", "state": "OR"} for _ in range(400)]
    drop = pd.DataFrame(rows, dtype=object)
    assert not [d for d in dependencies.learn(drop).dependencies if d.determinant == "city"]


def test_harm_is_estimated_from_the_drop_alone():
    assert doctest.testmod(harm).failed == 0
    assert doctest.testmod(entities).failed == 0
    assert doctest.testmod(drop_findings_module).failed == 0


def test_the_harm_estimate_judges_a_case_change_as_the_case_rule_does():
    codes = ["TX", "NY", "IL", "AZ", "PA", "OH", "CO", "GA", "WA", "MA", "OR"]
    states = harm.ValueCounts.of(pd.DataFrame({"state": ["CA"] * 301 + ["ca"] * 9 + codes * 30}))
    assert not states.looks_valid("state", "ca", "CA")  # a slip the case rule fixes itself: no harm
    assert states.looks_valid("state", "CA", "ca")
    languages = ["eng"] * 464 + ["English"] * 95 + ["ENG"] * 23 + ["Eng"] * 2 + ["jpn"] * 7 + ["ger"] * 6
    counts = harm.ValueCounts.of(pd.DataFrame({"language": languages}))
    assert counts.looks_valid("language", "ENG", "eng")  # a source's own spelling in a column that mixes cases


LOWER_ROLES = '''import pandas as pd


def lower_role(df: pd.DataFrame) -> pd.DataFrame:
    """Lower-case `role` ("CEO" -> "ceo")."""
    df = df.copy()
    df["role"] = df["role"].str.lower()
    return df
'''


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


def first_verdict(drop: pd.DataFrame, llm, tmp_path, sandbox) -> tuple[VerdictStep, RegistryStore]:
    """The model's first function on a chunk of `drop` (rows 0-49; reference 0-199, held out 200-), judged."""
    verdicts, store = judged(drop, llm, tmp_path, sandbox)
    return verdicts[0], store


def judged(drop: pd.DataFrame, llm, tmp_path, sandbox) -> tuple[list[VerdictStep], RegistryStore]:
    """Every function the model proposes on a chunk of `drop` (as `first_verdict`), judged, in order."""
    analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="test",
                           cache_dir=tmp_path / "cache", backoff_s=0.01, backoff_max_s=0.05, timeout_s=5.0)
    work = ChunkWork(dataset="d", drop="d.csv", chunk_id="c0", rows=drop.iloc[:50].reset_index(drop=True),
                     holdout=drop.iloc[200:].reset_index(drop=True), reference=drop.iloc[:200].reset_index(drop=True))
    store = RegistryStore(tmp_path / "registry.json", "d")
    steps = list(run_chunk(work, analyst, store, sandbox, LoopSettings(max_steps=3)))
    return [s for s in steps if isinstance(s, VerdictStep)], store


def test_a_model_function_that_rewrites_valid_values_is_sent_back_with_the_numbers(llm, tmp_path, sandbox):
    rng = random.Random(7)
    roles = ["director", "secretary", "member", "agent"] * 5 + ["CEO", "CFO", "President"]
    drop = pd.DataFrame({"id": [str(i) for i in range(300)], "role": [rng.choice(roles) for _ in range(300)]},
                        dtype=object)
    llm.add(reply(f"<issues>\n- role: mixed case\n</issues>\n<code>\n```python\n{LOWER_ROLES}```\n</code>\n"
                  "<status>needs_more_work</status>"),
            reply("<issues>\n</issues>\n<status>clean</status>"))
    verdict, store = first_verdict(drop, llm, tmp_path, sandbox)
    assert not verdict.accepted
    assert "would do harm" in verdict.reason and "looks valid" in verdict.reason
    assert "'CEO' -> 'ceo'" in verdict.reason or "'CFO' -> 'cfo'" in verdict.reason
    assert store.load().entries == ()
    # the reason went back to the model in the next step's prompt
    assert "would do harm" in llm.requests[-1].prompt


def test_dates_with_several_utc_offsets_are_read_not_a_crash():
    values = [f"2024-03-{d:02d}T10:00:00{tz}" for d in range(1, 29) for tz in ("+01:00", "-05:00")]
    values += ["03/29/2024 10:00", "March 30, 2024"]
    drop = pd.DataFrame({"id": [str(i) for i in range(len(values))], "timestamp": values}, dtype=object)
    finding = [f for f in detect_issues(drop) if f.kind == "date_format"]
    assert finding and finding[0].params["first"] == "2024-03-01" and finding[0].params["round_trip"] == 1.0


def test_decoding_debris_stays_unless_asked_and_a_spelling_on_many_rows_stays():
    titles = ["Effet d'une intervention non m\u0329dicamenteuse", "Bruxismo em crian\u0324as"] + [f"Title {i}" for i in range(60)]
    languages = ["eng"] * 200 + ["ENG"] * 23 + ["Eng"]
    kinds = ["retail"] * 223 + ["RETAIL"]
    drop = pd.DataFrame({"title": titles + [f"More {i}" for i in range(len(languages) - len(titles))],
                         "language": languages, "kind": kinds}, dtype=object)
    clean, names = module_of(drop)
    out = clean(drop)
    assert changed(drop, out, "title") == {}, names
    # "eng" and "ENG" are both the file's own spellings of one value: the lone "Eng" is no more wrong than "ENG"
    assert changed(drop, out, "language") == {}, names
    assert changed(drop, out, "kind") == {"RETAIL": "retail"}, names  # one spelling settled: the slip goes to it


ONE_UNIT_SPELLING = '''import pandas as pd


def unify_ounces(df: pd.DataFrame) -> pd.DataFrame:
    """Write every unit of `ounces` as "oz." ("12.0 oz" -> "12.0 oz.")."""
    df = df.copy()
    df["ounces"] = df["ounces"].str.replace(r"\\s*(?:oz\\.?|OZ\\.?|ounce)$", " oz.", regex=True)
    return df
'''


def test_a_model_function_merging_two_spellings_each_on_many_rows_is_sent_back_though_it_serves_its_plan(
        llm, tmp_path, sandbox):
    # four spellings of the unit, none on most rows: "12.0 oz." is the most common, not the column's form
    rng = random.Random(3)
    units = ["oz."] * 38 + ["oz"] * 26 + ["ounce"] * 24 + ["OZ."] * 6 + ["oz. Silo Can"] * 6
    drop = pd.DataFrame({"id": [str(i) for i in range(300)],
                         "ounces": [f"{rng.choice(['12.0', '16.0'])} {rng.choice(units)}" for _ in range(300)]},
                        dtype=object)
    # it serves the model's own plan: that is no permission, only the user's words are
    llm.add(reply(f"<issues>\n- ounces: units spelled four ways\n</issues>\n<plan>\n- ounces: one unit spelling\n</plan>\n"
                  f"<code>\n```python\n{ONE_UNIT_SPELLING}```\n</code>\n<serves>1</serves>\n<status>needs_more_work</status>"),
            reply("<issues>\n</issues>\n<declined>\n- 1: each spelling is on many rows; none is evidently wrong\n</declined>\n"
                  "<status>clean</status>"))
    verdict, store = first_verdict(drop, llm, tmp_path, sandbox)
    assert not verdict.accepted, "'12.0 oz' on a quarter of the rows was rewritten as if it were a slip"
    assert "would do harm" in verdict.reason
    assert re.search(r"'1\d\.0 (?:oz|ounce)' -> '1\d\.0 oz\.'", verdict.reason), verdict.reason
    assert store.load().entries == ()


def proposes(llm, issue: str, *functions: str) -> None:
    """The scripted model proposes `functions` one step each, then says the chunk is clean."""
    llm.add(*(reply(f"<issues>\n- {issue}\n</issues>\n<code>\n```python\n{code}```\n</code>\n<status>needs_more_work</status>")
              for code in functions), reply("<issues>\n</issues>\n<status>clean</status>"))


ALL_LANGUAGE_SPELLINGS = '''import pandas as pd

LANGUAGES = {"English": "eng", "ENG": "eng"}


def unify_language(df: pd.DataFrame) -> pd.DataFrame:
    """Write `language` as its three-letter code ("English" -> "eng")."""
    df = df.copy()
    df["language"] = df["language"].replace(LANGUAGES)
    return df
'''


def test_a_model_function_that_also_rewrites_a_spelling_held_on_many_rows_is_sent_back_and_its_narrowing_lands(
        llm, tmp_path, sandbox):
    # "English" -> "eng" is a fix; "ENG" is how a source writes the code on 23 rows: nothing says it is wrong.
    # Most of the function's changes are fixes, so the share of valid values hit alone would let it through.
    rng = random.Random(11)
    languages = ["eng"] * 400 + ["English"] * 60 + ["ENG"] * 23 + ["fre"] * 12 + ["ger"] * 5
    rng.shuffle(languages)
    drop = pd.DataFrame({"id": [str(i) for i in range(len(languages))], "language": languages}, dtype=object)
    narrowed = ALL_LANGUAGE_SPELLINGS.replace(', "ENG": "eng"', "")
    proposes(llm, "language: names beside codes", ALL_LANGUAGE_SPELLINGS, narrowed)
    verdicts, store = judged(drop, llm, tmp_path, sandbox)
    assert not verdicts[0].accepted
    assert "values the drop holds on many rows" in verdicts[0].reason and "language: 'ENG'" in verdicts[0].reason
    assert "values the drop holds on many rows" in llm.requests[1].prompt  # the model was told why
    assert verdicts[1].accepted, verdicts[1].reason
    assert [e.function.name for e in store.load().entries] == ["unify_language"]


TIME_FUNCTION = '''import re

import pandas as pd

TIME = re.compile(r"PATTERN")


def unify_departure(df: pd.DataFrame) -> pd.DataFrame:
    \"\"\"DOC\"\"\"
    df = df.copy()
    df["departure"] = df["departure"].str.replace(TIME, lambda m: f"{int(m[1])}:{m[2]} {m[3]}.m.", regex=True)
    return df
'''
ALL_TIME_FORMS = TIME_FUNCTION.replace(
    "PATTERN", r"^(?:[A-Z][a-z]{2} \d{1,2} )?(\d{1,2}):(\d{2}) ?([ap])(?:\.?m\.?)?(?:[A-Z][a-z]{2} \d{1,2})?$").replace(
    "DOC", 'Write every `departure` as "7:16 a.m." ("7:16a", "7:02aDec 1", "Dec 1 9:40a").')
# the same function, narrowed to the one source whose bare times are the flight's
ONE_SOURCE_FORM = TIME_FUNCTION.replace("PATTERN", r"^(\d{1,2}):(\d{2})([ap])$").replace(
    "DOC", 'Write the bare "7:16a" times of `departure` as "7:16 a.m.".')


def flight_reports(flights: int, seed: int) -> pd.DataFrame:
    """Seven sources report each flight's departure: four agree in the usual form, one writes the same time
    bare ("7:16a"), two write times of their own with a date stuck on ("7:02aDec 1", "Dec 1 7:31a")."""
    rng = random.Random(seed)
    rows = []
    for f in range(flights):
        hour, minute = rng.randint(1, 12), rng.randrange(0, 60)
        half = rng.choice("ap")
        number = f"{rng.choice(['AA', 'UA', 'DL', 'CO'])}-{1000 + f}"
        for source in ("flightview", "orbitz", "flightstats", "airline"):
            rows.append((source, number, f"{hour}:{minute:02d} {half}.m."))
        rows.append(("travelocity", number, f"{hour}:{minute:02d}{half}"))
        own = (minute + rng.randint(5, 25)) % 60
        rows.append(("mytripandmore", number, f"{hour}:{own:02d}{half}Dec 1"))
        own = (minute + rng.randint(26, 50)) % 60
        rows.append(("flightarrivals", number, f"Dec 1 {hour}:{own:02d}{half}"))
    rng.shuffle(rows)
    return pd.DataFrame(rows, columns=["src", "flight", "departure"], dtype=object)


def flight_functions_judged(llm, tmp_path, sandbox, *functions: str):
    """The flight reports, and the verdicts on `functions` proposed one step each; the first is sent back."""
    drop = flight_reports(60, seed=5)
    proposes(llm, "departure: several forms", *functions)
    verdicts, store = judged(drop, llm, tmp_path, sandbox)
    assert not verdicts[0].accepted
    return drop, verdicts, store


def test_a_model_function_whose_rewrites_the_entitys_other_rows_contradict_is_sent_back_and_its_narrowing_lands(
        llm, tmp_path, sandbox):
    # Every odd form becomes the usual one, but two sources' own times stay wrong in the usual form: the
    # other rows of the same flight hold another time. Only the bare form carries the flight's time.
    drop, verdicts, store = flight_functions_judged(llm, tmp_path, sandbox, ALL_TIME_FORMS, ONE_SOURCE_FORM)
    assert re.search(r"in departure, \d+ of its \d+ changes write a value the other rows of the same flight contradict",
                     verdicts[0].reason), verdicts[0].reason
    assert "other rows of the same flight contradict" in llm.requests[1].prompt
    assert verdicts[1].accepted, verdicts[1].reason
    cleaned = load(store.load().entries[0].function)(drop)
    wrong = {(f, d) for f, d in zip(cleaned["flight"], cleaned["departure"])} - {
        (f, d) for s, f, d in zip(drop["src"], drop["flight"], drop["departure"]) if s == "flightview"}
    changed_cells = (cleaned["departure"] != drop["departure"])
    assert changed_cells.sum() == 60 and not any((f, d) in wrong for f, d in zip(cleaned["flight"][changed_cells],
                                                                                 cleaned["departure"][changed_cells]))


# the same function without the "Dec 1 9:40a" form: half its changes are the flight's time, half are not
TWO_SOURCE_FORMS = TIME_FUNCTION.replace("PATTERN", r"^(\d{1,2}):(\d{2})([ap])(?:[A-Z][a-z]{2} \d{1,2})?$").replace(
    "DOC", 'Write the "7:16a" and "7:02aDec 1" times of `departure` as "7:16 a.m.".')


def test_a_model_function_half_of_whose_rewrites_the_entity_contradicts_is_sent_back_naming_where_they_gather(
        llm, tmp_path, sandbox):
    # Half right is not right: a fifth of a function's changes contradicted by the flight's other reports is
    # enough, and the reply names the source whose rows hold them, so the model can leave those rows.
    drop, verdicts, store = flight_functions_judged(llm, tmp_path, sandbox, TWO_SOURCE_FORMS, ONE_SOURCE_FORM)
    found = re.search(r"in departure, (\d+) of its (\d+) changes write a value the other rows of the same flight "
                      r"contradict.*\((\d+) of them are in rows where src is 'mytripandmore', of its (\d+) changes "
                      r"there; elsewhere 0 of (\d+)\)", verdicts[0].reason)
    assert found, verdicts[0].reason
    hit, changed, there, all_there, elsewhere = map(int, found.groups())
    # the drop's reference rows hold some flights' mytripandmore report with too few others to contradict it
    assert hit == there <= all_there and changed == all_there + elsewhere and 0.2 * changed < hit <= 0.5 * changed
    assert "rows where src is 'mytripandmore'" in llm.requests[1].prompt
    assert verdicts[1].accepted, verdicts[1].reason
    assert (load(store.load().entries[0].function)(drop)["departure"] != drop["departure"]).sum() == 60


def test_the_entity_check_ignores_changes_of_spaces_and_reports_of_no_value():
    rows = pd.DataFrame({"flight": ["AA-1"] * 4 + ["UA-2"] * 4,
                         "departure": ["7:16 a.m."] * 3 + ["7:02  a.m."] + ["", "Not Available", "", "9:40a"]})
    after = rows.assign(departure=rows["departure"].replace({"7:02  a.m.": "7:02 a.m.", "9:40a": "9:40 a.m."}))
    # "7:02 a.m." is still not the flight's time, but the function only wrote its spaces once; nobody on UA-2
    # reports a time to contradict "9:40 a.m."
    assert not entities.contradicted(rows, after, "departure", "flight").any()
    moved = rows.assign(departure=rows["departure"].replace({"7:02  a.m.": "7:05 a.m."}))
    assert entities.contradicted(rows, moved, "departure", "flight").tolist() == [False] * 3 + [True] + [False] * 4
    # the other reports hold the same time with a note after it: they agree with the note stripped off
    noted = pd.DataFrame({"flight": ["AA-1"] * 4, "departure": ["12/2/11 7:16 a.m."] + ["7:16 a.m. (Estimated)"] * 3})
    stripped = noted.assign(departure=["7:16 a.m."] + ["7:16 a.m. (Estimated)"] * 3)
    assert not entities.contradicted(noted, stripped, "departure", "flight").any()
    assert entities.contradicted(noted, stripped.replace({"7:16 a.m.": "7:02 a.m."}), "departure", "flight").iloc[0]


STRIP_PERCENT = '''import pandas as pd


def strip_abv_percent(df: pd.DataFrame) -> pd.DataFrame:
    """Drop the percent sign of `abv` ("0.05%" -> "0.05"), as most of the column is written."""
    df = df.copy()
    df["abv"] = df["abv"].str.replace(r"%$", "", regex=True)
    return df
'''


def test_a_model_function_stripping_the_unit_off_rounded_numbers_is_sent_back(llm, tmp_path, sandbox):
    # The bare numbers carry three decimals; those written with "%" two: they were rounded, and "0.05" is not
    # the beer's 0.046 either. The rules leave them (see the units test above); so must the model's function.
    rng = random.Random(4)
    abv = [f"0.0{rng.randint(40, 99)}" for _ in range(240)] + [f"0.0{rng.randint(4, 9)}%" for _ in range(60)]
    rng.shuffle(abv)
    drop = pd.DataFrame({"id": [str(i) for i in range(len(abv))], "abv": abv}, dtype=object)
    proposes(llm, "abv: percent signs", STRIP_PERCENT)
    verdicts, store = judged(drop, llm, tmp_path, sandbox)
    assert not verdicts[0].accepted
    assert re.search(r"in abv, \d+ of its \d+ changes strip the unit off a number written with fewer decimals",
                     verdicts[0].reason), verdicts[0].reason
    assert store.load().entries == ()



def test_a_value_built_from_the_rows_own_cells_is_not_taken_for_a_slip_of_its_keys_usual_value():
    from smolclean_dagster.core.detectors import dependencies

    rows = []
    for h in range(12):  # twelve hospitals in Alabama, one in Alaska; a state average per state and measure
        state = "ak" if h == 11 else "al"
        for m in range(1, 9):
            rows.append({"hospital": f"H{h:02d}", "state": state, "measure": f"pn-{m}",
                         "stateavg": f"{state}_pn-{m}"})
    frame = pd.DataFrame(rows, dtype=object)
    frame.loc[3, "stateavg"] = "al_pn-x4"  # a slip in Alabama
    learned = dependencies.learn(frame)
    assert any(d.determinant == "measure" and d.dependent == "stateavg" for d in learned.dependencies)
    repaired = dependencies.repair(frame, learned)
    assert repaired.loc[3, "stateavg"] == "al_pn-4", "the slip is repaired"
    alaska = frame["state"] == "ak"
    assert repaired.loc[alaska, "stateavg"].tolist() == [f"ak_pn-{m}" for m in range(1, 9)], "Alaska's own values stay"


COLLAPSE_SUMMARY_SPACES = '''import pandas as pd


def collapse_summary_spaces(df: pd.DataFrame) -> pd.DataFrame:
    """Write `summary` with single spaces between its sentences and no space or line break at either end."""
    df = df.copy()
    df["summary"] = df["summary"].str.replace(r"\\s+", " ", regex=True).str.strip()
    return df
'''


def sent_back(drop: pd.DataFrame, llm, tmp_path, sandbox, issue: str, code: str, reason: str) -> None:
    """The model proposes `code` on a chunk of `drop`: it is sent back for `reason` (a pattern), and nothing joins."""
    proposes(llm, issue, code)
    verdicts, store = judged(drop, llm, tmp_path, sandbox)
    assert not verdicts[0].accepted
    assert re.search(reason, verdicts[0].reason), verdicts[0].reason
    assert store.load().entries == ()


def test_a_model_function_respacing_free_text_unasked_is_sent_back_as_the_rules_would_keep_it(llm, tmp_path, sandbox):
    # The rules keep the summaries' own spacing unless asked (see above): so must a model's function
    drop = breach_reports(300, seed=6)
    sent_back(drop, llm, tmp_path, sandbox, "summary: double spaces between sentences", COLLAPSE_SUMMARY_SPACES,
              r"in summary, \d+ of its \d+ changes only change the spacing of free text")
    # asked for ("Collapse double spaces."), the spacing is the user's to change: no harm is counted
    holdout = drop.iloc[200:].reset_index(drop=True)
    after = load(CleaningFunction.from_code(COLLAPSE_SUMMARY_SPACES))(holdout)
    counts = harm.ValueCounts.of(drop.iloc[:200])
    assert harm.estimate(holdout, after, counts).respaced
    assert not harm.estimate(holdout, after, counts, spacing=False).harmful


def reference_list(n: int, seed: int, tagged: range) -> pd.DataFrame:
    """A bibliography export: each row's author list (unique, as a source writes it: `{"Ann Smith","Bo Li"}`);
    the rows in `tagged` carry reference-manager fields the source writes inside the list ("CN  - PubMed DA  - Aug
    ..."), and a few others a stray "??" where a letter was lost."""
    rng = random.Random(seed)
    first = ["Anna", "Bernd", "Carla", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kofi", "Lena"]
    last = ["Kowalski", "Nakamura", "Okafor", "Lindqvist", "Moreau", "Hernandez", "Petrov", "Schneider", "Rossi",
            "Andersen", "Yilmaz", "Fischer", "Novak", "Costa", "Brennan", "Tanaka"]
    lists, titles = [], []
    for i in range(n):
        names = [f"{rng.choice(first)} {rng.choice(last)}" for _ in range(rng.randint(2, 5))]
        if i in tagged:
            names[-1] = (f"{names[-1].split()[0][0]}. CN  - PubMed DA  - {rng.choice(['Aug', 'Mar', 'Nov'])} DP  - NLM "
                         f"ET  - 20{rng.randint(10, 15)}/0{rng.randint(1, 9)}/1{rng.randint(0, 9)} "
                         f"{names[-1].split()[1]}")
        elif rng.random() < 0.05:
            names[0] = names[0][:3] + "??" + names[0][4:]
        lists.append("{" + ",".join(f'"{name}"' for name in names) + "}")
        titles.append(f"Outcome {i} of a randomised trial in {rng.choice(['adults', 'children', 'older adults'])}")
    return pd.DataFrame({"id": [str(i) for i in range(n)], "title": titles, "author_list": lists}, dtype=object)


CUT_REFERENCE_FIELDS = '''import pandas as pd


def remove_ris_fields_author_list(df: pd.DataFrame) -> pd.DataFrame:
    """Take the reference-manager fields ("CN  - PubMed DA  - Aug ...") out of `author_list`."""
    df = df.copy()
    df["author_list"] = df["author_list"].str.replace(r"\\. CN  - .*? (?=[A-Z][a-z]+\\")", ". ", regex=True)
    return df
'''


def test_a_model_function_cutting_words_out_of_free_text_unasked_is_sent_back_though_the_held_out_rows_hold_none(
        llm, tmp_path, sandbox):
    # The fields are how the source writes these lists (the published clean file keeps them): every list is
    # unique, so no count tells them from debris, and cutting them loses what the writer put there. The rows
    # the model's function is tried on (200 on) hold none of them; the whole drop it may see does.
    drop = reference_list(300, seed=3, tagged=range(20, 32))
    fn = CleaningFunction.from_code(CUT_REFERENCE_FIELDS)
    cut = load(fn)(drop)
    assert changed(drop, cut, "author_list")  # the function does cut them, e.g.
    before, after = next(iter(changed(drop, cut, "author_list").items()))
    assert "PubMed" in before and "PubMed" not in after and after.endswith('"}')
    sent_back(drop, llm, tmp_path, sandbox, "author_list: reference-manager fields inside the names",
              CUT_REFERENCE_FIELDS, r"in author_list, 12 of its 12 changes cut words out of free text")
    # a fix that writes a word for the one it takes ("An??a" -> "Anna") is no cut; a null for the value neither
    assert not harm.cuts_words('{"An??a Rossi"}', '{"Anna Rossi"}') and not harm.cuts_words("N/A", "")
