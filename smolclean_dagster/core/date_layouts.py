"""Date layouts a person's corrections teach: the order and padding a column's numeric dates are wanted in.

Corrected from "4/2/15" to "2/15/04", "12/1/06" to "1/6/12" and "1/1/13" to "1/13/01", a column's dates show
that they were written year/month/day (Y/M/DD) and are wanted month/day/year (M/D/YY). Nothing in the file alone
says so: "1/1/13" reads as a date both ways. `learn` finds the layouts the corrections agree on, and `convert`
rewrites a value written in the first into the second, only where it reads as a real date there: "5/20/09" is
no year/month/day date (there is no month 20), so it stays. A date that reads both ways ("1/1/13") is rewritten
only when the corrections show many such dates rewritten (`MIN_BOTH_WAYS`) and no cell the person confirmed is
one, and only into a date that does not read both ways ("1/13/01"; "12/1/06" stays, as "1/6/12" reads as Y/M/DD
again): the module leaves its own output as it is.

A layout is written as its fields' roles joined by its separator: "Y/M/DD", "DD.MM.YYYY", "M/D/YY". A doubled
letter is zero-padded to two digits, "YYYY" is a four-digit year, a single letter is as short as the number.

Example:
    >>> taught = learn([("4/2/15", "2/15/04"), ("12/1/06", "1/6/12"), ("1/1/13", "1/13/01")], confirmed=["1/1/99"])
    >>> str(taught.source), str(taught.target), taught.both_ways
    ('Y/M/DD', 'M/D/YY', False)
    >>> [convert(v, taught.source, taught.target, both_ways=True) for v in ["1/1/14", "5/20/09", "1/1/99", "12/1/06"]]
    ['1/14/01', None, None, None]
    >>> convert("14/1/01", taught.source, taught.target, both_ways=False)  # no month 14: no M/D/YY date
    '1/1/14'
"""

from __future__ import annotations

import calendar
import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import permutations

#: The orders dates are written in: month first, day first, year first.
ORDERS = ("MDY", "DMY", "YMD")
#: Two-digit years below this are 20xx, the others 19xx (as strptime reads "%y").
CENTURY_PIVOT = 69
#: Corrections a layout must explain before it is taught.
MIN_EXAMPLES = 2
#: A date that reads both ways may be right as written. Such dates are rewritten once the corrections rewrite this
#: many of them and the person kept none: were one in ten of them right as written (`TOLERATED_SHARE`), as many
#: rewritten in a row would come up less than one time in three.
TOLERATED_SHARE = 0.1
MIN_BOTH_WAYS = math.ceil(math.log(1 / 3) / math.log(1 - TOLERATED_SHARE))

_DATE = re.compile(r"(\d{1,4})([/.-])(\d{1,4})\2(\d{1,4})")
_FIELD = r"(Y{1,4}|M{1,2}|D{1,2})"
LAYOUT = rf"{_FIELD}([/.-]){_FIELD}\2{_FIELD}"
_LAYOUT = re.compile(LAYOUT)


@dataclass(frozen=True)
class Layout:
    """How a numeric date is written: its fields' roles in order ("YMD"), their separator and widths (1: as short
    as the number, 2: zero-padded to two digits, 4: a four-digit year)."""

    order: str
    separator: str
    widths: tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> Layout | None:
        """A layout written as in instructions ("Y/M/DD", "dd.mm.yyyy"), or None when `text` is none."""
        m = _LAYOUT.fullmatch(text.strip().upper())
        if m is None:
            return None
        fields = (m[1], m[3], m[4])
        order = "".join(f[0] for f in fields)
        if sorted(order) != ["D", "M", "Y"] or any(len(f) == 3 for f in fields):
            return None
        return cls(order, m[2], tuple(len(f) for f in fields))

    def __str__(self) -> str:
        return self.separator.join(role * width for role, width in zip(self.order, self.widths))

    def read(self, value: str) -> dict[str, int] | None:
        """The (year, month, day) `value` holds in this layout, by role, or None when it is no real date in it. The
        widths are read loosely ("1/6/12" and "01/06/12" are both M/D/YY) except a four-digit year's."""
        m = _DATE.fullmatch(value.strip()) if isinstance(value, str) else None
        if m is None or m[2] != self.separator:
            return None
        fields = (m[1], m[3], m[4])
        if any((len(f) == 4) != (w == 4) or len(f) == 3 for f, w in zip(fields, self.widths)):
            return None
        date = {role: int(f) for role, f in zip(self.order, fields)}
        return date if _real(date, four_digit=self.widths[self.order.index("Y")] == 4) else None

    def write(self, date: dict[str, int]) -> str:
        """`date` written in this layout."""
        return self.separator.join(
            f"{date[role]:0{width}d}" if width > 1 else str(date[role]) for role, width in zip(self.order, self.widths))


@dataclass(frozen=True)
class Taught:
    """What corrections teach of a column's dates: rewrite `source` dates as `target` ones, those that also read
    as `target` dates too when `both_ways`; with one correction that shows it."""

    source: Layout
    target: Layout
    both_ways: bool
    example: tuple[str, str]


def convert(value: str, source: Layout, target: Layout, both_ways: bool) -> str | None:
    """`value` rewritten from `source` into `target`, or None when it is no `source` date or comes out as it was.
    Without `both_ways`, a value that reads as a `target` date already stays; with it, every `source` date is
    rewritten, but only into a date that cannot be read as a `source` one in turn ("1/1/13" -> "1/13/01", not
    "12/1/06" -> "1/6/12"): either way, a module leaves its own output as it is."""
    out = rewrite(value, source, target)
    if out is None:
        return None
    if both_ways:
        return out if source.read(out) is None else None
    return out if target.read(value) is None else None


