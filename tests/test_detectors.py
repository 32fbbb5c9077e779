"""The detectors find each kind of dirt on small raw frames, say what a rule needs, and stay silent on
clean columns of numbers, dates, names, free text, emails and identifiers."""

from __future__ import annotations

import doctest

import pandas as pd
import pytest

from smolclean_dagster.core import detectors, findings, labels, profile
from smolclean_dagster.core.analysts import asked, rules
from smolclean_dagster.core.profile import KINDS, detect_column, detect_issues, is_null_token, profile_columns


def findings_of(values: list[object], kind: str, name: str = "col") -> list:
    return [f for f in detect_column(name, pd.Series(values, dtype=object)) if f.kind == kind]


def only(values: list[object], kind: str):
    found = findings_of(values, kind)
    assert len(found) == 1, f"expected one {kind} finding, got {found}"
    return found[0]


CLEAN = pd.DataFrame(
    {
        "id": [f"{i}" for i in range(1, 41)],
        "sku": [f"AB-{1000 + i}-X" for i in range(40)],
        "zip": [f"{i:05d}" for i in range(1901, 1941)],
        "phone": [f"555-{1000 + 37 * i}" for i in range(40)],
        "amount": [f"{(i * 37) % 500 - 40}.{i % 100:02d}" for i in range(40)],
        "count": [str(i % 7) for i in range(40)],
        "flag": ["Y", "N"] * 20,
        "binary": ["0", "1", "1", "0"] * 10,
        "gender": ["F", "M", "M", "F"] * 10,
        "day": [f"2021-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(40)],
        "us_date": [f"{1 + i % 12}/{1 + i % 28}/19" for i in range(40)],
        "name": [f"{f} {l}" for f, l in zip(["Ann", "Bob", "Cara", "Dan", "Eve"] * 8, ["Lee", "Stone", "Diaz", "Roe"] * 10)],
        "email": [f"user{i}@example.com" for i in range(40)],
        "text": [f"Customer {i} asked about the March invoice, called back on day {i % 9}." for i in range(40)],
        "city": ["Boston", "Chicago", "Austin", "Denver"] * 10,
        "notes": ["", "N/A", "", "call back"] * 10,
    }
)


def test_clean_columns_give_no_findings_except_real_null_tokens():
    findings = detect_issues(CLEAN)
    assert [(f.kind, f.column) for f in findings] == [("null_tokens", "notes")]


def test_empty_string_is_the_canonical_null_not_an_issue():
    assert findings_of(["", "", "12", "13"], "null_tokens") == []
    assert detect_issues(pd.DataFrame({"a": ["", "", ""]})) == []


def test_whitespace_around_and_inside_values():
    f = only(["Bend ", " Gary", "New  York", "Austin", "   "], "whitespace")
    assert f.count == 4
    assert f.params == {"strip": True, "collapse": True}
    assert len(f.examples) <= 3
    assert findings_of(["line one\nline two", "a b"], "whitespace") == []


def test_null_tokens_are_listed_case_folded():
    f = only(["N/A", "n/a", " null ", "None", "-", "12", "13", "?"], "null_tokens")
    assert f.params["tokens"] == ["-", "?", "n/a", "none", "null"]
    assert f.count == 6
    assert "'n/a'" in f.message


def test_dash_is_a_value_in_a_column_of_signs():
    assert findings_of(["+", "-", "+", "+", "-"], "null_tokens") == []


def test_dash_is_missing_in_a_column_of_negative_numbers():
    assert only(["-5", "-3.2", "-", "7"], "null_tokens").params["tokens"] == ["-"]


def test_capitalised_token_words_are_names_in_a_name_column():
    names = ["Nan", "Anna", "Boris", "Chen", "Dmitri", "Nil", "Elena"]
    assert findings_of(names, "null_tokens") == []
    assert only(["1.5", "NaN", "2.5", "nan"], "null_tokens").params["tokens"] == ["nan"]


def test_is_null_token():
    assert is_null_token(" N/A ") and is_null_token("null") and is_null_token("")
    assert not is_null_token("Nairobi") and not is_null_token(None) and not is_null_token("empty")


def test_case_variants_map_to_the_most_frequent_spelling():
    values = ["New York"] * 5 + ["new york", "NEW YORK"] + ["Boston"] * 6 + ["boston"] + ["Austin", "Austin", "austin"]
    f = only(values, "case_variants")
    # "austin" is not rewritten: "Austin" is not far more common (2 against 1), so nothing says which is right
    assert (f.params["convention"], f.params["exceptions"]) == (None, {"boston": "Boston", "new york": "New York"})
    assert f.count == 3


def test_case_variants_ignore_inner_capitals_codes_and_unique_values():
    assert findings_of(["JoAnne", "Joanne", "JoAnne", "Joanne"] * 3, "case_variants") == []
    assert findings_of(["ab1", "AB1", "ab1", "ab1"], "case_variants") == []
    assert findings_of(["Alpha", "beta", "GAMMA", "delta"], "case_variants") == []


def test_rare_variants_map_typos_to_the_frequent_value():
    values = ["Premium"] * 12 + ["Basic"] * 10 + ["Premum", "Baisc"]
    f = only(values, "rare_variants")
    assert f.params["mapping"] == {"Premum": "Premium"}  # "Baisc" is two edits from a 5-letter word
    # what the fix judges the next drop's values by: every value but the slips, with its cells
    assert f.params["vocabulary"] == {"Premium": 12, "Basic": 10, "Baisc": 1}


def test_a_case_slip_is_judged_by_its_share_where_the_column_writes_its_values_one_way():
    codes = ["TX", "NY", "IL", "AZ", "PA", "OH", "CO", "GA", "WA", "MA", "OR"]
    # "ca" on 9 rows beside "CA" on 301 (3%) is a slip, however many rows it has
    f = only(["CA"] * 301 + ["ca"] * 9 + codes * 30, "case_variants")
    assert f.params["keep"] == () and f.examples == ("ca",) and f.count == 9
    # on a fifth of its value's rows it is a way the file writes the value
    assert findings_of(["CA"] * 240 + ["ca"] * 60 + codes * 60, "case_variants") == []
    # a column that mixes cases (rayyan's languages) keeps a second spelling on many rows, and its rare third
    languages = ["eng"] * 464 + ["English"] * 95 + ["ENG"] * 23 + ["Eng"] * 2 + ["jpn"] * 7 + ["ger"] * 6 + ["fre"] * 4
    assert findings_of(languages, "case_variants") == []


def test_a_columns_case_is_read_from_how_each_value_is_mostly_written():
    # thirteen codes in capitals, twelve of them also in lower case on a few of their rows: twelve distinct slips
    # beside thirteen codes, but each code is written in capitals on most of its rows, so capitals are the rule
    codes = ["TX", "MA", "CT", "OH", "CA", "IL", "GA", "NJ", "CO", "WA", "RI", "UT", "OK"]
    states = [c for c in codes for _ in range(40)] + [c.lower() for c in codes[:12] for _ in range(3)]
    f = only(states, "case_variants")
    assert f.params["convention"] == "upper" and f.params["keep"] == () and f.count == 36
    # four values, each in lower case on a seventh of its rows (13% of the column's cells): slips, none kept
    status = ["Active"] * 560 + ["active"] * 92 + ["Dormant"] * 235 + ["dormant"] * 33 + ["Prospect"] * 233
    f = only(status + ["prospect"] * 35 + ["Churned"] * 14, "case_variants")
    assert f.params["keep"] == () and f.count == 160
    assert f.params["exceptions"] == {"active": "Active", "churned": "Churned", "dormant": "Dormant",
                                      "prospect": "Prospect"}


def test_case_variants_without_a_convention_list_every_value_they_can_spell():
    plans = ["Basic"] * 60 + ["Premium"] * 30 + ["Business"] * 20 + ["basic"]
    f = only(plans, "case_variants")
    assert f.params["convention"] is None
    assert f.params["exceptions"] == {"basic": "Basic", "business": "Business", "premium": "Premium"}


def test_rare_variants_count_a_swap_as_one_slip_in_long_values_only():
    cities = ["Los Angeles"] * 30 + ["San Diego"] * 20 + ["Denver"] * 20
    f = only(cities + ["Los nAgeles", "Sna Diego", "Dnever"], "rare_variants")
    assert f.params["mapping"] == {"Los nAgeles": "Los Angeles"}  # "Sna Diego" and "Dnever" are shorter than 10


def test_the_vocabulary_a_misspelling_fix_carries_is_bounded_and_keeps_every_target():
    from smolclean_dagster.core.detectors import rare_variants

    values = {f"Value {i:04d}": 1000 - i for i in range(1000)}
    vocabulary = rare_variants.vocabulary(values, {"Value 0998": "Value 0999", "Valeu": "Value 0000"})
    assert len(vocabulary) == rare_variants.MAX_VOCABULARY + 1
    assert "Value 0999" in vocabulary and "Value 0998" not in vocabulary
    assert list(vocabulary)[:2] == ["Value 0000", "Value 0001"]  # those on most cells first


def test_rare_variants_leave_real_neighbours_codes_and_short_words():
    styles = ["American Amber / Red Ale"] * 30 + ["American Amber / Red Lager"]
    assert findings_of(styles, "rare_variants") == []
    assert findings_of(["scip-card-2"] * 20 + ["scip-card-3"], "rare_variants") == []
    assert findings_of(["cat"] * 20 + ["car"], "rare_variants") == []


def test_numbers_with_currency_and_separators():
    f = only(["$1,234.56", "12.50", "2500 USD", "-$5.00", "7"], "number_format")
    assert f.params["units"] == ["$", "USD"]
    assert f.params["unit_families"] == ["usd"]
    assert f.count == 3


def test_numbers_with_unit_spellings():
    f = only(["12.0 oz", "12.0 oz.", "16.0 ounce", "12.0 OZ.", "12.0"], "number_format")
    assert f.params["units"] == ["OZ.", "ounce", "oz", "oz."]
    assert f.params["unit_families"] == ["oz"]


def test_mixed_units_are_reported_but_not_strippable():
    f = only(["12 oz", "355 ml", "12 oz", "330 ml", "12"], "number_format")
    assert f.params["units"] == [] and f.params["fixable_cells"] == 0
    assert "several units" in f.message


def test_consistent_units_and_typo_suffixes_are_not_number_issues():
    assert findings_of([f"{i} patients" for i in range(30)], "number_format") == []
    assert findings_of([str(10000 + i) for i in range(30)] + ["1000x"], "number_format") == []
    assert findings_of(["1,234", "5,678,901", "12"], "number_format") == []  # separators used consistently


def test_magnitudes_months_and_ordinals_are_not_units():
    assert findings_of(["1.2k", "1200", "800"] * 3, "number_format") == []
    assert findings_of(["12 Mar", "14", "15"] * 3, "number_format") == []
    assert findings_of(["1st", "2", "3"] * 3, "number_format") == []


def test_mixed_date_formats_with_month_first_evidence():
    values = ["1978-03-22", "03/22/1978", "December 1, 1965", "15-Mar-85", "2001-01-05", "2001-01-06"]
    f = only(values, "date_format")
    assert f.params["formats"] == ["%m/%d/%Y", "%B %d, %Y", "%d-%b-%y"]
    assert f.params["dominant"] == "ISO 8601"
    assert f.params["day_first"] == {"NN/NN/NNNN": False}
    assert f.count == 3


def test_day_first_is_inferred_from_days_above_twelve():
    values = ["2020-01-05", "25/12/2020", "03/04/2020", "2020-02-02", "2020-02-03"]
    f = only(values, "date_format")
    assert f.params["day_first"] == {"NN/NN/NNNN": True}
    assert f.params["formats"] == ["%d/%m/%Y"]


def test_day_or_month_first_is_decided_per_layout_and_only_by_dates_that_settle_it():
    # a penguins-like column: ISO mostly, month first with slashes, day first with dots, and dashes that never
    # show which comes first; the slashes' evidence must not decide how "05.11.2008" reads
    days = pd.date_range("2007-11-09", periods=300, freq="D")
    values = [d.strftime("%Y-%m-%d") for d in days[:240]]
    values += [d.strftime("%m/%d/%Y") for d in days[240:280]] + [d.strftime("%d.%m.%Y") for d in days[280:296]]
    values += ["05.11.2008", "03-04-2008", "11-10-2008", "01-02-2009"]
    f = only(values, "date_format")
    assert f.params["day_first"] == {"NN.NN.NNNN": True, "NN/NN/NNNN": False}
    assert f.params["formats"] == ["%m/%d/%Y", "%d.%m.%Y"]
    # the dashed dates are dates of the column, in a layout of their own that reads two ways
    assert f.params["format_cells"]["NN-NN-NNNN"] == 3 and f.count == 60


def test_datetimes_mixed_with_dates():
    f = only(["2023-04-05 10:22", "04/15/2023 10:22 AM", "2023-04-06", "2023-04-07 08:00"], "date_format")
    assert f.params["formats"] == ["%m/%d/%Y %I:%M %p"]


def test_dates_in_one_format_and_text_that_mentions_dates_are_not_flagged():
    assert findings_of(["1/1/71", "4/2/15", "12/1/06"] * 3, "date_format") == []
    titles = [f"Report of March {i}, 2020 on the committee" for i in range(10)]
    assert findings_of(titles, "date_format") == []
    assert findings_of(["0035-9157", "1187-9", "2044-6055"] * 3, "date_format") == []


def test_boolean_spellings_map_to_the_dominant_pair():
    f = only(["true", "false", "true", "yes", "Y", "0", "TRUE", "false"], "boolean_spellings")
    assert f.params["true"] == "true" and f.params["false"] == "false"
    assert f.params["mapping"]["y"] == "true" and f.params["mapping"]["0"] == "false"
    assert f.count == 4


def test_consistent_booleans_and_gender_codes_are_not_flagged():
    assert findings_of(["Y", "N", "Y"], "boolean_spellings") == []
    assert findings_of(["0", "1", "1"], "boolean_spellings") == []
    assert findings_of(["F", "M", "F", "M"], "boolean_spellings") == []
    assert findings_of(["yes", "Yes", "no"], "boolean_spellings") == []  # case only: the case detector's job


def test_json_cells_that_are_not_text_are_ignored():
    values = [1.5, None, "N/A", {"a": 1}, " x ", 3]
    kinds = {f.kind for f in detect_column("mixed", pd.Series(values, dtype=object))}
    assert kinds == {"whitespace", "null_tokens"}


def test_findings_come_in_priority_order_then_column_order():
    df = pd.DataFrame({"b": ["N/A", "1", "2"], "a": [" x", "y", "N/A"]})
    assert [(f.kind, f.column) for f in detect_issues(df)] == [
        ("whitespace", "a"),
        ("null_tokens", "b"),
        ("null_tokens", "a"),
    ]
    assert KINDS[:2] == ("whitespace", "null_tokens")


def test_column_profile():
    df = pd.DataFrame({"d": ["2020-03-22", "2021-01-02", "N/A", "", "03/22/2020"], "city": ["Bend"] * 5})
    by_column = {p.column: p for p in profile_columns(df)}
    d = by_column["d"]
    assert (d.dominant_shape, d.dominant_share, d.null_tokens, d.empty, d.distinct) == ("9999-99-99", 0.6667, 1, 1, 3)
    assert by_column["city"].dominant_shape == "Aaaa"
    assert by_column["city"].dominant_share == 1.0


@pytest.mark.parametrize(
    "module", [profile, findings, rules, asked, labels, detectors.cells, *detectors.DETECTORS], ids=lambda m: m.__name__.split(".")[-1]
)
def test_docstring_examples_hold(module):
    assert doctest.testmod(module).failed == 0


def test_typed_values_count_as_values_and_do_not_trip_the_detectors():
    """A JSON drop's numbers, booleans, lists and objects are values, not empty cells, and no detector
    chokes on them (lists and dicts cannot be counted as keys)."""
    df = pd.DataFrame({
        "id": pd.Series([0, 1, 2, None], dtype=object),
        "ok": pd.Series([True, False, True, None], dtype=object),
        "tags": pd.Series([["a", "b"], [], ["a", "b"], None], dtype=object),
        "meta": pd.Series([{"k": 1}, {"k": [1, 2]}, {"k": 1}, None], dtype=object),
        "city": pd.Series([" Bend", "Bend", ["Bend"], ""], dtype=object),
    })
    profiles = {p.column: p for p in profile_columns(df)}
    assert [profiles[c].empty for c in ("id", "ok", "tags", "meta", "city")] == [1, 1, 1, 1, 1]
    assert (profiles["id"].dominant_shape, profiles["id"].distinct) == ("<number>", 3)
    assert (profiles["tags"].dominant_shape, profiles["tags"].distinct) == ("<list>", 2)
    assert (profiles["meta"].dominant_shape, profiles["meta"].distinct) == ("<object>", 2)
    assert profiles["ok"].dominant_shape == "<boolean>" and profiles["ok"].dominant_share == 1.0
    assert [(f.kind, f.column) for f in detect_issues(df)] == [("whitespace", "city")]
