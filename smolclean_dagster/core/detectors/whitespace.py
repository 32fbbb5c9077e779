"""Detector: whitespace around a value or repeated inside it (" Bend", "New  York", "   ")."""

from __future__ import annotations

import pandas as pd

from ..findings import Finding
from .cells import REPEATED_SPACES, ColumnValues, top_examples

KIND = "whitespace"


def detect(column: ColumnValues) -> Finding | None:
    """Find cells whose text changes when stripped and when runs of spaces collapse to one.

    Example:
        >>> detect(ColumnValues.of("city", pd.Series(["Bend ", "New  York", "Gary"]))).count
        2
    """
    raw = pd.Series(column.counts.index, dtype=object)
    stripped = raw.str.strip()
    outer = (raw != stripped).to_numpy()
    inner = (stripped != stripped.str.replace(REPEATED_SPACES, " ", regex=True)).to_numpy()
    dirty = outer | inner
    if not dirty.any():
        return None
    counts = column.counts[dirty]
    n_outer, n_inner = int(column.counts[outer].sum()), int(column.counts[inner].sum())
    parts = [f"{n_outer} with surrounding whitespace"] * bool(n_outer) + [f"{n_inner} with repeated spaces"] * bool(n_inner)
    return Finding(
        kind=KIND,
        column=column.name,
        count=int(counts.sum()),
        message=f"{int(counts.sum())} cells of {column.name!r} have stray whitespace ({', '.join(parts)})",
        examples=top_examples(counts),
        params={"strip": bool(n_outer), "collapse": bool(n_inner)},
    )
