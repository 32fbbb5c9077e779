"""Text damage the detectors find and the rules repair: apostrophes escaped twice, flag marks appended to
values, debris of a wrong decoding, and numbers written as float exports write them. Each repair keeps
what it does not know, is idempotent, and stays silent on clean text."""

from __future__ import annotations

import pandas as pd
import pytest

from smolclean_dagster.core.analysts.base import AnalysisRequest
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.profile import detect_column, detect_issues
from smolclean_dagster.core.sandbox.gate import check_function


def load(fn):
    namespace: dict = {}
    exec(compile(fn.code, fn.name, "exec"), namespace)  # tests only: the product runs it in the sandbox
    return namespace[fn.name]


def cells(series: pd.Series) -> list[object]:
    return [None if pd.isna(v) else v for v in series.tolist()]


# kind, dirty column, the same column repaired
CASES = {
    "escaped_quotes": (
        ["O''Brien", "d''Astous", "Surveyors''", "Smith", "it''s ''quoted''", "O'Neil", None],
        ["O'Brien", "d'Astous", "Surveyors'", "Smith", "it's ''quoted'", "O'Neil", None],
    ),
    "marker_suffixes": (
        ["ARCADIA", "ARCADIA-*", "ARBON", "ARBON-*", "BOSTON", "DENVER", "AUSTIN", "NEW*", "ARBON-*-*"],
        ["ARCADIA", "ARCADIA", "ARBON", "ARBON", "BOSTON", "DENVER", "AUSTIN", "NEW*", "ARBON"],  # no plain NEW
    ),
    "broken_text": (
        ["Voix d'Or\ufffd", "m\u0329dicamenteuse", "caf\u0065\u0301", "St\ufffd\ufffd_ber F", "plain"],
        ["Voix d'Or", "mdicamenteuse", "caf\u0065\u0301", "St_ber F", "plain"],
    ),
    "number_format": (
        ["12.0 oz", "16.0 oz.", "19.2 ounce", "12 oz", "0.055999999999999994 oz", "12.50 oz", "8", "n/a"] + ["12"] * 12,
        ["12", "16", "19.2", "12", "0.056", "12.50", "8", "n/a"] + ["12"] * 12,
    ),
}


@pytest.mark.parametrize("dtype", [object, "str"])
@pytest.mark.parametrize("kind", list(CASES))
def test_each_repair_fixes_its_dirt_and_keeps_the_rest(kind: str, dtype: object):
    dirty, expected = CASES[kind]
    index = pd.Index([3 * i for i in range(len(dirty))][::-1])  # not a RangeIndex: order must survive
    frame = pd.DataFrame({"col": pd.Series(dirty, dtype=dtype, index=index), "other": ["keep"] * len(dirty)}, index=index)
    findings = tuple(f for f in detect_issues(frame) if f.kind == kind)
    assert findings, f"the {kind} detector found nothing"
    # the letters decoding debris stands for are lost: the rule removes it only when the user asks
    asked = "Remove the debris of a wrong decoding." if kind == "broken_text" else ""
    proposal = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=frame, findings=findings,
                                                      instructions=asked))
    fn = proposal.function
    check_function(fn.code)
    out = load(fn)(frame)
    assert cells(out["col"]) == expected
    assert out.index.equals(frame.index) and out["other"].tolist() == frame["other"].tolist()
    assert cells(frame["col"]) == dirty, "the input frame must not be modified"
    assert cells(load(fn)(out)["col"]) == expected, "not idempotent"
    assert [f for f in detect_issues(out[["col"]]) if f.kind == kind] == []


@pytest.mark.parametrize(
    "values",
    [
        ["Rock 'n' roll", "It's", "Anne-Marie", "C++", "Notes #2", "Boston", "Gary*"],  # no plain twin for Gary
        ["caf\u00e9", "nai\u0308ve", "\u0915\u093f\u0938\u094d\u0924", "Z\u00fcrich"],  # accents, Hindi
    ],
)
def test_clean_text_is_not_flagged(values):
    kinds = {"escaped_quotes", "marker_suffixes", "broken_text"}
    assert [f for f in detect_column("col", pd.Series(values, dtype=object)) if f.kind in kinds] == []


def test_each_distinct_value_is_repaired_once_for_every_cell_holding_it():
    # a column of many cells and few values: the function works per distinct value, cells stay in place
    frame = pd.DataFrame({"col": ["O''Brien", "Smith", None, "O''Brien"] * 500}, dtype=object)
    fn = RulesAnalyst().propose(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=frame)).function
    out = load(fn)(frame)
    assert cells(out["col"]) == ["O'Brien", "Smith", None, "O'Brien"] * 500
