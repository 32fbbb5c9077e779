"""Detector: cells that spell "no value" ("N/A", "null", "none", "-", "?"...) instead of being empty."""

from __future__ import annotations

import pandas as pd

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "null_tokens"


def detect(column: ColumnValues) -> Finding | None:
    """Find null tokens; the params list their case-folded spellings.

    Punctuation tokens ("-", "?") count only where most values hold letters or digits: in a column of
    signs ("+", "-") the dash is a value, not a missing one. Capitalised word tokens ("Nan", "Na", "Nil")
    count only where most values are not capitalised words: in a column of first names they are names.

    Example:
        >>> detect(ColumnValues.of("ibu", pd.Series(["N/A", "20", "null", "35"]))).params
        {'tokens': ['n/a', 'null']}
    """
    tokens = column.token_mask.to_numpy().copy()
    if not tokens.any():
        return None
    written = pd.Series(column.stripped[tokens], dtype=object)
    doubtful = pd.Series(False, index=written.index)
    if _share(column, r".*\w") < 0.5:
        doubtful |= ~written.str.contains(r"\w", regex=True)
    if _share(column, r"[A-Z][^\W\d_A-Z]+") >= 0.5:
        doubtful |= written.str.fullmatch(r"[A-Z][^\W\d_A-Z]+")
    tokens[tokens] = ~doubtful.to_numpy()
    if not tokens.any():
        return None
    counts = column.counts[tokens]
    found = sorted(set(column.stripped[tokens].str.casefold()))
    n = int(counts.sum())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} spell a missing value as text ({', '.join(map(repr, found))})",
        examples=top_examples(counts),
        params={"tokens": found},
    )


def _share(column: ColumnValues, pattern: str) -> float:
    """The share of a column's meaningful cells whose value starts with `pattern`."""
    values = column.meaningful
    if values.empty:
        return 0.0
    hits = pd.Series(values.index, dtype=object).str.match(pattern).to_numpy()
    return float(values[hits].sum() / values.sum())
