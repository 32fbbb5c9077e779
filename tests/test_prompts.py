"""Prompt rendering: budgets, what goes first when the registry overflows, and strict templates."""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from smolclean_dagster.core.analysts.base import AnalysisRequest, RegisteredSummary
from smolclean_dagster.core.analysts.prompts import analysis_messages, merge_messages, registry_for_prompt, render
from smolclean_dagster.core.errors import AnalystError
from smolclean_dagster.core.validate import COST_LIMIT


def summary(i: int, column: str) -> RegisteredSummary:
    return RegisteredSummary(
        name=f"fix_{i}", columns=(column,),
        docstring=f"Fix number {i} in `{column}`.\n\n" + "A long explanation of the mapping table. " * 10,
    )


def test_every_function_stays_listed_and_the_relevant_and_newest_keep_their_full_docstrings():
    registry = [summary(0, "city"), summary(1, "name"), summary(2, "name"), summary(3, "spend")]
    full = registry_for_prompt(registry, 100_000)
    assert all(e.complete for e in full)
    budget = int(sum(len(e.name) + len(e.text) for e in full) * 0.6)  # room for two full docstrings
    entries = registry_for_prompt(registry, budget, focus_columns={"city"})
    assert [e.name for e in entries] == ["fix_0", "fix_1", "fix_2", "fix_3"]  # nothing evicted, order kept
    complete = {e.name for e in entries if e.complete}
    assert "fix_0" in complete  # touches a column the detectors still flag
    assert "fix_3" in complete  # then the newest
    assert "fix_1" not in complete and "fix_2" not in complete
    assert all(e.text.startswith("Fix number") for e in entries)  # the rest keep their first line


def test_a_tiny_budget_still_names_every_function():
    registry = [summary(i, "city") for i in range(30)]
    entries = registry_for_prompt(registry, 200)
    assert [e.name for e in entries] == [f"fix_{i}" for i in range(30)]
    assert entries[-1].text == ""


def test_rows_past_the_budget_are_counted_not_silently_dropped():
    chunk = pd.DataFrame({"note": [f"row {i} " + "x" * 50 for i in range(40)]})
    request = AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk)
    user = analysis_messages(request, rows_budget=600)[1]["content"]
    shown = int(re.search(r"## The rows \((\d+) of 40,", user).group(1))
    assert 0 < shown < 40 and f"{40 - shown} more rows not shown" in user
    assert "row 0 " in user and f"row {shown} " not in user


def test_values_are_shown_exactly_as_written():
    chunk = pd.DataFrame({"note": ["a <b> & c", None]})
    user = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk))[1]["content"]
    assert '["note"]\n["a <b> & c"]\n[null]' in user


def test_a_ready_made_function_is_described_with_the_values_spacing_as_written():
    from smolclean_dagster.core.analysts.base import Candidate

    offered = Candidate(
        name="strip_whitespace_beer_name", columns=("beer_name",),
        docstring="Strip whitespace in 'beer_name' ('Yeti  Imperial Stout' -> 'Yeti Imperial Stout').\n\n"
                  "    Every other value is kept.",
        evidence="1 cells with repeated spaces (e.g. 'Yeti  Imperial Stout')",
        on_labels="it breaks 1 labelled cell(s): row 955 'beer_name': the user confirmed 'Yeti  Imperial Stout', "
                  "it writes 'Yeti Imperial Stout'")
    chunk = pd.DataFrame({"beer_name": ["Yeti  Imperial Stout", "Lasso"]})
    user = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk,
                                             candidates=(offered,)))[1]["content"]
    line = next(line for line in user.splitlines() if line.startswith("- `strip_whitespace_beer_name`"))
    # what the function changes shows only with the double space kept, in every part of its line
    assert "('Yeti  Imperial Stout' -> 'Yeti Imperial Stout'). Every other value is kept." in line
    assert "confirmed 'Yeti  Imperial Stout', it writes 'Yeti Imperial Stout'" in line
    assert "(e.g. 'Yeti  Imperial Stout')" in line


