"""Detector: apostrophes written twice inside words ("O''Brien", "d''Astous"), the way SQL and some CSV
writers escape them, left in the text by a export that escaped once too often."""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "escaped_quotes"

#: Two apostrophes right after a letter, before a letter or at the end of the value.
DOUBLED = r"(?<=[^\W\d_])''(?=[^\W\d_]|$)"
_DOUBLED = re.compile(DOUBLED)


def detect(column: ColumnValues) -> Finding | None:
    """Find values with a doubled apostrophe inside or at the end of a word.

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("last_name", pd.Series(["O''Brien", "Smith", "d''Astous"]))).count
        2
    """
    doubled = {v: n for v, n in column.meaningful.items() if _DOUBLED.search(v)}
    if not doubled:
        return None
    n = sum(doubled.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} write an apostrophe twice inside a word (escaped once too often)",
        examples=top_examples(doubled),
        params={"pattern": DOUBLED},
    )
