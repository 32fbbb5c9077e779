"""Detector: dates written in several formats in a mostly-date column ("1978-03-22", "03/22/1978",
"December 1, 1965", "15-Mar-85", "3/22/1978 7:10 PM").

The column's own format is the one most of its cells use; the other cells are what is off. ISO 8601 is what a
user may ask for, not what the detector imposes: a column written "2012/01/01" throughout is consistent.

A numeric date such as "05.11.2008" reads two ways. Its layout ("NN.NN.NNNN": the separator and the year's
width) is what one writer keeps, so the order is decided per layout, from the column's own dates: a first
number above 12 shows the layout is day first, a second one that it is month first. A layout showing both
orders, or neither, settles nothing: its dates that read both ways are labelled with the layout itself
("NN.NN.NNNN"), a writing no date is rewritten from or into."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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
#: A numeric date with the day and month first in some order: (number, separator, number, year).
NUMERIC_DATE = r"(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})\b"
_NUMERIC = re.compile(NUMERIC_DATE)
#: The day and month of a strptime format, in some order ("%d.%m.%Y"): (separator, year directive).
_FORMAT_LAYOUT = re.compile(r"%[dm]([/.-])%[md]\1%([Yy])")
_LAYOUT = re.compile(r"NN([/.-])NN\1N{2}(?:N{2})?")

YEAR_FIRST = ("%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d")
MONTH_FIRST = ("%m/%d/%Y", "%m/%d/%y", "%m-%d-%Y", "%m.%d.%Y")
DAY_FIRST = ("%d/%m/%Y", "%d/%m/%y", "%d-%m-%Y", "%d.%m.%Y")
WORDED = (
    "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y", "%b. %d, %Y", "%d %B %Y", "%d %b %Y", "%d-%b-%Y",
    "%d-%b-%y", "%d %b %y", "%d-%B-%Y", "%A, %B %d, %Y", "%a, %d %b %Y", "%a %b %d %Y",
)
TIMES = ("%H:%M", "%H:%M:%S", "%I:%M %p", "%I:%M:%S %p", "%I:%M%p")
#: Formats a date reads one way in whatever the drop writes (the year first, the month in words): a date column's
#: fix rewrites them too where the drop it learned from never showed them, so a later drop's "Jan 5, 2024" or
#: "2024/01/05" is written in the column's format like the slips it saw. A numeric layout with the day and month
#: first needs the drop's order (`day_first_layouts`), so only the layouts seen are read.
ONE_WAY = YEAR_FIRST + WORDED
#: A column's own format is written back only when this share of its values come back unchanged from it.
MIN_ROUND_TRIP = 0.95
#: A date is rewritten only when its year lies this far around the years of the column's own dates: a
#: string written backwards ("10/10/2102") parses, but is no date of the column.
YEARS_BEFORE, YEARS_AFTER = 100, 1


def candidate_formats(day_first: Mapping[str, bool]) -> tuple[str, ...]:
    """Every format tried, in order. A numeric layout in `day_first` (see `day_first_layouts`) is read only in
    its order; any other is tried both ways, for the dates a number above 12 settles ("25/12/2020")."""
    numeric = YEAR_FIRST
    for day, month in zip(DAY_FIRST, MONTH_FIRST):
        numeric += {True: (day,), False: (month,)}.get(day_first.get(layout_of(day)), (month, day))
    timed = tuple(f"{d} {t}" for d in numeric for t in TIMES) + ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
    return numeric + WORDED + timed + ("%a %b %d %H:%M:%S %Y",)


def has_time(fmt: str) -> bool:
    """True when a format carries a time of day."""
    return "%H" in fmt or "%I" in fmt


def layout_of(label: str) -> str | None:
    """The numeric layout a format label writes the day and month in ("%d.%m.%Y %H:%M" -> "NN.NN.NNNN"; a
    layout label is its own), or None when the label leaves no doubt which is which (ISO, worded months)."""
    if _LAYOUT.fullmatch(label):
        return label
    m = _FORMAT_LAYOUT.search(label)
    return _layout(m[1], 4 if m[2] == "Y" else 2) if m else None


def writable(label: str, day_first: Mapping[str, bool]) -> bool:
    """Whether a date written in `label` reads one way: not in a numeric layout whose order is unsettled.

    Example:
        >>> writable("%d.%m.%Y", {"NN.NN.NNNN": True}), writable("%m/%d/%Y", {"NN.NN.NNNN": True})
        (True, False)
    """
    layout = layout_of(label)
    return layout is None or layout in day_first


def day_first_layouts(values: Iterable[str]) -> dict[str, bool]:
    """Per numeric layout of `values`, whether its dates are written day first (True) or month first (False),
    for the layouts whose dates show one order only: a first number above 12 is a day, so is a second one.

    Example:
        >>> day_first_layouts(["16.11.2007", "05.11.2008", "11/16/2007", "03-04-2008", "13-04-2008", "04-13-2008"])
        {'NN.NN.NNNN': True, 'NN/NN/NNNN': False}
    """
    shown: dict[str, set[bool]] = {}
    for value in values:
        m = _NUMERIC.match(value)
        if m:
            first, second = int(m[1]), int(m[3])
            if 12 < max(first, second) <= 31 and 1 <= min(first, second) <= 12:
                shown.setdefault(_layout(m[2], len(m[4])), set()).add(first > 12)
    return {layout: orders.pop() for layout, orders in sorted(shown.items()) if len(orders) == 1}


def detect(column: ColumnValues) -> Finding | None:
    """Find cells of a date column not written in its own (most common) format, when the column mixes formats.

    A column written in one format throughout is consistent and not flagged. Day or month first is read per
    layout from the values that settle it (see `day_first_layouts`); `params["day_first"]` holds that order.

    Example:
        >>> col = ColumnValues.of("d", pd.Series(["1978-03-22", "03/22/1978", "December 1, 1965", "2001-01-05"]))
        >>> f = detect(col)
        >>> f.count, f.params["dominant"], f.params["formats"], f.params["day_first"]
        (2, 'ISO 8601', ['%m/%d/%Y', '%B %d, %Y'], {'NN/NN/NNNN': False})
    """
    values = column.meaningful
    sample = dict(list(values.items())[:SAMPLE_VALUES])  # most columns are obviously not dates
    if not sample or not _shaped(sample) or not _shaped(values):
        return None
    day_first = day_first_layouts(values)
    formats = candidate_formats(day_first)
    labels = _classify(values, formats, day_first)
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
            f"{n} cells of {column.name!r} write dates in {len(cells) - 1} "
            f"format(s) other than the column's own, {dominant} ({cells[dominant]} of {sum(cells.values())} cells)"
        ),
        examples=top_examples(to_fix),
        params={"formats": seen, "dominant": dominant, "day_first": day_first, "format_cells": cells,
                "first": first, "last": last, "round_trip": round_trip},
    )


def _dominant_dates(words: list[str], fmt: str) -> tuple[str, str, float]:
    """The earliest and latest date (ISO) written in the column's own format, and the share of those values
    that come back unchanged when parsed and written again in it (1.0 for ISO 8601; 0.0 for a layout label, whose
    dates read two ways)."""
    if layout_of(fmt) == fmt:
        return "", "", 0.0
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


def _layout(separator: str, year_digits: int) -> str:
    """A numeric date's layout: "NN" for the day and the month, the separator, "N" for each digit of the year."""
    return f"NN{separator}NN{separator}{'N' * year_digits}"


