"""Detector: values written against the column's case convention ("hilliard" and "GOLDFIELD" among
title-case cities, "fl" among upper-case state codes), or one value spelled in several cases.

A column whose values repeat (categories, codes, places) usually writes them one way: upper case ("IL",
"F"), lower case, or title case ("New York"). That convention is learned over the drop and becomes a rule
over all of the column's values, so a value never seen while learning is written the same way; a small
table keeps the spellings the rule would get wrong ("McDonald", "de la Cruz" among title-case names). A column
with no clear convention gets the table alone: each value with case variants in the spelling of the
column's most common style, so one column never ends up with "f" beside "M".
"""

from __future__ import annotations

import re

from ..findings import Finding
from .cells import ColumnValues, holds_person_names, top_examples

KIND = "case_variants"

#: A column repeats its values when it has at most this many distinct values per cell. Case carries
#: meaning in identifiers and free text, which rarely repeat; categories repeat.
MAX_DISTINCT_SHARE = 0.5
#: A column follows a convention when this share of its cells with letters follow it ...
CONVENTION_SHARE = 0.9
#: ... out of at least this many cells.
MIN_CONVENTION_CELLS = 10
#: Exceptions kept at most, the most frequent first: the table stays reviewable and bounded.
MAX_EXCEPTIONS = 300
#: In a lower- or title-case column an all-capitals value is rewritten only when it has a word this long:
#: "GOLDFIELD" is shouted, "USA", "CO" and "NW" are abbreviations or codes.
MIN_SHOUTED_WORD = 4

STYLES = ("upper", "lower", "title")
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
_SHOUTED = re.compile(r"[^\W\d_]{%d,}" % MIN_SHOUTED_WORD)
#: A letter that starts a word: at the start, or after whitespace, a hyphen, a slash or a parenthesis.
WORD_START = r"(?<![^\s\-/(])[^\W\d_]"
_WORD_START = re.compile(WORD_START)
_SPACES = re.compile(r"\s+")


def style(value: str) -> str | None:
    """How a value is written: "upper", "lower", "title" (every word starts with a capital: "New York",
    "McDonald"), "mixed" ("de la Cruz", "iPhone"), or None when it has no cased letter.

    Example:
        >>> [style(v) for v in ("IL", "hilliard", "New York", "de la Cruz", "42")]
        ['upper', 'lower', 'title', 'mixed', None]
    """
    upper, lower = value.upper(), value.lower()
    if upper == lower:
        return None
    if value == upper:
        return "upper"
    if value == lower:
        return "lower"
    starts = [m.group(0) for m in _WORD_START.finditer(value)]
    return "title" if starts and all(c.isupper() for c in starts) else "mixed"


def convert(value: str, convention: str) -> str:
    """`value` written in `convention`, as the rule template does it (values it leaves alone come back).

    Example:
        >>> convert("fl", "upper"), convert("GOLDFIELD", "title"), convert("USA", "title"), convert("st. louis", "title")
        ('FL', 'Goldfield', 'USA', 'St. Louis')
        >>> convert("Shipped", "lower"), convert("CO", "lower")
        ('shipped', 'CO')
    """
    if convention == "upper":
        return value.upper()
    kind = style(value)
    if kind == "upper" and not _SHOUTED.search(value):
        return value  # an abbreviation or a code ("USA", "CO") is written in capitals on purpose
    if convention == "lower":
        return value.lower() if kind in ("upper", "title", "mixed") else value
    if kind in ("lower", "upper"):
        return _WORD_START.sub(lambda m: m.group(0).upper(), value.lower())
    return value


def detect(column: ColumnValues) -> Finding | None:
    """Find cells written against the column's case convention, or values with case variants when the
    column has no convention; params: the `convention` (or None) and the `exceptions` table
    (case-folded value -> spelling).

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("city", pd.Series(["New York", "new york", "New York", "Gary", "Gary"]))
        >>> detect(col).params
        {'convention': None, 'exceptions': {'new york': 'New York'}}
        >>> col = ColumnValues.of("state", pd.Series(["IL", "TX", "CA", "NY", "fl"] * 4 + ["IL"] * 20))
        >>> detect(col).params, detect(col).count
        ({'convention': 'upper', 'exceptions': {}}, 4)
    """
    convention, exceptions = case_rule(column)
    if convention is None and not exceptions:
        return None
    variants = {
        value: n for value, n in column.meaningful.items() if fix(value, convention, exceptions) != value
    }
    if not variants:
        return None
    n = sum(variants.values())
    what = f"against the column's {convention} case" if convention else "in a different case than usual"
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} are written {what}",
        examples=top_examples(variants),
        params={"convention": convention, "exceptions": exceptions},
    )


