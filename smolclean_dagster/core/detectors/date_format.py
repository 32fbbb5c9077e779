"""Detector: dates written in several formats in a mostly-date column ("1978-03-22", "03/22/1978",
"December 1, 1965", "15-Mar-85", "3/22/1978 7:10 PM").

The column's own format is the one most of its cells use; the other cells are what is off. ISO 8601 is what a
user may ask for, not what the detector imposes: a column written "2012/01/01" throughout is consistent."""

from __future__ import annotations

import re

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

_ISO = re.compile(ISO)
_SHAPE = re.compile(DATE_SHAPE)
_LETTERS = re.compile(r"[^\W\d_]")
_NUMERIC = re.compile(r"(\d{1,2})[/.-](\d{1,2})[/.-]\d{2,4}\b")

YEAR_FIRST = ("%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d")
MONTH_FIRST = ("%m/%d/%Y", "%m/%d/%y", "%m-%d-%Y", "%m.%d.%Y")
DAY_FIRST = ("%d/%m/%Y", "%d/%m/%y", "%d-%m-%Y", "%d.%m.%Y")
WORDED = (
    "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y", "%b. %d, %Y", "%d %B %Y", "%d %b %Y", "%d-%b-%Y",
    "%d-%b-%y", "%d %b %y", "%d-%B-%Y", "%A, %B %d, %Y", "%a, %d %b %Y", "%a %b %d %Y",
)
TIMES = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M:%S %p", "%I:%M%p")
#: A column's own format is written back only when this share of its values come back unchanged from it.
MIN_ROUND_TRIP = 0.95
#: A date is rewritten only when its year lies this far around the years of the column's own dates: a
#: string written backwards ("10/10/2102") parses, but is no date of the column.
YEARS_BEFORE, YEARS_AFTER = 100, 1


def candidate_formats(dayfirst: bool) -> tuple[str, ...]:
    """Every format tried, in order; for "03/04/2020" the first that parses decides, hence `dayfirst`."""
    numeric = YEAR_FIRST + (DAY_FIRST + MONTH_FIRST if dayfirst else MONTH_FIRST + DAY_FIRST)
    timed = tuple(f"{d} {t}" for d in numeric for t in TIMES) + ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
    return numeric + WORDED + timed + ("%a %b %d %H:%M:%S %Y",)


def has_time(fmt: str) -> bool:
    """True when a format carries a time of day."""
    return "%H" in fmt or "%I" in fmt


def detect(column: ColumnValues) -> Finding | None:
    """Find cells of a date column not written in its own (most common) format, when the column mixes formats.

    A column written in one format throughout is consistent and not flagged. Day or month first is read
    from the values that settle it (a first number above 12 is a day); without evidence, month first.

    Example:
        >>> col = ColumnValues.of("d", pd.Series(["1978-03-22", "03/22/1978", "December 1, 1965", "2001-01-05"]))
        >>> f = detect(col)
        >>> f.count, f.params["dominant"], f.params["formats"], f.params["dayfirst"]
        (2, 'ISO 8601', ['%m/%d/%Y', '%B %d, %Y'], False)
    """
    values = column.meaningful
    sample = dict(list(values.items())[:SAMPLE_VALUES])  # most columns are obviously not dates
    if not sample or not _shaped(sample) or not _shaped(values):
        return None
    dayfirst = _day_first(values)
    formats = candidate_formats(dayfirst)
    labels = _classify(values, formats)
    if labels is None:
        return None
    cells: dict[str, int] = {}
    for value, label in labels.items():
        cells[label] = cells.get(label, 0) + values[value]
    if len(cells) < 2:
        return None
    dominant = max(cells, key=lambda label: (cells[label], label))
    to_fix = {v: values[v] for v, label in labels.items() if label != dominant}
    seen = [f for f in formats if f in cells and f != dominant]
    first, last, round_trip = _dominant_dates([v for v, label in labels.items() if label == dominant], dominant)
    n = sum(to_fix.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=(
            f"{n} cells of {column.name!r} write dates in {len(seen) + (ISO_LABEL in cells and dominant != ISO_LABEL)} "
            f"format(s) other than the column's own, {dominant} ({cells[dominant]} of {sum(cells.values())} cells)"
        ),
        examples=top_examples(to_fix),
        params={"formats": seen, "dominant": dominant, "dayfirst": dayfirst, "format_cells": cells,
                "first": first, "last": last, "round_trip": round_trip},
    )


def _dominant_dates(words: list[str], fmt: str) -> tuple[str, str, float]:
    """The earliest and latest date (ISO) written in the column's own format, and the share of those values
    that come back unchanged when parsed and written again in it (1.0 for ISO 8601)."""
    text = pd.Series(words, dtype=object)
    try:  # ISO values may carry several UTC offsets: compare them in UTC
        parsed = pd.to_datetime(text, format="ISO8601" if fmt == ISO_LABEL else fmt, errors="coerce",
                                utc=fmt == ISO_LABEL or "%z" in fmt)
    except (ValueError, OverflowError):
        return "", "", 0.0
    if parsed.isna().all():
        return "", "", 0.0
    again = 1.0 if fmt == ISO_LABEL else float((parsed.dt.strftime(fmt) == text).mean())
    return parsed.min().strftime("%Y-%m-%d"), parsed.max().strftime("%Y-%m-%d"), round(again, 4)


def _shaped(values: dict[str, int]) -> bool:
    """True when most cells look like a date (the cheap test before any parsing)."""
    shaped = sum(n for v, n in values.items() if 6 <= len(v) <= 40 and _SHAPE.match(v))
    return shaped >= MIN_DATE_SHARE * sum(values.values())


def _day_first(values: dict[str, int]) -> bool:
    day_first = month_first = 0
    for value, n in values.items():
        m = _NUMERIC.match(value)
        if m:
            first, second = int(m[1]), int(m[2])
            day_first += n * (first > 12 >= second)
            month_first += n * (second > 12 >= first)
    return day_first > month_first


def _classify(values: dict[str, int], formats: tuple[str, ...]) -> dict[str, str] | None:
    """The format of each distinct value that parses (ISO_LABEL or a strptime format), or None when the
    column is not mostly dates. The most frequent values go first so non-date columns fail fast."""
    ranked = sorted(values, key=lambda v: (-values[v], v))
    head, tail = ranked[:SAMPLE_VALUES], ranked[SAMPLE_VALUES:]
    labels = _labels(head, formats)
    if sum(values[v] for v in labels) < MIN_DATE_SHARE * sum(values[v] for v in head):
        return None
    labels.update(_labels(tail, formats))
    if sum(values[v] for v in labels) < MIN_DATE_SHARE * sum(values.values()):
        return None
    return labels


def _labels(words: list[str], formats: tuple[str, ...]) -> dict[str, str]:
    labels = {w: ISO_LABEL for w in words if _ISO.fullmatch(w)}
    # a format only sees the values that can fit it: with or without a time, with or without words
    pending: dict[tuple[bool, bool], list[str]] = {}
    for w in words:
        if w not in labels:
            pending.setdefault((":" in w, bool(_LETTERS.search(w))), []).append(w)
    for fmt in formats:
        kind = (has_time(fmt), any(d in fmt for d in ("%B", "%b", "%A", "%a", "%p")))
        todo = pending.get(kind)
        if not todo:
            continue
        parsed = pd.to_datetime(pd.Series(todo, dtype=object), format=fmt, errors="coerce")
        hits = parsed.notna().to_numpy()
        labels.update((w, fmt) for w, hit in zip(todo, hits) if hit)
        pending[kind] = [w for w, hit in zip(todo, hits) if not hit]
    return labels