def _classify(values: dict[str, int], formats: tuple[str, ...], day_first: Mapping[str, bool]) -> dict[str, str] | None:
    """The format of each distinct value that parses (ISO_LABEL, a strptime format, or the layout of a date
    that reads two ways), or None when the column is not mostly dates. The most frequent values go first so
    non-date columns fail fast."""
    ranked = sorted(values, key=lambda v: (-values[v], v))
    head, tail = ranked[:SAMPLE_VALUES], ranked[SAMPLE_VALUES:]
    labels = _labels(head, formats, day_first)
    if sum(values[v] for v in labels) < MIN_DATE_SHARE * sum(values[v] for v in head):
        return None
    labels.update(_labels(tail, formats, day_first))
    if sum(values[v] for v in labels) < MIN_DATE_SHARE * sum(values.values()):
        return None
    return labels


def _labels(words: list[str], formats: tuple[str, ...], day_first: Mapping[str, bool]) -> dict[str, str]:
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
    # "03/04/2020" in a layout whose order is unsettled parsed with whichever format came first: it is a date,
    # but in no format of its own
    for w, label in labels.items():
        layout = layout_of(label)
        if layout is not None and layout not in day_first and _reads_both_ways(w):
            labels[w] = layout
    return labels


def _reads_both_ways(value: str) -> bool:
    m = _NUMERIC.match(value)
    return bool(m) and 1 <= int(m[1]) <= 12 and 1 <= int(m[3]) <= 12
