"""The rules analyst turns each finding into a templated function that fixes the dirt, is idempotent,
keeps every row, nulls only null tokens and leaves values it does not know alone; and, looping over its
own proposals, it cleans the demo data until no finding is left.

Generated functions run in-process here (exec into a dict) to check what they do; the product runs
them in the sandbox.
"""

from __future__ import annotations

import ast

import pandas as pd
import pytest

from smolclean_dagster.core.analysts.base import AnalysisRequest, RegisteredSummary
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.drops import read_drop
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.profile import detect_issues, is_null_token
from smolclean_dagster.core.sandbox.gate import check_function
from smolclean_dagster.sample_data import CUSTOMERS_CSV, ORDERS_JSONL

ALLOWED_IMPORTS = {
    "pandas", "numpy", "re", "math", "datetime", "decimal", "json", "string", "collections", "itertools",
    "functools", "statistics", "unicodedata", "zoneinfo", "typing", "html",
}
BANNED_NAMES = {"eval", "exec", "open", "getattr", "setattr", "compile", "__import__", "globals", "locals", "vars"}


def request(chunk: pd.DataFrame, **kwargs) -> AnalysisRequest:
    return AnalysisRequest(dataset="demo", chunk_id="c0", step=1, chunk=chunk, **kwargs)


def load(fn: CleaningFunction):
    namespace: dict = {}
    exec(compile(fn.code, fn.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[fn.name]


def cells(series: pd.Series) -> list[object]:
    return [None if pd.isna(v) else v for v in series.tolist()]


# kind, dirty column, the same column fixed; the last value of each is one the rule does not know
RULE_CASES = {
    "whitespace": (
        [" Bend", "Gary ", "New  York", "two  words\nnext  line", "   ", None, "Austin"],
        ["Bend", "Gary", "New York", "two words\nnext line", "", None, "Austin"],
    ),
    "null_tokens": (
        ["N/A", "12", " null ", "None", "-", "", None, "nothing"],
        [None, "12", None, None, None, None, None, "nothing"],  # "" and "N/A": one null
    ),
    "case_variants": (
        ["New York"] * 4 + ["new york", "NEW YORK", "Boston", "Boston", "Boston", "boston", "Zürich"],
        ["New York"] * 6 + ["Boston"] * 4 + ["Zürich"],
    ),
    "rare_variants": (
        ["Premium"] * 10 + ["Basic"] * 10 + ["Premum", "Gold"],
        ["Premium"] * 10 + ["Basic"] * 10 + ["Premium", "Gold"],
    ),
    "number_format": (
        [str(10 + i) for i in range(20)] + ["$1,234.56", "2500 USD", "-$5.00", "1,2 approx"],
        [str(10 + i) for i in range(20)] + ["1234.56", "2500", "-5.00", "1,2 approx"],
    ),
    "date_format": (
        ["2001-01-05"] * 5 + ["03/22/1978", "December 1, 1965", "15-Mar-85", "someday"],
        ["2001-01-05"] * 5 + ["1978-03-22", "1965-12-01", "1985-03-15", "someday"],
    ),
    "boolean_spellings": (
        ["true", "false"] * 12 + ["yes", "Y", "0", "TRUE", "n", "1", "maybe"],
        ["true", "false"] * 12 + ["true", "true", "false", "true", "false", "true", "maybe"],
    ),
}


#: Spellings of "no value" become real nulls only when the user asks for it.
ASK_FOR_NULLS = "Write N/A and the like as real nulls."


def propose_for(kind: str, frame: pd.DataFrame, **kwargs) -> CleaningFunction:
    if kind == "null_tokens":
        kwargs.setdefault("instructions", ASK_FOR_NULLS)
    findings = tuple(f for f in detect_issues(frame) if f.kind == kind)
    assert findings, f"the {kind} detector found nothing to fix"
    proposal = RulesAnalyst().propose(request(frame, findings=findings, **kwargs))
    assert proposal.status == "needs_more_work" and proposal.function is not None
    return proposal.function


@pytest.mark.parametrize("dtype", [object, "str"])
@pytest.mark.parametrize("kind", list(RULE_CASES))
def test_each_rule_fixes_its_dirt_safely(kind: str, dtype: object):
    dirty, expected = RULE_CASES[kind]
    index = pd.Index([10 * i for i in range(len(dirty))][::-1])  # not a RangeIndex: order must survive
    frame = pd.DataFrame({"col": pd.Series(dirty, index=index, dtype=dtype), "other": ["keep"] * len(dirty)})
    fn = propose_for(kind, frame)
    assert fn.columns == ("col",)
    clean = load(fn)

    out = clean(frame)
    assert cells(out["col"]) == expected
    assert out.index.equals(frame.index) and list(out.columns) == ["col", "other"]
    assert out["other"].tolist() == frame["other"].tolist()
    assert cells(frame["col"]) == dirty, "the input frame must not be modified"
    for before, after in zip(cells(frame["col"]), cells(out["col"])):
        if after is None and before is not None:
            assert is_null_token(before), f"{before!r} became null"
    again = clean(out)
    assert cells(again["col"]) == cells(out["col"]), "not idempotent"
    assert [f for f in detect_issues(out[["col"]]) if f.kind == kind] == []


def test_functions_work_on_duplicate_labels_and_json_values():
    frame = pd.DataFrame({"col": [" a", 3.5, None, "N/A", "b "]}, index=[0, 0, 1, 1, 2], dtype=object)
    for kind, expected in (("whitespace", ["a", 3.5, None, "N/A", "b"]), ("null_tokens", [" a", 3.5, None, None, "b "])):
        out = load(propose_for(kind, frame))(frame)
        assert cells(out["col"]) == expected


def generated_functions() -> list[CleaningFunction]:
    functions = []
    for kind, (dirty, _) in RULE_CASES.items():
        functions.append(propose_for(kind, pd.DataFrame({"odd 'name\"\\": dirty}, dtype=object)))
    return functions


def test_generated_code_is_one_documented_function_with_allowed_imports_only():
    for fn in generated_functions():
        tree = ast.parse(fn.code)
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        others = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom))]
        assert len(functions) == 1 and not others, fn.code
        assert ast.get_docstring(functions[0]), fn.name
        assert fn.docstring.startswith(ast.get_docstring(functions[0]).splitlines()[0])
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= ALLOWED_IMPORTS
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] in ALLOWED_IMPORTS
            elif isinstance(node, ast.Name):
                assert node.id not in BANNED_NAMES
            elif isinstance(node, ast.Attribute):
                assert not node.attr.startswith("_"), node.attr
        assert all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body[:-1])
        check_function(fn.code)  # and the sandbox's own gate agrees


