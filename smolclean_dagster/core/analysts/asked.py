"""What the user's words ask of the rules analyst, column by column, and which instruction items a rule serves.

The rules' templates do not read prose; they read a few requests, each one kind of fix the defaults leave alone
("Write N/A as null.", "Write numbers without units.", "Remove broken characters.", "Collapse double spaces.",
"Write the dates as YYYY-MM-DD.") and explicit rewrites ("Write 'BOSTON' as 'Boston'."). An item that names
columns (quoted, beside the word "column": "in columns 'email' and 'phone'", "the 'qty' column") asks it of those
columns only; an item naming none asks it of every column. The answers to learning's questions
(core/questions.py) are worded so that they are read here.

Example:
    >>> asks_for_real_nulls("Write 'N/A' as empty in column 'email'.", "email")
    True
    >>> asks_for_real_nulls("Write 'N/A' as empty in column 'email'.", "phone")
    False
    >>> asked_rewrites("Write 'BOSTON' as 'Boston' in column 'city'.", "city")
    {'BOSTON': 'Boston'}
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..date_layouts import Layout
from ..detectors import broken_text, case_variants, date_format, null_tokens, number_format, whitespace
from ..detectors.cells import unit_key
from ..instructions import ItemState, split_instructions

#: A name or value in quotes: '...', "..." or `...` (a rewrite's target may be empty: '').
_QUOTED = r"""(?:'[^']+'|"[^"]+"|`[^`]+`)"""
_QUOTED_OR_EMPTY = r"""(?:'[^']*'|"[^"]*"|`[^`]*`)"""
_AND = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s*&\s*)"
_QUOTED_LIST = rf"{_QUOTED}(?:{_AND}{_QUOTED})*"
#: Columns named by an item: quoted names after "column(s)", or before it ("the 'qty' column").
_COLUMNS_AFTER = re.compile(rf"\bcolumns?\s+(?:named\s+|called\s+)?({_QUOTED_LIST})", re.IGNORECASE)
_COLUMNS_BEFORE = re.compile(rf"({_QUOTED_LIST})\s+columns?\b", re.IGNORECASE)
_ONE_QUOTED = re.compile(_QUOTED)
#: "write 'X' (and 'Y') as 'Z'": a rewrite the user spells out, value by value.
_REWRITE = re.compile(rf"({_QUOTED_LIST})\s+(?:as|to|into)\s+({_QUOTED_OR_EMPTY})", re.IGNORECASE)
_WRITE = re.compile(r"\b(?:write|rewrite|replace|change|turn|spell)\b", re.IGNORECASE)

_FILL = re.compile(r"\b(?:fill|impute)\w*", re.IGNORECASE)
_REAL_NULLS = re.compile(
    r"\b(?:as|to|into|with|by|be|become|becomes)\s+(?:an?\s+|real\s+|true\s+|proper\s+)?(?:nulls?|none|empty|blanks?|missing)\b|"
    r"\b(?:real|true|proper|actual)\s+(?:nulls?|missing values?)\b|\bnull\s+tokens?\b|\bplaceholders?\b|"
    r"\b(?:nulls?|empty|blank)\s+(?:for|instead of)\b|\bmissing values? (?:as|to)\b",
    re.IGNORECASE)
_DEBRIS = re.compile(r"\b(?:debris|broken characters?|replacement characters?|mojibake|garbled|encoding)\b",
                     re.IGNORECASE)
_WHITESPACE = re.compile(
    r"\bnormali[sz]\w*\s+(?:the\s+|all\s+|any\s+)?(?:white\s*space|spac\w*)|"
    r"\b(?:white\s*space|spacing)\s+normali[sz]\w*|\bsingle\s+spac\w*|"
    r"\b(?:collapse|squeeze|remove|strip|drop)\w*\s+(?:the\s+|all\s+|any\s+)?"
    r"(?:double|repeated|multiple|extra|consecutive)\s+(?:spaces?|white\s*space|blanks?)",
    re.IGNORECASE)
_PLAIN_NUMBERS = re.compile(
    r"\b(?:without (?:the |their |its |any )?units?|(?:strip|remove|drop)\w* (?:the |their |its |all |any )?units?|"
    r"plain numbers?|bare numbers?)\b", re.IGNORECASE)
