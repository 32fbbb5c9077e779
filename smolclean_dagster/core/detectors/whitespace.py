"""Detector: whitespace around a value or repeated inside it (" Bend", "New  York", "   ")."""

from __future__ import annotations

from ..findings import Finding
from .cells import ColumnValues, normalise, top_examples

KIND = "whitespace"


def detect(column: ColumnValues) -> Finding | None:
    """Find cells whose text changes when stripped and when runs of spaces collapse to one.

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("city", pd.Series(["Bend ", "New  York", "Gary"]))).count
        2
    """
    dirty = {raw: n for raw, n in column.counts.items() if normalise(raw) != raw}
    if not dirty:
        return None
    n_outer = sum(n for raw, n in dirty.items() if raw.strip() != raw)
    n_inner = sum(n for raw, n in dirty.items() if normalise(raw) != raw.strip())
    parts = [f"{n_outer} with surrounding whitespace"] * bool(n_outer)
    parts += [f"{n_inner} with repeated spaces"] * bool(n_inner)
    n = sum(dirty.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} have stray whitespace ({', '.join(parts)})",
        examples=top_examples(dirty),
        params={"strip": bool(n_outer), "collapse": bool(n_inner)},
    )
