"""Detector: numbers written inconsistently in a mostly numeric column: with a unit or currency on some
cells ("12.0 oz", "12.0 ounce", "$1,234.56", "2500 USD", "0.05%") and thousands separators on some."""

from __future__ import annotations

import re
from typing import NamedTuple

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "number_format"

#: A column is numeric when this share of its values are numbers, decorated or not.
MIN_NUMERIC_SHARE = 0.9
#: An unknown word behind numbers is a unit when this many cells (and this share of numbers) carry it.
MIN_UNIT_CELLS = 3
MIN_UNIT_SHARE = 0.05

#: Numbers written with a unit were rounded when this share of the bare numbers carry more decimals than any of them.
ROUNDED_SHARE = 0.25
#: A column's own form is bare numbers when this share of its numbers carry no unit or currency: only then are
#: units stripped unasked (a column of "12.0 oz" is written consistently, with its unit).
MIN_BARE_SHARE = 0.5

NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
#: Currency in front: a symbol, a dollar with its country ("US$"), or an ISO code.
CURRENCY_CODES = (
    "USD", "EUR", "GBP", "JPY", "CNY", "CHF", "CAD", "AUD", "NZD", "SEK", "NOK", "DKK", "INR", "BRL", "MXN",
    "ZAR", "KRW", "SGD", "HKD", "PLN", "RUB", "TRY",
)
PREFIX = r"[$€£¥₹]|(?:US|A|C|NZ|HK|R|S)\$|" + "|".join(CURRENCY_CODES)
#: A unit behind: a symbol or one word ("oz.", "km/h", "°C", "%"), or a two-word unit ("fl oz", "sq ft").
SUFFIX = r"fl\.?\s?oz\.?|sq\.?\s?(?:ft|m|km|mi)\.?|(?:[%$€£¥₹°]|[^\W\d_])[^\W\d_/°]{0,11}(?:/[^\W\d_]{1,4})?\.?"
_PLAIN = re.compile(r"(?P<sign>[-+]?)(?P<number>\d+(?:\.\d+)?|\.\d+)$")
DECORATED = re.compile(
    rf"^(?P<sign>[-+]?)(?P<prefix>{PREFIX})?\s*(?P<sign2>[-+]?)(?P<number>{NUMBER})\s*(?P<suffix>{SUFFIX})?$"
)

#: Words behind a number that are not units: months and times make dates, ordinals make ranks, and
#: magnitudes (k, M, bn) change the value, so stripping them would change what the cell says.
NOT_UNITS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august "
    "september october november december am pm a.m p.m st nd rd th k m b bn mn mio mil thousand million "
    "billion e".split()
)
#: Spellings of one unit that stripping may treat as the same thing.
UNIT_ALIASES = {
    "$": "usd", "us$": "usd", "usd": "usd", "€": "eur", "eur": "eur", "euro": "eur", "£": "gbp", "gbp": "gbp",
    "¥": "jpy", "jpy": "jpy", "₹": "inr", "inr": "inr",
    "oz": "oz", "ounce": "oz", "fl oz": "oz", "fl. oz": "oz", "fl.oz": "oz", "floz": "oz",
    "lb": "lb", "lbs": "lb", "pound": "lb", "kg": "kg", "kgs": "kg", "kilogram": "kg", "kilo": "kg",
    "g": "g", "gr": "g", "gram": "g", "ml": "ml", "millilitre": "ml", "milliliter": "ml",
    "l": "l", "liter": "l", "litre": "l", "%": "%", "pct": "%", "percent": "%",
}


def unit_family(spelling: str) -> str:
    """The unit a spelling stands for: "oz.", "ounces" and "fl oz" are all "oz"; unknown words lose a plural s."""
    key = re.sub(r"\s+", " ", spelling.casefold().strip()).rstrip(".")
    if key in UNIT_ALIASES:
        return UNIT_ALIASES[key]
    singular = key[:-1] if len(key) > 3 and key.endswith("s") else key
    return UNIT_ALIASES.get(singular, singular)