#: ISO dates: an item speaking of dates and of ISO 8601 ("dates as ISO", "as YYYY-MM-DD"), not of ISO country codes.
#: Whole numbers without their ".0" ("7.0" -> "7"), as a user's corrections of a float export show it.
_WHOLE_NUMBERS = re.compile(r"\bwhole numbers?\b.*\bwithout (?:a |the |any )?decimal(?: points?)?\b", re.IGNORECASE)
#: Integers without leading zeros ("01907" -> "1907").
_LEADING_ZEROS = re.compile(
    r"\b(?:without|no) (?:the |their |its |any )?leading zeros?\b|"
    r"\b(?:strip|remove|drop)\w* (?:the |their |its |any |all )?leading zeros?\b", re.IGNORECASE)
#: Dates written in one layout asked in another: "dates ... written Y/M/DD ... in the layout M/D/YY", and
#: whether those that read both ways go too.
_LAYOUT_WORD = r"[YMD]{1,4}[/.-][YMD]{1,4}[/.-][YMD]{1,4}"
_LAYOUTS = re.compile(rf"\bdates?\b.*?\bwritten\s+({_LAYOUT_WORD})\b.*?\bin the layout\s+({_LAYOUT_WORD})\b"
                      r"(.*\bboth ways\b)?", re.IGNORECASE)
#: A number's unit written one way: "the unit of ... as 'oz' where it is written 'OZ.', 'ounce' or 'oz.'", and
#: whether words written after such a unit go too.
_UNITS = re.compile(rf"\bunit\b.*?\bas\s+({_QUOTED})\s+where it is written\s+({_QUOTED_LIST})"
                    r"(.*\bwords written after it\b)?", re.IGNORECASE)
#: Digits laid out one way: "the digits of column 'phone' in the layout '999-999-9999'", and whether digits
#: written in one run are laid out too.
_DIGIT_LAYOUT = re.compile(rf"\bdigits\b.*?\bin the layout\s+({_QUOTED})(.*\balso those written in one run\b)?",
                           re.IGNORECASE)
#: Empty cells written as a placeholder: "the empty cells of column 'abv' as 'n/a (not measured)'".
_PLACEHOLDER = re.compile(rf"\bempty cells(?:\s+(?:of|in)\s+(?:the\s+)?(?:columns?\s+)?{_QUOTED_LIST}(?:\s+columns?)?)?"
                          rf"\s+as\s+({_QUOTED})", re.IGNORECASE)
#: A case asked of a column's values: "in upper case", "title-case", "lowercase", "in capital letters", "Uppercase".
_CASE = re.compile(r"\b(?:(upper|lower|title)[\s-]?case[ds]?|(capital letters|capitals|all caps))\b", re.IGNORECASE)
#: An item that says what not to do ("Do not lower-case column 'code'").
_NEGATED = re.compile(r"\b(?:not|never|no)\b|n't\b", re.IGNORECASE)
_ISO_DATES = re.compile(r"^(?=.*\bdates?\b).*?(?:\bISO(?:[ -]?8601)?\b|\bYYYY-MM-DD\b)", re.IGNORECASE | re.MULTILINE)


def named_columns(text: str) -> frozenset[str]:
    """The columns an instruction item names (case-folded), or none when it speaks of every column.

    Example:
        >>> sorted(named_columns("Write 'N/A' as empty in columns 'email' and 'phone'."))
        ['email', 'phone']
        >>> named_columns("Write N/A as null.")
        frozenset()
    """
    names = set()
    for pattern in (_COLUMNS_AFTER, _COLUMNS_BEFORE):
        for group in pattern.findall(text or ""):
            names.update(q[1:-1].casefold() for q in _ONE_QUOTED.findall(group))
    return frozenset(names)


def in_scope(text: str, column: str) -> bool:
    """Whether an instruction item speaks of `column`: it names no column, or names this one."""
    named = named_columns(text)
    return not named or str(column).casefold() in named


def _item_texts(instructions: str) -> list[str]:
    return [i.text for i in split_instructions(instructions or "")]


def _asked(pattern: re.Pattern, instructions: str, column: str | None) -> bool:
    if column is None:
        return bool(pattern.search(instructions or ""))
    return any(pattern.search(text) and in_scope(text, column) for text in _item_texts(instructions))


def asks_to_fill(instructions: str) -> bool:
    """Whether the user's instructions ask for missing values to be filled in ("fill empty cities from the
    zip code"): without that, a dependency never fills an empty cell, it only repairs wrong ones.

    Example:
        >>> asks_to_fill("Fill missing states from the city."), asks_to_fill("Trim names.")
        (True, False)
    """
    return bool(_FILL.search(instructions or ""))


