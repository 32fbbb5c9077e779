"""Instruction items: how the user's words are split, and how coverage is told."""

from __future__ import annotations

import pandas as pd

from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.instructions import Declined, coverage_line, split_instructions, stop_reason
from smolclean_dagster.core.registry import Provenance, Registry, RegistryEntry
from smolclean_dagster.sandbox import check_function, run_function


def texts(text: str) -> list[str]:
    return [i.text for i in split_instructions(text)]


def test_bullets_numbered_lines_and_sentences_become_items():
    assert texts("Clean this:\n- dates as ISO 8601\n* phone as (XXX) XXX-XXXX\n  with the area code\n• gender as M or F") == [
        "dates as ISO 8601", "phone as (XXX) XXX-XXXX with the area code", "gender as M or F"]
    assert texts("1. trim names\n2) prices as numbers\n10. e.g. 5 -> 5.0") == ["trim names", "prices as numbers", "e.g. 5 -> 5.0"]
    assert texts("Dates as ISO. Names without titles like Dr. Smith. Is it clear?") == [
        "Dates as ISO.", "Names without titles like Dr. Smith.", "Is it clear?"]
    assert split_instructions("") == () and split_instructions("  \n ") == ()
    assert [i.number for i in split_instructions("- a\n- b\n- a")] == [1, 2]  # a repeated line is one item


def test_coverage_tells_served_declined_and_open_items_and_why_learning_stopped():
    items = split_instructions("- city upper\n- drop duplicates\n- fix zip")
    fn = CleaningFunction.from_code("def city_upper(df):\n    return df\n", columns=["city"])
    registry = Registry(dataset="d").with_entry(RegistryEntry(
        function=fn, provenance=Provenance(drop="d", chunk="c", step=1, analyst="llm"), serves=("city upper",),
    )).with_declined([Declined(item="drop duplicates", reason="needs other rows")])
    states = registry.coverage(items)
    assert coverage_line(states) == "3 instructions: 1 served, 1 declined (#2: needs other rows), 1 open (#3)"
    assert stop_reason(states, selection="step budget spent", said_clean=False, reads=True) == \
        "step budget spent with instruction item #3 open"
    assert "rules analyst does not read instructions" in stop_reason(states, selection="", said_clean=True, reads=False)


def test_the_gate_takes_module_constants_beside_the_function_and_allowed_modules_work_in_full():
    code = '''import datetime
import re
import pandas as pd

GENDER = {"male": "M", "female": "F", "m": "M", "f": "F"}
DIGITS = re.compile(r"\\D+", re.ASCII)


def tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Gender as M/F, dates as ISO, phone digits only."""
    df = df.copy()
    df["g"] = df["g"].str.lower().map(GENDER).fillna(df["g"])
    df["d"] = [datetime.datetime.strptime(v, "%d/%m/%Y").strftime("%Y-%m-%d") for v in df["d"]]
    df["p"] = df["p"].str.replace(DIGITS, "", regex=True)
    return df
'''
    check_function(code)
    out = run_function(code, pd.DataFrame({"g": ["male", "F"], "d": ["01/02/2020", "03/04/2021"], "p": ["(1) 2", "3-4"]}))
    assert out.to_dict("list") == {"g": ["M", "F"], "d": ["2020-02-01", "2021-04-03"], "p": ["12", "34"]}
