"""Scores recorded runs on the instructed-cleaning cases (benchmarks/instructed/): cell F1 against the truth,
per case and per column, with the model calls and tokens each run took.

Run:
    python benchmarks/instructed.py --run patients=OUT.jsonl --run products=OUT.csv \\
        --run transactions=OUT.jsonl --log patients=Q1/log.jsonl --log products=Q2/log.jsonl ...
    python benchmarks/instructed.py --self-check      # truth scores 1.0, the dirty file 0.0

`--run CASE=PATH` is the cleaned output a run wrote for the case's dirty file (.jsonl, .csv or .parquet, read
with its types: JSON values as JSON, Parquet through pyarrow, CSV as text). Cases without --run are skipped.

`--log CASE=PATH` is the model server's log (QUEUE/log.jsonl of ../shared/tools/file_llm_server.py: one line
per call, {"t", "source", "wait_s", "prompt_tokens", "completion_tokens", "total_tokens"}, tokens estimated as
characters / 4). Give each case its own queue folder, or share one log and cut it with
`--window CASE=T0,T1` (unix seconds, t of the call's answer): only lines with T0 <= t <= T1 count. A call
answered from the server's cache counts as a call (the run made it) and is also shown apart.

Scoring, cell by cell: rows aligned by position, columns by name, against `<case>.truth.jsonl|csv`.
- an error is a cell whose dirty value differs from the truth; a change is a cell whose cleaned value differs
  from the dirty one; a change is correct when the cleaned value equals the truth.
- precision = correct / changes, recall = correct / errors, exact F1 their harmonic mean (the headline).
- "exact": JSON cases compare typed values: a list equals a list with the same items, 12.5 equals 12.5 (and
  12.5 == 12.5000), but the string "12.5" is not the number 12.5, "true" is not true and null is only null.
  CSV cases compare the text of the cell (an output with types is written as a CSV writer would: null as the
  empty cell, numbers in Python's shortest form, lists and objects as JSON).
- "typing aside" (a separate, labelled column, never the headline): both sides turned to one canonical text
  first: a string holding a JSON number, boolean, array or object is read as that value, and numbers are
  compared by value ("12.50" = "12.5" = 12.5). Case, spaces and anything else still count.
A cleaned file with another number of rows is refused (the product keeps every row); a column missing from
it counts as cells left unchanged.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import describe_machine, machine_info, table, write_results  # noqa: E402

CASES_DIR = Path(__file__).resolve().with_name("instructed")
#: case -> (dirty file, truth file), in CASES_DIR
CASES = {
    "patients": ("patients.jsonl", "patients.truth.jsonl"),
    "products": ("products.csv", "products.truth.csv"),
    "transactions": ("transactions.jsonl", "transactions.truth.jsonl"),
}
#: The issue's bar for a capable model.
TARGET_F1 = 0.97


class ScoreInputError(Exception):
    """A run, log or truth file the scorer cannot use; the message names it and what to do."""


# ------------------------------------------------------------------------------------------------ reading

def read_rows(path: Path) -> list[dict]:
    """The rows of a file as dicts of typed values (CSV: text, empty cell as "")."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise ScoreInputError(f"{path}: no such file")
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ScoreInputError(f"{path}: line {lineno} is not valid JSON: {exc.msg}") from exc
        return [_no_nan(r) for r in rows]
    if suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8-sig", newline="") as fh:
            return list(csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ","))
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return [_no_nan(r) for r in pq.read_table(path).to_pylist()]
    raise ScoreInputError(f"{path}: unknown extension {suffix!r}; give a .jsonl, .csv or .parquet file")


def _no_nan(value: object) -> object:
    """NaN (how pandas and Parquet may write a missing number) read as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def as_csv_text(value: object) -> str:
    """A typed value as a CSV writer writes it (the cell text a user would see)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# -------------------------------------------------------------------------------------------- comparing