class Number(NamedTuple):
    """One distinct value read as a number: its sign(s), unit before and after, and digits as written."""

    value: str
    cells: int
    sign: str
    prefix: str
    number: str
    suffix: str

    @property
    def plain(self) -> str:
        """The number without unit and thousands separators ("-$1,200.50" -> "-1200.50")."""
        return self.sign + self.number.replace(",", "")

    @property
    def spelling(self) -> tuple[str, str]:
        """How the number is dressed: (prefix, suffix)."""
        return self.prefix, self.suffix


def parse_numbers(values: dict[str, int]) -> list[Number]:
    """The distinct values that are numbers, optionally with a currency before and a unit after.

    Example:
        >>> [(n.prefix, n.number) for n in parse_numbers({"$1,200": 3, "red": 1, "12 Mar": 2})]
        [('$', '1,200')]
    """
    numbers = []
    for value, cells in values.items():
        plain = _PLAIN.match(value)  # the common case, without the costly decorated pattern
        if plain:
            numbers.append(Number(value, cells, plain["sign"], "", plain["number"], ""))
            continue
        m = DECORATED.match(value)
        if m is None:
            continue
        suffix = (m["suffix"] or "").strip()
        if suffix.casefold().rstrip(".") in NOT_UNITS:
            continue
        sign = m["sign"] + m["sign2"]
        numbers.append(Number(value, cells, sign, m["prefix"] or "", m["number"], suffix))
    return numbers


def detect(column: ColumnValues) -> Finding | None:
    """Find cells whose number is written differently from the others.

    When every unit found is one unit ("oz", "oz.", "ounce"), params["units"] lists its spellings to strip;
    with several units ("oz" and "ml") nothing is stripped and the message says so. Thousands separators
    are always removed. params["fixable_cells"] counts the cells a rule with these params changes.
    A word behind a number is a unit when it is a known unit or currency, or when it is common in the
    column ("patients" on most cells); a rare unknown word ("1000x") makes the cell not a number.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("price", pd.Series(["$1,234.56", "12.50", "2500 USD"]))
        >>> detect(col).params
        {'units': ['$', 'USD'], 'unit_families': ['usd'], 'fixable_cells': 2, 'bare_share': 0.3333, 'rounded': False}
    """
    values = column.meaningful
    numbers = _with_units(parse_numbers(values))
    if not numbers or sum(x.cells for x in numbers) < MIN_NUMERIC_SHARE * column.n_meaningful:
        return None
    long_numbers = [x for x in numbers if len(x.number.replace(",", "").split(".")[0]) >= 4]
    mixed_separators = len({"," in x.number for x in long_numbers}) > 1
    spellings: dict[tuple[str, str], int] = {}
    for x in numbers:
        spellings[x.spelling] = spellings.get(x.spelling, 0) + x.cells
    if len(spellings) < 2 and not mixed_separators:
        return None

    decorations = {d for x in numbers for d in x.spelling if d}
    families = sorted({unit_family(d) for d in decorations})
    units = sorted(decorations) if len(families) == 1 else []
    affected = {x.value: x.cells for x in numbers if _changes(x, units)}
    fixable = sum(affected.values())
    if not affected:  # several units: report the cells written unlike the most common spelling
        usual = max(spellings, key=lambda s: (spellings[s], s))
        affected = {x.value: x.cells for x in numbers if x.spelling != usual}
    n = sum(affected.values())
    message = f"{n} cells of {column.name!r} write numbers with units, currency or thousands separators"
    if len(families) > 1:
        message += f"; several units ({', '.join(families)}) are mixed, so no unit is stripped"
    bare = sum(x.cells for x in numbers if not x.prefix and not x.suffix)
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=message,
        examples=top_examples(affected),
        params={"units": units, "unit_families": families, "fixable_cells": fixable,
                "bare_share": round(bare / sum(x.cells for x in numbers), 4), "rounded": rounded(numbers)},
    )


def rounded(numbers: list[Number]) -> bool:
    """True when the numbers written with a unit carry fewer decimals than the column's bare numbers usually do
    ("0.06%" where the bare numbers read "0.055"): they were rounded, and stripping the unit would not give the
    value back.

    Example:
        >>> rounded(parse_numbers({"0.055": 30, "0.061": 20, "0.06%": 12, "0.05%": 9}))
        True
        >>> rounded(parse_numbers({"0.055": 30, "0.06": 20, "0.065%": 12, "0.05%": 9}))
        False
    """
    def decimals(x: Number) -> int:
        return len(x.number.partition(".")[2])

    decorated = [x for x in numbers if x.prefix or x.suffix]
    bare = [x for x in numbers if not x.prefix and not x.suffix]
    if sum(x.cells for x in decorated) < MIN_UNIT_CELLS or not bare:
        return False
    most = max(decimals(x) for x in decorated)
    finer = sum(x.cells for x in bare if decimals(x) > most)
    return finer >= ROUNDED_SHARE * sum(x.cells for x in bare)


