"""Detector: numbers written inconsistently in a mostly numeric column: with a unit or currency on some
cells ("12.0 oz", "12.0 ounce", "$1,234.56", "2500 USD", "0.05%") and thousands separators on some."""

from __future__ import annotations

import re

import pandas as pd

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "number_format"

#: A column is numeric when this share of its values are numbers, decorated or not.
MIN_NUMERIC_SHARE = 0.9
#: An unknown word behind numbers is a unit when this many cells (and this share of numbers) carry it.
MIN_UNIT_CELLS = 3
MIN_UNIT_SHARE = 0.05

NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
#: Currency in front: a symbol, a dollar with its country ("US$"), or an ISO code.
CURRENCY_CODES = (
    "USD", "EUR", "GBP", "JPY", "CNY", "CHF", "CAD", "AUD", "NZD", "SEK", "NOK", "DKK", "INR", "BRL", "MXN",
    "ZAR", "KRW", "SGD", "HKD", "PLN", "RUB", "TRY",
)
PREFIX = r"[$€£¥₹]|(?:US|A|C|NZ|HK|R|S)\$|" + "|".join(CURRENCY_CODES)
#: A unit behind: a symbol or one word ("oz.", "km/h", "°C", "%"), or a two-word unit ("fl oz", "sq ft").
SUFFIX = r"fl\.?\s?oz\.?|sq\.?\s?(?:ft|m|km|mi)\.?|(?:[%$€£¥₹°]|[^\W\d_])[^\W\d_/°]{0,11}(?:/[^\W\d_]{1,4})?\.?"
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


def parse_numbers(values: pd.Series) -> pd.DataFrame:
    """Split distinct values into sign, prefix, number and suffix; rows that are not numbers are dropped.

    Example:
        >>> parse_numbers(pd.Series([3, 1], index=["$1,200", "red"]))[["prefix", "number"]].to_dict("records")
        [{'prefix': '$', 'number': '1,200'}]
    """
    parts = pd.Series(values.index, dtype=object).str.extract(DECORATED)
    parts["value"] = values.index.to_numpy()
    parts["n"] = values.to_numpy()
    parts = parts[parts["number"].notna()].fillna("")
    parts["suffix"] = parts["suffix"].str.strip()
    is_unit = ~parts["suffix"].str.casefold().str.rstrip(".").isin(NOT_UNITS)
    return parts[is_unit].reset_index(drop=True)


def detect(column: ColumnValues) -> Finding | None:
    """Find cells whose number is written differently from the others.

    When every unit found is one unit ("oz", "oz.", "ounce"), params["units"] lists its spellings to strip;
    with several units ("oz" and "ml") nothing is stripped and the message says so. Thousands separators
    are always removed. params["fixable_cells"] counts the cells a rule with these params changes.
    A word behind a number is a unit when it is a known unit or currency, or when it is common in the
    column ("patients" on most cells); a rare unknown word ("1000x") makes the cell not a number.

    Example:
        >>> col = ColumnValues.of("price", pd.Series(["$1,234.56", "12.50", "2500 USD"]))
        >>> detect(col).params
        {'units': ['$', 'USD'], 'unit_families': ['usd'], 'fixable_cells': 2}
    """
    values = column.meaningful
    if values.empty:
        return None
    parts = _with_units(parse_numbers(values))
    if parts["n"].sum() < MIN_NUMERIC_SHARE * values.sum():
        return None
    spelling = parts["prefix"] + "|" + parts["suffix"]
    digits = parts["number"].str.replace(",", "", regex=False).str.split(".").str[0].str.len()
    separated = parts["number"].str.contains(",", regex=False)
    long_numbers = digits >= 4
    mixed_separators = bool((separated & long_numbers).any() and (~separated & long_numbers).any())
    if spelling.nunique() < 2 and not mixed_separators:
        return None

    decorations = pd.concat([parts["prefix"], parts["suffix"]])
    decorations = decorations[decorations != ""]
    families = sorted({unit_family(d) for d in decorations})
    units = sorted(set(decorations)) if len(families) == 1 else []
    changes = _changes(parts, units)
    if changes.any():
        affected = parts[changes]
    else:  # several units: report the cells written unlike the most common spelling
        affected = parts[spelling != parts.groupby(spelling)["n"].sum().idxmax()]
    if affected.empty:
        return None
    counts = pd.Series(affected["n"].to_numpy(), index=affected["value"].to_numpy())
    n = int(counts.sum())
    message = f"{n} cells of {column.name!r} write numbers with units, currency or thousands separators"
    if len(families) > 1:
        message += f"; several units ({', '.join(families)}) are mixed, so no unit is stripped"
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=message,
        examples=top_examples(counts),
        params={"units": units, "unit_families": families, "fixable_cells": int(parts.loc[changes, "n"].sum())},
    )


def fixable_cells(column: ColumnValues, units: list[str]) -> int:
    """How many cells of `column` a rule stripping `units` and thousands separators would change."""
    parts = parse_numbers(column.meaningful)
    return int(parts.loc[_changes(parts, units), "n"].sum()) if not parts.empty else 0


def _changes(parts: pd.DataFrame, units: list[str]) -> pd.Series:
    """True for the parsed values that change once `units` and thousands separators are dropped."""
    fixable = (parts["prefix"].isin(units) | (parts["prefix"] == "")) & (parts["suffix"].isin(units) | (parts["suffix"] == ""))
    plain = parts["sign"] + parts["sign2"] + parts["number"].str.replace(",", "", regex=False)
    return fixable & (plain != parts["value"])


def _with_units(parts: pd.DataFrame) -> pd.DataFrame:
    """Keep the numbers whose prefix and suffix are plausible units (known, or common in the column)."""
    family = {
        side: parts[side].map(lambda d: unit_family(d) if d else "") for side in ("prefix", "suffix")
    }
    cells = pd.concat([parts["n"], parts["n"]], ignore_index=True)
    by_family = cells.groupby(pd.concat([family["prefix"], family["suffix"]], ignore_index=True).to_numpy()).sum()
    common = set(by_family[by_family >= max(MIN_UNIT_CELLS, MIN_UNIT_SHARE * parts["n"].sum())].index)
    plausible = set(UNIT_ALIASES.values()) | common | {""}
    return parts[family["prefix"].isin(plausible) & family["suffix"].isin(plausible)].reset_index(drop=True)