def fix(value: str, convention: str | None, exceptions: dict[str, str]) -> str:
    """What the rule makes of one value: its exception, else the convention, else the value."""
    key = _SPACES.sub(" ", value.strip()).casefold()
    if key in exceptions:
        return exceptions[key]
    return convert(value, convention) if convention else value


def case_rule(column: ColumnValues) -> tuple[str | None, dict[str, str]]:
    """The column's case convention (None when it has none, or holds people's names, whose case is the
    person's own) and the table of exceptions to it, for a column whose values repeat."""
    values = column.meaningful
    keys: dict[str, dict[str, int]] = {}
    for value, n in values.items():
        if style(value) is not None:
            keys.setdefault(value.casefold(), {})[value] = n
    cells = sum(values.values())
    if not keys or len(keys) > MAX_DISTINCT_SHARE * cells:
        return None, {}
    styles = {s: 0 for s in (*STYLES, "mixed")}
    for spellings in keys.values():
        for value, n in spellings.items():
            styles[style(value)] += n
    cased = sum(styles.values())
    usual = max(STYLES, key=lambda s: (styles[s], -STYLES.index(s)))
    strong = cased >= MIN_CONVENTION_CELLS and styles[usual] >= CONVENTION_SHARE * cased
    if not strong or holds_person_names(column.name):
        return None, _variant_table(keys, usual)
    exceptions: dict[str, tuple[int, str]] = {}
    for key, spellings in keys.items():
        canonical = _canonical(spellings, usual)
        if canonical is None:
            continue
        forms = {canonical, key, key.upper(), *spellings}
        if any(convert(form, usual) != canonical for form in forms):
            exceptions[key] = (sum(spellings.values()), canonical)
    kept = sorted(exceptions.items(), key=lambda item: (-item[1][0], item[0]))[:MAX_EXCEPTIONS]
    return usual, {key: canonical for key, (_, canonical) in sorted(kept)}


def _canonical(spellings: dict[str, int], convention: str) -> str | None:
    """The spelling a value should keep: the most frequent one in the convention, else a deliberate
    mixed spelling ("de la Cruz", "McDonald"), else None (the convention decides)."""
    deliberate = [v for v in spellings if style(v) in (convention, "mixed")]
    if len(deliberate) > 1 and convention in ("title", "mixed"):
        return None  # "JoAnne" and "Joanne" are often two names: neither is rewritten
    for wanted in (convention, "mixed"):
        matching = {v: n for v, n in spellings.items() if style(v) == wanted}
        if matching:
            return min(matching, key=lambda v: (-matching[v], v))
    return None


def _variant_table(keys: dict[str, dict[str, int]], usual: str) -> dict[str, str]:
    """For a column with no convention: each value with case variants -> its spelling in the column's
    usual style if it has one, else its most frequent spelling. A group counts when one of its spellings
    is all lower or all upper case ("new york", "NEW YORK"): spellings that differ inside a word
    ("JoAnne", "Joanne") are often different names; values with digits are codes and are left alone."""
    table: dict[str, str] = {}
    ranked = sorted(keys.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    for key, spellings in ranked:
        if len(spellings) < 2 or _DIGIT.search(key) or not _LETTER.search(key):
            continue
        if all(style(s) in ("title", "mixed") for s in spellings):
            continue
        in_style = {s: n for s, n in spellings.items() if style(s) == usual}
        pool = in_style or spellings
        table[_SPACES.sub(" ", key.strip())] = min(pool, key=lambda s: (-pool[s], style(s) not in ("title", "mixed"), s))
        if len(table) >= MAX_EXCEPTIONS:
            break
    return dict(sorted(table.items()))
