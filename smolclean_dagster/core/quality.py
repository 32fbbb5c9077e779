"""Validation of a whole registry on held-out rows: the module's blocking checks and quality before/after."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd
from pydantic import BaseModel, ConfigDict

from . import harm
from .entities import entity_keys
from .export import render_module
from .instructions import split_instructions
from .profile import detect_issues
from .registry import DroppedFunction, Registry
from .validate import CodeRunner, as_text, changed_cells, frames_equal, output_changes


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


class FunctionChanges(BaseModel):
    """What one function of the module changed on the held-out rows, in module order: for a person to review."""

    model_config = ConfigDict(frozen=True)

    name: str
    cells: int
    columns: tuple[str, ...] = ()
    #: Cells whose old value looked valid (see `harm`), and cells a later function set back to their old value.
    valid_hits: int = 0
    undone: int = 0
    pairs: tuple[tuple[str, str, str], ...] = ()  # (column, before, after), up to ten


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
    functions: tuple[FunctionChanges, ...] = ()

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
    registry: Registry, holdout: pd.DataFrame, runner: CodeRunner, *, timeout_s: float = 60.0,
    per_function: bool = True, text_rows: bool | Sequence[bool] = False,
) -> ValidationReport:
    """Run the exported module on `holdout` and check it: compiles and passes the gate, keeps every row,
    is idempotent, and leaves no column with more detector findings than before.

    The cells changed are counted as the output file shows them: in the rows of a text drop (`text_rows`, see
    `output_changes`) an empty string turned into null is no change.

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
    cells = int(output_changes(holdout, once, text_rows).to_numpy().sum()) if len(once) == len(holdout) else 0
    examples = row_examples(holdout, once) if len(once) == len(holdout) else ()
    return ValidationReport(
        dataset=registry.dataset,
        registry_version=registry.version,
        holdout_rows=len(holdout),
        cells_changed=cells,
        checks=tuple(checks),
        quality=quality,
        examples=examples,
        functions=(function_changes(registry, holdout, once, runner, timeout_s=timeout_s, text_rows=text_rows)
                   if per_function else ()),
    )


def function_changes(registry: Registry, holdout: pd.DataFrame, cleaned: pd.DataFrame, runner: CodeRunner, *,
                     timeout_s: float = 60.0, text_rows: bool | Sequence[bool] = False) -> tuple[FunctionChanges, ...]:
    """Each function's changes on the held-out rows, run one after another as the module runs them: cells,
    columns, up to ten before -> after pairs, the cells whose old value looked valid, and those undone later.
    Changes count as the output file shows them (`output_changes`: `text_rows` are rows of a text drop)."""
    if len(cleaned) != len(holdout) or holdout.empty:
        return ()
    counts = harm.ValueCounts.of(holdout)
    final = as_text(cleaned).reset_index(drop=True)
    out, rows = [], holdout.reset_index(drop=True)
    for entry in registry.entries:
        fn = entry.function
        after = runner.run(fn.code, rows, entry=fn.name, timeout_s=timeout_s).reset_index(drop=True)
        if len(after) != len(rows):  # rows dropped on purpose: nothing to compare cell by cell
            out.append(FunctionChanges(name=fn.name, cells=0))
            rows = after
            continue
        diff = output_changes(rows, after, text_rows)
        before_text, after_text = as_text(rows), as_text(after)
        pairs, undone = [], 0
        for column in diff.columns:
            hit = diff[column].to_numpy()
            for i in hit.nonzero()[0]:
                if len(pairs) < harm.MAX_PAIRS:
                    pairs.append((str(column), _shown(before_text.at[i, column]), _shown(after_text.at[i, column])))
            if column in final.columns:
                undone += int((final[column][hit].fillna("\0") == before_text[column][hit].fillna("\0")).sum())
        damage = harm.estimate(rows, after, counts)
        out.append(FunctionChanges(
            name=fn.name, cells=int(diff.to_numpy().sum()), columns=tuple(str(c) for c in diff.columns if diff[c].any()),
            valid_hits=damage.valid_hits, undone=undone, pairs=tuple(pairs),
        ))
        rows = after
    return tuple(out)


def _shown(value: str | None) -> str:
    return "null" if value is None else value