def test_names_are_descriptive_deterministic_and_suffixed_when_taken():
    frame = pd.DataFrame({"Signup Date": ["N/A", "2020-01-01"], "city": [" Bend", "Gary"]}, dtype=object)
    first = RulesAnalyst().propose(request(frame))
    assert first.function.name == "strip_whitespace_city"
    assert RulesAnalyst().propose(request(frame)).function.code == first.function.code
    taken = (RegisteredSummary(name="strip_whitespace_city", docstring=""),
             RegisteredSummary(name="strip_whitespace_city_2", docstring=""))
    assert RulesAnalyst().propose(request(frame, registry=taken)).function.name == "strip_whitespace_city_3"
    nulls = RulesAnalyst().propose(request(frame[["Signup Date"]], instructions=ASK_FOR_NULLS))
    assert nulls.function.name == "replace_null_tokens_signup_date"


def test_null_tokens_stay_unless_the_user_asks_for_real_nulls():
    # "NaN" is a rate and "Not Available" a departure time the file could not give: no null is evidently right
    frame = pd.DataFrame({"rate": ["5.3", "NaN", "0.0"] * 5, "dep": ["7:10 a.m.", "Not Available", ""] * 5})
    proposal = RulesAnalyst().propose(request(frame))
    assert proposal.function is None and proposal.status == "clean"
    assert {i.column for i in proposal.issues} == {"rate", "dep"}, "the tokens are still reported"
    asked = RulesAnalyst().propose(request(frame, instructions="Write missing values as null."))
    assert asked.function.name.startswith("replace_null_tokens")
    filled = RulesAnalyst().propose(request(frame, instructions="Fill missing values from the other rows."))
    assert filled.function is None, "filling is not nulling"


