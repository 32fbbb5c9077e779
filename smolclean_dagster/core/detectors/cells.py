"""ColumnValues: the text cells of one column, counted by distinct value, as every detector reads them.

Detectors work on distinct values with their cell counts instead of on cells: a 50k-row column usually
holds a few hundred distinct values, so every regex and parse runs once per value. Counting is pandas
(`value_counts`); the per-value work is plain Python over the distinct values, because pandas string
methods loop in Python over object arrays anyway and their per-call overhead dominates on the 50-row
chunks the agent loop profiles at every step.
The null-token vocabulary lives here because "which cells mean something" depends on it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

#: Spellings of "no value" (compared stripped and case-folded). "" is the canonical null and is not a
#: token. Words that are also real values somewhere ("empty", "unknown", "missing", "nat") stay out:
#: a token list that destroys a category is worse than one that misses a spelling.
NULL_TOKENS = frozenset(
    {
        "n/a", "n.a.", "n.a", "na", "#n/a", "#na", "nan", "null", "(null)", "<null>", "none", "(none)",
        "<na>", "nil", "-", "--", "---", "?", "??", "???", "not available",
    }
)

#: Runs of horizontal whitespace; line breaks inside a cell are kept (they carry structure).
REPEATED_SPACES = r"[^\S\r\n]{2,}"
_REPEATED = re.compile(REPEATED_SPACES)

MAX_EXAMPLES = 3

#: Words of a column name saying that it holds people's names ("last_name", "Surname", "contactName").
#: Spellings of a name are the person's own: "Smyth" beside 40 "Smith" is no typo, so no rule rewrites them.
_PERSON_WORDS = frozenset({"first", "last", "given", "family", "middle", "maiden", "full", "person", "customer",
                           "patient", "contact", "employee", "author", "client", "member", "owner", "user", "student"})
_PERSON_NAMES = frozenset({"name", "surname", "lastname", "firstname", "forename", "givenname", "familyname",
                           "fullname", "middlename", "fname", "lname", "nickname"})
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


#: Values longer than this are shaped by their start only: free text has no dominant shape anyway.
SHAPE_PREFIX = 30
_ASCII_SHAPES = str.maketrans(
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "9" * 10 + "A" * 26 + "a" * 26
)


def value_shape(value: str) -> str:
    """The shape of a value: digits -> 9, A-Z -> A, other letters -> a, everything else kept.

    Example:
        >>> value_shape("2020-03-22"), value_shape("New York")
        ('9999-99-99', 'Aaa Aaaa')
    """
    shape = value[:SHAPE_PREFIX].translate(_ASCII_SHAPES)
    if shape.isascii():
        return shape
    return "".join("9" if c.isdigit() else ("A" if c.isupper() else "a") if c.isalpha() else c for c in shape)


#: A word, where what a value says is compared: two letters or digits or more in a row.
WORD = re.compile(r"[^\W_]{2,}")

#: A shape (`shape`) is a column's dominant form when this share of its cells have it.
DOMINANT_SHAPE = 0.6
_DIGITS = re.compile(r"\d+")
_UPPER = re.compile(r"[^\W\d_a-z]+")  # runs of letters that are not lower case ASCII (upper and foreign)
_LOWER = re.compile(r"[a-z]+")


def shape(value: str) -> str:
    """A value's form: digit runs as 9, letter runs as A (capital first) or a, the rest as written.

    Example:
        >>> shape("2012/01/01"), shape("2012-01-01"), shape("0.05%"), shape("New York")
        ('9/9/9', '9-9-9', '9.9%', 'Aa Aa')
    """
    out = _DIGITS.sub("9", value)
    out = _UPPER.sub("A", out)
    return _LOWER.sub("a", out)


def without_stray(value: str, letters: Collection[str]) -> str:
    """`value` without its stray characters: those beyond ASCII that are not among `letters` (case-folded), the
    letters the column's established values use.

    Example:
        >>> without_stray("TRU\u0140E", set("true")), without_stray("Zo\u00eb", set("zoë"))
        ('TRUE', 'Zo\u00eb')
    """
    return "".join(ch for ch in value if ch <= "\x7f" or ch.casefold() in letters)


def is_null_token(value: object) -> bool:
    """True for a text cell that spells "no value" ("N/A", " null ", "-"...) and for the empty string.

    Example:
        >>> is_null_token(" N/A "), is_null_token(""), is_null_token("Nairobi")
        (True, True, False)
    """
    return isinstance(value, str) and (value.strip() == "" or value.strip().casefold() in NULL_TOKENS)


def holds_person_names(column: str) -> bool:
    """Whether a column's name says it holds people's names: "name", "surname", "f_name", "Last Name",
    "customerName" (but not "beer_name" or "city").

    Example:
        >>> holds_person_names("last_name"), holds_person_names("Surname"), holds_person_names("beer_name")
        (True, True, False)
    """
    words = [w.lower() for w in _NAME_WORDS.findall(str(column))]
    joined = "".join(words)
    if joined in _PERSON_NAMES or (words and words[-1] in _PERSON_NAMES and joined[: -len(words[-1])] in _PERSON_WORDS):
        return True
    return len(words) >= 2 and words[-1] == "name" and words[-2] in _PERSON_WORDS


def normalise(value: str) -> str:
    """A value as the column means it: stripped, runs of spaces collapsed to one."""
    value = value.strip()
    if value.isprintable() and "  " not in value:  # fast path: the only whitespace is single spaces
        return value
    return _REPEATED.sub(" ", value)


def text_cells(series: pd.Series) -> pd.Series:
    """The cells of `series` that hold text (JSON drops may hold numbers, lists or nulls beside it)."""
    return series[_text_mask(series)]


def _text_mask(series: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(series.dtype) and series.dtype != object:
        return series.notna()
    return series.apply(isinstance, args=(str,))


def value_kind(value: object) -> str | None:
    """What a cell that is not text holds, in JSON's words ("number", "boolean", "list", "object"), or
    None for a null.

    Example:
        >>> value_kind(3), value_kind(True), value_kind(["a"]), value_kind(None)
        ('number', 'boolean', 'list', None)
    """
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return "boolean"
    if isinstance(value, (int, float, np.number)):
        return "number"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def top_examples(counts: Mapping[str, int], limit: int = MAX_EXAMPLES) -> tuple[str, ...]:
    """The most frequent values of a value->cells mapping, ties broken by value: stable examples."""
    return tuple(v for v, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit])


def share(values: Mapping[str, int], matches: re.Pattern[str]) -> float:
    """The share of the cells whose value `matches` (re.match: at the start)."""
    total = sum(values.values())
    return sum(n for v, n in values.items() if matches.match(v)) / total if total else 0.0


@dataclass(frozen=True)
class ColumnValues:
    """The text cells of one column as distinct values with cell counts.

    `counts` maps each distinct raw non-empty text to its number of cells; `typed` counts the cells
    holding a value that is not text (a JSON number, boolean, list or object) by kind, and
    `typed_distinct` how many distinct such values there are; `tokens` the raw null tokens among the texts; `meaningful` each distinct value as the column means it (see `normalise`) to its cells,
    without empty strings and null tokens: what the value-level detectors read.

    Example:
        >>> col = ColumnValues.of("city", pd.Series([" Bend", "Bend", "N/A", ""]))
        >>> col.counts, col.tokens, col.meaningful
        ({' Bend': 1, 'Bend': 1, 'N/A': 1}, {'N/A': 1}, {'Bend': 2})
    """

    name: str
    counts: dict[str, int] = field(repr=False)
    n_rows: int = 0
    typed: dict[str, int] = field(default_factory=dict, repr=False)
    typed_distinct: int = 0

    @classmethod
    def of(cls, name: object, series: pd.Series) -> ColumnValues:
        """Count the non-empty text cells of `series`, and the cells holding typed values."""
        is_text = _text_mask(series)
        counted = series[is_text].value_counts(sort=False)
        counts = {str(v): int(n) for v, n in zip(counted.index, counted.to_numpy()) if v != ""}
        typed: Counter[str] = Counter()
        distinct: set[str] = set()
        if series.dtype == object and not is_text.all():
            for value in series[~is_text]:
                kind = value_kind(value)
                if kind is not None:
                    typed[kind] += 1
                    distinct.add(json.dumps(value, default=str, sort_keys=True) if kind in ("list", "object")
                                 else f"{kind}:{value!r}")
        return cls(name=str(name), counts=counts, n_rows=len(series), typed=dict(typed), typed_distinct=len(distinct))

    @cached_property
    def tokens(self) -> dict[str, int]:
        """Cells per distinct raw value that is a null token."""
        return {v: n for v, n in self.counts.items() if v.strip().casefold() in NULL_TOKENS}

    @cached_property
    def meaningful(self) -> dict[str, int]:
        """Cells per normalised value, without empties and null tokens."""
        values: dict[str, int] = {}
        for raw, n in self.counts.items():
            if raw in self.tokens:
                continue
            value = normalise(raw)
            if value:
                values[value] = values.get(value, 0) + n
        return values

    @property
    def n_meaningful(self) -> int:
        """Cells holding a value (not empty, not a null token)."""
        return sum(self.meaningful.values())


#: A number with a unit: the number as written, the space between, the unit (one word) and any words after it.
NUMBER_WITH_UNIT = re.compile(r"\s*([-+]?\d[\d,]*(?:\.\d+)?)(\s*)([^\d\s'\"][^\d\s'\"]*)(?:\s+(\S.*?))?\s*")


def unit_key(unit: str) -> str:
    """What two spellings of one unit share: its letters case-folded, without the full stops ("OZ." and "oz")."""
    return unit.casefold().replace(".", "")


#: A value written with digits and separators only: spaces, dashes, full stops, slashes and brackets.
DIGITS_AND_SEPARATORS = re.compile(r"[\d\s().\-/]*\d[\d\s().\-/]*")


def digit_layout(value: str) -> str | None:
    """How a value of digits and separators is laid out: each digit written 9 ("(555) 123-4567" -> "(999)
    999-9999"); None for a value with other characters.

    Example:
        >>> digit_layout("(555) 123-4567"), digit_layout("555-123-4567 x12")
        ('(999) 999-9999', None)
    """
    value = value.strip()
    return re.sub(r"\d", "9", value) if DIGITS_AND_SEPARATORS.fullmatch(value) else None


def in_layout(value: str, layout: str, runs: bool = False) -> str | None:
    """`value` written in `layout` (`digit_layout`), where its digits fit it: grouped as the layout groups them, or
    (with `runs`) all in one run of as many digits; None where they do not, or `value` holds anything but digits
    and separators.

    Example:
        >>> in_layout("555.123.4567", "999-999-9999"), in_layout("5551234567", "999-999-9999", runs=True)
        ('555-123-4567', '555-123-4567')
        >>> in_layout("05/01/2020", "9999-99-99") is None, in_layout("5551234567", "999-999-9999") is None
        (True, True)
    """
    if digit_layout(value) is None:
        return None
    groups, wanted = re.findall(r"\d+", value), [len(g) for g in re.findall(r"9+", layout)]
    digits = "".join(groups)
    if [len(g) for g in groups] != wanted and not (runs and len(groups) == 1 and len(digits) == sum(wanted)):
        return None
    it = iter(digits)
    return re.sub(r"9", lambda _: next(it), layout)
