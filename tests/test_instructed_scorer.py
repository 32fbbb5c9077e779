"""The instructed-cleaning cases and their scorer (benchmarks/instructed.py): the committed files are what
make_cases.py writes, the truth is reachable from the dirty rows, and the scorer counts what it says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(BENCHMARKS / "instructed"))
import instructed  # noqa: E402
import make_cases  # noqa: E402
import reference_clean  # noqa: E402

CASES = BENCHMARKS / "instructed"


def test_committed_cases_are_the_script_output(tmp_path: Path):
    make_cases.main(tmp_path)
    for case, (dirty, truth) in instructed.CASES.items():
        assert (tmp_path / dirty).read_bytes() == (CASES / dirty).read_bytes(), dirty
        assert (tmp_path / truth).read_bytes() == (CASES / truth).read_bytes(), truth
        assert (CASES / f"{case}.instructions.md").is_file()


def test_self_check_scores_truth_one_and_dirty_zero(capsys):
    assert instructed.main(["--self-check"]) == 0
    out = capsys.readouterr().out
    assert "self-check passed" in out
    assert out.count("F1 1.000") == 3 and out.count("F1 0.000") == 3


def test_nested_values_are_kept_typed_in_the_patients_truth():
    rows = instructed.read_rows(CASES / "patients.truth.jsonl")
    assert 55 <= len(rows) <= 120 and len(rows[0]) in range(10, 13)
    assert all(isinstance(r["allergies"], list) and isinstance(r["address"], dict) for r in rows)
    assert any(r["email"] is None for r in rows) and all(isinstance(r["smoker"], bool) for r in rows)


@pytest.mark.parametrize("case", list(instructed.CASES))
def test_every_dirty_cell_can_be_recovered_from_its_row(case: str, tmp_path: Path):
    out = tmp_path / ("out.csv" if case == "products" else "out.jsonl")
    reference_clean.main(case, out)
    score = instructed.score_case(case, out)
    assert score.exact.errors > 0.3 * score.cells
    assert score.exact.f1 == 1.0


def test_one_fixed_column_counts_as_its_cells_only(tmp_path: Path):
    dirty = instructed.read_rows(CASES / "transactions.jsonl")
    truth = instructed.read_rows(CASES / "transactions.truth.jsonl")
    for d, t in zip(dirty, truth):
        d["status"] = t["status"]               # fixed as asked
        d["amount"] = str(t["amount"])          # the right number, written as a string
        d["currency"] = "XXX"                   # every cell changed, all wrong
    out = tmp_path / "cleaned.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in dirty))

    score = instructed.score_case("transactions", out)
    cols = score.columns
    assert cols["status"].f1 == 1.0 and cols["status"].correct == cols["status"].errors
    assert cols["currency"].changes == len(truth) and cols["currency"].correct == 0
    assert cols["amount"].correct == 0          # "137.77" is not the number 137.77
    assert cols["txn_id"].changes == 0 and cols["txn_id"].f1 == 0.0
    assert score.exact.correct == cols["status"].correct
    assert score.exact.changes == sum(c.changes for c in cols.values())
    # Typing aside, the amounts written as strings count as right; the bad currencies still do not.
    assert score.typing_aside.correct > score.exact.correct
    assert 0 < score.exact.f1 < score.typing_aside.f1 < 1


def test_csv_case_compares_text_and_a_typed_output_as_csv_writes_it(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    truth = instructed.read_rows(CASES / "products.truth.csv")
    table = {c: [r[c] for r in truth] for c in truth[0]}
    table["price"] = [float(v) for v in table["price"]]  # 1285.0 where the user asked for "1285.00"
    pq.write_table(pa.table(table), tmp_path / "cleaned.parquet")

    score = instructed.score_case("products", tmp_path / "cleaned.parquet")
    assert score.columns["sku"].f1 == 1.0
    assert score.columns["price"].f1 < 1.0
    assert score.typing_aside.f1 == 1.0 > score.exact.f1


def test_calls_and_tokens_come_from_the_model_server_log(tmp_path: Path):
    log = tmp_path / "log.jsonl"
    entries = [{"t": 100.0, "source": "agent#1", "wait_s": 30.0, "prompt_tokens": 4000, "completion_tokens": 500,
                "total_tokens": 4500},
               {"t": 200.0, "source": "cache", "wait_s": 0.0, "prompt_tokens": 4200, "completion_tokens": 300,
                "total_tokens": 4500},
               {"t": 900.0, "source": "agent#2", "wait_s": 12.0, "prompt_tokens": 6000, "completion_tokens": 900,
                "total_tokens": 6900}]
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))

    calls = instructed.read_calls(log)
    assert (calls.calls, calls.from_cache, calls.tokens, calls.largest_call_tokens) == (3, 1, 15900, 6900)
    windowed = instructed.read_calls(log, (50, 500))
    assert (windowed.calls, windowed.tokens) == (2, 9000)


def test_a_cleaned_file_with_other_rows_is_refused_naming_it(tmp_path: Path, capsys):
    short = tmp_path / "short.jsonl"
    short.write_text("".join((CASES / "patients.truth.jsonl").read_text().splitlines(True)[:10]))
    assert instructed.main(["--no-write", "--run", f"patients={short}"]) == 2
    err = capsys.readouterr().err
    assert str(short) in err and "10 rows" in err and "60" in err


def test_the_cases_hold_what_their_instructions_speak_of_and_make_cases_fails_loudly_otherwise():
    import random

    emails = [r["customer_email"] for r in instructed.read_rows(CASES / "transactions.jsonl")]
    assert "unknown" in emails  # "missing (empty, N/A, -, unknown) as null" is exercised
    patients = instructed.read_rows(CASES / "patients.jsonl")
    assert "unknown" in [r["email"] for r in patients] and "unknown" in [r["blood_type"] for r in patients]
    assert "unknown" in [r["stock_qty"] for r in instructed.read_rows(CASES / "products.csv")]
    dirty, truth = make_cases.transactions(random.Random(1305))
    for row in dirty:
        if row["customer_email"] == "unknown":
            row["customer_email"] = None
    with pytest.raises(SystemExit, match=r"#3: no 'customer_email' cell matches '\^unknown\$'"):
        make_cases.check_spoken("transactions", dirty, truth)
