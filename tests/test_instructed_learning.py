"""The user's instructions carried out with a model: every item served by a function or declined with a
reason, tracked through the Dagster flow, over real HTTP to a scripted model that acts on the prompts."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import dagster as dg
import pandas as pd

from instructed_model import InstructedModel
from llm_server import ScriptedLLM
from smolclean_dagster.core.instructions import split_instructions
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.core.steps import FinalStep
from smolclean_dagster.learning.embedded import learn
from smolclean_dagster.settings import DatasetSettings

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]


def function(name: str, doc: str, body: str) -> str:
    return f'import pandas as pd\n\n\ndef {name}(df: pd.DataFrame) -> pd.DataFrame:\n    """{doc}"""\n    df = df.copy()\n{body}    return df\n'


SIX = {
    "names in upper case": function("names_upper", "Upper-case `name`.", '    df["name"] = df["name"].str.upper()\n'),
    "state codes": function("state_upper", "Upper-case the `state` codes.", '    df["state"] = df["state"].str.upper()\n'),
    "product code": function(
        "sku_codes", "Write `code` as SKU- and the code in upper case (ab12 -> SKU-AB12).",
        '    code = df["code"].str.upper()\n'
        '    df["code"] = code.where(code.str.startswith("SKU-"), "SKU-" + code)\n'),
    "tier as a number": (
        "import pandas as pd\n\nTIERS = {\"bronze\": \"1\", \"silver\": \"2\", \"gold\": \"3\"}\n\n\n"
        "def tier_numbers(df: pd.DataFrame) -> pd.DataFrame:\n"
        '    """`tier` as a number: bronze 1, silver 2, gold 3."""\n'
        "    df = df.copy()\n"
        '    df["tier"] = df["tier"].map(TIERS).fillna(df["tier"])\n'
        "    return df\n"),
    "emails in lower case": function("emails_lower", "Lower-case `email`.", '    df["email"] = df["email"].str.lower()\n'),
    "scores rounded": function(
        "round_scores", "Round `score` to a whole number.",
        '    df["score"] = pd.to_numeric(df["score"]).round().astype(int).astype(str)\n'),
}
SIX_TEXT = """Please clean this export:
- names in upper case
- state codes in upper case
- product code as SKU- and the code in upper case (ab12 -> SKU-AB12)
- tier as a number: bronze 1, silver 2, gold 3
- emails in lower case
- scores rounded to whole numbers
"""


def messy_accounts(path):
    """90 rows with whitespace, mixed dates, currency amounts and boolean spellings (the rules see those),
    and values only the instructions say how to write."""
    first = ["ann", "bob", "cleo", "dev", "eli", "fay", "gus", "hana", "ivo", "jo"]
    rows = []
    for i in range(90):
        name = f"{first[i % 10]} lee{i}"
        rows.append({
            "id": str(i + 1),
            "name": f"  {name} " if i % 4 == 0 else name,
            "signup": f"2024-{i % 12 + 1:02d}-{i % 27 + 1:02d}" if i % 3 else f"{i % 12 + 1:02d}/{i % 27 + 1:02d}/2024",
            "amount": f"${(i * 37) % 2000 + 10:,}.50" if i % 2 else f"{(i * 37) % 2000 + 10}.50",
            "active": ["yes", "no", "Y", "N", "true", "false"][i % 6],
            "state": ["ca", "ny", "tx", "wa"][i % 4],
            "code": f"ab{i:02d}",
            "tier": ["bronze", "silver", "gold"][i % 3],
            "email": f"{first[i % 10].title()}.Lee{i}@Example.com",
            "score": f"{(i * 7) % 100}.{i % 10}",
        })
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_with_a_model_configured_the_default_analyst_carries_out_every_instruction(tmp_path):
    data = messy_accounts(tmp_path / "accounts.csv")
    (tmp_path / "instructions.md").write_text(SIX_TEXT, encoding="utf-8")
    model = InstructedModel(code=SIX, adopt=("strip_whitespace", "dates_to_iso", "normalize_numbers", "unify_booleans"))
    with ScriptedLLM(responder=model) as llm:
        env = {**os.environ, "SMOLCLEAN_MODEL": "openai/test-model", "SMOLCLEAN_API_BASE": llm.api_base,
               "SMOLCLEAN_API_KEY": "k"}
        proc = subprocess.run(
            [*SMOLCLEAN, "learn", str(data), "--name", "accounts", "--workdir", str(tmp_path / "w"),
             "--instructions", f"@{tmp_path / 'instructions.md'}", "--concurrency", "1"],
            capture_output=True, text=True, timeout=600, env=env,
        )
    assert proc.returncode == 0, proc.stderr
    assert "6 instructions: 6 served" in proc.stdout
    # The model was asked at every step, and the rules' ready-made functions were offered to it.
    assert model.calls >= 7 and any("## Ready-made functions" in p for p in model.prompts)
    out = pd.read_parquet(tmp_path / "w" / "cleaned" / "accounts" / "accounts.parquet")
    raw = pd.read_csv(data, dtype=str, keep_default_na=False)
    assert out["name"].tolist() == raw["name"].str.strip().str.upper().tolist()
    assert set(out["state"]) == {"CA", "NY", "TX", "WA"}
    assert out["code"].tolist() == [f"SKU-AB{i:02d}" for i in range(90)]
    assert out["tier"].tolist() == [["1", "2", "3"][i % 3] for i in range(90)]
    assert out["email"].tolist() == raw["email"].str.lower().tolist()
    assert out["score"].str.fullmatch(r"\d+").all()
    assert out["signup"].str.fullmatch(r"2024-\d{2}-\d{2}").all()  # the dates, through an adopted rule
    report = (tmp_path / "w" / "modules" / "accounts" / "report.md").read_text(encoding="utf-8")
    assert "## Instructions" in report and "served by `tier_numbers`" in report


def test_a_small_file_gets_the_steps_to_serve_twelve_instructions(tmp_path):
    columns = [f"c{k:02d}" for k in range(1, 13)]
    pd.DataFrame({c: [f"{c}-value {i}" for i in range(60)] for c in columns}).to_csv(tmp_path / "wide.csv", index=False)
    text = "\n".join(f"{k}. column {c} in upper case" for k, c in enumerate(columns, 1))
    code = {f"column {c} ": function(f"upper_{c}", f"Upper-case `{c}`.", f'    df["{c}"] = df["{c}"].str.upper()\n')
            for c in columns}
    model = InstructedModel(code=code)
    with ScriptedLLM(responder=model) as llm:
        settings = DatasetSettings(name="wide", workdir=tmp_path / "w", instructions=text, model="openai/test-model",
                                   api_base=llm.api_base, api_key="k", concurrency=1)
        outcome = learn(settings, tmp_path / "wide.csv", dg.DagsterInstance.ephemeral())
    assert [s.state for s in outcome.instructions] == ["served"] * 12
    assert outcome.stopped.startswith("every instruction item served or declined")
    assert model.calls <= 15
    out = pd.read_parquet(outcome.cleaned)
    assert all(out[c].str.isupper().all() for c in columns)


def test_instructions_alone_start_the_agent_on_a_file_the_detectors_find_clean(tmp_path):
    pd.DataFrame({"id": [str(i) for i in range(40)], "city": ["Bend", "Gary", "Reno", "Waco"] * 10}).to_csv(
        tmp_path / "cities.csv", index=False)
    model = InstructedModel(code={"city": function("city_upper", "Upper-case `city`.",
                                                   '    df["city"] = df["city"].str.upper()\n')})
    with ScriptedLLM(responder=model) as llm:
        settings = DatasetSettings(name="cities", workdir=tmp_path / "w", instructions="Write every city in upper case.",
                                   model="openai/test-model", api_base=llm.api_base, api_key="k")
        outcome = learn(settings, tmp_path / "cities.csv", dg.DagsterInstance.ephemeral())
    assert outcome.chunks >= 1 and model.calls >= 1
    assert [s.state for s in outcome.instructions] == ["served"]
    assert pd.read_parquet(outcome.cleaned)["city"].tolist() == ["BEND", "GARY", "RENO", "WACO"] * 10


def test_clean_is_refused_while_an_item_is_open_and_a_declined_item_keeps_its_reason(tmp_path, sandbox):
    rows = pd.DataFrame({"city": ["Bend", "Gary"] * 10})
    work = ChunkWork(dataset="d", drop="d.csv", chunk_id="c0", rows=rows, holdout=rows.iloc[:4].reset_index(drop=True))
    text = "- city in upper case\n- remove duplicate rows"
    model = InstructedModel(
        code={"city": function("city_upper", "Upper-case `city`.", '    df["city"] = df["city"].str.upper()\n')},
        decline={"duplicate": "removing duplicates needs other rows, not a row-level fix"}, clean_first=True,
    )
    store = RegistryStore(tmp_path / "registry.json", "d")
    from smolclean_dagster.core.analysts import make_analyst

    with ScriptedLLM(responder=model) as llm:
        analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="k", cache_dir=None)
        steps = list(run_chunk(work, analyst, store, sandbox,
                               LoopSettings(max_steps=10, instructions=text, items=split_instructions(text))))
    refused = model.prompts[1]
    assert "You said clean, but these instruction items are still open: #1 'city in upper case'; #2" in refused
    final = steps[-1]
    assert isinstance(final, FinalStep) and final.reason == "clean"
    assert [(s.state, s.functions, s.reason) for s in final.items] == [
        ("served", ("city_upper",), ""),
        ("declined", (), "removing duplicates needs other rows, not a row-level fix"),
    ]


def test_a_second_function_under_a_taken_name_or_constant_never_lands(tmp_path, sandbox):
    rows = pd.DataFrame({"city": ["bend", "gary"] * 10, "state": ["or", "in"] * 10})
    work = ChunkWork(dataset="d", drop="d.csv", chunk_id="c1", rows=rows, holdout=rows.iloc[:4].reset_index(drop=True))
    first = function("upper_city", "Upper-case `city`.", '    df["city"] = df["city"].str.upper()\n')
    twin = function("upper_city", "Upper-case `city` again.", '    df["city"] = df["city"].str.strip().str.upper()\n')
    clash_a = 'import pandas as pd\n\nCODES = {"or": "OR"}\n\n\ndef state_codes(df):\n    """`state` codes."""\n' \
              '    df = df.copy()\n    df["state"] = df["state"].map(CODES).fillna(df["state"])\n    return df\n'
    clash_b = clash_a.replace('{"or": "OR"}', '{"in": "IN"}').replace("state_codes", "more_state_codes")
    from llm_server import reply
    from smolclean_dagster.core.analysts import make_analyst

    def fenced(code):
        return reply(f"<issues>\n</issues>\n<code>\n```python\n{code}```\n</code>\n<status>needs_more_work</status>")

    store = RegistryStore(tmp_path / "registry.json", "d")
    with ScriptedLLM([fenced(first), fenced(twin), fenced(clash_a), fenced(clash_b),
                      reply("<status>clean</status>")]) as llm:
        analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="k", cache_dir=None)
        steps = list(run_chunk(work, analyst, store, sandbox, LoopSettings(max_steps=10)))
        assert "already has a function named `upper_city`" in llm.requests[2].prompt
        assert "`CODES` is already defined by `state_codes`" in llm.requests[4].prompt
    assert [e.function.name for e in store.load().entries] == ["upper_city", "state_codes"]
    assert steps[-1].reason == "clean"


def test_two_runs_at_concurrency_two_give_the_same_module(tmp_path):
    import random

    rows = []
    for i in range(80):
        rows.append({
            "id": str(i),
            "name": f"  ann lee{i} " if i < 20 and i % 2 else f"ann lee{i}",
            "city": ("bend" if i % 3 else "Bend") if 20 <= i < 40 else "Bend",
            "score": "N/A" if 40 <= i < 60 and i % 4 == 0 else str(i),
            "code": ("x" + str(i)).upper() if i < 60 else f"x{i}",
        })
    pd.DataFrame(rows).to_csv(tmp_path / "people.csv", index=False)
    fixes = {
        "'name' have stray whitespace": function("strip_name", "Strip `name`.", '    df["name"] = df["name"].str.strip()\n'),
        "'city' are written in a different case": function(
            "city_title", "Title-case `city`.", '    df["city"] = df["city"].str.title()\n'),
        "'score' spell a missing value": function(
            "score_nulls", "Null tokens in `score` as null.",
            '    df["score"] = df["score"].where(~df["score"].isin(["N/A"]), None)\n'),
        "'code' are written in a different case": function(
            "code_upper", "Upper-case `code`.", '    df["code"] = df["code"].str.upper()\n'),
    }
    chance = random.Random(7)

    def respond(recorded):
        from llm_server import reply

        prompt = recorded.prompt
        delay = chance.uniform(0, 0.6)  # chunks of a wave finish in a different order each run
        if "Merge them into ONE function" in prompt:
            return reply("<status>keep</status>", delay_s=delay)
        found = prompt.split("## What the detectors still find")[1].split("\n## ")[0]
        module = prompt.split("## Functions already in the module")[1].split("\n## ")[0]
        for key, source in fixes.items():
            name = re.search(r"^def (\w+)", source, re.MULTILINE).group(1)
            if key in found and f"`{name}`" not in module:
                return reply(f"<issues>\n</issues>\n<code>\n```python\n{source}```\n</code>\n"
                             "<status>needs_more_work</status>", delay_s=delay)
        return reply("<issues>\n</issues>\n<status>clean</status>", delay_s=delay)

    modules = []
    for run in ("first", "second"):
        with ScriptedLLM(responder=respond) as llm:
            settings = DatasetSettings(name="people", workdir=tmp_path / run, analyst="llm", model="openai/test-model",
                                       api_base=llm.api_base, api_key="k", chunk_size=20, concurrency=2,
                                       planning_interval=3, llm_cache=False)
            outcome = learn(settings, tmp_path / "people.csv")  # its own instance in the workdir: chunks run in processes
        text = outcome.module.read_text(encoding="utf-8")
        modules.append(re.sub(r"Updated: .*", "", text))
    assert modules[0] == modules[1]
    assert all(f"def {n}(" in modules[0] for n in ("strip_name", "score_nulls")), \
        re.findall(r"^def (\w+)", modules[0], re.MULTILINE)


def test_a_value_the_user_names_may_become_null_and_one_no_item_names_is_still_sent_back(tmp_path, sandbox):
    rows = pd.DataFrame({"id": [str(i) for i in range(24)],
                         "status": ["active", "unknown", "inactive", "Unknown", "N/A", "active"] * 4})
    work = ChunkWork(dataset="d", drop="d.csv", chunk_id="c0", rows=rows, holdout=rows.iloc[:6].reset_index(drop=True))
    text = "Write the status 'unknown' as a missing value (null)."
    too_much = function("status_nulls", "Null the statuses that are not active in `status`.",
                        '    df["status"] = df["status"].where(df["status"] == "active", None)\n')
    named = function("status_unknown_as_null", "Write `status` 'unknown' (any case) and null tokens as null.",
                     '    df["status"] = df["status"].where(~df["status"].str.lower().isin(["unknown", "n/a"]), None)\n')
    from llm_server import reply
    from smolclean_dagster.core.analysts import make_analyst

    def serving(code):
        return reply(f"<issues>\n</issues>\n<code>\n```python\n{code}```\n</code>\n<serves>1</serves>\n"
                     "<status>needs_more_work</status>")

    store = RegistryStore(tmp_path / "registry.json", "d")
    with ScriptedLLM([serving(too_much), serving(named), reply("<status>clean</status>")]) as llm:
        analyst = make_analyst("llm", model="openai/test-model", api_base=llm.api_base, api_key="k", cache_dir=None)
        steps = list(run_chunk(work, analyst, store, sandbox,
                               LoopSettings(max_steps=5, instructions=text, items=split_instructions(text))))
        sent_back = llm.requests[1].prompt
    assert "function status_nulls was rejected: turned the non-null value 'inactive' in column 'status' into null" \
        in sent_back
    assert [e.function.name for e in store.load().entries] == ["status_unknown_as_null"]
    final = steps[-1]
    assert isinstance(final, FinalStep) and final.reason == "clean"
    assert [(s.state, s.functions) for s in final.items] == [("served", ("status_unknown_as_null",))]


def test_an_item_a_function_leaves_undone_stays_open_and_the_model_is_told_what_is_left(tmp_path):
    states = ["MO", "tx", "Ny", "wa", "CA", "Il"]
    pd.DataFrame({"site": [f"S{i:03d}" for i in range(80)],
                  "state": [states[i % len(states)] for i in range(80)]}).to_csv(tmp_path / "sites.csv", index=False)
    text = "Write the values of column 'state' in upper case."
    # the model's first function upper-cases only values written all in lower case ("Ny" and "Il" stay); asked
    # again, it writes one for the rest
    lower_only = function("upper_lower_states", "Upper-case the `state` codes written in lower case.",
                          '    df["state"] = df["state"].where(~df["state"].str.islower(), df["state"].str.upper())\n')
    rest = function("upper_states", "Upper-case every `state` code.", '    df["state"] = df["state"].str.upper()\n')
    model = InstructedModel(code={"upper case": lower_only, "column 'state'": rest})
    with ScriptedLLM(responder=model) as llm:
        settings = DatasetSettings(name="sites", workdir=tmp_path / "w", instructions=text, model="openai/test-model",
                                   api_base=llm.api_base, api_key="k", concurrency=1)
        outcome = learn(settings, tmp_path / "sites.csv", dg.DagsterInstance.ephemeral())
    (item,) = outcome.instructions
    assert item.state == "served" and item.functions == ("upper_states",), item
    # the evidence counts the cells the item asks otherwise, as the rules' candidate does
    found = model.prompts[0].split("## What the detectors still find")[1].split("\n## ")[0]
    assert "are written in another case than the upper case asked" in found, found
    told = [p for p in model.prompts if "does not serve item #1" in p]
    assert told and "'Ny'" in told[0] and "'Il'" in told[0]
    assert pd.read_parquet(outcome.cleaned)["state"].tolist() == [s.upper() for s in states] * 13 + ["MO", "TX"]


def test_a_model_takes_every_ready_made_function_it_wants_in_one_reply(tmp_path):
    rng = range(120)
    pd.DataFrame({"site": [f"S{i:03d}" for i in rng], "state": [["mo", "TX", "ny", "WA"][i % 4] for i in rng],
                  "phone": [["(555) 123-45{:02d}", "555.987.65{:02d}", "555-222-33{:02d}"][i % 3].format(i % 100)
                            for i in rng],
                  "tier": [["gold", "", "silver"][i % 3] for i in rng]}).to_csv(tmp_path / "sites.csv", index=False)
    text = ("Write the values of column 'state' in upper case. Write the digits of column 'phone' in the layout "
            "'999-999-9999'. Write the empty cells of column 'tier' as 'unknown'.")
    model = InstructedModel(code={}, adopt_together={"unify_case_state": "'state'", "rewrite_digit_layout_phone": "'phone'",
                                                     "write_empty_as_tier": "'tier'"})
    with ScriptedLLM(responder=model) as llm:
        settings = DatasetSettings(name="sites", workdir=tmp_path / "w", instructions=text, model="openai/test-model",
                                   api_base=llm.api_base, api_key="k", concurrency=1)
        outcome = learn(settings, tmp_path / "sites.csv", dg.DagsterInstance.ephemeral())
    assert [s.state for s in outcome.instructions] == ["served"] * 3
    assert model.calls == 1, "one reply took the three functions and said clean"
    out = pd.read_parquet(outcome.cleaned)
    assert set(out["state"]) == {"MO", "TX", "NY", "WA"} and set(out["tier"]) == {"gold", "silver", "unknown"}
    assert out["phone"].str.fullmatch(r"555-\d{3}-\d{4}").all()
