"""Detector: cells that spell "no value" ("N/A", "null", "none", "-", "?"...) instead of being empty."""

from __future__ import annotations

import pandas as pd

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "null_tokens"


def detect(column: ColumnValues) -> Finding | None:
    """Find null tokens; the params list their case-folded spellings.

    Punctuation tokens ("-", "?") count only where most values hold letters or digits: in a column of
    signs ("+", "-") the dash is a value, not a missing one.

    Example:
        >>> detect(ColumnValues.of("ibu", pd.Series(["N/A", "20", "null", "35"]))).params
        {'tokens': ['n/a', 'null']}
    """
    tokens = column.token_mask.to_numpy()
    if not tokens.any():
        return None
    spellings = column.stripped[tokens].str.casefold()
    symbolic = ~spellings.str.contains(r"\w", regex=True)
    if symbolic.any() and _mostly_symbols(column):
        keep = ~symbolic.to_numpy()
        tokens[tokens] = keep
        spellings = spellings[keep]
        if not tokens.any():
            return None
    counts = column.counts[tokens]
    found = sorted(set(spellings))
    n = int(counts.sum())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} spell a missing value as text ({', '.join(map(repr, found))})",
        examples=top_examples(counts),
        params={"tokens": found},
    )


def _mostly_symbols(column: ColumnValues) -> bool:
    values = column.meaningful
    if values.empty:
        return False
    wordy = pd.Series(values.index, dtype=object).str.contains(r"\w", regex=True).to_numpy()
    return values[wordy].sum() < 0.5 * values.sum()