def test_one_function_per_step_and_every_finding_listed_as_an_issue():
    frame = pd.DataFrame({"a": [" x", "N/A", "y"], "b": ["N/A", "1", "2"]}, dtype=object)
    findings = detect_issues(frame)
    proposal = RulesAnalyst().propose(request(frame))
    assert len(proposal.issues) == len(findings) == 3
    assert {i.column for i in proposal.issues} == {"a", "b"}
    assert proposal.function.name == "strip_whitespace_a"
    assert proposal.function.columns == ("a",)


def test_null_tokens_of_several_columns_in_one_function_then_per_column_after_a_rejection():
    frame = pd.DataFrame({"a": ["N/A", "x"], "b": ["null", "1"]}, dtype=object)
    grouped = RulesAnalyst().propose(request(frame, instructions=ASK_FOR_NULLS)).function
    assert grouped.name == "replace_null_tokens_a_b" and grouped.columns == ("a", "b")
    fallback = RulesAnalyst().propose(request(frame, rejected=(grouped.name,), feedback="too broad",
                                              instructions=ASK_FOR_NULLS)).function
    assert fallback.name == "replace_null_tokens_a"
    rejected = (grouped.name, "replace_null_tokens_a", "replace_null_tokens_b")
    assert RulesAnalyst().propose(request(frame, rejected=rejected, instructions=ASK_FOR_NULLS)).status == "clean"


def test_clean_when_nothing_is_left():
    proposal = RulesAnalyst().propose(request(pd.DataFrame({"a": ["x", "y"]}, dtype=object)))
    assert proposal.status == "clean" and proposal.function is None and proposal.issues == ()


def test_reference_rows_decide_the_canonical_spelling():
    chunk = pd.DataFrame({"city": ["NEW YORK"] * 3 + ["New York"] + ["BOSTON"] * 4}, dtype=object)
    reference = pd.DataFrame({"city": ["New York"] * 30 + ["Boston"] * 30}, dtype=object)
    alone = load(RulesAnalyst().propose(request(chunk)).function)(chunk)
    assert set(alone["city"]) == {"NEW YORK", "BOSTON"}
    informed = load(RulesAnalyst().propose(request(chunk, reference=reference)).function)(chunk)
    assert set(informed["city"]) == {"New York", "Boston"}


def test_units_are_not_stripped_when_the_drop_mixes_units():
    chunk = pd.DataFrame({"size": ["12 oz", "12", "16 oz", "12"] * 3}, dtype=object)
    assert RulesAnalyst().propose(request(chunk)).function.name == "normalize_numbers_size"
    reference = pd.DataFrame({"size": ["355 ml", "12 oz", "500 ml", "12"] * 5}, dtype=object)
    proposal = RulesAnalyst().propose(request(chunk, reference=reference))
    assert proposal.function is None and proposal.status == "clean"
    assert [i.column for i in proposal.issues] == ["size"]


def clean_by_looping(frame: pd.DataFrame, reference: pd.DataFrame | None = None, max_steps: int = 20,
                     instructions: str = ASK_FOR_NULLS):
    """The agent loop in miniature: propose, apply in-process, check the invariants, re-detect."""
    analyst, registry, steps = RulesAnalyst(), [], 0
    for steps in range(1, max_steps + 1):
        proposal = analyst.propose(
            AnalysisRequest(dataset="demo", chunk_id="c0", step=steps, chunk=frame, instructions=instructions,
                            findings=tuple(detect_issues(frame)), registry=tuple(registry), reference=reference)
        )
        if proposal.function is None:
            return proposal, frame, registry
        fn = load(proposal.function)
        out = fn(frame)
        assert len(out) == len(frame) and out.index.equals(frame.index)
        assert out.equals(fn(out)), f"{proposal.function.name} is not idempotent"
        frame = out
        registry.append(RegisteredSummary(name=proposal.function.name, docstring=proposal.function.docstring))
    raise AssertionError(f"still proposing after {max_steps} steps: {[r.name for r in registry]}")


@pytest.mark.parametrize("path", [CUSTOMERS_CSV, ORDERS_JSONL], ids=["customers", "orders"])
def test_looping_on_the_demo_data_ends_clean(path):
    raw = read_drop(path)
    proposal, cleaned, registry = clean_by_looping(raw)
    assert proposal.status == "clean" and detect_issues(cleaned) == []
    assert len(registry) >= 6
    assert cleaned.shape == raw.shape
    nulled = cleaned.isna() & raw.notna()
    assert nulled.to_numpy().sum() > 0
    for column in raw.columns:
        assert all(is_null_token(v) for v in raw.loc[nulled[column], column]), column