def asks_for_plain_numbers(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for numbers without their units ("numbers without units", "strip the
    units", "plain numbers"), of `column` when given: without that, units are stripped only where most of the
    column is bare numbers.

    Example:
        >>> asks_for_plain_numbers("Write numbers without units."), asks_for_plain_numbers("Trim names.")
        (True, False)
    """
    return _asked(_PLAIN_NUMBERS, instructions, column)


def asks_for_whole_numbers(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for whole numbers without a decimal point ("7.0" -> "7"), of `column`
    when given: without that, a column written "7.0" throughout keeps its own form.

    Example:
        >>> asks_for_whole_numbers("Write whole numbers without a decimal point in column 'rate'.", "rate")
        True
    """
    return _asked(_WHOLE_NUMBERS, instructions, column)


def asks_without_leading_zeros(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for numbers without leading zeros ("01907" -> "1907"), of `column`
    when given: without that, a code's leading zeros are its own.

    Example:
        >>> asks_without_leading_zeros("Write numbers without leading zeros in column 'zip'.", "zip")
        True
        >>> asks_without_leading_zeros("Write numbers without leading zeros in column 'zip'.", "phone")
        False
    """
    return _asked(_LEADING_ZEROS, instructions, column)


def asks_to_remove_debris(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for the debris of a wrong decoding to be removed ("remove the
    replacement characters", "strip broken characters", "fix mojibake"): the letters it stands for are lost,
    so without that the cells are left and reported.

    Example:
        >>> asks_to_remove_debris("Remove broken characters from titles."), asks_to_remove_debris("Trim names.")
        (True, False)
    """
    return _asked(_DEBRIS, instructions, column)


def asks_to_normalise_whitespace(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for whitespace to be normalised everywhere ("normalise whitespace",
    "collapse double spaces"): without that, free text keeps its own spacing (a double space after a full stop,
    a line break), while stray spaces around short values go anyway.

    Example:
        >>> asks_to_normalise_whitespace("Collapse double spaces."), asks_to_normalise_whitespace("Trim names.")
        (True, False)
    """
    return _asked(_WHITESPACE, instructions, column)


def asks_for_real_nulls(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for spellings of "no value" ("N/A", "NaN", "-") to be written as real
    nulls ("write N/A as null", "placeholders to empty", "use real nulls"), in `column` when given: without that
    they are left and reported. A token is the file's own way to write a missing value, and in some files it is
    the value the file means ("NaN" as a rate, "-" as a page range), so no null is evidently right unless asked
    for. Filling missing values ("fill missing cities") is another request: it fills, it does not null.

    Example:
        >>> asks_for_real_nulls("Write 'N/A' as a missing value (null)."), asks_for_real_nulls("Fill missing values.")
        (True, False)
    """
    return _asked(_REAL_NULLS, instructions, column)


def asks_for_iso_dates(instructions: str, column: str | None = None) -> bool:
    """Whether the user's instructions ask for dates as ISO 8601 ("dates as ISO", "as YYYY-MM-DD"), of `column` when
    given: without that, a date column is written in its own most common format, when that can be written back.

    Example:
        >>> asks_for_iso_dates("Write the dates of column 'signup' as YYYY-MM-DD (ISO 8601).", "signup")
        True
    """
    return _asked(_ISO_DATES, instructions, column)


def asked_rewrites(instructions: str, column: str) -> dict[str, str]:
    """The values of `column` the user asks to be written otherwise, each to its new spelling ("Write 'BOSTON' and
    'boston' as 'Boston' in column 'city'."): whole values, as written in quotes.

    Example:
        >>> asked_rewrites("In column 'state', write 'Calif.' as 'CA', 'Tex.' as 'TX'.", "state")
        {'Calif.': 'CA', 'Tex.': 'TX'}
    """
    out: dict[str, str] = {}
    for text in _item_texts(instructions):
        if not _WRITE.search(text) or not in_scope(text, column):
            continue
        for values, target in _REWRITE.findall(text):
            if re.search(r"\bcolumns?\s*$", text[: text.find(values)], re.IGNORECASE):
                continue  # "column 'city' as ...": a column's name, not a value
            for value in _ONE_QUOTED.findall(values):
                if value[1:-1] != target[1:-1]:
                    out.setdefault(value[1:-1], target[1:-1])
    return out


def asked_layouts(instructions: str, column: str) -> list[tuple[Layout, Layout, bool]]:
    """The date layouts the user asks `column`'s dates to be rewritten between ("Write the dates of column 'd'
    written D/M/YYYY in the layout YYYY-MM-DD."): (written in, wanted in, whether a date that reads both ways is
    rewritten too, "also those that read both ways"), as a person's corrections teach them (core/date_layouts.py).

    Example:
        >>> [(str(a), str(b), both) for a, b, both in asked_layouts(
        ...     "Write the dates of column 'd' written Y/M/DD (as in '4/2/15') in the layout M/D/YY.", "d")]
        [('Y/M/DD', 'M/D/YY', False)]
    """
    out = []
    for text in _item_texts(instructions):
        if not in_scope(text, column):
            continue
        for m in _LAYOUTS.finditer(text):
            source, target = Layout.parse(m[1]), Layout.parse(m[2])
            if source is not None and target is not None and source != target:
                out.append((source, target, bool(m[3])))
    return out


def asked_units(instructions: str, column: str) -> tuple[dict[str, str], bool] | None:
    """The units the user asks `column`'s numbers to be written with, where they are written with another spelling
    ("Write the unit of the numbers of column 'size' as 'oz' where it is written 'OZ.' or 'ounce'."), as a person's
    corrections teach them (`Labels.conventions`): ({a spelling's key (`unit_key`): the unit asked}, whether the
    words written after such a unit go too); None when nothing asks it. The first item to name a spelling decides.

    Example:
        >>> asked_units("Write the unit of the numbers of column 'size' as 'oz' where it is written 'OZ.' or "
        ...             "'ounce', and drop the words written after it.", "size")
        ({'oz': 'oz', 'ounce': 'oz'}, True)
    """
    units: dict[str, str] = {}
    drop_rest = False
    for text in _item_texts(instructions):
        if in_scope(text, column) and (m := _UNITS.search(text)):
            unit = m[1][1:-1]
            for spelling in (unit, *(q[1:-1] for q in _ONE_QUOTED.findall(m[2]))):
                units.setdefault(unit_key(spelling), unit)
            drop_rest |= bool(m[3])
    return (units, drop_rest) if units else None


def asked_digit_layout(instructions: str, column: str) -> tuple[str, bool] | None:
    """The layout the user asks `column`'s digits to be written in ("Write the digits of column 'phone' in the layout
    '999-999-9999'."; each digit written 9, `cells.digit_layout`), as a person's corrections teach it
    (`Labels.conventions`), and whether digits written in one run are laid out too; None when nothing asks it. The
    first item to ask one decides.

    Example:
        >>> asked_digit_layout("Write the digits of column 'phone' in the layout '(999) 999-9999', also those "
        ...                    "written in one run.", "phone")
        ('(999) 999-9999', True)
    """
    for text in _item_texts(instructions):
        if in_scope(text, column) and (m := _DIGIT_LAYOUT.search(text)):
            return m[1][1:-1], bool(m[2])
    return None


def asked_placeholder(instructions: str, column: str) -> str | None:
    """The text the user asks `column`'s empty cells to be written as ("Write the empty cells of column 'abv' as
    'n/a'."), as a person's corrections teach it (`Labels.conventions`); None when nothing asks it.

    Example:
        >>> asked_placeholder("Write the empty cells of column 'abv' as 'n/a (not measured)'.", "abv")
        'n/a (not measured)'
        >>> asked_placeholder("Keep empty cells as they are; write 'N/A' as 'unknown'.", "abv") is None
        True
    """
    for text in _item_texts(instructions):
        if in_scope(text, column) and (m := _PLACEHOLDER.search(text)):
            return m[1][1:-1]
    return None


def asked_case(instructions: str, column: str) -> str | None:
    """The case the user asks `column`'s values to be written in ("upper", "lower" or "title": "Write the values of
    column 'state' in upper case."), as a person's corrections teach it (`Labels.conventions`); None when nothing
    asks it. Only an item naming the column, or quoting its name, asks it: "Write the names in title case" would
    rewrite every column's codes and abbreviations. An item saying what not to do, or what to keep as it is, asks
    none. The first item to ask one decides.

    Example:
        >>> asked_case("Write the values of column 'state' in upper case.", "state")
        'upper'
        >>> asked_case("Write the 'email' column in lowercase.", "email"), asked_case("Make 'city' title-case.", "city")
        ('lower', 'title')
        >>> asked_case("Write names in title case.", "name"), asked_case("Do not lower-case column 'code'.", "code")
        (None, None)
    """
    for text in _item_texts(instructions):
        m = _CASE.search(text)
        if not m or _NEGATED.search(text) or asks_to_keep(text):
            continue
        quoted = {q[1:-1].casefold() for q in _ONE_QUOTED.findall(text)}
        if str(column).casefold() in named_columns(text) | quoted:
            return (m[1] or "upper").lower()
    return None


def asks_the_rules(instructions: str, columns: Iterable[str]) -> bool:
    """Whether the user's instructions ask a rewrite of one of `columns` that the rules carry out and no detector
    sees: values written otherwise, a unit, a date layout, a digit layout, a placeholder or a case.

    Example:
        >>> asks_the_rules("Write the digits of column 'phone' in the layout '999-999-9999'.", ["id", "phone"])
        True
    """
    asks = (asked_rewrites, asked_layouts, asked_units, asked_digit_layout, asked_placeholder, asked_case)
    return bool(instructions) and any(ask(instructions, c) for c in columns for ask in asks)


def asks_to_keep(text: str) -> bool:
    """Whether an instruction item asks for cells to stay as they are written ("Keep 'N/A' as written in column
    'email'."): carried out by changing nothing, so no function serves it.

    Example:
        >>> asks_to_keep("Keep the numbers of column 'qty' as written."), asks_to_keep("Write N/A as null.")
        (True, False)
    """
    return bool(_KEEP.search(text or ""))


_KEEP = re.compile(r"\b(?:keep|leave)\b.*\bas\s+(?:it\s+is|they\s+are|written|is)\b", re.IGNORECASE)


def left_as_written(instructions: str) -> frozenset[str]:
    """The kinds of dirt the defaults leave as written unless the user asks: spellings of "no value" (no real
    null unasked) and decoding debris (its letters are lost).

    Example:
        >>> sorted(left_as_written("")), sorted(left_as_written("Write N/A as null."))
        (['broken_text', 'null_tokens'], ['broken_text'])
    """
    kinds = set()
    if not asks_for_real_nulls(instructions):
        kinds.add(null_tokens.KIND)
    if not asks_to_remove_debris(instructions):
        kinds.add(broken_text.KIND)
    return frozenset(kinds)


#: Finding kind of the values the user asks to be rewritten (no detector finds them: the user's words do).
REWRITES = "asked_rewrites"
LAYOUTS = "asked_date_layouts"
UNITS = "asked_units"
DIGITS = "asked_digit_layouts"
PLACEHOLDERS = "asked_placeholders"

_ASKS = {
    null_tokens.KIND: _REAL_NULLS, number_format.KIND: _PLAIN_NUMBERS, broken_text.KIND: _DEBRIS,
    whitespace.KIND: _WHITESPACE, date_format.KIND: _ISO_DATES,
}


def items_served(kind: str, columns: Iterable[str], items: Iterable[ItemState]) -> tuple[int, ...]:
    """The instruction items a rule's function of `kind` on `columns` carries out: those asking that kind of fix of
    one of the columns (an explicit rewrite, of a value in one of them).

    Example:
        >>> items_served("null_tokens", ["email"], [ItemState(number=1, text="Write 'N/A' as empty in column 'email'.")])
        (1,)
    """
    columns = list(columns)
    out = []
    for item in items:
        if kind == REWRITES:
            asked = any(asked_rewrites(item.text, c) for c in columns)
        elif kind == LAYOUTS:
            asked = any(asked_layouts(item.text, c) for c in columns)
        elif kind == UNITS:
            asked = any(asked_units(item.text, c) for c in columns)
        elif kind == DIGITS:
            asked = any(asked_digit_layout(item.text, c) for c in columns)
        elif kind == PLACEHOLDERS:
            asked = any(asked_placeholder(item.text, c) for c in columns)
        elif kind == case_variants.KIND:
            asked = any(asked_case(item.text, c) for c in columns)
        else:
            pattern = _ASKS.get(kind)
            asked = pattern is not None and bool(pattern.search(item.text)) and any(in_scope(item.text, c) for c in columns)
        if asked:
            out.append(item.number)
    return tuple(out)


__all__ = ["DIGITS", "LAYOUTS", "PLACEHOLDERS", "REWRITES", "UNITS", "asked_case", "asked_digit_layout", "asked_layouts",
           "asked_placeholder", "asked_rewrites", "asked_units", "asks_for_iso_dates", "asks_for_plain_numbers", "asks_for_real_nulls",
           "asks_for_whole_numbers", "asks_the_rules", "asks_to_fill", "asks_to_keep",
           "asks_to_normalise_whitespace", "asks_to_remove_debris", "asks_without_leading_zeros", "in_scope",
           "items_served", "left_as_written", "named_columns"]
