"""Detector: one value spelled in several cases ("new york", "New York", "NEW YORK") in a repetitive column."""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "case_variants"

#: A column repeats its values when it has at most this many distinct values per cell. Case carries
#: meaning in identifiers and codes, which rarely repeat; categories repeat.
MAX_DISTINCT_SHARE = 0.5
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")


def detect(column: ColumnValues) -> Finding | None:
    """Find values that differ only by case; params map each case-folded value to its canonical spelling.

    A group counts when one of its spellings is all lower or all upper case ("new york", "NEW YORK"):
    spellings that differ inside a word ("JoAnne", "Joanne") are often different names. Values with
    digits are codes and are left alone. The canonical spelling is the most frequent one; ties go to a
    mixed-case spelling ("New York"), then to the alphabetically first.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("city", pd.Series(["New York", "new york", "New York", "Gary", "Gary"]))
        >>> detect(col).params
        {'mapping': {'new york': 'New York'}}
    """
    mapping, variants = case_mapping(column.meaningful)
    if not mapping:
        return None
    n = sum(variants.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} spell {len(mapping)} value(s) in a different case than usual",
        examples=top_examples(variants),
        params={"mapping": mapping},
    )


def _mixed(value: str) -> bool:
    return value != value.lower() and value != value.upper()


def case_mapping(values: dict[str, int]) -> tuple[dict[str, str], dict[str, int]]:
    """From value->cells counts: {case-folded value: canonical spelling} for values with case variants,
    and the cells of each non-canonical spelling."""
    keys = {value.casefold() for value in values}
    if len(keys) == len(values) or len(keys) > MAX_DISTINCT_SHARE * sum(values.values()):
        return {}, {}
    groups: dict[str, list[str]] = {}
    for value in values:
        groups.setdefault(value.casefold(), []).append(value)
    mapping: dict[str, str] = {}
    variants: dict[str, int] = {}
    for key in sorted(groups):
        spellings = groups[key]
        if len(spellings) < 2 or _DIGIT.search(key) or not _LETTER.search(key):
            continue
        if all(_mixed(s) for s in spellings):
            continue
        canonical = min(spellings, key=lambda s: (-values[s], not _mixed(s), s))
        mapping[key] = canonical
        variants.update({s: values[s] for s in spellings if s != canonical})
    return mapping, variants
