"""What the rules analyst finds over the whole drop, beside what the loop's detectors find in the chunk.

The analyst is shown reference rows of the drop (all but the held-out rows, cleaned by the registry so
far). Over them it finds rare dirt the chunk happens not to hold (a flag mark on 30 cells of 50,000) and
the values that break a dependency between columns (a zip code's city, a flight's departure time), which
only many rows show. Learning over a big frame costs seconds, so the result is kept per frame content
while the registry, and with it the cleaned reference, stays the same.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import pandas as pd

from ..detectors import dependencies
from ..findings import Finding
from ..profile import detect_issues
from .asked import asks_to_fill
from .base import AnalysisRequest

#: Reference frames whose findings are kept (one per registry revision a worker process is likely to see).
KEPT_VIEWS = 4


@dataclass
class DropView:
    """What was learned over one reference frame."""

    learned: dependencies.Dependencies
    column_findings: list[Finding]
    violations: dict[tuple[tuple[str, ...], bool], list[Finding]]


_VIEWS: OrderedDict[str, DropView] = OrderedDict()


def drop_findings(request: AnalysisRequest, chunk_findings: list[Finding], prefixes: dict[str, str]) -> list[Finding]:
    """The findings over the reference rows that the chunk's own findings do not already cover.

    `prefixes` maps each finding kind to the name prefix of the rule fixing it, so that dirt a registered
    function already fixes is not reported again from the drop: what is left of it in the reference is
    what that function could not fix, and only the chunk's own findings ask for another one.
    Dependency findings carry in their params the tables the rule embeds.

    Example:
        >>> drop_findings(AnalysisRequest(dataset="d", chunk_id="c", step=1, chunk=chunk, reference=drop),
        ...               [], {"dependency_violations": "repair_dependencies"})   # doctest: +SKIP
    """
    evidence = request.reference if request.reference is not None and len(request.reference) else request.chunk
    if len(evidence) < dependencies.MIN_ROWS:
        return []
    view = _view(evidence, request.labels.truth if request.labels is not None else None)
    out = []
    if evidence is not request.chunk:
        seen = {(f.kind, f.column) for f in chunk_findings}
        out = [
            f for f in view.column_findings
            if (f.kind, f.column) not in seen and not _covered(request, prefixes.get(f.kind), [f.column])
        ]
    learned = view.learned
    repaired = _covered(request, prefixes.get(dependencies.KIND), learned.dependents)
    # Sources vote once: after a voted repair every source agrees, and a second vote would count the
    # repaired values (now looking like copies of each other) again.
    voted = {d.dependent for d in learned.dependencies if d.source is not None} & repaired
    if voted:
        learned = learned.for_columns([c for c in learned.dependents if c not in voted])
    fill = asks_to_fill(request.instructions)
    key = (tuple(sorted(voted)), fill)
    if key not in view.violations:
        view.violations[key] = dependencies.detect(evidence, learned, fill_empty=fill)
    # A column already repaired by its dependencies is repaired again only for what the chunk itself still
    # shows (keys the first repair fixed can settle more cells).
    again = (
        {f.column for f in dependencies.detect(request.chunk, learned.for_columns(sorted(repaired)), fill_empty=fill)}
        if repaired else set()
    )
    for f in view.violations[key]:
        if f.column in repaired and f.column not in again:
            continue
        part = learned.for_columns([f.column])
        tables = [[d.determinant, d.dependent, d.mapping, d.source is not None, list(d.strong)] for d in part.dependencies]
        conditions = [[c.determinant, c.dependent, c.usual, c.value] for c in part.conditions]
        witnesses = [[d.determinant, d.dependent, d.mapping] for d in part.witnesses]
        params = {**f.params, "dependencies": tables, "conditions": conditions, "witnesses": witnesses,
                  "numeric": list(part.numeric), "fill_empty": fill}
        out.append(f.model_copy(update={"params": params}))
    return out


def _covered(request: AnalysisRequest, prefix: str | None, columns: list[str]) -> set[str]:
    """Which of `columns` a registered function named `<prefix>_...` already fixes (one that does not say
    its columns covers them all)."""
    out: set[str] = set()
    if prefix is None:
        return out
    for summary in request.registry:
        if summary.name.startswith(prefix + "_"):
            out |= set(columns) & set(summary.columns) if summary.columns else set(columns)
    return out


def _view(frame: pd.DataFrame, truth: pd.DataFrame | None = None) -> DropView:
    """What is learned over `frame`, with the labelled rows as the person wants them (`truth`), kept per frame."""
    digest = hashlib.sha256(repr(list(frame.columns)).encode())
    try:
        for part in (frame, truth) if truth is not None else (frame,):
            digest.update(pd.util.hash_pandas_object(part.astype(object), index=False).to_numpy().tobytes())
    except TypeError:  # cells pandas cannot hash: learn again rather than risk a stale answer
        return DropView(dependencies.learn(frame, truth), detect_issues(frame), {})
    key = digest.hexdigest()
    if key not in _VIEWS:
        _VIEWS[key] = DropView(dependencies.learn(frame, truth), detect_issues(frame), {})
        while len(_VIEWS) > KEPT_VIEWS:
            _VIEWS.popitem(last=False)
    return _VIEWS[key]