def same_exact(a: object, b: object) -> bool:
    """Typed equality: booleans only equal booleans, numbers equal numbers by value, lists and objects item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_exact(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_exact(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def canonical(value: object) -> object:
    """The value with typing set aside: JSON held in a string read as JSON, numbers as floats."""
    if isinstance(value, str):
        # Only a string that is exactly JSON: " 50" keeps its stray space, and "0742" is no number in JSON.
        if value and value == value.strip() and (value[0] in "[{-0123456789" or value in ("true", "false", "null")):
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                return value
            return canonical(parsed) if not isinstance(parsed, str) else value
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value


def same_typing_aside(a: object, b: object) -> bool:
    return same_exact(canonical(a), canonical(b))


# ----------------------------------------------------------------------------------------------- scoring

@dataclass
class Score:
    """Cell counts and the scores they give."""

    errors: int = 0
    changes: int = 0
    correct: int = 0

    def add(self, dirty: object, cleaned: object, truth: object, same) -> None:
        error, change = not same(dirty, truth), not same(cleaned, dirty)
        self.errors += error
        self.changes += change
        self.correct += change and same(cleaned, truth)

    @property
    def precision(self) -> float:
        return self.correct / self.changes if self.changes else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.errors if self.errors else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {"errors": self.errors, "changes": self.changes, "correct": self.correct,
                "precision": round(self.precision, 4), "recall": round(self.recall, 4), "f1": round(self.f1, 4)}


@dataclass
class CaseScore:
    """One case scored: exact (headline), typing aside, and exact per column."""

    case: str
    run: str
    rows: int
    cells: int
    exact: Score = field(default_factory=Score)
    typing_aside: Score = field(default_factory=Score)
    columns: dict[str, Score] = field(default_factory=dict)
    missing_columns: list[str] = field(default_factory=list)


def score_case(case: str, cleaned_path: Path, cases_dir: Path = CASES_DIR) -> CaseScore:
    """Score a cleaned file of `case` cell by cell against the case's truth (see the module docstring)."""
    dirty_name, truth_name = CASES[case]
    dirty, truth = read_rows(cases_dir / dirty_name), read_rows(cases_dir / truth_name)
    cleaned = read_rows(cleaned_path)
    if len(dirty) != len(truth):
        raise ScoreInputError(f"{cases_dir / truth_name}: {len(truth)} rows, but {dirty_name} has {len(dirty)}; "
                              "regenerate both with make_cases.py")
    if len(cleaned) != len(truth):
        raise ScoreInputError(f"{cleaned_path}: {len(cleaned)} rows, but the case has {len(truth)}; rows are "
                              "aligned by position, so give the cleaned output of the whole dirty file")
    text_case = Path(truth_name).suffix == ".csv"
    columns = list(truth[0])
    present = set().union(*(r.keys() for r in cleaned)) if cleaned else set()
    result = CaseScore(case, str(cleaned_path), len(truth), len(truth) * len(columns),
                       columns={c: Score() for c in columns},
                       missing_columns=[c for c in columns if c not in present])
    for d_row, c_row, t_row in zip(dirty, cleaned, truth):
        for col in columns:
            d, t = d_row.get(col), t_row.get(col)
            c = c_row[col] if col in c_row else d  # a dropped column: its cells left as they were
            if text_case:
                d, c, t = as_csv_text(d), as_csv_text(c), as_csv_text(t)
            result.exact.add(d, c, t, same_exact)
            result.columns[col].add(d, c, t, same_exact)
            result.typing_aside.add(d, c, t, same_typing_aside)
    return result


# ------------------------------------------------------------------------------------------------- calls

