"""Detector: values written against the column's case convention ("hilliard" and "GOLDFIELD" among
title-case cities, "fl" among upper-case state codes), or one value spelled in several cases.

A column whose values repeat (categories, codes, places) usually writes them one way: upper case ("IL",
"F"), lower case, or title case ("New York"). That convention is learned over the drop, from many distinct
values (one value, "USA", is no convention), and becomes a rule for values written all in one case, so a
value never seen while learning is written the same way; a small table keeps the spellings the rule would
get wrong ("McDonald", "de la Cruz" among title-case names). A column with no clear convention gets the
table alone: each rare spelling of a value the column holds far more often in another case.

Do no harm: the rule never touches a spelling that is frequent in its column ("new york" written so in 30
rows), a value with mixed case or an acronym beside lower-case words ("Chairman, CEO", "IT Consulting"
among lower-case job titles), a title-case value among upper-case codes ("Taiwan" among "US", "TW"), or a
value holding a letter the column's values never use ("TRU\u0140E": a stray character, not a case).
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
#: ... out of at least this many cells ...
MIN_CONVENTION_CELLS = 10
#: ... and this many distinct values, and this share of them: a column of one value ("USA") shows no convention
#: for the next value.
MIN_CONVENTION_VALUES, CONVENTION_VALUE_SHARE = 12, 0.8
#: A spelling the rule would rewrite is kept when it is frequent: this many cells and this share of the column,
#: or more than 1/SPELLING_RATIO of the cells of the column's spelling it would become ("new york" 30 beside
#: "New York" 40).
FREQUENT_CELLS, FREQUENT_SHARE, SPELLING_RATIO = 3, 0.1, 3
#: A spelling written on this many rows was written on purpose by whoever exported them ("ENG" on 23 rows
#: beside "eng" on 900): it is never rewritten, whatever the column's convention.
KEEP_CELLS = 5
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

    Only values written all in one case are converted: a capital inside a lower-case value ("Chairman, CEO")
    or a value in title case among codes ("Taiwan") was written so on purpose, or is no value of the column.

    Example:
        >>> convert("fl", "upper"), convert("Taiwan", "upper"), convert("GOLDFIELD", "title"), convert("USA", "title")
        ('FL', 'Taiwan', 'Goldfield', 'USA')
        >>> convert("st. louis", "title"), convert("SHIPPED", "lower"), convert("Shipped", "lower"), convert("CO", "lower")
        ('St. Louis', 'shipped', 'Shipped', 'CO')
    """
    kind = style(value)
    if convention == "upper":
        return value.upper() if kind == "lower" else value
    if kind == "upper" and not _SHOUTED.search(value):
        return value  # an abbreviation or a code ("USA", "CO") is written in capitals on purpose
    if convention == "lower":
        return value.lower() if kind == "upper" else value
    if kind in ("lower", "upper"):
        return _WORD_START.sub(lambda m: m.group(0).upper(), value.lower())
    return value


def foreign_letters(value: str, letters: str) -> bool:
    """True when `value` holds a letter beyond ASCII that is not among `letters` (case-folded), the letters the
    column's values use: a stray character ("TRU\u0140E"), never case-mapped.

    Example:
        >>> foreign_letters("TRU\u0140E", "eurt"), foreign_letters("True", "eurt"), foreign_letters("fl", "il")
        (True, False, False)
    """
    return any(c not in letters and c > "\x7f" for c in _LETTER.findall(value.casefold()))


def detect(column: ColumnValues) -> Finding | None:
    """Find cells written against the column's case convention, or values with case variants when the
    column has no convention; params: the `convention` (or None) and the `exceptions` table
    (case-folded value -> spelling).

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("city", pd.Series(["New York"] * 5 + ["new york", "Gary", "Gary"]))
        >>> detect(col).params["convention"], detect(col).params["exceptions"]
        (None, {'new york': 'New York'})
        >>> codes = ["IL", "TX", "CA", "NY", "OH", "WA", "OR", "NV", "UT", "AZ", "NM", "CO"]
        >>> col = ColumnValues.of("state", pd.Series(codes * 4 + ["fl", "Taiwan"]))
        >>> detect(col).params["convention"], detect(col).examples
        ('upper', ('fl',))
    """
    convention, exceptions, letters, keep = case_rule(column)
    if convention is None and not exceptions:
        return None
    variants = {
        value: n for value, n in column.meaningful.items()
        if fix(value, convention, exceptions, letters, keep) != value
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
        params={"convention": convention, "exceptions": exceptions, "letters": letters, "keep": keep},
    )