def rewrite(value: str, source: Layout, target: Layout) -> str | None:
    """`value`, a `source` date, written in `target`; None when it is none or comes out as it was."""
    date = source.read(value)
    if date is None:
        return None
    out = target.write(date)
    return out if out != value.strip() else None


def learn(corrections: list[tuple[str, str]], confirmed: list[str]) -> Taught | None:
    """The layouts `corrections` ((before, after) of one column) agree on, or None when fewer than
    `MIN_EXAMPLES` of them, or under half of the date-shaped ones, show one, when two readings explain them
    equally well, or when a value the person `confirmed` would be rewritten."""
    shaped = [(b.strip(), a.strip()) for b, a in corrections if _DATE.fullmatch(b.strip()) and _DATE.fullmatch(a.strip())]
    if len(shaped) < MIN_EXAMPLES:
        return None
    scored: dict[tuple[Layout, Layout], list[tuple[str, str]]] = {}
    for perm in permutations(range(3)):
        for order in ORDERS:
            layouts = _layouts(shaped, perm, order, confirmed)
            if layouts is not None:
                explained = [(b, a) for b, a in shaped if rewrite(b, *layouts) == a]
                if len(explained) >= max(MIN_EXAMPLES, len(shaped) / 2):
                    scored[layouts] = explained
    if not scored:
        return None
    most = max(len(e) for e in scored.values())
    best = [layouts for layouts, e in scored.items() if len(e) == most]
    if len(best) > 1:  # the confirmed cells may tell two readings apart: those that keep them as they are
        kept = {layouts: sum(rewrite(v, *layouts) is None for v in confirmed) for layouts in best}
        best = [layouts for layouts in best if kept[layouts] == max(kept.values())]
    if len(best) > 1:  # then a date written in a usual order ("Y/M/D") over one no writer uses ("M/Y/D")
        best = [layouts for layouts in best if layouts[0].order in ORDERS] or best
        if len(best) > 1:
            return None
    source, target = best[0]
    if any(convert(v, source, target, both_ways=False) is not None for v in confirmed):
        return None
    explained = scored[best[0]]
    both_ways = sum(target.read(b) is not None for b, _ in explained) >= MIN_BOTH_WAYS and not any(
        rewrite(v, source, target) is not None for v in confirmed)
    return Taught(source, target, both_ways, explained[0])


def _layouts(shaped: list[tuple[str, str]], perm: tuple[int, ...], order: str,
             confirmed: list[str]) -> tuple[Layout, Layout] | None:
    """The (source, target) layouts under which each `after` field i is `before` field perm[i] and the `after`
    dates are written in `order`, with the separators and widths the examples show; None when they show two, or
    when neither they nor the `confirmed` values show how wide a field is written."""
    befores = [_DATE.fullmatch(b) for b, _ in shaped]
    afters = [_DATE.fullmatch(a) for _, a in shaped]
    separators = {m[2] for m in befores}, {m[2] for m in afters}
    if len(separators[0]) != 1 or len(separators[1]) != 1:
        return None
    source_order = [""] * 3
    for i, j in enumerate(perm):
        source_order[j] = order[i]
    source_widths = tuple(_width([(m[1], m[3], m[4])[j] for m in befores]) or 1 for j in range(3))
    separator = separators[1].pop()
    # a width the corrections leave open (every day 10 or more) is read from the confirmed dates in that layout
    kept = [m for v in confirmed if (m := _DATE.fullmatch(v.strip())) and m[2] == separator]
    kept = [m for m in kept if all((len(m[k]) == 4) == (len(afters[0][k]) == 4) for k in (1, 3, 4))]
    target_widths = tuple(_width([(m[1], m[3], m[4])[i] for m in afters], shown_only=True)
                          or _width([(m[1], m[3], m[4])[i] for m in kept], shown_only=True) for i in range(3))
    source = Layout("".join(source_order), separators[0].pop(), source_widths)
    target = Layout(order, separator, target_widths)
    return (source, target) if all(w in (1, 2, 4) for w in source.widths + target.widths) else None


def _width(fields: list[str], *, shown_only: bool = False) -> int:
    """The width a field's values are written in: 4 for four digits, 2 when one is zero-padded, 1 when one is a
    single digit; 0 when they show two widths, and, with `shown_only`, when they show none (all 10 or more)."""
    lengths = Counter(len(f) for f in fields)
    if lengths[4]:
        return 4 if len(lengths) == 1 else 0
    padded = any(len(f) == 2 and f.startswith("0") for f in fields)
    single = lengths[1] > 0
    if padded and single:
        return 0
    if padded:
        return 2
    if single:
        return 1
    return 0 if shown_only else 2


def _real(date: dict[str, int], *, four_digit: bool) -> bool:
    year = date["Y"] if four_digit else date["Y"] + (2000 if date["Y"] < CENTURY_PIVOT else 1900)
    if not (1 <= date["M"] <= 12 and 1 <= year <= 9999):
        return False
    return 1 <= date["D"] <= calendar.monthrange(year, date["M"])[1]


__all__ = ["LAYOUT", "Layout", "Taught", "convert", "learn", "rewrite"]
