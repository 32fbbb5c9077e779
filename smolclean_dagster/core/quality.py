"""Validation of a whole registry on held-out rows: the module's blocking checks and quality before/after."""

from __future__ import annotations

from collections import Counter

import pandas as pd
from pydantic import BaseModel, ConfigDict

from .export import render_module
from .profile import detect_issues
from .registry import Registry
from .validate import CodeRunner, as_text, changed_cells, frames_equal


class ColumnQuality(BaseModel):
    """Detector findings (cells affected) in one column before and after cleaning, and what is left: the
    findings still there after cleaning, in words (e.g. "3 cells of 'state' spell a missing value ...")."""

    model_config = ConfigDict(frozen=True)

    column: str
    before: int
    after: int
    left: tuple[str, ...] = ()


class CheckOutcome(BaseModel):
    """One blocking check: passed or not, and what was seen."""

    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    detail: str


class RowExample(BaseModel):
    """One held-out row before and after the module: the shipped tests replay these."""

    model_config = ConfigDict(frozen=True)

    before: dict[str, str | None]
    after: dict[str, str | None]


class ValidationReport(BaseModel):
    """The registry's module run on held-out rows it was never shown."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    registry_version: int
    holdout_rows: int
    cells_changed: int
    checks: tuple[CheckOutcome, ...]
    quality: tuple[ColumnQuality, ...]
    examples: tuple[RowExample, ...] = ()

    def check(self, name: str) -> CheckOutcome:
        return next(c for c in self.checks if c.name == name)

    @property
    def passed(self) -> bool:
        """Whether every blocking check passed; says nothing of what is left (see `left`)."""
        return all(c.passed for c in self.checks)

    @property
    def left(self) -> tuple[ColumnQuality, ...]:
        """The columns in which the detectors still find something after cleaning, in column order."""
        return tuple(q for q in self.quality if q.after)


def _issue_counts(df: pd.DataFrame) -> tuple[Counter[str], dict[str, list[str]]]:
    counts: Counter[str] = Counter()
    messages: dict[str, list[str]] = {}
    for f in detect_issues(df):
        counts[f.column] += f.count
        messages.setdefault(f.column, []).append(f.message)
    return counts, messages


def validate_registry(
    registry: Registry, holdout: pd.DataFrame, runner: CodeRunner, *, timeout_s: float = 60.0
) -> ValidationReport:
    """Run the exported module on `holdout` and check it: compiles and passes the gate, keeps every row,
    is idempotent, and leaves no column with more detector findings than before.

    Example:
        >>> report = validate_registry(registry, holdout_rows, sandbox)   # doctest: +SKIP
        >>> report.passed                                                 # doctest: +SKIP
        True
    """
    from .sandbox import SandboxError, check_module

    source = render_module(registry)
    checks: list[CheckOutcome] = []
    try:
        check_module(source)
        checks.append(CheckOutcome(name="module_compiles", passed=True, detail="parses and passes the code gate"))
    except (SyntaxError, SandboxError) as exc:
        checks.append(CheckOutcome(name="module_compiles", passed=False, detail=str(exc)))
        return ValidationReport(
            dataset=registry.dataset, registry_version=registry.version, holdout_rows=len(holdout),
            cells_changed=0, checks=tuple(checks), quality=(),
        )
    try:
        once = runner.run(source, holdout, entry="clean", module=True, timeout_s=timeout_s)
        twice = runner.run(source, once, entry="clean", module=True, timeout_s=timeout_s)
    except SandboxError as exc:
        checks.append(CheckOutcome(name="module_runs", passed=False, detail=f"{type(exc).__name__}: {exc}"))
        return ValidationReport(
            dataset=registry.dataset, registry_version=registry.version, holdout_rows=len(holdout),
            cells_changed=0, checks=tuple(checks), quality=(),
        )
    checks.append(
        CheckOutcome(
            name="no_row_lost",
            passed=len(once) == len(holdout),
            detail=f"{len(holdout)} held-out rows in, {len(once)} out",
        )
    )
    idem = frames_equal(once, twice)
    checks.append(
        CheckOutcome(
            name="idempotent",
            passed=idem,
            detail="clean(clean(rows)) == clean(rows)" if idem else "a second clean() changed the rows again",
        )
    )
    (before, _), (after, left) = _issue_counts(holdout), _issue_counts(once)
    quality = tuple(  # every column, clean ones too: a reader sees what was looked at
        ColumnQuality(column=str(c), before=before.get(str(c), 0), after=after.get(str(c), 0),
                      left=tuple(left.get(str(c), ())))
        for c in holdout.columns
    )
    worse = [q.column for q in quality if q.after > q.before]
    checks.append(
        CheckOutcome(
            name="quality_not_worse",
            passed=not worse,
            detail=f"more findings after cleaning in {worse}" if worse else "no column has more findings after cleaning",
        )
    )
    cells = int(changed_cells(holdout, once).to_numpy().sum()) if len(once) == len(holdout) else 0
    examples = row_examples(holdout, once) if len(once) == len(holdout) else ()
    return ValidationReport(
        dataset=registry.dataset,
        registry_version=registry.version,
        holdout_rows=len(holdout),
        cells_changed=cells,
        checks=tuple(checks),
        quality=quality,
        examples=examples,
    )


def row_examples(before: pd.DataFrame, after: pd.DataFrame, limit: int = 12) -> tuple[RowExample, ...]:
    """Up to `limit` changed rows, chosen so that every changed column shows up (first rows first)."""
    diff = changed_cells(before, after)
    b, a = as_text(before).reset_index(drop=True), as_text(after).reset_index(drop=True)
    chosen: list[int] = []
    for col in diff.columns:  # one row per changed column first, then more rows in order
        hits = diff.index[diff[col]].tolist()
        if hits and hits[0] not in chosen and len(chosen) < limit:
            chosen.append(hits[0])
    for i in diff.index[diff.any(axis=1)].tolist():
        if len(chosen) >= limit:
            break
        if i not in chosen:
            chosen.append(i)
    return tuple(
        RowExample(before=b.iloc[i].to_dict(), after=a.iloc[i].to_dict()) for i in sorted(chosen)
    )