def test_typed_values_are_shown_as_values_not_as_empty_cells():
    # After a function turned prices into numbers (and tags into arrays), the model must see numbers and
    # arrays, counted as filled cells, and told apart from the text "12.5".
    chunk = pd.DataFrame({"price": [12.5, 3.0, None, "12.5"], "tags": [["a", "b"], [], None, "x"],
                          "ok": [True, False, True, None]}, dtype=object)
    reference = chunk.copy()
    user = analysis_messages(
        AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk, reference=reference)
    )[1]["content"]
    assert '[12.5, ["a", "b"], true]' in user and '["12.5", "x", null]' in user
    price_row = next(line for line in user.splitlines() if line.startswith("| price |"))
    assert price_row.split("|")[2].strip() == "3"  # three filled cells: 12.5, 3.0 and the text "12.5"
    values = next(line for line in user.splitlines() if line.startswith("- price ("))
    assert "12.5 x1" in values and '"12.5" x1' in values
    # A column of text where a function wrote real nulls: pandas' string columns hold them as NaN.
    emails = pd.DataFrame({"email": pd.array(["a@x.org", None, "b@y.org"], dtype="str")})
    user = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=emails))[1]["content"]
    email_row = next(line for line in user.splitlines() if line.startswith("| email |"))
    assert [c.strip() for c in email_row.split("|")[2:4]] == ["2", "1"]


def test_a_template_value_left_out_is_an_error_not_a_blank():
    with pytest.raises(AnalystError, match="prompts/consolidation.yaml"):
        render("consolidation", dataset="d", functions=[], allowed_imports=[])  # no `instructions`


def test_the_merge_prompt_states_what_the_analysis_prompt_states_and_the_limit_reads_the_same_everywhere():
    from pathlib import Path

    analysis = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=pd.DataFrame({"a": ["x"]})))
    merge = merge_messages("d", [])
    for system in (analysis[0]["content"], merge[0]["content"]):
        assert "JSON numbers, booleans, arrays, objects\n  and nulls as Python values" in system  # typed values
        assert "module constants `NAME = ...` whose value is a literal" in system
        assert f"costing more than {COST_LIMIT} (CPU time per cell it touches" in system
    root = Path(__file__).parents[1]
    docs = "\n".join(p.read_text(encoding="utf-8") for p in [root / "README.md", *(root / "docs").glob("*.md")])
    assert f"**{COST_LIMIT}**" in docs and "us per row" not in docs


def test_the_prompt_examples_are_not_the_instructed_benchmark_declines():
    system = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1,
                                               chunk=pd.DataFrame({"a": ["x"]})))[0]["content"].lower()
    for decline in ("duplicate", "exchange rate", "eur", "sort"):
        assert not re.search(rf"\b{decline}", system), decline


def test_every_template_carries_a_version_the_changelog_explains():
    """A learning run records the template versions it used; each version has its line in prompts/CHANGELOG.md."""
    from pathlib import Path

    from smolclean_dagster.core.analysts.prompts import template_versions

    versions = template_versions()
    assert set(versions) == {"analysis", "consolidation"}
    changelog = (Path(__file__).resolve().parents[1] / "prompts" / "CHANGELOG.md").read_text(encoding="utf-8")
    for name, version in versions.items():
        section = changelog[changelog.index(f"## {name}\n"):]
        assert f"- **{version}**:" in section.split("\n## ")[0], name


def system_prompt() -> str:
    return analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1,
                                             chunk=pd.DataFrame({"a": ["x"]})))[0]["content"]


