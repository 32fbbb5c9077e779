"""Prompt rendering: budgets, what goes first when the registry overflows, and strict templates."""

from __future__ import annotations

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
