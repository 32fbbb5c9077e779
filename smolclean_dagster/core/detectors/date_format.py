"""Detector: dates written in several formats in a mostly-date column ("1978-03-22", "03/22/1978",
"December 1, 1965", "15-Mar-85", "3/22/1978 7:10 PM")."""

from __future__ import annotations

import pandas as pd

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "date_format"

#: A column holds dates when this share of its values parse as dates.
MIN_DATE_SHARE = 0.8
#: The most frequent values tried first: a column that fails on them is not a date column.
SAMPLE_VALUES = 200
#: ISO 8601 dates and datetimes (zero-padded): the target representation, never flagged or changed.
ISO = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
ISO_LABEL = "ISO 8601"
#: Cheap shape test before any parsing: digits plus a numeric date or a month name.
DATE_SHAPE = (
    r"(?=.*\d)(?:.*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}.*|"
    r"(?i:.*\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\b.*))"
)

YEAR_FIRST = ("%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d")
MONTH_FIRST = ("%m/%d/%Y", "%m/%d/%y", "%m-%d-%Y", "%m.%d.%Y")
DAY_FIRST = ("%d/%m/%Y", "%d/%m/%y", "%d-%m-%Y", "%d.%m.%Y")
WORDED = (
    "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y", "%b. %d, %Y", "%d %B %Y", "%d %b %Y", "%d-%b-%Y",
    "%d-%b-%y", "%d %b %y", "%d-%B-%Y", "%A, %B %d, %Y", "%a, %d %b %Y", "%a %b %d %Y",
)
TIMES = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M:%S %p", "%I:%M%p")


def candidate_formats(dayfirst: bool) -> tuple[str, ...]:
    """Every format tried, in order; for "03/04/2020" the first that parses decides, hence `dayfirst`."""
    numeric = YEAR_FIRST + (DAY_FIRST + MONTH_FIRST if dayfirst else MONTH_FIRST + DAY_FIRST)
    timed = tuple(f"{d} {t}" for d in numeric for t in TIMES) + ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
    return numeric + WORDED + timed + ("%a %b %d %H:%M:%S %Y",)


def has_time(fmt: str) -> bool:
    """True when a format carries a time of day."""
    return "%H" in fmt or "%I" in fmt


def detect(column: ColumnValues) -> Finding | None:
    """Find cells of a date column not written in ISO 8601, when the column mixes formats.

    A column written in one format throughout is consistent and not flagged. Day or month first is read
    from the values that settle it (a first number above 12 is a day); without evidence, month first.

    Example:
        >>> col = ColumnValues.of("d", pd.Series(["1978-03-22", "03/22/1978", "December 1, 1965", "2001-01-05"]))
        >>> f = detect(col)
        >>> f.count, f.params["formats"], f.params["dayfirst"]
        (2, ['%m/%d/%Y', '%B %d, %Y'], False)
    """
    values = column.meaningful
    if values.empty:
        return None
    words = pd.Series(values.index, dtype=object)
    shaped = words.str.len().between(6, 40) & words.str.fullmatch(DATE_SHAPE)
    if values[shaped.to_numpy()].sum() < MIN_DATE_SHARE * values.sum():
        return None
    dayfirst = _day_first(words, values)
    labels = _classify(words, values, candidate_formats(dayfirst))
    if labels is None:
        return None
    cells = pd.Series(values.to_numpy(), index=labels.to_numpy()).groupby(level=0).sum()
    if len(cells) < 2:
        return None
    to_fix = (labels.notna() & (labels != ISO_LABEL)).to_numpy()
    counts = pd.Series(values.to_numpy()[to_fix], index=values.index[to_fix])
    formats = [f for f in candidate_formats(dayfirst) if f in cells.index]
    dominant = str(cells.sort_values(ascending=False, kind="stable").index[0])
    n = int(counts.sum())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=(
            f"{n} cells of {column.name!r} write dates in {len(cells) - (ISO_LABEL in cells.index)} format(s) "
            f"other than ISO 8601 ({', '.join(formats)}); the most common is {dominant}"
        ),
        examples=top_examples(counts),
        params={
            "formats": formats,
            "dominant": dominant,
            "dayfirst": dayfirst,
            "format_cells": {str(k): int(v) for k, v in cells.items()},
        },
    )


def _day_first(words: pd.Series, values: pd.Series) -> bool:
    parts = words.str.extract(r"^(\d{1,2})[/.-](\d{1,2})[/.-]\d{2,4}\b").astype(float)
    first, second = parts[0], parts[1]
    day_first = int(values[((first > 12) & (second <= 12)).to_numpy()].sum())
    month_first = int(values[((second > 12) & (first <= 12)).to_numpy()].sum())
    return day_first > month_first


def _classify(words: pd.Series, values: pd.Series, formats: tuple[str, ...]) -> pd.Series | None:
    """The format of each distinct value (ISO_LABEL, a strptime format, or None), or None when the
    column is not mostly dates. The most frequent values go first so non-date columns fail fast."""
    order = values.to_numpy().argsort(kind="stable")[::-1]
    head, tail = order[:SAMPLE_VALUES], order[SAMPLE_VALUES:]
    head_labels = _labels(words.iloc[head], formats)
    if values.iloc[head][head_labels.notna().to_numpy()].sum() < MIN_DATE_SHARE * values.iloc[head].sum():
        return None
    labels = pd.concat([head_labels, _labels(words.iloc[tail], formats)]).reindex(words.index)
    if values[labels.notna().to_numpy()].sum() < MIN_DATE_SHARE * values.sum():
        return None
    return labels


def _labels(words: pd.Series, formats: tuple[str, ...]) -> pd.Series:
    labels = pd.Series(None, index=words.index, dtype=object)
    if words.empty:
        return labels
    labels[words.str.fullmatch(ISO)] = ISO_LABEL
    timed = words.str.contains(":", regex=False)
    for fmt in formats:
        pending = labels.isna() & (timed if has_time(fmt) else ~timed)
        if not pending.any():
            continue
        parsed = pd.to_datetime(words[pending], format=fmt, errors="coerce")
        labels[parsed[parsed.notna()].index] = fmt
    return labels