def test_the_harm_rules_are_stated_with_the_numbers_the_gate_applies():
    # the model learned "a value on 5 rows is presumed right" only from rejections; each rule is stated with the
    # number core/harm.py applies, so a changed constant changes the prompt with it
    from smolclean_dagster.core import harm
    from smolclean_dagster.core.detectors.case_variants import CONVENTION_SHARE, KEEP_CELLS, KEEP_SHARE
    from smolclean_dagster.core.detectors.cells import DOMINANT_SHAPE

    system = " ".join(system_prompt().split())
    assert f"it rewrites a value the drop holds on {KEEP_CELLS} rows or more wherever that value stands" in system
    # ... but a case slip, as the case rule and the gate judge it (a model left "tx" on 15 rows beside "TX" on 324)
    assert (f"where {CONVENTION_SHARE:.0%} of the column's cells hold values whose usual spelling is in one and the "
            f"same case, that rule writes a spelling in another case on less than {KEEP_SHARE:.0%} of its value's "
            f"rows in that case, as a slip") in system
    assert f"where the column mixes cases, \"eng\" beside \"English\", a spelling on {KEEP_CELLS} rows or more stays" in system
    assert (f"more than {harm.HARM_SHARE:.0%} of the cells it changes (and {harm.MIN_HARM_CELLS} or more) held a "
            f"value that looks valid: a value on {harm.COMMON_CELLS} rows or more turned into another of the same "
            f"shape") in system
    assert f"unless the new value is on {harm.RARER} times as many rows" in system
    assert f"(the shape {DOMINANT_SHAPE:.0%} of its cells share)" in system
    assert (f"more than {harm.CONTRADICTED_SHARE:.0%} of its changes (and {harm.MIN_HARM_CELLS} or more) write a "
            "value the other rows of the same entity contradict") in system
    assert "strip the unit off numbers where the column's bare numbers carry more decimals" in system
    assert "Whatever it serves, it is sent back when the module with it added is no longer idempotent" in system
    assert "an item of your own plan is no such permission" in system


def entity_prompt(reference: pd.DataFrame) -> str:
    user = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=reference.head(5),
                                             reference=reference))[1]["content"]
    return " ".join(user.split("## Rows of one entity")[1].split("\n## ")[0].split())


