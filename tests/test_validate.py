"""Acceptance checks: each bad candidate is rejected with a reason the analyst can act on."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.validate import MAX_COST_PER_ROW_S, check_candidate, measure_cost

CHUNK = pd.DataFrame({"city": [" Boston", "boston", "N/A", "Chicago ", "chicago"], "n": ["1", "2", "3", "4", "5"]},
                     dtype=object)
HOLDOUT = pd.DataFrame({"city": ["BOSTON", " Denver"], "n": ["6", "7"]}, dtype=object)


def fn(body: str, name: str = "candidate", imports: str = "") -> CleaningFunction:
    code = f'{imports}def {name}(df):\n    """A candidate."""\n' + "".join(f"    {line}\n" for line in body.strip().splitlines())
    return CleaningFunction.from_code(code, columns=["city"])


@pytest.mark.parametrize(
    ("body", "imports", "reason"),
    [
        ("return df.iloc[1:]", "", "changed the number of rows"),
        ("df = df.copy()\ndf['city'] = df['city'] + '!'\nreturn df", "", "not idempotent"),
        ("df = df.copy()\ndf['city'] = df['city'] + str(pd.Timestamp.now().value)\nreturn df",
         "import pandas as pd\n\n\n", "not deterministic"),
        ("df = df.copy()\ndf['city'] = df['city'].where(df['city'].str.islower(), None)\nreturn df", "",
         "into null"),
        ("total = 0\nfor i in range(60_000_000):\n    total += i\nreturn df.assign(city=df['city'].str.strip())", "",
         "too slow"),
        ("return df.drop(columns=['n'])", "", "removed column"),
        ("return df", "", "made no change"),
    ],
    ids=["drops-a-row", "not-idempotent", "nondeterministic", "nulls-good-values", "slow", "drops-a-column", "no-op"],
)
def test_bad_candidates_are_rejected_with_the_reason(sandbox, body, imports, reason):
    verdict = check_candidate(fn(body, imports=imports), CHUNK, HOLDOUT, sandbox, timeout_s=30)
    assert not verdict.accepted
    assert reason in verdict.reason


def test_a_good_candidate_is_accepted_with_evidence(sandbox):
    good = fn("df = df.copy()\ndf['city'] = df['city'].str.strip().str.title()\nreturn df")
    verdict = check_candidate(good, CHUNK, HOLDOUT, sandbox)
    assert verdict.accepted, verdict.reason
    ev = verdict.evidence
    assert ev.columns_changed == ("city",) and ev.cells_changed == 6 and ev.holdout_rows == 2
    assert ev.examples[0].before == " Boston" and ev.examples[0].after == "Boston"


def test_null_tokens_may_become_null(sandbox):
    nulls = fn("df = df.copy()\ndf['city'] = df['city'].where(df['city'] != 'N/A', None)\nreturn df")
    assert check_candidate(nulls, CHUNK, HOLDOUT, sandbox).accepted


def test_dropping_rows_is_allowed_and_counted_when_the_instructions_ask(sandbox):
    drop = fn("return df[df['city'] != 'N/A'].reset_index(drop=True)")
    verdict = check_candidate(drop, CHUNK, HOLDOUT, sandbox, allow_row_drops=True)
    assert verdict.accepted and verdict.evidence.rows_dropped == 1
    assert "dropped 1 row" in verdict.reason


def test_a_per_row_loop_is_sent_back_with_its_measured_cost(sandbox):
    loop = fn("df = df.copy()\ncities = []\nfor _, row in df.iterrows():\n    cities.append(row['city'].strip().title())\n"
              "df['city'] = cities\nreturn df")
    verdict = check_candidate(loop, CHUNK, HOLDOUT, sandbox, timeout_s=30)
    assert not verdict.accepted
    measured = re.search(r"too slow for real drops: ([\d.]+) us per row \(([\d.]+) s on 5000 rows", verdict.reason)
    assert measured, verdict.reason
    assert float(measured.group(1)) > MAX_COST_PER_ROW_S * 1e6
    assert "vectorise" in verdict.reason and "pd.factorize" in verdict.reason

    # the same job done on whole columns passes the same measurement
    vectorised = fn("df = df.copy()\ndf['city'] = df['city'].str.strip().str.title()\nreturn df")
    per_row, rows = measure_cost(vectorised, [CHUNK, HOLDOUT], sandbox)
    assert rows == 5000 and per_row <= MAX_COST_PER_ROW_S
