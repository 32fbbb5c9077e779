"""Detector: values written against the column's case convention ("hilliard" and "GOLDFIELD" among
title-case cities, "fl" among upper-case state codes), or one value spelled in several cases.

A column whose values repeat (categories, codes, places) usually writes them one way: upper case ("IL",
"F"), lower case, or title case ("New York"). That convention is learned over the drop, from many distinct
values (one value, "USA", is no convention), and becomes a rule for values written all in one case, so a
value never seen while learning is written the same way; a small table keeps the spellings the rule would
get wrong ("McDonald", "de la Cruz" among title-case names). A column with no clear convention gets a table
of the spelling each of its values is written in, so a known value written in capitals or lower case on the
next drop ("PREMIUM" where the drop wrote "Premium") takes it too.

Do no harm: the rule never touches a spelling the file writes on purpose: one holding a real share of its
value's rows ("new york" on 30 rows beside "New York" on 40), or, in a column that writes its values in
several cases, one on many rows ("ENG" on 23 rows beside "eng"); a slip is rewritten however many rows it
has ("ca" on 9 rows beside "CA" on 301). Nor a value with mixed case or an acronym beside lower-case words
("Chairman, CEO", "IT Consulting" among lower-case job titles), a title-case value among upper-case codes
("Taiwan" among "US", "TW"), or a value holding a letter the column's values never use ("TRU\u0140E": a
stray character, not a case). `fix` is the rule; the template and the harm estimate decide as it does.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..findings import Finding
from .cells import ColumnValues, holds_person_names, top_examples

KIND = "case_variants"

#: A column repeats its values when it has at most this many distinct values per cell. Case carries
#: meaning in identifiers and free text, which rarely repeat; categories repeat.
MAX_DISTINCT_SHARE = 0.5
#: A column follows a convention when this share of its cells with letters belong to values it writes that way
#: most (each value counted with all its rows in its usual spelling: its slips do not vote against the convention
#: they break, "tx" on 15 rows beside "TX" on 324, however many values have such slips) ...
CONVENTION_SHARE = 0.9
#: ... out of at least this many cells ...
MIN_CONVENTION_CELLS = 10
#: ... and this many distinct values so written, and this share of them: a column of one value ("USA") shows no
#: convention for the next value.
MIN_CONVENTION_VALUES, CONVENTION_VALUE_SHARE = 12, 0.8
#: A spelling the rule would rewrite is kept when the file writes it on purpose. In a column written one way
#: (`CONVENTION_SHARE` of its cells in values usually written in one case) that is judged by the spelling's share
#: of its value's rows: a fifth or more ("new york" 30 beside "New York" 40) is a way the file writes the value;
#: below that, outnumbered more than four to one in a column that writes everything else one way, it is a slip
#: however many rows it has ("ca" on 9 rows beside "CA" on 301: 3%). Typing slips of a source run at a few percent
#: of a value's rows.
KEEP_SHARE = 0.2
#: A column that writes its values in several cases (no case is the usual one of values holding `CONVENTION_SHARE`
#: of its cells: rayyan's language codes "eng" and "ENG" beside names "English") often joins sources that each
#: write a value their own way: there a spelling on this many rows is kept ("ENG" on 23 rows beside "eng" on 464),
#: and a value written two ways on that many rows each keeps its rare third spelling too ("Eng" on 2 rows): nothing
#: says which is wrong.
KEEP_CELLS = 5
#: Either way a spelling on fewer rows than this is no evidence of a way of writing ("boston" once beside
#: "Boston" three times); a value written only against the convention is kept when it holds this many rows and
#: this share of the column ("new york" on 30 rows of 300, never "New York").
FREQUENT_CELLS, FREQUENT_SHARE = 3, 0.1
#: A column with no convention gives a value with several spellings the one holding this many times the rows of
#: each other spelling; with no such spelling nothing says which is right, and the value stays out of the table.
SPELLING_RATIO = 3
#: Table entries kept at most, the values on most rows first: the table stays reviewable and bounded.
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
#: A letter written in capitals in title case: a word's first, and the one after a single letter and an apostrophe
#: that start a word ("O'Brien", "D'Angelo", "L'Oreal"; "Don't" keeps its "t").
TITLE_START = WORD_START + r"|(?:(?<=^[^\W\d_]')|(?<=[\s\-/(][^\W\d_]'))[^\W\d_]"
_TITLE_START = re.compile(TITLE_START)
#: Two words with letters: an all-capitals value of several words is a name shouted ("ANN LEE"), not an abbreviation,
#: where the user asked for title case.
TWO_WORDS = r"[^\W\d_]\S*\s+\S*[^\W\d_]"
_TWO_WORDS = re.compile(TWO_WORDS)
_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=1 << 16)  # judged for the same values over and over while learning
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


def convert(value: str, convention: str, asked: bool = False) -> str:
    """`value` written in `convention`, as the rule template does it (values it leaves alone come back).

    Only values written all in one case are converted: a capital inside a lower-case value ("Chairman, CEO")
    or a value in title case among codes ("Taiwan") was written so on purpose, or is no value of the column.
    A case the user `asked` for in upper or lower case is every value's ("Taiwan" -> "TAIWAN", "JD@X.COM" ->
    "jd@x.com"); asked in title case, it is the convention's rule.

    Example:
        >>> convert("fl", "upper"), convert("Taiwan", "upper"), convert("GOLDFIELD", "title"), convert("USA", "title")
        ('FL', 'Taiwan', 'Goldfield', 'USA')
        >>> convert("st. louis", "title"), convert("SHIPPED", "lower"), convert("Shipped", "lower"), convert("CO", "lower")
        ('St. Louis', 'shipped', 'Shipped', 'CO')
        >>> convert("Taiwan", "upper", asked=True), convert("JD@X.COM", "lower", asked=True)
        ('TAIWAN', 'jd@x.com')
        >>> convert("O'BRIEN", "title"), convert("DON'T STOP", "title"), convert("ANN LEE", "title", asked=True)
        ("O'Brien", "Don't Stop", 'Ann Lee')
    """
    kind = style(value)
    if asked and convention in ("upper", "lower"):
        return value.upper() if convention == "upper" else value.lower()
    if convention == "upper":
        return value.upper() if kind == "lower" else value
    if kind == "upper" and not _SHOUTED.search(value) and not (asked and _TWO_WORDS.search(value)):
        return value  # an abbreviation or a code ("USA", "CO") is written in capitals on purpose
    if convention == "lower":
        return value.lower() if kind == "upper" else value
    if kind in ("lower", "upper"):
        return _TITLE_START.sub(lambda m: m.group(0).upper(), value.lower())
    return value


def foreign_letters(value: str, letters: str) -> bool:
    """True when `value` holds a letter beyond ASCII that is not among `letters` (case-folded), the letters the
    column's values use: a stray character ("TRU\u0140E"), never case-mapped.

    Example:
        >>> foreign_letters("TRU\u0140E", "eurt"), foreign_letters("True", "eurt"), foreign_letters("fl", "il")
        (True, False, False)
    """
    return any(c not in letters and c > "\x7f" for c in _LETTER.findall(value.casefold()))


def detect(column: ColumnValues, asked: str | None = None) -> Finding | None:
    """Find cells written against the column's case convention, or values with case variants when the
    column has no convention; params: the `convention` (or None), the `exceptions` table (case-folded value
    -> spelling: the convention's exceptions, or without one every value's spelling), the `letters` the
    column's values use, the spellings to `keep` and whether the convention was `asked`.

    `asked`: the case the user asks the column's values to be written in ("upper", "lower" or "title"; in words
    or by corrected rows, `Labels.conventions`). It is the convention whatever the column writes, on a column
    whose values do not repeat too, and no spelling is kept because many rows write it: the user has said which
    is right. Values with a capital among lower-case letters stay in title case ("McDonald"), and so do the
    deliberate spellings of the drop's values ("MCDONALD" -> "McDonald" where the drop writes both).

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("city", pd.Series(["New York"] * 5 + ["new york", "Gary", "Gary"]))
        >>> detect(col).params["convention"], detect(col).params["exceptions"]
        (None, {'gary': 'Gary', 'new york': 'New York'})
        >>> codes = ["IL", "TX", "CA", "NY", "OH", "WA", "OR", "NV", "UT", "AZ", "NM", "CO"]
        >>> col = ColumnValues.of("state", pd.Series(codes * 4 + ["fl", "Taiwan"]))
        >>> detect(col).params["convention"], detect(col).examples
        ('upper', ('fl',))
        >>> detect(ColumnValues.of("state", pd.Series(["ca", "Ny", "TX"])), asked="upper").examples
        ('Ny', 'ca')
    """
    convention, exceptions, letters, keep = case_rule(column, asked)
    if convention is None and not exceptions:
        return None
    variants = {
        value: n for value, n in column.meaningful.items()
        if fix(value, convention, exceptions, letters, keep, asked=asked is not None) != value
    }
    if not variants:
        return None
    n = sum(variants.values())
    what = (f"in another case than the {convention} case asked" if asked else
            f"against the column's {convention} case" if convention else "in a different case than usual")
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} are written {what}",
        examples=top_examples(variants),
        params={"convention": convention, "exceptions": exceptions, "letters": letters, "keep": keep,
                "asked": asked is not None},
    )


def fix(value: str, convention: str | None, exceptions: dict[str, str], letters: str | None = None,
        keep: tuple[str, ...] = (), asked: bool = False) -> str:
    """What the rule makes of one value: kept when the file writes it so on purpose (`keep`) or when it holds a
    stray letter, else its spelling in the table, else the convention, else the value. Without a convention
    the table rewrites a spelling only when it, or the spelling it would take, is written all in one case:
    "JoAnne" beside "Joanne" may be another name, "JOANNE" is not.

    Example:
        >>> fix("COLUMBUS", None, {"columbus": "Columbus"}), fix("ColumBus", None, {"columbus": "Columbus"})
        ('Columbus', 'ColumBus')
        >>> fix("ca", "upper", {}), fix("ca", "upper", {}, keep=("ca",))
        ('CA', 'ca')
    """
    if value in keep or (letters is not None and foreign_letters(value, letters)):
        return value
    key = _SPACES.sub(" ", value.strip()).casefold()
    spelling = exceptions.get(key)
    if spelling is not None and (convention or _one_case(value) or _one_case(spelling)):
        return spelling
    return convert(value, convention, asked) if convention else value


def _one_case(value: str) -> bool:
    return style(value) in ("upper", "lower")


def case_rule(column: ColumnValues, asked: str | None = None) -> tuple[str | None, dict[str, str], str, tuple[str, ...]]:
    """What the rule for a column whose values repeat needs: its case convention (None when it has none, or
    holds people's names, whose case is the person's own), its table (case-folded value -> spelling: the
    exceptions to the convention, or without one each value's spelling), the letters its established values
    use (a value with another letter is left alone), and the spellings the file writes on purpose, kept
    whatever the rule says (see `KEEP_SHARE`, `KEEP_CELLS`). With a case the user `asked` for (see `detect`),
    that case and its exceptions, and nothing kept."""
    values = column.meaningful
    keys: dict[str, dict[str, int]] = {}
    for value, n in values.items():
        if style(value) is not None:
            keys.setdefault(value.casefold(), {})[value] = n
    cells = sum(values.values())
    if not keys or (asked is None and len(keys) > MAX_DISTINCT_SHARE * cells):
        return None, {}, "", ()
    established = [v for v, n in values.items() if n >= 2] or list(values)
    letters = "".join(sorted({c for v in established for c in _LETTER.findall(v.casefold())}))
    if asked is not None:
        return asked, _exceptions(keys, asked, asked=True), letters, ()
    # each value counts, with all its rows, in the case the file writes it most (see `CONVENTION_SHARE`)
    styles = {s: 0 for s in (*STYLES, "mixed")}
    distinct = dict.fromkeys(styles, 0)
    for spellings in keys.values():
        usual_spelling = max(spellings.items(), key=lambda item: (item[1], item[0]))[0]
        styles[style(usual_spelling)] += sum(spellings.values())
        distinct[style(usual_spelling)] += 1
    cased = sum(styles.values())
    usual = max(STYLES, key=lambda s: (styles[s], -STYLES.index(s)))
    # the column writes its values one way; with many distinct values so written, that is a rule for new values too
    uniform = cased >= MIN_CONVENTION_CELLS and styles[usual] >= CONVENTION_SHARE * cased
    strong = (
        uniform
        and distinct[usual] >= MIN_CONVENTION_VALUES
        and distinct[usual] >= CONVENTION_VALUE_SHARE * sum(distinct.values())
    )
    if not strong or holds_person_names(column.name):
        table = _variant_table(keys, usual)
        return None, table, letters, _kept(keys, table, None, cells, uniform)
    table = _exceptions(keys, usual)
    return usual, table, letters, _kept(keys, table, usual, cells, uniform)


def _exceptions(keys: dict[str, dict[str, int]], convention: str, asked: bool = False) -> dict[str, str]:
    """The convention's table: each value (case-folded) the rule would write otherwise than its canonical
    spelling (`_canonical`) -> that spelling, the values on most rows first, up to `MAX_EXCEPTIONS`. Asked in upper
    or lower case, every value is written so: no table."""
    if asked and convention != "title":
        return {}
    exceptions: dict[str, tuple[int, str]] = {}
    for key, spellings in keys.items():
        canonical = _canonical(spellings, convention)
        if canonical is None:
            continue
        forms = {canonical, key, key.upper(), *spellings}
        if any(convert(form, convention, asked) != canonical for form in forms):
            exceptions[key] = (sum(spellings.values()), canonical)
    kept = sorted(exceptions.items(), key=lambda item: (-item[1][0], item[0]))[:MAX_EXCEPTIONS]
    return {key: canonical for key, (_, canonical) in sorted(kept)}


def _kept(keys: dict[str, dict[str, int]], table: dict[str, str], convention: str | None, cells: int,
          uniform: bool) -> tuple[str, ...]:
    """The spellings the rule would rewrite that the file writes on purpose: on a real share of their value's
    rows (in a column written one way, `uniform`) or on many rows (in one written several ways), or common in
    the column. A value the file writes two such ways on many rows each ("eng" 464, "ENG" 23 where the column
    mixes cases; "eng" 200 and "ENG" 23, a tenth of the column's cells, where it holds little else) has no one
    right spelling, so its rare third one ("Eng" on 2 rows) is kept too: nothing says it is the wrong one. Three
    rows of 18 are common in so few cells, but no way of writing to settle a value ("oslo" beside "Oslo" 11)."""
    kept = []
    for key, spellings in keys.items():
        total = sum(spellings.values())
        settled = sum(1 for n in spellings.values()
                      if _on_purpose(n, total, uniform) or (_common(n, cells) and n >= KEEP_CELLS)) >= 2
        for value, n in spellings.items():
            if fix(value, convention, table) == value:
                continue
            own = len(spellings) > 1 and _on_purpose(n, total, uniform)
            if settled or own or _common(n, cells):
                kept.append(value)
    return tuple(sorted(kept))


def _common(n: int, cells: int) -> bool:
    """Whether a spelling on `n` of the column's `cells` is common in the column, whatever its value's other rows."""
    return n >= FREQUENT_CELLS and n >= FREQUENT_SHARE * cells


def _on_purpose(n: int, total: int, uniform: bool) -> bool:
    """Whether a spelling on `n` of its value's `total` rows is a way the file writes the value, not a slip."""
    return n >= FREQUENT_CELLS and (n >= KEEP_SHARE * total or (not uniform and n >= KEEP_CELLS))


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
    """For a column with no convention: each value -> its spelling in the column's usual style if it has one,
    else its most frequent spelling, when that spelling is far more common than the others. Values with one
    spelling are listed too, so that the next drop's "COLUMBUS" finds "Columbus". A value written several ways
    all with capitals inside ("JoAnne", "Joanne") is left out (often different names); so are values with
    digits (codes). The values on most rows come first, up to `MAX_EXCEPTIONS`."""
    table: dict[str, str] = {}
    ranked = sorted(keys.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    for key, spellings in ranked:
        if _DIGIT.search(key) or not _LETTER.search(key):
            continue
        if len(spellings) > 1 and not any(_one_case(s) for s in spellings):
            continue
        in_style = {s: n for s, n in spellings.items() if style(s) == usual}
        pool = in_style or spellings
        canonical = min(pool, key=lambda s: (-pool[s], style(s) not in ("title", "mixed"), s))
        if spellings[canonical] < SPELLING_RATIO * max((n for s, n in spellings.items() if s != canonical), default=0):
            continue  # no spelling is far more common than the others: nothing says which is right
        table[_SPACES.sub(" ", key.strip())] = canonical
        if len(table) >= MAX_EXCEPTIONS:
            break
    return dict(sorted(table.items()))
