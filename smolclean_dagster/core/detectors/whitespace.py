"""Detector: whitespace around a value or repeated inside it (" Bend", "New  York", "   ").

Free text is the exception: in sentences, a double space after a full stop, a run of spaces or a line break
(trailing ones too) is the writer's own spacing, not an export's slip, so a free-text column is not flagged
unless the user asks for whitespace to be normalised."""

from __future__ import annotations

from ..findings import Finding
from .cells import ColumnValues, normalise, top_examples

KIND = "whitespace"

#: A column is free text, and keeps its own spacing, when half its cells hold values at least this long: in
#: sentences a double space after a full stop or a line break is the writer's, not an export's slip. Names,
#: cities, codes and categories stay far below it; a sentence of seven or eight words reaches it.
FREE_TEXT_MEDIAN_CHARS = 40


def is_free_text(column: ColumnValues) -> bool:
    """Whether a column holds free text (sentences) rather than short values: see `FREE_TEXT_MEDIAN_CHARS`.

    Example:
        >>> import pandas as pd
        >>> summaries = pd.Series(["A laptop was stolen from a car.  It held the records of 500 patients."] * 3)
        >>> cities = pd.Series(["Bend", "New York"])
        >>> is_free_text(ColumnValues.of("summary", summaries)), is_free_text(ColumnValues.of("city", cities))
        (True, False)
    """
    values = column.meaningful
    long = sum(n for value, n in values.items() if len(value) >= FREE_TEXT_MEDIAN_CHARS)
    return long > 0 and 2 * long >= sum(values.values())


def detect(column: ColumnValues, *, normalise_free_text: bool = False) -> Finding | None:
    """Find cells whose text changes when stripped and when runs of spaces collapse to one; in free text
    (`is_free_text`) only when `normalise_free_text`, i.e. the user's instructions ask for it.

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("city", pd.Series(["Bend ", "New  York", "Gary"]))).count
        2
    """
    if not normalise_free_text and is_free_text(column):
        return None
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