@dataclass
class Calls:
    """The model calls of one run, from the server's log."""

    calls: int = 0
    from_cache: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    largest_call_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def read_calls(path: Path, window: tuple[float, float] | None = None) -> Calls:
    """Count the calls and tokens in a file_llm_server log (only those answered inside `window`, if given)."""
    if not path.is_file():
        raise ScoreInputError(f"{path}: no such log; give the QUEUE/log.jsonl the model server wrote")
    calls = Calls()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            t, prompt, completion = float(entry["t"]), int(entry["prompt_tokens"]), int(entry["completion_tokens"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ScoreInputError(f"{path}: line {lineno} is not a model server log entry ({exc})") from exc
        if window and not window[0] <= t <= window[1]:
            continue
        calls.calls += 1
        calls.from_cache += entry.get("source") == "cache"
        calls.prompt_tokens += prompt
        calls.completion_tokens += completion
        calls.largest_call_tokens = max(calls.largest_call_tokens, prompt + completion)
    return calls


# ---------------------------------------------------------------------------------------------- printing

def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        case, sep, value = item.partition("=")
        if not sep or case not in CASES:
            raise ScoreInputError(f"{what} {item!r}: expected CASE=VALUE with CASE one of {', '.join(CASES)}")
        out[case] = value
    return out


def _window(text: str) -> tuple[float, float]:
    try:
        start, end = (float(x) for x in text.split(","))
    except ValueError as exc:
        raise ScoreInputError(f"--window {text!r}: expected T0,T1 in unix seconds") from exc
    return start, end


def report(scores: list[CaseScore], calls: dict[str, Calls]) -> str:
    """The tables a measurement prints: per case, then per column."""
    rows = []
    for s in scores:
        c = calls.get(s.case)
        rows.append([s.case, s.rows, s.cells, s.exact.errors, s.exact.changes, s.exact.correct,
                     s.exact.precision, s.exact.recall, s.exact.f1, s.typing_aside.f1,
                     "yes" if s.exact.f1 >= TARGET_F1 else "no",
                     c.calls if c else None, c.from_cache if c else None, c.tokens if c else None,
                     c.largest_call_tokens if c else None])
    lines = [table(["case", "rows", "cells", "errors", "changes", "correct", "P", "R", "exact F1",
                    "F1 typing aside", f"F1 >= {TARGET_F1}", "calls", "cached", "tokens", "largest call"], rows)]
    for s in scores:
        lines.append("")
        lines.append(f"{s.case} per column (exact; {s.run})")
        lines.append(table(["column", "errors", "changes", "correct", "P", "R", "F1"],
                           [[col, sc.errors, sc.changes, sc.correct, sc.precision, sc.recall, sc.f1]
                            for col, sc in s.columns.items()]))
        if s.missing_columns:
            lines.append(f"missing from the cleaned file (left unchanged): {', '.join(s.missing_columns)}")
    return "\n".join(lines)


def self_check(cases_dir: Path = CASES_DIR) -> list[str]:
    """Score each case's truth (must give F1 1.0) and its dirty file (must give F1 0.0, recall 0); the failures."""
    failures = []
    for case, (dirty_name, truth_name) in CASES.items():
        truth = score_case(case, cases_dir / truth_name, cases_dir)
        dirty = score_case(case, cases_dir / dirty_name, cases_dir)
        print(f"{case}: truth as the run: errors {truth.exact.errors}, changes {truth.exact.changes}, "
              f"P {truth.exact.precision:.3f} R {truth.exact.recall:.3f} F1 {truth.exact.f1:.3f} | "
              f"dirty as the run: changes {dirty.exact.changes}, R {dirty.exact.recall:.3f} F1 {dirty.exact.f1:.3f}")
        if truth.exact.errors == 0 or truth.exact.f1 != 1.0 or truth.typing_aside.f1 != 1.0:
            failures.append(f"{case}: the truth scored against itself gives F1 {truth.exact.f1:.3f}, not 1.0")
        if dirty.exact.f1 != 0.0 or dirty.exact.recall != 0.0 or dirty.exact.changes:
            failures.append(f"{case}: the dirty file scored as a run gives F1 {dirty.exact.f1:.3f}, not 0.0")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", default=[], metavar="CASE=PATH", help="cleaned output of a case")
    parser.add_argument("--log", action="append", default=[], metavar="CASE=PATH", help="model server log.jsonl")
    parser.add_argument("--window", action="append", default=[], metavar="CASE=T0,T1",
                        help="only log lines with T0 <= t <= T1 (unix seconds) count for CASE")
    parser.add_argument("--self-check", action="store_true", help="score truth and dirty files against the truth")
    parser.add_argument("--no-write", action="store_true", help="do not write benchmarks/results/instructed.json")
    args = parser.parse_args(argv)
    try:
        if args.self_check:
            failures = self_check()
            for failure in failures:
                print("FAILED:", failure)
            print("self-check", "failed" if failures else "passed: truth F1 1.0, dirty F1 0.0 on every case")
            return 1 if failures else 0
        runs, logs = _pairs(args.run, "--run"), _pairs(args.log, "--log")
        windows = {case: _window(v) for case, v in _pairs(args.window, "--window").items()}
        if not runs:
            parser.error("give at least one --run CASE=PATH (or --self-check)")
        scores = [score_case(case, Path(path)) for case, path in runs.items()]
        calls = {case: read_calls(Path(path), windows.get(case)) for case, path in logs.items()}
    except ScoreInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = machine_info()
    print(f"Instructed cleaning, cell scores against the hand-made truth ({describe_machine(info)})")
    print(report(scores, calls))
    if not args.no_write:
        payload = {
            "machine": info,
            "target_f1": TARGET_F1,
            "cases": {
                s.case: {"run": s.run, "rows": s.rows, "cells": s.cells, "exact": s.exact.as_dict(),
                         "typing_aside": s.typing_aside.as_dict(), "missing_columns": s.missing_columns,
                         "columns": {col: sc.as_dict() for col, sc in s.columns.items()},
                         "calls": (vars(calls[s.case]) | {"tokens": calls[s.case].tokens}) if s.case in calls else None,
                         "log": logs.get(s.case), "window": windows.get(s.case)}
                for s in scores
            },
        }
        print(f"\nwrote {write_results('instructed', payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
