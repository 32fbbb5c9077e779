"""Detector: cells that spell "no value" ("N/A", "null", "none", "-", "?"...) instead of being empty."""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import NULL_TOKENS, ColumnValues, share, top_examples, value_shape

KIND = "null_tokens"

#: A column has a dominant shape when this share of its values have it ("AA" for two-letter codes).
DOMINANT_SHAPE_SHARE = 0.5

_WORDY = re.compile(r".*\w")
_CAPITALISED = re.compile(r"[A-Z][^\W\d_A-Z]+")
_ALPHA = re.compile(r"[^\W\d_]+")


def detect(column: ColumnValues) -> Finding | None:
    """Find null tokens; the params list their case-folded spellings (`tokens`) and every spelling of "no
    value" the column's fix may null (`vocabulary`: the known spellings that are no valid value there, so
    a spelling first met in the next drop is fixed too).

    Punctuation tokens ("-", "?") count only where most values hold letters or digits: in a column of
    signs ("+", "-") the dash is a value, not a missing one. Capitalised word tokens ("Nan", "Na", "Nil")
    count only where most values are not capitalised words: in a column of first names they are names.
    A token shaped like most of the column's values is one of them: "NA" among two-letter state codes is
    Namibia or Nebraska's neighbour, not a missing value.

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("ibu", pd.Series(["N/A", "20", "null", "35"]))).params["tokens"]
        ['n/a', 'null']
        >>> detect(ColumnValues.of("state", pd.Series(["NA", "IL", "TX", "n/a"]))).params["tokens"]
        ['n/a']
    """
    if not column.tokens:
        return None
    allowed = vocabulary(column)
    tokens = {t: n for t, n in column.tokens.items() if t.strip().casefold() in allowed}
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
        params={"tokens": found, "vocabulary": sorted(allowed | set(found))},
    )


def vocabulary(column: ColumnValues) -> set[str]:
    """The case-folded spellings of "no value" that are no valid value of this column (see `detect`)."""
    allowed = set(NULL_TOKENS)
    values = column.meaningful
    if share(values, _WORDY) < 0.5:
        allowed = {t for t in allowed if _WORDY.match(t)}
    if share(values, _CAPITALISED) >= 0.5:  # word tokens are names here, unless the column writes them in another case
        seen = {t.strip().casefold() for t in column.tokens if not _CAPITALISED.fullmatch(t.strip())}
        allowed = {t for t in allowed if not _ALPHA.fullmatch(t) or t in seen}
    shapes: dict[str, int] = {}
    for value, n in values.items():
        shape = value_shape(value).upper()
        shapes[shape] = shapes.get(shape, 0) + n
    total = sum(shapes.values())
    if total:
        dominant = max(shapes, key=lambda s: (shapes[s], s))
        if shapes[dominant] >= DOMINANT_SHAPE_SHARE * total:
            allowed = {t for t in allowed if value_shape(t).upper() != dominant}
    return allowed
