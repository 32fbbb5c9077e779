"""ColumnValues: the text cells of one column, counted by distinct value, as every detector reads them.

Detectors work on distinct values with their cell counts instead of on cells: a 50k-row column
usually holds a few hundred distinct values, so every regex and parse runs once per value.
The null-token vocabulary lives here because "which cells mean something" depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd

#: Spellings of "no value" (compared stripped and case-folded). "" is the canonical null and is not a
#: token. Words that are also real values somewhere ("empty", "unknown", "missing", "nat") stay out:
#: a token list that destroys a category is worse than one that misses a spelling.
NULL_TOKENS = frozenset(
    {
        "n/a", "n.a.", "n.a", "na", "#n/a", "#na", "nan", "null", "(null)", "<null>", "none", "(none)",
        "<na>", "nil", "-", "--", "---", "?", "??", "???",
    }
)

#: Runs of horizontal whitespace; line breaks inside a cell are kept (they carry structure).
REPEATED_SPACES = r"[^\S\r\n]{2,}"

MAX_EXAMPLES = 3


def is_null_token(value: object) -> bool:
    """True for a text cell that spells "no value" ("N/A", " null ", "-"...) and for the empty string.

    Example:
        >>> is_null_token(" N/A "), is_null_token(""), is_null_token("Nairobi")
        (True, True, False)
    """
    return isinstance(value, str) and (value.strip() == "" or value.strip().casefold() in NULL_TOKENS)


def text_cells(series: pd.Series) -> pd.Series:
    """The cells of `series` that hold text (JSON drops may hold numbers, lists or nulls beside it)."""
    if pd.api.types.is_string_dtype(series.dtype) and series.dtype != object:
        return series.dropna()
    return series[series.apply(isinstance, args=(str,))]


def top_examples(counts: pd.Series, limit: int = MAX_EXAMPLES) -> tuple[str, ...]:
    """The most frequent values of a value->count series, ties broken by value: stable examples."""
    if counts.empty:
        return ()
    frame = pd.DataFrame({"value": counts.index.astype(str), "n": counts.to_numpy()})
    frame = frame.sort_values(["n", "value"], ascending=[False, True], kind="stable")
    return tuple(frame["value"].head(limit))


@dataclass(frozen=True)
class ColumnValues:
    """The text cells of one column as distinct values with cell counts.

    `counts` maps each distinct raw non-empty text to its number of cells. `meaningful` maps each
    distinct value as the column means it (stripped, repeated spaces collapsed) to its cells, without
    empty strings and null tokens: what the value-level detectors read.

    Example:
        >>> col = ColumnValues.of("city", pd.Series([" Bend", "Bend", "N/A", ""]))
        >>> col.counts.to_dict(), col.meaningful.to_dict()
        ({' Bend': 1, 'Bend': 1, 'N/A': 1}, {'Bend': 2})
    """

    name: str
    counts: pd.Series = field(repr=False)
    n_rows: int = 0

    @classmethod
    def of(cls, name: str, series: pd.Series) -> ColumnValues:
        """Count the non-empty text cells of `series`."""
        text = text_cells(series)
        counts = text[text != ""].value_counts(sort=False)
        counts.index = pd.Index(counts.index.astype(str), dtype=object)
        return cls(name=str(name), counts=counts.astype("int64"), n_rows=len(series))

    @cached_property
    def stripped(self) -> pd.Index:
        """Each distinct raw value stripped and with repeated spaces collapsed (aligned with `counts`)."""
        index = pd.Series(self.counts.index, dtype=object)
        return pd.Index(index.str.strip().str.replace(REPEATED_SPACES, " ", regex=True), dtype=object)

    @cached_property
    def token_mask(self) -> pd.Series:
        """True for the distinct raw values that are null tokens (aligned with `counts`)."""
        return pd.Series(self.stripped.str.casefold().isin(NULL_TOKENS), index=self.counts.index)

    @cached_property
    def meaningful(self) -> pd.Series:
        """Cells per normalised value, without empties and null tokens."""
        keep = (~self.token_mask.to_numpy()) & (self.stripped != "")
        if not keep.any():
            return pd.Series(dtype="int64", index=pd.Index([], dtype=object))
        grouped = pd.Series(self.counts.to_numpy()[keep], index=self.stripped[keep]).groupby(level=0, sort=True).sum()
        grouped.index = pd.Index(grouped.index, dtype=object)
        return grouped.astype("int64")

    @property
    def n_meaningful(self) -> int:
        """Cells holding a value (not empty, not a null token)."""
        return int(self.meaningful.sum())