def test_looping_on_a_chunk_with_the_drop_as_reference_ends_clean():
    raw = read_drop(CUSTOMERS_CSV)
    proposal, cleaned, registry = clean_by_looping(raw.iloc[100:150].reset_index(drop=True), reference=raw)
    assert proposal.status == "clean" and detect_issues(cleaned) == []
    assert any(r.name.startswith("dates_to_iso") for r in registry)


STATES = ["IL", "TX", "CA", "NY", "OH", "WA", "OR", "NV", "UT", "AZ", "NM", "CO", "GA"]
CITIES = ["New York", "Chicago", "McDonald", "St. Louis", "Boston", "Austin", "Denver", "Gary", "Bend", "Salem",
          "Reno", "Provo", "Tulsa", "Omaha"]
STATUSES = ["shipped", "pending", "delivered", "returned", "lost", "held", "paid", "open", "closed", "late", "new",
            "sent", "void"]


@pytest.mark.parametrize(
    "learned, unseen",
    [
        (STATES * 4 + ["tx", "Il"], ["fl", "Mi", "Taiwan", "ab1", "NA", "IL"]),
        (CITIES * 4 + ["CHICAGO", "new york"],
         ["GOLDFIELD", "hilliard", "MCDONALD", "USA", "o'brien", "de la Cruz", "x", "NEW YORK"]),
        (STATUSES * 4 + ["Shipped", "DELIVERED"], ["PENDING", "CO", "Refunded", "ok", "Chairman, CEO", "IT Consulting"]),
    ],
)
def test_the_case_rule_follows_the_column_convention_on_values_never_seen(learned, unseen):
    from smolclean_dagster.core.detectors import case_variants

    frame = pd.DataFrame({"col": learned}, dtype=object)
    fn = propose_for("case_variants", frame)
    context = fn.rule.context
    assert context["convention"] is not None
    values = learned + unseen
    out = load(fn)(pd.DataFrame({"col": values}, dtype=object))["col"].tolist()
    assert out == [case_variants.fix(v, context["convention"], context["exceptions"], context["letters"],
                                     tuple(context["keep"])) for v in values]
    # values written in more than one case on purpose, and values from outside the column's codes, are kept
    for kept in ("Mi", "Taiwan", "Refunded", "Chairman, CEO", "IT Consulting", "USA", "de la Cruz"):
        assert kept not in unseen or out[values.index(kept)] == kept
    assert load(fn)(pd.DataFrame({"col": out}, dtype=object))["col"].tolist() == out, "not idempotent"
    assert [f for f in detect_issues(pd.DataFrame({"col": out})) if f.kind == "case_variants"] == []


#: A city column: fifteen cities at realistic frequencies, "Austin" beside "Justin" (one letter apart, both real).
CITY_ROWS = {"New York": 37, "Los Angeles": 21, "Chicago": 22, "Houston": 18, "Phoenix": 15, "Philadelphia": 13,
             "San Antonio": 11, "San Diego": 10, "Dallas": 9, "Columbus": 9, "Denver": 8, "Atlanta": 8, "Seattle": 7,
             "Boston": 6, "Portland": 5, "Austin": 20, "Justin": 8}


def test_the_misspelling_fix_judges_a_value_it_never_saw_as_the_detector_would_have():
    from smolclean_dagster.core.detectors.rare_variants import variant_mapping

    learned = [city for city, n in CITY_ROWS.items() for _ in range(n)] + ["Atlantta"]
    fn = propose_for("rare_variants", pd.DataFrame({"city": learned}, dtype=object))
    valid = fn.rule.context["valid"]
    assert valid == {city: n for city, n in CITY_ROWS.items()}, "the column's values travel with their rows"
    unseen = ["Colubus", "COLUBUS", "Los nAgeles", "San Antnoio", "Sna Diego", "Dnever", "Bostn", "Dustin", "Dalton",
              "Dayton", "sallaD", "Dall\u0140as", "Portland 2", "Atlantta", "Atlanta", "Justin", "denver"]
    out = load(fn)(pd.DataFrame({"city": unseen}, dtype=object))["city"].tolist()
    # each value decided as the detector decides a value of one row beside the column's valid values
    assert out == [variant_mapping({v: 1, **valid}).get(v, v) for v in unseen]
    assert out == ["Columbus", "Columbus", "Los Angeles", "San Antonio", "Sna Diego", "Dnever", "Boston", "Dustin",
                   "Dalton", "Dayton", "Dallas", "Dallas", "Portland 2", "Atlanta", "Atlanta", "Justin", "denver"]
    assert load(fn)(pd.DataFrame({"city": out}, dtype=object))["city"].tolist() == out, "not idempotent"