def fix(value: str, convention: str | None, exceptions: dict[str, str], letters: str | None = None,
        keep: tuple[str, ...] = ()) -> str:
    """What the rule makes of one value: kept when frequent or holding a stray letter, else its exception,
    else the convention, else the value."""
    if value in keep or (letters is not None and foreign_letters(value, letters)):
        return value
    key = _SPACES.sub(" ", value.strip()).casefold()
    if key in exceptions:
        return exceptions[key]
    return convert(value, convention) if convention else value


def case_rule(column: ColumnValues) -> tuple[str | None, dict[str, str], str, tuple[str, ...]]:
    """What the rule for a column whose values repeat needs: its case convention (None when it has none, or
    holds people's names, whose case is the person's own), the table of exceptions to it (case-folded value
    -> spelling), the letters its established values use (a value with another letter is left alone), and the
    spellings frequent enough to be kept whatever the rule says."""
    values = column.meaningful
    keys: dict[str, dict[str, int]] = {}
    for value, n in values.items():
        if style(value) is not None:
            keys.setdefault(value.casefold(), {})[value] = n
    cells = sum(values.values())
    if not keys or len(keys) > MAX_DISTINCT_SHARE * cells:
        return None, {}, "", ()
    established = [v for v, n in values.items() if n >= 2] or list(values)
    letters = "".join(sorted({c for v in established for c in _LETTER.findall(v.casefold())}))
    styles = {s: 0 for s in (*STYLES, "mixed")}
    distinct = dict.fromkeys(styles, 0)
    for spellings in keys.values():
        for value, n in spellings.items():
            styles[style(value)] += n
            distinct[style(value)] += 1
    cased = sum(styles.values())
    usual = max(STYLES, key=lambda s: (styles[s], -STYLES.index(s)))
    strong = (
        cased >= MIN_CONVENTION_CELLS
        and styles[usual] >= CONVENTION_SHARE * cased
        and distinct[usual] >= MIN_CONVENTION_VALUES
        and distinct[usual] >= CONVENTION_VALUE_SHARE * sum(distinct.values())
    )
    if not strong or holds_person_names(column.name):
        table = _variant_table(keys, usual)
        return None, table, letters, _kept(keys, table, None, cells)
    exceptions: dict[str, tuple[int, str]] = {}
    for key, spellings in keys.items():
        canonical = _canonical(spellings, usual)
        if canonical is None:
            continue
        forms = {canonical, key, key.upper(), *spellings}
        if any(convert(form, usual) != canonical for form in forms):
            exceptions[key] = (sum(spellings.values()), canonical)
    kept = sorted(exceptions.items(), key=lambda item: (-item[1][0], item[0]))[:MAX_EXCEPTIONS]
    table = {key: canonical for key, (_, canonical) in sorted(kept)}
    return usual, table, letters, _kept(keys, table, usual, cells)


def _kept(keys: dict[str, dict[str, int]], table: dict[str, str], convention: str | None, cells: int) -> tuple[str, ...]:
    """The spellings the rule would rewrite that are frequent in the column: too common to be a slip. A value
    the file already writes two ways on many rows each ("eng" 464, "ENG" 23) has no one right spelling, so
    its rare third one ("Eng" on 2 rows) is kept too: nothing says it is the wrong one."""
    kept = []
    for key, spellings in keys.items():
        settled = sum(1 for n in spellings.values() if n >= KEEP_CELLS) >= 2
        for value, n in spellings.items():
            target = table.get(key) or (convert(value, convention) if convention else value)
            if target == value:
                continue
            if settled:
                kept.append(value)
                continue
            common = n >= FREQUENT_SHARE * cells
            # beside the spelling it would become, a spelling is frequent unless that one is far more common
            rivals = target in spellings and n * SPELLING_RATIO > spellings[target]
            if n >= KEEP_CELLS or n >= FREQUENT_CELLS and (common or rivals):
                kept.append(value)
    return tuple(sorted(kept))


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
    usual style if it has one, else its most frequent spelling, when that spelling is far more common. A group counts when one of its spellings
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
        canonical = min(pool, key=lambda s: (-pool[s], style(s) not in ("title", "mixed"), s))
        if spellings[canonical] < SPELLING_RATIO * max(n for s, n in spellings.items() if s != canonical):
            continue  # no spelling is far more common than the others: nothing says which is right
        table[_SPACES.sub(" ", key.strip())] = canonical
        if len(table) >= MAX_EXCEPTIONS:
            break
    return dict(sorted(table.items()))