def keep_what_holds(registry: Registry, holdout: pd.DataFrame, runner: CodeRunner, *,
                    timeout_s: float = 60.0) -> tuple[Registry, tuple[DroppedFunction, ...]]:
    """The registry without the functions that make its module fail a blocking check on the held-out rows, and
    those functions with the reason: a learning run always ends with a module of what holds.

    The module is checked with its first 1, 2, ... functions; a function whose arrival makes a check fail
    (it fails on new rows, a second clean() changes the rows again, a column gets more findings) is dropped
    and the checks go on with the next one.

    Example:
        >>> kept, dropped = keep_what_holds(registry, holdout_rows, sandbox)   # doctest: +SKIP
        >>> [(d.name, d.reason) for d in dropped]                               # doctest: +SKIP
        [('unify_case_city', 'idempotent: a second clean() changed the rows again')]
    """
    if holdout.empty or validate_registry(registry, holdout, runner, timeout_s=timeout_s, per_function=False).passed:
        return registry, ()
    kept: list = []
    dropped: list[DroppedFunction] = []
    for entry in registry.entries:
        trial = registry.model_copy(update={"entries": (*kept, entry)})
        report = validate_registry(trial, holdout, runner, timeout_s=timeout_s, per_function=False)
        if report.passed:
            kept.append(entry)
        else:
            failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.passed)
            dropped.append(DroppedFunction(name=entry.function.name, reason=failed))
    pruned = registry.model_copy(update={"entries": tuple(kept), "version": registry.version + 1,
                                         "dropped": (*registry.dropped, *dropped)})
    return pruned, tuple(dropped)


def keep_what_agrees(registry: Registry, drops: dict[str, pd.DataFrame], runner: CodeRunner, *, instructions: str = "",
                     timeout_s: float = 60.0) -> tuple[Registry, tuple[DroppedFunction, ...]]:
    """The registry without the functions whose changes over the rows of a learned drop (`drops`: its name ->
    its reference rows) write, in some column, values the other rows of their entity contradict
    (`harm.contradictions`), and those functions with the reason.

    A function is judged on the drop it was learned from; a later drop may hold forms that drop never did
    ("7:02aDec 1" in a column that only held "7:02a"), and the function may fix their form into the wrong value.
    Learning from that drop takes it out here. Each drop is judged on its own rows (a flight of one day is not
    the same flight the next day), by the entity the drop names as read. A function serving the user's
    `instructions` stays: their words win (an item of the model's own plan is no such permission). The module
    runs once per drop; only when one of its columns fails is each function run on its own, in module order, to
    name which.

    Example:
        >>> kept, dropped = keep_what_agrees(registry, {"april.csv": april_rows}, sandbox)   # doctest: +SKIP
        >>> [d.name for d in dropped]                                                        # doctest: +SKIP
        ['unify_departure']
    """
    asked = {item.text for item in split_instructions(instructions)}
    dropped: list[DroppedFunction] = []
    for drop, rows in drops.items():
        keys = entity_keys(rows) if not rows.empty else {}  # the entity is the drop's: no function decides it
        gone = {d.name for d in dropped}
        kept = tuple(e for e in registry.entries if e.function.name not in gone)
        if not keys or not kept:
            continue
        rows = rows.reset_index(drop=True)
        trial = registry.model_copy(update={"entries": kept})
        once = runner.run(render_module(trial, with_main=False), rows, entry="clean", module=True, timeout_s=timeout_s)
        if len(once) != len(rows) or not harm.contradictions(rows, once.reset_index(drop=True), keys):
            continue
        for entry in kept:
            fn = entry.function
            after = runner.run(fn.code, rows, entry=fn.name, timeout_s=timeout_s).reset_index(drop=True)
            judged = len(after) == len(rows) and not asked.intersection(entry.serves)
            found = harm.contradictions(rows, after, keys) if judged else ()
            if found:
                why = harm.Harm(contradicted=found).describe()
                dropped.append(DroppedFunction(name=fn.name, reason=f"on the rows of {drop}, {why}"))
            else:
                rows = after
    if not dropped:
        return registry, ()
    return registry.without_dropped(dropped), tuple(dropped)


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