def test_the_date_fix_writes_a_later_drops_dates_of_formats_it_never_saw_when_they_read_one_way():
    # learned from ISO dates with a few written mm/dd/yyyy; a later drop brings month names and the year first
    learned = [f"2023-{m:02d}-{d:02d}" for m in range(1, 13) for d in (3, 17)] + ["01/08/2023", "11/25/2023"]
    fn = propose_for("date_format", pd.DataFrame({"listed_on": learned}, dtype=object))
    unseen = ["Jan 5, 2024", "March 14, 2024", "2024/02/29", "7 Feb 2024", "12/30/2023", "05.01.2024", "Jan 5 2524",
              "2023-04-03", "soon"]
    out = load(fn)(pd.DataFrame({"listed_on": unseen}, dtype=object))["listed_on"].tolist()
    # a day-and-month layout the drop never wrote ("05.01.2024") could be either: kept; so is a year far off
    assert out == ["2024-01-05", "2024-03-14", "2024-02-29", "2024-02-07", "2023-12-30", "05.01.2024", "Jan 5 2524",
                   "2023-04-03", "soon"]
    assert load(fn)(pd.DataFrame({"listed_on": out}, dtype=object))["listed_on"].tolist() == out, "not idempotent"


def test_a_case_slip_on_many_rows_beside_a_far_more_common_spelling_is_fixed():
    codes = ["TX", "NY", "IL", "AZ", "PA", "OH", "CO", "GA", "WA", "MA", "OR"]
    frame = pd.DataFrame({"state": ["CA"] * 301 + ["ca"] * 9 + codes * 30}, dtype=object)
    out = load(propose_for("case_variants", frame))(frame)
    assert set(out["state"]) == {"CA", *codes}


def test_a_column_without_a_case_convention_writes_a_known_value_as_it_was_learned():
    from smolclean_dagster.core.detectors import case_variants

    plans = ["Basic"] * 60 + ["Premium"] * 30 + ["Business"] * 20 + ["Joanne Plus"] * 5 + ["basic"]
    fn = propose_for("case_variants", pd.DataFrame({"plan": plans}, dtype=object))
    context = fn.rule.context
    assert context["convention"] is None  # four values are no convention for values never seen
    unseen = ["PREMIUM", "business", "JOANNE PLUS", "JoAnne Plus", "PreMium", "Gold", "GOLD"]
    out = load(fn)(pd.DataFrame({"plan": unseen}, dtype=object))["plan"].tolist()
    assert out == ["Premium", "Business", "Joanne Plus", "JoAnne Plus", "PreMium", "Gold", "GOLD"]
    assert out == [case_variants.fix(v, None, context["exceptions"], context["letters"], tuple(context["keep"]))
                   for v in unseen]


def test_a_title_case_asked_of_names_writes_shouted_names_and_keeps_abbreviations_and_own_spellings():
    from smolclean_dagster.core.instructions import ItemState

    names = ["O'BRIEN, PAT", "d'angelo", "DON'T STOP", "McDonald", "ANN LEE", "USA", "mary-jo ruiz"]
    chunk = pd.DataFrame({"name": names * 8})
    said = "Write the values of column 'name' in title case."
    proposal = RulesAnalyst().propose(request(chunk, reference=chunk, instructions=said,
                                              items=(ItemState(number=1, text=said),)))
    assert proposal.serves == (1,)
    out = load(proposal.function)(chunk)
    assert out["name"].tolist()[:7] == ["O'Brien, Pat", "D'Angelo", "Don't Stop", "McDonald", "Ann Lee", "USA",
                                        "Mary-Jo Ruiz"]
