"""Detector: cells that spell "no value" ("N/A", "null", "none", "-", "?"...) instead of being empty."""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import ColumnValues, share, top_examples

KIND = "null_tokens"

_WORDY = re.compile(r".*\w")
_CAPITALISED = re.compile(r"[A-Z][^\W\d_A-Z]+")


def detect(column: ColumnValues) -> Finding | None:
    """Find null tokens; the params list their case-folded spellings.

    Punctuation tokens ("-", "?") count only where most values hold letters or digits: in a column of
    signs ("+", "-") the dash is a value, not a missing one. Capitalised word tokens ("Nan", "Na", "Nil")
    count only where most values are not capitalised words: in a column of first names they are names.

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("ibu", pd.Series(["N/A", "20", "null", "35"]))).params
        {'tokens': ['n/a', 'null']}
    """
    tokens = dict(column.tokens)
    if not tokens:
        return None
    if share(column.meaningful, _WORDY) < 0.5:
        tokens = {t: n for t, n in tokens.items() if _WORDY.match(t)}
    if share(column.meaningful, _CAPITALISED) >= 0.5:
        tokens = {t: n for t, n in tokens.items() if not _CAPITALISED.fullmatch(t.strip())}
    if not tokens:
        return None
    found = sorted({t.strip().casefold() for t in tokens})
    n = sum(tokens.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} spell a missing value as text ({', '.join(map(repr, found))})",
        examples=top_examples(tokens),
        params={"tokens": found},
    )
