"""The shadow check: a proposed module version runs beside the live one on the latest drops.

Both modules clean the same bounded sample of rows (the start of each of the latest drops) in the sandbox,
as `smolclean apply` would; every cell whose cleaned value differs is counted against the function(s) of
the proposed version that explain it (added, changed or removed functions touching its column), with up to
`EXAMPLES` before -> after pairs each. That is what a person approves, and what `promote: auto` weighs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from .drop_io.writers import plain_value
from .drops import drop_key, iter_batches
from .errors import SmolcleanError
from .loop import MODEL_FAULTS
from .registry_changes import RegistryChanges

#: Rows of the latest drops both versions clean, at most, in all.
SHADOW_ROWS = 2_000
#: Latest drops the sample is taken from.
SHADOW_DROPS = 3
#: Before -> after pairs kept per function.
EXAMPLES = 10
#: A changed cell in a column no changed function declares.
UNATTRIBUTED = "(functions' order or shared columns)"


class CellChange(BaseModel):
    """One cell the proposed version cleans differently: the live version's value, then the proposed one's."""

    model_config = ConfigDict(frozen=True)

    drop: str
    row: int
    column: str
    before: str
    after: str


class FunctionDiff(BaseModel):
    """The cells one function of the proposed version changes compared to the live version."""

    model_config = ConfigDict(frozen=True)

    function: str
    cells: int
    examples: tuple[CellChange, ...] = ()


class ShadowDiff(BaseModel):
    """What the proposed version would change, cell by cell, on a sample of the latest drops.

    Example:
        >>> ShadowDiff(live_version=1, cells=200, changed=5).share
        0.025
    """

    model_config = ConfigDict(frozen=True)

    live_version: int
    drops: tuple[str, ...] = ()
    rows: int = 0
    cells: int = 0
    changed: int = 0
    functions: tuple[FunctionDiff, ...] = ()
    failures: tuple[str, ...] = Field(default=(), description="drops the proposed version fails on, and why")

    @property
    def share(self) -> float:
        """Changed cells over cells compared (0 when nothing was compared; 1 when the version fails on a drop)."""
        if self.failures:
            return 1.0
        return round(self.changed / self.cells, 6) if self.cells else 0.0

    def summary(self) -> str:
        drops = ", ".join(self.drops) or "no drop"
        return (f"{self.changed} of {self.cells} cells ({self.share:.2%}) cleaned differently than by live version "
                f"{self.live_version}, on {self.rows} rows of {drops}")

    def markdown(self) -> str:
        """Per function, the cells it changes and up to `EXAMPLES` before -> after pairs, as a table."""
        lines = [self.summary() + ".", ""] + [f"**Fails** on {f}" for f in self.failures] + [""] * bool(self.failures)
        if not self.functions:
            return "\n".join(lines + ["No cell would change."])
        lines += ["| function | cells | drop | row | column | before (live) | after (proposed) |",
                  "|---|---|---|---|---|---|---|"]
        for f in self.functions:
            for i, x in enumerate(f.examples or (None,)):
                head = f"| `{f.function}` | {f.cells} " if i == 0 else "| | "
                cells = (f"| {_md(x.drop)} | {x.row} | {_md(x.column)} | `{_md(x.before)}` | `{_md(x.after)}` |"
                         if x else "| | | | | |")
                lines.append(head + cells)
        return "\n".join(lines)

    def text(self) -> str:
        """The same for a terminal: one block per function."""
        lines = [self.summary()] + [f"  FAILS on {f}" for f in self.failures]
        for f in self.functions:
            lines.append(f"  {f.function}: {f.cells} cell(s)")
            lines += [f"    {x.drop} row {x.row}, {x.column}: {x.before} -> {x.after}" for x in f.examples]
        return "\n".join(lines)


def latest_drops(folder: Path, glob: str = "*", limit: int = SHADOW_DROPS) -> list[Path]:
    """The newest files of a drop folder (hidden and temporary names left out), newest first."""
    if not folder.is_dir():
        return []
    files = [p for p in folder.glob(glob) if p.is_file() and not p.name.startswith(".")
             and not p.name.endswith((".tmp", ".part", ".partial", ".crdownload"))]
    return sorted(files, key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)[:limit]


def shadow_check(live_source: str, proposed_source: str, drops: Sequence[Path], runner, changes: RegistryChanges, *,
                 live_version: int, rows: int = SHADOW_ROWS, timeout_s: float = 60.0) -> ShadowDiff:
    """Clean the start of each drop with both modules in the sandbox (`runner`) and diff the results.

    A drop that cannot be read is left out of the sample (its own cleaning run reports it); a drop the proposed
    version fails on is named in `failures` (the live one failing there too is our business, and raises).
    """
    per_drop = max(1, rows // max(1, len(drops)))
    found: dict[str, list[CellChange]] = {}
    counts: dict[str, int] = {}
    used: list[str] = []
    failures: list[str] = []
    total_rows = total_cells = changed = 0
    for path in drops:
        try:
            sample = next(iter_batches(path, per_drop), None)
        except (SmolcleanError, OSError):  # an unreadable drop: its cleaning run names the problem
            continue
        if sample is None or sample.empty:
            continue
        sample = sample.reset_index(drop=True)
        key = drop_key(path)
        before = runner.run(live_source, sample, entry="clean", module=True, timeout_s=timeout_s)
        try:
            after = runner.run(proposed_source, sample, entry="clean", module=True, timeout_s=timeout_s)
        except MODEL_FAULTS as exc:
            failures.append(f"{key}: {type(exc).__name__}: {exc}")
            continue
        used.append(key)
        n = min(len(before), len(after))
        columns = list(dict.fromkeys([*map(str, before.columns), *map(str, after.columns)]))
        total_rows += n
        total_cells += n * len(columns)
        for column in columns:
            old = _texts(before, column, n)
            new = _texts(after, column, n)
            owner = _owner(column, changes)
            for row, (a, b) in enumerate(zip(old, new)):
                if a == b:
                    continue
                changed += 1
                counts[owner] = counts.get(owner, 0) + 1
                examples = found.setdefault(owner, [])
                if len(examples) < EXAMPLES:
                    examples.append(CellChange(drop=key, row=row, column=column, before=a, after=b))
    functions = tuple(FunctionDiff(function=name, cells=counts[name], examples=tuple(found[name]))
                      for name in sorted(counts, key=lambda k: (-counts[k], k)))
    return ShadowDiff(live_version=live_version, drops=tuple(used), rows=total_rows, cells=total_cells,
                      changed=changed, functions=functions, failures=tuple(failures))


def _texts(df: pd.DataFrame, column: str, n: int) -> list[str]:
    """A column's first `n` values as comparable text (JSON, so 1 and "1" differ); `(no column)` when absent."""
    if column not in df.columns:
        return ["(no column)"] * n
    return [json.dumps(plain_value(v), ensure_ascii=False, default=str) for v in df[column].tolist()[:n]]


def _owner(column: str, changes: RegistryChanges) -> str:
    """The changed functions that touch `column` (declared columns; one declaring none touches any)."""
    names = [c.name for c in (*changes.added, *changes.changed, *changes.removed)
             if column in c.columns or not c.columns]
    return ", ".join(names) or UNATTRIBUTED


def _md(text: object) -> str:
    s = str(text).replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= 80 else s[:79] + "…"
