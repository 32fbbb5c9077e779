"""Detector: one value spelled in several cases ("new york", "New York", "NEW YORK") in a repetitive column."""

from __future__ import annotations

import pandas as pd

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "case_variants"

#: A column repeats its values when it has at most this many distinct values per cell. Case carries
#: meaning in identifiers and codes, which rarely repeat; categories repeat.
MAX_DISTINCT_SHARE = 0.5


def detect(column: ColumnValues) -> Finding | None:
    """Find values that differ only by case; params map each case-folded value to its canonical spelling.

    A group counts when one of its spellings is all lower or all upper case ("new york", "NEW YORK"):
    spellings that differ inside a word ("JoAnne", "Joanne") are often different names. Values with
    digits are codes and are left alone. The canonical spelling is the most frequent one; ties go to a
    mixed-case spelling ("New York"), then to the alphabetically first.

    Example:
        >>> col = ColumnValues.of("city", pd.Series(["New York", "new york", "New York", "Gary", "Gary"]))
        >>> detect(col).params
        {'mapping': {'new york': 'New York'}}
    """
    mapping, variants = case_mapping(column.meaningful)
    if not mapping:
        return None
    n = int(variants.sum())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} spell {len(mapping)} value(s) in a different case than usual",
        examples=top_examples(variants),
        params={"mapping": mapping},
    )


def case_mapping(values: pd.Series) -> tuple[dict[str, str], pd.Series]:
    """From value->cells counts: {case-folded value: canonical spelling} for values with case variants,
    and the counts of the non-canonical spellings."""
    empty = ({}, values.iloc[:0])
    keys = pd.Series(values.index, dtype=object).str.casefold()
    if not keys.duplicated().any() or keys.nunique() > MAX_DISTINCT_SHARE * values.sum():
        return empty
    frame = pd.DataFrame({"value": values.index.astype(str), "n": values.to_numpy(), "key": keys.to_numpy()})
    frame = frame[frame["key"].duplicated(keep=False) & ~frame["value"].str.contains(r"\d", regex=True)]
    frame["mixed"] = (frame["value"] != frame["value"].str.lower()) & (frame["value"] != frame["value"].str.upper())
    restyled = ~frame.groupby("key")["mixed"].transform("all").astype(bool)
    frame = frame[restyled & frame["value"].str.contains(r"[^\W\d_]", regex=True)]
    if frame.empty:
        return empty
    frame = frame.sort_values(["key", "n", "mixed", "value"], ascending=[True, False, False, True], kind="stable")
    canonical = frame.groupby("key", sort=True)["value"].first()
    variants = frame[frame["value"] != frame["key"].map(canonical)]
    return dict(canonical.items()), pd.Series(variants["n"].to_numpy(), index=variants["value"].to_numpy())
