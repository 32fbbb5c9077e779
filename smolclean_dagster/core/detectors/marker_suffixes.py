"""Detector: flag marks appended to values that otherwise occur plain in the same column ("ARCADIA-*"
beside "ARCADIA", "AK-*" beside "AK", "Boston *" beside "Boston")."""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "marker_suffixes"

#: A marker: flag symbols (asterisks, hashes, daggers...) at the end, after an optional - _ or space.
MARKS = "*#~^|§†‡¤"
SUFFIX = r"[-_ ]?[" + re.escape(MARKS) + r"]+$"
_SUFFIX = re.compile(r"(?<=\w)" + SUFFIX)
#: Share of the marked cells whose plain value also occurs in the column.
MIN_PLAIN_SHARE = 0.5


def detect(column: ColumnValues) -> Finding | None:
    """Find values carrying a flag mark whose plain form the column also holds; params list the marks.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("city", pd.Series(["ARCADIA", "ARCADIA-*", "ARBON-*", "ARBON", "BOSTON"]))
        >>> detect(col).params
        {'suffixes': ['-*']}
    """
    values = column.meaningful
    marked: dict[str, dict[str, int]] = {}
    for value, n in values.items():
        m = _SUFFIX.search(value)
        if m:
            marked.setdefault(m.group(), {})[value] = n
    suffixes = []
    cells: dict[str, int] = {}
    for suffix, found in sorted(marked.items()):
        plain = sum(n for v, n in found.items() if v[: -len(suffix)] in values)
        if plain >= MIN_PLAIN_SHARE * sum(found.values()):
            suffixes.append(suffix)
            cells.update(found)
    if not suffixes:
        return None
    n = sum(cells.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} carry a flag mark ({', '.join(map(repr, suffixes))}) after a value the column also holds plain",
        examples=top_examples(cells),
        params={"suffixes": suffixes},
    )
