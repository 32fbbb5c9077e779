"""Chunk planning: held-out rows, chunks, and which chunks the analyst should see first and why."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from .drops import chunk_id
from .errors import SmolcleanError
from .profile import detect_issues


class PlannedChunk(BaseModel):
    """One chunk of a drop, and why it was chosen (empty reason: not chosen)."""

    model_config = ConfigDict(frozen=True)

    id: str
    start: int
    stop: int
    findings: tuple[str, ...] = ()
    reason: str = ""


class ChunkPlan(BaseModel):
    """How one drop is split: held-out row positions, every chunk, and the chosen chunks in order."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    drop: str
    rows: int
    chunk_size: int
    holdout: tuple[int, ...]
    chunks: tuple[PlannedChunk, ...]
    selected: tuple[str, ...]

    def chunk(self, cid: str) -> PlannedChunk:
        for c in self.chunks:
            if c.id == cid:
                return c
        raise SmolcleanError(f"chunk {cid!r} is not part of drop {self.drop!r}")

    def chunk_rows(self, df: pd.DataFrame, cid: str) -> pd.DataFrame:
        """The chunk's rows without the held-out ones: what the analyst may see."""
        c = self.chunk(cid)
        held = set(self.holdout)
        keep = [i for i in range(c.start, c.stop) if i not in held]
        return df.iloc[keep].reset_index(drop=True)

    def holdout_rows(self, df: pd.DataFrame) -> pd.DataFrame:
        return df.iloc[list(self.holdout)].reset_index(drop=True)

    def visible_rows(self, df: pd.DataFrame) -> pd.DataFrame:
        """Every row but the held-out ones (the analyst's reference for whole-column statistics)."""
        mask = np.ones(len(df), dtype=bool)
        mask[list(self.holdout)] = False
        return df.iloc[np.flatnonzero(mask)].reset_index(drop=True)


def choose_holdout(drop: str, n_rows: int, fraction: float) -> tuple[int, ...]:
    """Deterministic held-out row positions: the same drop always holds out the same rows."""
    if fraction <= 0 or n_rows < 2:
        return ()
    seed = int(hashlib.sha256(drop.encode()).hexdigest()[:8], 16)
    k = max(1, min(n_rows - 1, round(n_rows * fraction)))
    return tuple(sorted(np.random.default_rng(seed).choice(n_rows, size=k, replace=False).tolist()))


def plan_chunks(
    df: pd.DataFrame, *, dataset: str, drop: str, chunk_size: int, budget: int, holdout_fraction: float
) -> ChunkPlan:
    """Split a drop and choose up to `budget` chunks: first those showing kinds of dirt not yet covered,
    then an even spread over the file so that rare problems in any region get a chance.

    Example:
        >>> plan = plan_chunks(df, dataset="c", drop="c.csv", chunk_size=50, budget=8, holdout_fraction=0.2)  # doctest: +SKIP
    """
    n = len(df)
    holdout = choose_holdout(drop, n, holdout_fraction)
    held = np.zeros(n, dtype=bool)
    held[list(holdout)] = True
    bounds = [(s, min(s + chunk_size, n)) for s in range(0, n, chunk_size)]
    # Profile at most a spread of 4x the budget so planning stays cheap on huge drops.
    probe = set(_spread(len(bounds), 4 * budget))
    signatures: dict[int, tuple[str, ...]] = {}
    for i in sorted(probe):
        s, e = bounds[i]
        rows = df.iloc[s:e][~held[s:e]]
        signatures[i] = tuple(sorted({f"{f.kind}:{f.column}" for f in detect_issues(rows)})) if len(rows) else ()
    reasons: dict[int, str] = {}
    covered: set[str] = set()
    while len(reasons) < budget:
        best = max(
            (i for i in signatures if i not in reasons),
            key=lambda i: (len(set(signatures[i]) - covered), -i),
            default=None,
        )
        if best is None or not set(signatures[best]) - covered:
            break
        new = sorted(set(signatures[best]) - covered)
        reasons[best] = "covers new issues: " + ", ".join(new[:6]) + (" ..." if len(new) > 6 else "")
        covered.update(new)
    for i in _spread(len(bounds), budget):
        if len(reasons) >= budget:
            break
        reasons.setdefault(i, "spread sample")
    chunks = tuple(
        PlannedChunk(id=chunk_id(drop, s, e), start=s, stop=e, findings=signatures.get(i, ()), reason=reasons.get(i, ""))
        for i, (s, e) in enumerate(bounds)
    )
    selected = tuple(chunks[i].id for i in reasons)  # priority order: most new dirt first
    return ChunkPlan(
        dataset=dataset, drop=drop, rows=n, chunk_size=chunk_size, holdout=holdout, chunks=chunks, selected=selected
    )


def _spread(n: int, k: int) -> list[int]:
    """Up to k indexes evenly spread over range(n), first and last included."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})
