"""Consolidation: merge functions that do the same job, and prove the module's output did not change.

A merge is kept only when the whole module with the merged function gives exactly the same rows as the
module before, on the rows it is checked on, passes the code gate, and stays idempotent, and when the
merged function itself passes every check a new function does (`check_candidate`: deterministic,
idempotent, no new nulls but those its items name, its cost per cell). Nothing disappears silently: the
merged entry names every function it replaced (`merged_from`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .export import render_module
from .functions import CleaningFunction
from .registry import Registry, RegistryEntry
from .validate import COST_ROWS, CodeRunner, check_candidate, frames_equal

log = logging.getLogger("smolclean.consolidate")

#: Merges several functions into one, or says None; the result is checked before it is kept.
Merger = Callable[[list[CleaningFunction]], CleaningFunction | None]
#: What rule-made functions must share to be tried as one group (None: never merged).
MergeKey = Callable[[CleaningFunction], "tuple | None"]


def same_rule_and_columns(function: CleaningFunction) -> tuple | None:
    """The default grouping of rule-made functions: one template on the same columns."""
    return None if function.rule is None else ("rule", function.rule.template, function.columns)


@dataclass(frozen=True)
class Merge:
    """One consolidation decision: `names` became `into`, or stayed apart and why."""

    into: str | None
    names: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Consolidation:
    """The registry after consolidation and every merge tried."""

    registry: Registry
    merges: tuple[Merge, ...] = field(default_factory=tuple)

    @property
    def merged(self) -> tuple[Merge, ...]:
        return tuple(m for m in self.merges if m.into)


def candidate_groups(registry: Registry, *, by_columns: bool, rule_key: MergeKey = same_rule_and_columns) -> list[list[int]]:
    """Positions of entries that may do the same job: made by one rule with the same `rule_key` (by default
    on the same columns), and (with `by_columns`, for LLM-written functions) any functions touching exactly
    the same columns."""
    groups: dict[tuple, list[int]] = {}
    for i, entry in enumerate(registry.entries):
        fn = entry.function
        if fn.rule is not None:
            key = rule_key(fn)
            if key is None:
                continue
        elif by_columns and fn.columns:
            key = ("columns", tuple(sorted(fn.columns)))
        else:
            continue
        groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def consolidate(
    registry: Registry,
    rows: pd.DataFrame,
    runner: CodeRunner,
    *,
    rule_merger: Merger | None,
    model_merger: Merger | None = None,
    rule_key: MergeKey = same_rule_and_columns,
    timeout_s: float = 60.0,
) -> Consolidation:
    """Merge redundant functions of `registry`, checking each merge on `rows` (drop rows, never held out).

    `rule_key` groups rule-made functions for `rule_merger` (the rules analyst's `merge_key` also groups
    functions of one column-wise rule made on different columns).

    Example:
        >>> rules = RulesAnalyst()
        >>> result = consolidate(registry, rows, sandbox, rule_merger=rules.merge, rule_key=rules.merge_key)  # doctest: +SKIP
        >>> [(m.into, m.names) for m in result.merged]                                           # doctest: +SKIP
        [('unify_case_city', ('unify_case_city', 'unify_case_city_2'))]
    """
    from .sandbox import SandboxError, check_module

    merges: list[Merge] = []
    current = registry
    baseline: pd.DataFrame | None = None
    while True:
        groups = candidate_groups(current, by_columns=model_merger is not None, rule_key=rule_key)
        tried = {m.names for m in merges}
        group = next((g for g in groups if tuple(current.entries[i].function.name for i in g) not in tried), None)
        if group is None:
            break
        entries = [current.entries[i] for i in group]
        names = tuple(e.function.name for e in entries)
        merger = rule_merger if entries[0].function.rule is not None else model_merger
        merged = merger([e.function for e in entries]) if merger else None
        if merged is None:
            merges.append(Merge(None, names, "cannot be merged"))
            continue
        others = {e.function.name for i, e in enumerate(current.entries) if i not in group}
        if merged.name in others:
            merges.append(Merge(None, names, f"the merged name {merged.name!r} is another function's"))
            continue
        candidate = _replace(current, group, merged)
        try:
            source = render_module(candidate)
            check_module(source)
            if baseline is None:
                baseline = _run(current, rows, runner, timeout_s)
            once = runner.run(source, rows, entry="clean", module=True, timeout_s=timeout_s)
            twice = runner.run(source, once, entry="clean", module=True, timeout_s=timeout_s)
        except (SyntaxError, SandboxError) as exc:
            merges.append(Merge(None, names, f"merged code rejected: {type(exc).__name__}: {exc}"))
            continue
        if not frames_equal(once, baseline):
            merges.append(Merge(None, names, "the merged function changes the module's output"))
            continue
        if not frames_equal(once, twice):
            merges.append(Merge(None, names, "the merged module is not idempotent"))
            continue
        refused = _check_merged(merged, current, group, rows, runner, timeout_s)
        if refused:
            merges.append(Merge(None, names, f"the merged function was rejected: {refused}"))
            continue
        log.info("consolidation: %s merged into %s", names, merged.name)
        merges.append(Merge(merged.name, names, f"same output on {len(rows)} rows"))
        current = candidate
    return Consolidation(current, tuple(merges))


def _run(registry: Registry, rows: pd.DataFrame, runner: CodeRunner, timeout_s: float) -> pd.DataFrame:
    if not registry.entries:
        return rows.reset_index(drop=True)
    return runner.run(render_module(registry), rows, entry="clean", module=True, timeout_s=timeout_s)


def _check_merged(merged: CleaningFunction, registry: Registry, group: list[int], rows: pd.DataFrame,
                  runner: CodeRunner, timeout_s: float) -> str | None:
    """Why the merged function fails a check a new function must pass, on `rows` as the functions before the
    group leave them; None when it passes. It need not change anything on these rows (the ones it replaces
    may not have either)."""
    from .sandbox import SandboxError

    entries = [registry.entries[i] for i in group]
    spread = rows.iloc[np.linspace(0, len(rows) - 1, COST_ROWS).round().astype(int)] if len(rows) > COST_ROWS else rows
    try:
        before = _run(registry.with_entries(list(registry.entries[: group[0]])), spread.reset_index(drop=True),
                      runner, timeout_s)
        verdict = check_candidate(
            merged, before, before.iloc[:0], runner, timeout_s=timeout_s, require_change=False,
            allow_row_drops=any(e.evidence is not None and e.evidence.rows_dropped for e in entries),
            asks=tuple(dict.fromkeys(t for e in entries for t in e.serves)),
        )
    except SandboxError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if verdict.accepted else verdict.reason


def _replace(registry: Registry, group: list[int], merged: CleaningFunction) -> Registry:
    """The registry with the group's entries replaced by one, at the position of the first of them."""
    first = registry.entries[group[0]]
    replaced = [registry.entries[i] for i in group]
    names = tuple(dict.fromkeys(n for e in replaced for n in (e.merged_from or (e.function.name,))))
    entry = RegistryEntry(
        function=merged,
        provenance=first.provenance,
        evidence=first.evidence,
        merged_from=names,
        serves=tuple(dict.fromkeys(t for e in replaced for t in e.serves)),
    )
    entries = [entry if i == group[0] else e for i, e in enumerate(registry.entries) if i not in group[1:]]
    return registry.with_entries(entries)
