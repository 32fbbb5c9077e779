"""The model sees the whole drop: evidence computed over every row, read-only queries, and a model that is
always asked. Real learning runs (Dagster, sandbox) with a scripted model over real HTTP."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pandas as pd
import pytest

from llm_server import ScriptedLLM, reply
from smolclean_dagster.core import evidence, queries
from smolclean_dagster.core.analysts.replies import parse_analysis_reply
from smolclean_dagster.core.drops import drop_key
from smolclean_dagster.core.plan import choose_holdout, held_out_residual, plan_chunks, split_drop
from smolclean_dagster.core.profile import detect_issues
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.core.steps import ChunkTrace
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.settings import DatasetSettings

CITIES = [("Chicago", "IL"), ("Milwaukee", "WI"), ("Columbus", "OH"), ("Louisville", "KY"), ("Nashville", "TN"),
          ("Memphis", "TN"), ("Portland", "OR"), ("Seattle", "WA")]
CLEAN = "<issues>\n</issues>\n<status>clean</status>"
QUERY = '<issues>\n- city: a rare spelling\n</issues>\n<query>df[df["city"] == "Chicgo"][["id", "zip"]]</query>'


def addresses(path: Path) -> Path:
    """3,000 addresses, 200 zip codes of 15 rows each; the only dirt lies in three rows far apart: two cities
    misspelled once each, and one row whose zip code names another city."""
    rng = random.Random(11)
    zips = {f"{40000 + 7 * i}": CITIES[i % len(CITIES)] for i in range(200)}
    keys = sorted(zips) * 15
    rng.shuffle(keys)
    rows = [{"id": f"A{i:05d}", "zip": z, "city": zips[z][0], "state": zips[z][1]} for i, z in enumerate(keys)]
    df = pd.DataFrame(rows)
    # the dirt is on rows the analyst may see (validation holds out others, which no prompt shows)
    visible = ~df.index.isin(choose_holdout(drop_key(path), len(df), DatasetSettings(name="x").holdout_fraction))
    chicago = df.index[(df["city"] == "Chicago") & (df.index > 1000) & visible]
    seattle = df.index[(df["city"] == "Seattle") & (df.index > 2000) & visible]
    df.loc[chicago[0], "city"] = "Chicgo"
    df.loc[seattle[0], "city"] = "Seatle"
    milwaukee = df.index[(df["city"] == "Milwaukee") & (df.index > 2800) & visible]
    df.loc[milwaukee[0], ["city", "state"]] = ["Nashville", "WI"]  # the zip and state say Milwaukee
    df.to_csv(path, index=False)
    return path


def test_the_evidence_shows_rare_values_beside_what_they_resemble_and_broken_dependencies(tmp_path):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    assert detect_issues(df.head(50)) == []
    text = evidence.drop_evidence(df).render(4000)
    assert re.search(r'city: "Chicago" \[\d+\] <- "Chicgo" \[1\] 1 edit', text), text
    assert re.search(r'city: "Seattle" \[\d+\] <- "Seatle" \[1\] 1 edit', text), text
    assert re.search(r'zip -> city holds on 99\.\d%: .*"\d+" has "Nashville" \[1\] where its other rows have "Milwaukee"',
                     text), text


def test_the_evidence_shows_a_dependency_broken_on_two_rows_of_a_key_on_hundreds():
    # zip 60601 is Chicago on ~600 rows and Denver on 2: a key on that many rows is a category, never repaired, but
    # the model judges from the evidence, so the two rows are shown with what the key's other rows say
    chance = random.Random(3)
    cities = {"60601": "Chicago", "80202": "Denver", "10001": "New York", "94105": "San Francisco", "73301": "Austin"}
    rows = [{"zip": z, "city": cities[z], "customer": f"C{i:05d}"}
            for i, z in enumerate(chance.choice(sorted(cities)) for _ in range(3000))]
    drop = pd.DataFrame(rows)
    drop.loc[[10, 11], ["zip", "city"]] = ["60601", "Denver"]
    shown = evidence.drop_evidence(drop).render(4000)
    assert 'zip -> city holds on 99.9%: "60601" has "Denver" [2] where its other rows have "Chicago"' in shown
    assert "customer" not in shown.split("Dependencies")[-1]  # an id on one row each is no key


def test_the_evidence_reads_a_column_a_function_turned_into_numbers():
    # a CSV column the user asked to write as numbers holds no text once cleaned: its evidence is empty, not an error
    cleaned = pd.DataFrame({"category": pd.Series([1, 2, 3] * 20, dtype="int64"),
                            "brand": ["ACME", "GLOBEX", "ACME", "ACME", "INITECH", "ACME"] * 10})
    shown = evidence.drop_evidence(cleaned).render(2000)
    assert "category" not in shown


def test_a_query_runs_in_the_sandbox_and_a_bad_one_is_the_models_fault(sandbox, tmp_path):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    answer = queries.run_query('df[df["city"] == "Chicgo"][["id", "zip"]]', df, sandbox)
    assert "Chicgo" not in answer and re.search(r"A0[0-9]{4}\s+\d{5}", answer)
    with pytest.raises(queries.QueryError):
        queries.query_code("import os")
    from smolclean_dagster.core.sandbox import GateRejected

    with pytest.raises(GateRejected):
        queries.run_query('open("/etc/passwd").read()', df, sandbox)
    assert parse_analysis_reply(QUERY, columns=["city"]).query == 'df[df["city"] == "Chicgo"][["id", "zip"]]'
    # a long answer says it was cut, and how many rows there were, so the model does not read it as whole
    long = queries.run_query('df["city"].str.cat(sep=" | ")', df, sandbox)
    assert len(long) < queries.RESULT_BUDGET + 60 and re.search(r"\(cut at 3,000 of \d{5,} characters\)$", long)
    many = queries.run_query('df[["id", "city"]]', df, sandbox)
    assert many.endswith(f"({len(df)} rows in all; the first {queries.RESULT_ROWS} shown)")


def test_a_querys_answer_shows_empty_texts_and_repeated_keys_apart(sandbox):
    # pandas prints a blank both for an empty text and for a key repeated under the first row of its group: the
    # model could not tell the rows without a zip code from the second city of a zip code
    df = pd.DataFrame({"zip": ["60601", "60601", "60601", "", ""],
                       "city": ["Chicago", "Chicago ", "Denver", "Chicago", ""]})
    lines = queries.run_query('df.groupby(["zip", "city"]).size()', df, sandbox).splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [
        [queries.EMPTY, queries.EMPTY], [queries.EMPTY, "Chicago"], ["60601", "Chicago"], ["60601", "'Chicago"],
        ["60601", "Denver"]]
    frame = queries.run_query('df[df["zip"] == ""]', df, sandbox)
    assert frame.splitlines()[2].split() == ["4", queries.EMPTY, queries.EMPTY]
    counts = queries.run_query('df["city"].value_counts()', df, sandbox)
    assert [line.rsplit(None, 1) for line in counts.splitlines()[1:]] == [
        ["Chicago", "2"], ["'Chicago '", "1"], ["Denver", "1"], [queries.EMPTY, "1"]]


def test_one_long_value_does_not_pad_a_series_answer_out_of_its_budget(sandbox):
    # a title of 400 characters among 50 short ones: padded to its width, the answer held a dozen rows of 3,000
    df = pd.DataFrame({"title": ["x" * 400] + [f"Study {i}" for i in range(50)] * 2})
    lines = queries.run_query('df["title"].value_counts()', df, sandbox).splitlines()
    assert lines[0] == "title" and len(lines) == 52, lines[:3]
    assert lines[1] == "Study 0  2" and lines[-1] == "x" * 400 + "  1"


def test_the_model_is_asked_on_a_quiet_drop_sees_its_rare_rows_and_reads_its_query_answer(tmp_path):
    source = addresses(tmp_path / "addresses.csv")

    def answer(recorded):
        return reply(CLEAN)

    with ScriptedLLM(script=[reply(QUERY)], responder=answer) as llm:
        settings = DatasetSettings(name="addresses", workdir=tmp_path / "work", model="openai/test-model",
                                   api_base=llm.api_base, api_key="test", concurrency=1)
        outcome = learn(settings, source, log_level="ERROR")
        prompts = [r.prompt for r in llm.requests if "Answer in the reply format" in r.prompt]
    assert prompts, "the model was never asked"
    first = prompts[0]
    assert re.search(r'"Chicago" \[\d+\] <- "Chicgo" \[1\]', first) and re.search(r'"Seattle" \[\d+\] <- "Seatle" \[1\]', first)
    assert '"Nashville" [1] where its other rows have "Milwaukee"' in first
    shown = first.split("## The rows")[1].split("## Columns")[0]
    unseen = [v for v in ('"Chicgo"', '"Seatle"', '"Nashville", "WI"') if v not in shown]
    assert len(unseen) >= 2, "the dirt lies in rows of several chunks; the model was shown one"
    assert "Your query `df[df[\"city\"] == \"Chicgo\"][[\"id\", \"zip\"]]` over the drop's rows returned:" in prompts[1]
    assert re.search(r"A0[0-9]{4}\s+\d{5}", prompts[1].split("returned:")[1])
    traces = DatasetStore(settings.storage_dir, "addresses").models("chunk_functions", ChunkTrace)
    steps = [s for t in traces for s in t.steps if getattr(s, "query", None)]
    assert steps and steps[0].query_result and "A0" in steps[0].query_result
    assert outcome.module.exists()


FIX_CITY = '''import pandas as pd

CITIES = {"Chicgo": "Chicago", "Seatle": "Seattle"}


def fix_city_spellings(df: pd.DataFrame) -> pd.DataFrame:
    """Fix the misspelled cities of `city` ("Chicgo" -> "Chicago")."""
    df = df.copy()
    df["city"] = df["city"].replace(CITIES)
    return df
'''


def chunk_loop(df: pd.DataFrame, script: list, tmp_path: Path, sandbox):
    """The agent loop on the first 50 rows of `df` (reference: rows up to 2,400, held out: the rest) with a
    scripted model: its steps, the prompts it was sent and the registry store."""
    from smolclean_dagster.core.analysts import make_analyst
    from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
    from smolclean_dagster.core.registry import RegistryStore

    with ScriptedLLM(script=script) as llm:
        analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="test",
                               cache_dir=tmp_path / "cache", backoff_s=0.01, backoff_max_s=0.05, timeout_s=5.0)
        work = ChunkWork(dataset="a", drop="a.csv", chunk_id="c0", rows=df.iloc[:50].reset_index(drop=True),
                         holdout=df.iloc[2400:].reset_index(drop=True), reference=df.iloc[:2400].reset_index(drop=True),
                         sample=df.iloc[:2400].reset_index(drop=True))
        store = RegistryStore(tmp_path / "registry.json", "a")
        steps = list(run_chunk(work, analyst, store, sandbox, LoopSettings(max_steps=4)))
        return steps, [r.prompt for r in llm.requests], store


def test_with_no_instructions_the_model_writes_its_plan_and_serves_or_declines_each_item(tmp_path, sandbox):
    from smolclean_dagster.core.steps import FinalStep

    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    plan = ("- city: fix the two misspelled cities\n- zip: check the zip code whose city disagrees")
    script = [
        reply(f"<issues>\n- city: misspellings\n</issues>\n<plan>\n{plan}\n</plan>\n<code>\n```python\n{FIX_CITY}```\n"
              "</code>\n<serves>1</serves>\n<status>needs_more_work</status>"),
        reply("<issues>\n</issues>\n<declined>\n- 2: the zip code or the city may be the wrong cell; nothing in the "
              "row says which\n</declined>\n<status>clean</status>"),
    ]
    steps, prompts, store = chunk_loop(df, script, tmp_path, sandbox)
    assert "First write your plan: <plan>" in prompts[0]
    assert "## Your own plan (no instructions were given; serve or decline each item)" in prompts[1]
    assert "1. [served by fix_city_spellings] city: fix the two misspelled cities" in prompts[1]
    assert "2. [OPEN] zip: check the zip code whose city disagrees" in prompts[1]
    registry = store.load()
    assert registry.plan == ("city: fix the two misspelled cities", "zip: check the zip code whose city disagrees")
    states = {s.number: s.state for s in registry.coverage(registry.items_for(""))}
    assert states == {1: "served", 2: "declined"}
    assert isinstance(steps[-1], FinalStep) and steps[-1].reason == "clean"


def test_an_item_of_the_plan_declined_in_the_reply_that_writes_the_plan_stays_declined(tmp_path, sandbox):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    plan = ("- city: fix the two misspelled cities\n- zip: check the zip code whose city disagrees")
    script = [
        reply(f"<issues>\n- city: misspellings\n</issues>\n<plan>\n{plan}\n</plan>\n<code>\n```python\n{FIX_CITY}```\n"
              "</code>\n<serves>1</serves>\n<declined>\n- 2: the zip code or the city may be the wrong cell; nothing "
              "in the row says which\n</declined>\n<status>needs_more_work</status>"),
        reply("<issues>\n</issues>\n<status>clean</status>"),
    ]
    steps, prompts, store = chunk_loop(df, script, tmp_path, sandbox)
    assert "2. [declined" in prompts[1] and "2. [OPEN]" not in prompts[1], prompts[1]
    registry = store.load()
    assert {s.number: s.state for s in registry.coverage(registry.items_for(""))} == {1: "served", 2: "declined"}
    assert steps[-1].reason == "clean" and len(prompts) == 2


def test_a_plan_line_sent_after_the_plan_is_written_becomes_an_item_and_a_repeated_one_does_not(tmp_path, sandbox):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    script = [
        reply(f"<issues>\n- city: misspellings\n</issues>\n<plan>\n- city: fix the two misspelled cities\n</plan>\n"
              f"<code>\n```python\n{FIX_CITY}```\n</code>\n<serves>1</serves>\n<status>needs_more_work</status>"),
        reply("<issues>\n- zip: one zip code names another city\n</issues>\n<plan>\n- City: fix the two misspelled "
              "cities\n- zip: check the zip code whose city disagrees\n</plan>\n<declined>\n- 2: the zip code or the "
              "city may be the wrong cell; nothing in the row says which\n</declined>\n<status>needs_more_work</status>"),
        reply("<issues>\n</issues>\n<status>clean</status>"),
    ]
    steps, prompts, store = chunk_loop(df, script, tmp_path, sandbox)
    assert "To add an item to your plan, send <plan>" in prompts[1]
    assert "Items #2-#2 are added to your plan" in prompts[2] and "2. [declined: the zip code" in prompts[2], prompts[2]
    registry = store.load()
    assert registry.plan == ("city: fix the two misspelled cities", "zip: check the zip code whose city disagrees")
    assert {s.number: s.state for s in registry.coverage(registry.items_for(""))} == {1: "served", 2: "declined"}
    assert steps[-1].reason == "clean"


def test_dirt_left_on_the_held_out_rows_goes_back_to_the_model_without_its_values(tmp_path):
    source = addresses(tmp_path / "addresses.csv")
    df = pd.read_csv(source, dtype=str, keep_default_na=False)
    held = choose_holdout(drop_key(source), len(df), DatasetSettings(name="x").holdout_fraction)
    row = next(i for i in held if df.loc[i, "city"] == "Columbus")
    df.loc[row, "city"] = "Colunbus"  # on a row no prompt may show
    df.loc[next(i for i in held if i != row), "state"] = "N/A"  # left as written unasked: nothing to send back
    df.to_csv(source, index=False)

    with ScriptedLLM(script=[], responder=lambda recorded: reply(CLEAN)) as llm:
        settings = DatasetSettings(name="addresses", workdir=tmp_path / "work", model="openai/test-model",
                                   api_base=llm.api_base, api_key="test", concurrency=1)
        learn(settings, source, log_level="ERROR")
        prompts = [r.prompt for r in llm.requests if "Answer in the reply format" in r.prompt]
    back = [p for p in prompts if "This chunk was chosen because: left on the held-out rows" in p]
    assert back, f"the run ended with dirt left on the held-out rows and the model never heard of it ({len(prompts)} calls)"
    why = back[0].split("This chunk was chosen because:")[1].splitlines()[0]
    assert "city" in why and "null_tokens" not in why, why
    assert not any("Colunbus" in p for p in prompts), "a held-out value reached a prompt"
    assert len(back) == 1, "each kind of leftover goes back once"


def test_a_spelling_the_drop_holds_on_many_rows_does_not_go_back_from_the_held_out_rows_and_a_rare_one_does():
    # "ENG" is on 12 rows of the drop, three of them held out: there it looks like a slip, but in a column that
    # mixes cases ("English" beside "eng") the drop says it is a spelling of its own, which the harm gate keeps;
    # asking the model about it again is a call for nothing
    rng = random.Random(3)
    languages = ["eng"] * 700 + ["English"] * 200 + ["ENG"] * 12 + ["fre"] * 88
    rng.shuffle(languages)
    df = pd.DataFrame({"id": [str(i) for i in range(1000)], "language": languages})
    plan = split_drop(df, dataset="d", drop="d.csv", chunk_size=50, holdout_fraction=0.2)
    held = list(plan.holdout)
    assert [f.column for f in detect_issues(df.loc[held]) if f.kind == "case_variants"] == ["language"]
    assert held_out_residual(plan, df, lambda rows: rows) == ()
    # where every value is written in lower case but its slips, "ENG" on 12 rows beside "eng" on 900 is a slip
    # however many rows hold it: the gate lets a function fix it, so it goes back
    lower = df.assign(language=df["language"].replace({"English": "eng"}))
    assert held_out_residual(plan, lower, lambda rows: rows) == ("case_variants:language",)
    df.loc[held[:2], "language"] = "fre "  # a stray space is not the spelling "fre" the drop holds on many rows
    assert held_out_residual(plan, df, lambda rows: rows) == ("whitespace:language",)


def test_no_chunk_goes_to_the_model_for_the_spacing_of_free_text_unless_the_user_asks():
    # contact notes are sentences over the drop; one stretch of rows holds short ones, each with a double space
    # after a full stop: over those 50 rows the column looks like values, and its spacing like dirt. The gate
    # sends back any function respacing the notes, so choosing that chunk for it costs a model call for nothing.
    notes = ["Wants a demo for the sales team. Call back on Tuesday mornings, before ten."] * 1000
    notes[500:550] = ["Signed.  Paid."] * 50
    df = pd.DataFrame({"id": [str(i) for i in range(1000)], "city": ["Bend"] * 1000, "notes": notes})

    def reasons(**kwargs) -> list[str]:
        plan = plan_chunks(df, dataset="d", drop="d.csv", chunk_size=50, budget=4, holdout_fraction=0.1,
                           ask_model=True, **kwargs)
        return [c.reason for c in plan.chunks if c.reason]

    assert not any("whitespace:notes" in r for r in reasons())
    assert any("whitespace:notes" in r for r in reasons(spacing_asked=True)), "asked, the spacing is the user's"


def test_a_learning_run_stops_asking_the_model_once_its_token_budget_is_spent(tmp_path):
    source = addresses(tmp_path / "addresses.csv")
    asking = ('<issues>\n- city: rare spellings\n</issues>\n<query>df["city"].value_counts().tail(5)</query>')

    with ScriptedLLM(script=[], responder=lambda recorded: reply(asking, prompt_tokens=2000, completion_tokens=100)) as llm:
        settings = DatasetSettings(name="addresses", workdir=tmp_path / "work", model="openai/test-model",
                                   api_base=llm.api_base, api_key="test", concurrency=1, token_budget=5000)
        outcome = learn(settings, source, log_level="ERROR")
        calls = [r for r in llm.requests if "Answer in the reply format" in r.prompt]
    # 2,100 tokens a call: the third passes 5,000, and neither that chunk nor the drop asks again
    assert len(calls) == 3, len(calls)
    assert "token budget spent" in outcome.stopped
    assert outcome.module.exists(), "a run out of budget still ends with a module"


def test_a_query_sees_the_rows_as_the_functions_so_far_clean_them(tmp_path, sandbox):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    ask = '<issues>\n- city: rare spellings\n</issues>\n<query>df["city"].isin(["Chicgo", "Seatle"]).sum()</query>'
    script = [reply(f"<issues>\n- city: misspellings\n</issues>\n<code>\n```python\n{FIX_CITY}```\n</code>\n"
                    "<status>needs_more_work</status>"), reply(ask), reply(CLEAN)]
    _, prompts, store = chunk_loop(df, script, tmp_path, sandbox)
    assert [e.function.name for e in store.load().entries] == ["fix_city_spellings"]
    answer = prompts[2].split("returned:")[1].strip().splitlines()[0].strip()
    assert answer in ("0", "np.int64(0)"), answer  # the two misspellings are fixed already


def test_a_querys_answer_stays_in_the_prompt_after_the_next_step(tmp_path, sandbox):
    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    first = '<issues>\n- city: rare spellings\n</issues>\n<query>df["city"].nunique()</query>'
    second = '<issues>\n- state: codes\n</issues>\n<query>sorted(df["state"].unique())</query>'
    _, prompts, _ = chunk_loop(df, [reply(first), reply(second), reply(CLEAN)], tmp_path, sandbox)
    assert "## Your earlier queries" not in prompts[1], "the one answer is in the feedback, shown once"
    earlier = prompts[2].split("## Your earlier queries on this chunk")[1].split("\n## ")[0]
    assert '`df["city"].nunique()` returned:' in earlier and "10" in earlier  # ten cities: the model keeps its answer
    assert "sorted(df" in prompts[2].split("## The answer to your query")[1]


def test_a_new_plan_line_keeps_the_function_serving_it_when_another_chunk_took_its_number(tmp_path, sandbox):
    from smolclean_dagster.core.analysts import make_analyst
    from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
    from smolclean_dagster.core.registry import RegistryStore

    df = pd.read_csv(addresses(tmp_path / "a.csv"), dtype=str, keep_default_na=False)
    store = RegistryStore(tmp_path / "registry.json", "a")
    store.update(lambda reg: reg.with_plan(("state: write every state as its two-letter code",), extend=False))
    script = [  # shown item 1, the model numbers its new line 2
        reply("<issues>\n- city: misspellings\n</issues>\n<plan>\n- city: fix the two misspelled cities\n</plan>\n"
              f"<code>\n```python\n{FIX_CITY}```\n</code>\n<serves>2</serves>\n<status>needs_more_work</status>"),
        reply("<issues>\n</issues>\n<declined>\n- 1: every state is a code already\n- 2: nothing in the row says which "
              "cell is wrong\n</declined>\n<status>clean</status>"),
    ]

    def answer(request):  # while the model writes that reply, another chunk of the wave adds the plan's #2
        store.update(lambda reg: reg.with_plan(("zip: check the zip code whose city disagrees",), extend=True))
        return script.pop(0)

    with ScriptedLLM(responder=lambda request: answer(request) if len(script) == 2 else script.pop(0)) as llm:
        analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="test",
                               cache_dir=tmp_path / "cache", backoff_s=0.01, backoff_max_s=0.05, timeout_s=5.0)
        work = ChunkWork(dataset="a", drop="a.csv", chunk_id="c0", rows=df.iloc[:50].reset_index(drop=True),
                         holdout=df.iloc[2400:].reset_index(drop=True), reference=df.iloc[:2400].reset_index(drop=True),
                         sample=df.iloc[:2400].reset_index(drop=True))
        list(run_chunk(work, analyst, store, sandbox, LoopSettings(max_steps=4)))
        prompts = [r.prompt for r in llm.requests]
    assert "1. [OPEN] state: write every state" in prompts[0] and "2. [" not in prompts[0]
    registry = store.load()
    assert registry.plan == ("state: write every state as its two-letter code",
                             "zip: check the zip code whose city disagrees", "city: fix the two misspelled cities")
    states = {s.number: s.state for s in registry.coverage(registry.items_for(""))}
    assert states == {1: "declined", 2: "declined", 3: "served"}, states
    assert "3. [served by fix_city_spellings] city: fix the two misspelled cities" in prompts[1], prompts[1]


def test_dirt_left_on_the_held_out_rows_goes_back_to_the_model_only_where_a_chunk_shows_that_kind():
    from smolclean_dagster.core.plan import select_wave

    df = pd.DataFrame({"id": [str(i) for i in range(500)], "style": ["IPA"] * 500})
    plan = split_drop(df, dataset="d", drop="d.csv", chunk_size=50, holdout_fraction=0.2)
    first = select_wave(plan, {0: ("rare_variants:style",)}, wave_size=2, budget=12, ask_model=True)
    quiet = {i: () for i in range(1, 10)}
    # no chunk, analysed or left, shows the kind left on the held-out rows: the model would see none of it
    done = select_wave(first, quiet, wave_size=2, budget=12, ask_model=True, held_out=("case_variants:style",))
    assert done.done and done.stopped == "no new dirt"
    # the analysed chunk showed that kind: its function may be a table the held-out rows defeat, so it goes back
    again = select_wave(first, quiet, wave_size=2, budget=12, ask_model=True, held_out=("rare_variants:style",))
    [chunk] = [c for c in again.chunks if c.wave == 2]
    assert chunk.reason.startswith("left on the held-out rows by the functions so far: rare_variants:style")
