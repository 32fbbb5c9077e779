"""The demo drops are what make_sample.py writes, and hold the everyday kinds of dirt the demo shows."""

from __future__ import annotations

from pathlib import Path

from smolclean_dagster.core.drops import read_drop
from smolclean_dagster.core.profile import detect_issues

#: The everyday dirt of exports; rarer kinds (mojibake, escaped quotes...) are shown on the benchmarks.
DEMO_KINDS = {"whitespace", "null_tokens", "case_variants", "rare_variants", "number_format", "date_format",
              "boolean_spellings"}
from smolclean_dagster.sample_data import CUSTOMERS_CSV, ORDERS_JSONL, make_sample


def test_committed_files_are_the_script_output(tmp_path: Path):
    make_sample.main(tmp_path)
    assert (tmp_path / "customers.csv").read_bytes() == CUSTOMERS_CSV.read_bytes()
    assert (tmp_path / "orders.jsonl").read_bytes() == ORDERS_JSONL.read_bytes()


def test_demo_data_holds_the_everyday_kinds_of_dirt():
    findings = detect_issues(read_drop(CUSTOMERS_CSV)) + detect_issues(read_drop(ORDERS_JSONL))
    assert DEMO_KINDS <= {f.kind for f in findings}
    whitespace = [f for f in findings if f.kind == "whitespace"]
    assert any(f.params["collapse"] for f in whitespace) and any(f.params["strip"] for f in whitespace)
    assert 300 <= len(read_drop(CUSTOMERS_CSV)) <= 400