def detect_asked(column: ColumnValues, *, whole: bool = False, leading_zeros: bool = False) -> Finding | None:
    """`detect`, with the forms the user asked for besides: a whole number loses its ".0" ("7.0" -> "7", `whole`)
    and an integer its leading zeros ("01907" -> "1907", `leading_zeros`). A column written one way throughout
    ("7.0" on every whole number) is found too: the user's words, not the column, say it is dirty.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("rate", pd.Series(["7.0", "5.3", "0.0", "4.75"]))
        >>> detect(col) is None, detect_asked(col, whole=True).params["fixable_cells"]
        (True, 2)
    """
    found = detect(column)
    numbers = _with_units(parse_numbers(column.meaningful))
    if not numbers or sum(x.cells for x in numbers) < MIN_NUMERIC_SHARE * column.n_meaningful:
        return found
    units = found.params["units"] if found is not None else []
    affected = {x.value: x.cells for x in numbers if _changes(x, units, whole=whole, leading_zeros=leading_zeros)}
    if not affected:
        return found
    bare = sum(x.cells for x in numbers if not x.prefix and not x.suffix)
    params = found.params if found is not None else {
        "units": [], "unit_families": [], "bare_share": round(bare / sum(x.cells for x in numbers), 4),
        "rounded": False}
    n = sum(affected.values())
    asked = [what for what, on in (("a decimal point on whole numbers", whole), ("leading zeros", leading_zeros)) if on]
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} write numbers with {' or '.join(asked)}, which the user asked away",
        examples=top_examples(affected),
        params={**params, "fixable_cells": n, "whole": whole, "leading_zeros": leading_zeros},
    )


def fixable_cells(column: ColumnValues, units: list[str], *, whole: bool = False, leading_zeros: bool = False) -> int:
    """How many cells of `column` a rule stripping `units` and thousands separators would change (and, asked,
    the ".0" of whole numbers and the leading zeros of integers)."""
    return sum(x.cells for x in parse_numbers(column.meaningful)
               if _changes(x, units, whole=whole, leading_zeros=leading_zeros))


def written_plain(x: Number, *, whole: bool = False, leading_zeros: bool = False) -> str:
    """The number as the rule writes it: without unit and thousands separators; asked, a whole number without
    its ".0" and an integer without leading zeros ("007" -> "7", "0" stays).

    Example:
        >>> written_plain(parse_numbers({"007.0": 1})[0], whole=True, leading_zeros=True)
        '7'
    """
    text = x.plain
    if whole and re.fullmatch(r"[-+]?\d+\.0", text):
        text = text[:-2]
    if leading_zeros:
        text = re.sub(r"^([-+]?)0+(?=\d)", r"\1", text)
    return text


def _changes(x: Number, units: list[str], *, whole: bool = False, leading_zeros: bool = False) -> bool:
    """True when the number changes once `units` and thousands separators are dropped (and, asked, the ".0" of a
    whole number and an integer's leading zeros)."""
    return x.prefix in ("", *units) and x.suffix in ("", *units) \
        and written_plain(x, whole=whole, leading_zeros=leading_zeros) != x.value


def _with_units(numbers: list[Number]) -> list[Number]:
    """Keep the numbers whose prefix and suffix are plausible units (known, or common in the column)."""
    by_family: dict[str, int] = {}
    for x in numbers:
        for family in {unit_family(d) for d in x.spelling if d}:
            by_family[family] = by_family.get(family, 0) + x.cells
    floor = max(MIN_UNIT_CELLS, MIN_UNIT_SHARE * sum(x.cells for x in numbers))
    plausible = set(UNIT_ALIASES.values()) | {f for f, n in by_family.items() if n >= floor}
    return [x for x in numbers if all(unit_family(d) in plausible for d in x.spelling if d)]