def test_the_prompt_names_the_entity_the_gate_judges_by_and_never_a_last_name_or_a_mostly_blank_column():
    from smolclean_dagster.core.entities import MIN_FILLED_SHARE, MIN_GROUP, MIN_GROUPED_SHARE

    flights = pd.DataFrame({"flight": [f"AA-{i // 4}" for i in range(40)],
                            "dep": [f"{7 + i // 4}:16 a.m." for i in range(40)],
                            "src": ["aa", "ua", "flightview", "orbitz"] * 10})
    assert "Rows with the same `flight` describe one thing, and they agree on `dep`" in entity_prompt(flights)
    system = " ".join(system_prompt().split())
    assert (f"groups of {MIN_GROUP} rows or more cover {MIN_GROUPED_SHARE:.0%} of the drop" in system
            and f"a column filled on fewer than {MIN_FILLED_SHARE:.0%} of the rows names none" in system
            and "a part of a person's name (a last or first name) is never one" in system)
    # households of three people: a surname groups a household's rows, which agree on the city, but people in other
    # cities share it; a first name left to group the rows where the surname is blank is no entity either
    rng = random.Random(5)
    rows = []
    for _ in range(600):
        surname, city = f"Name{rng.randrange(1000)}", f"City{rng.randrange(100)}"
        rows += [{"first_name": f"P{rng.randrange(900)}", "last_name": surname, "city": city} for _ in range(3)]
    people = pd.DataFrame(rows)
    assert "No column names an entity" in entity_prompt(people)
    assert "No column names an entity" in entity_prompt(people.rename(columns={"last_name": "Surname"}))
    blank = people.assign(last_name=[v if rng.random() >= 0.7 else "" for v in people["last_name"]])
    assert "No column names an entity" in entity_prompt(blank)
    # a household column blank on three rows in five: its filled groups agree, but it names the entity of few rows
    households = [f"H{i // 3}" for i in range(len(people))]
    sparse = people.assign(last_name=[h if (i // 3) % 5 < 2 else "" for i, h in enumerate(households)])
    assert "No column names an entity" in entity_prompt(sparse.rename(columns={"last_name": "household"}))
    # the same column filled on every row is the entity: the blanks were what said nothing
    full = people.assign(last_name=households).rename(columns={"last_name": "household"})
    assert "Rows with the same `household` describe one thing" in entity_prompt(full)


def test_module_constants_share_one_namespace_and_each_functions_constants_are_listed():
    from smolclean_dagster.core.functions import CleaningFunction
    from smolclean_dagster.core.loop import summarise_registry
    from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry

    code = ('import re\n\nNON_ASCII = re.compile("[^\\\\x00-\\\\x7f]")\nNAME_FIXES = {"jon": "John"}\n\n\n'
            'def strip_non_ascii(df):\n    """Remove non-ASCII characters from `name`."""\n    df = df.copy()\n'
            '    df["name"] = df["name"].str.replace(NON_ASCII, "", regex=True)\n    return df\n')
    fn = CleaningFunction.from_code(code, columns=["name"])
    registry = Registry(dataset="d").with_entry(RegistryEntry(function=fn, provenance=Provenance(
        drop="d.csv", chunk="c0", step=1, analyst="llm")))
    messages = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=pd.DataFrame({"name": ["x"]}),
                                                 registry=summarise_registry(registry)))
    assert "- `strip_non_ascii` [name] (constants NON_ASCII, NAME_FIXES): Remove non-ASCII" in messages[1]["content"]
    system = " ".join(messages[0]["content"].split())
    assert "Every function's constants share one namespace, the module's: a constant name another function already has" in system


def test_a_query_answer_is_shown_as_an_answer_and_only_a_rejection_asks_for_a_corrected_function():
    chunk = pd.DataFrame({"city": ["Chicago", "Chicgo"]})
    answered = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=2, chunk=chunk,
                                                 answer=('df["city"].value_counts()', "city\nChicago    2")))[1]["content"]
    section = answered.split("## The answer to your query\n")[1].split("\n## ")[0]
    assert section.startswith("Your query `df[\"city\"].value_counts()` over the drop's rows returned:\ncity\nChicago    2")
    assert "## What happened to your previous reply" not in answered and "corrected" not in answered
    rejected = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=2, chunk=chunk, sent_back="fix_city",
                                                 feedback="function fix_city was rejected: it would do harm"))[1]["content"]
    assert "## The answer to your query" not in rejected
    assert "it would do harm\nSend `fix_city` corrected" in rejected
    noted = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=2, chunk=chunk,
                                              feedback="Items #2-#2 are added to your plan"))[1]["content"]
    assert "Items #2-#2 are added" in noted and "corrected" not in noted
    # and the model is told what an answer looks like: no blank label for an empty text or a repeated key
    from smolclean_dagster.core.queries import EMPTY

    system = " ".join(system_prompt().split())
    assert "comes back in your next step as an answer, not as a rejection" in system
    assert (f"every row's whole index label (a key repeated on several rows is written on each), an empty text as "
            f"{EMPTY}") in system


def test_an_item_may_be_declined_alone_and_a_plan_is_shared_by_the_chunks_of_a_wave():
    system = " ".join(system_prompt().split())
    assert "A decline may come beside a function or alone: a reply holding only <issues> and <declined>" in system
    from smolclean_dagster.core.instructions import ItemState

    user = analysis_messages(AnalysisRequest(dataset="d", chunk_id="c", step=2, chunk=pd.DataFrame({"a": ["x"]}),
                                             planned=True, items=(ItemState(number=1, text="a: trim"),)))[1]["content"]
    assert "Other chunks of this file share the plan" in " ".join(user.split())
