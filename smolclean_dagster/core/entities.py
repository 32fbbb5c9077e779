"""Rows that describe the same thing: a change the other rows of its entity contradict is not evidently right.

Many drops hold several rows per entity: a flight reported by several sources, a hospital with a row per
measure, a brewery with a row per beer. Another column names the entity (`flight`, `ProviderNumber`,
`brewery_id`), and most of that entity's rows agree on the column's value. A function that rewrites a cell
into a value the entity's other rows do not hold ("7:02aDec 1" -> "7:02 a.m." where the flight's other rows
say "7:16 a.m.") may fix the cell's form, but the value it writes is still not the entity's: the cell was
wrong and is still wrong. Do no harm asks for a change only where the replacement is evidently right, so the
validation gate counts such changes and sends back a function whose changes in a column mostly are such.

The entity column is found over the drop (`entity_keys`): the column whose groups of three rows or more
cover a good share of the drop, and inside whose groups the other columns agree most. It names the entity of
the columns whose most common value inside a group covers most of its rows, far more than their most common
value covers the whole column (any grouping agrees on a yes/no column). What no value says never makes a
group: a blank or a spelling of "no value" is no entity, a column blank on most rows names none, and an
agreement is only counted in groups where three rows or more hold a value (two rows of a thousand agree by
chance). A part of a person's name (`last_name`, `first_name`, `surname`) is no entity either: many people who
have nothing else in common share it.

Example:
    >>> import pandas as pd
    >>> rows = pd.DataFrame({"flight": ["AA-1"] * 4 + ["UA-2"] * 4 + ["DL-3"] * 4,
    ...                      "dep": ["7:16 a.m."] * 3 + ["7:02aDec 1"]
    ...                             + ["9:05 a.m.", "9:05a"] * 2 + ["6:40 a.m.", "6:40a"] * 2})
    >>> entity_keys(rows)
    {'dep': 'flight'}
    >>> after = rows.assign(dep=rows["dep"].replace("7:02aDec 1", "7:02 a.m."))
    >>> contradicted(rows, after, "dep", "flight").tolist()
    [False, False, False, True, False, False, False, False, False, False, False, False]
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .detectors import dependencies
from .detectors.cells import holds_person_names, is_null_token

#: A group of this many rows or more says what its entity's value is.
MIN_GROUP = 3
#: Rows in such groups must be this share of the drop for the column to name entities at all.
MIN_GROUPED_SHARE = 0.3
#: Inside the groups, the most common value must cover this share of the rows ...
MIN_AGREEMENT = 0.5
#: ... and this many times the share the column's most common value covers of the whole column.
OVER_CHANCE = 2.0
#: An entity column holds a value (not a blank, not a spelling of "no value") on at least this share of the rows.
MIN_FILLED_SHARE = 0.5
#: Words of a column's name that make it one part of a person's name, which people with nothing else in common share.
_NAME_PART = re.compile(r"first|last|given|family|middle|maiden|sur|fore|nick|^[fl]name$")


def entity_keys(frame: pd.DataFrame) -> dict[str, str]:
    """Column -> the column naming the entity whose value it holds, for the columns one does (module docstring).

    A drop has one entity column: of the columns filled on `MIN_FILLED_SHARE` of its rows whose groups of
    `MIN_GROUP` rows or more cover `MIN_GROUPED_SHARE` of it, the one inside whose groups the other columns
    agree most, over chance; never a part of a person's name (`names_one_entity`), nor an amount or a measurement
    (`_amounts`). A sibling value ("act_arr_time" beside "act_dep_time") may agree as well on one column, but it
    does not name the flight: the flight's own column agrees on all of them.
    """
    factorized = {str(c): pd.factorize(_text(frame[c]), use_na_sentinel=True) for c in frame.columns}
    codes = {c: found[0] for c, found in factorized.items()}
    chance = {c: _top_share(v) for c, v in codes.items()}
    best, best_score, best_agreement = None, 0.0, {}
    for key, keys in codes.items():
        if not names_one_entity(key) or (keys >= 0).sum() < MIN_FILLED_SHARE * len(frame):
            continue
        grouped = _in_groups(keys, keys >= 0)
        if grouped.sum() < MIN_GROUPED_SHARE * len(frame) or len(np.unique(keys[grouped])) < 2:
            continue
        if _amounts(factorized[key][1]):
            continue
        agreement = {}
        for column, values in codes.items():
            # the rows of a group that hold a value in `column`: a group with fewer says nothing about it
            rows = _in_groups(keys, grouped & (values >= 0))
            if column == key or rows.sum() < MIN_GROUP:
                continue
            agreement[column] = _mode_rows(keys[rows], values[rows]) / rows.sum()
        score = sum(max(0.0, a - chance[c]) for c, a in agreement.items()) * grouped.sum() / len(frame)
        if score > best_score:
            best, best_score, best_agreement = key, score, agreement
    if best is None:
        return {}
    return {c: best for c, a in best_agreement.items() if a >= max(MIN_AGREEMENT, OVER_CHANCE * chance[c])}


def _amounts(values) -> bool:
    """Whether most of a column's distinct values (as text) are amounts or measurements: a number with a fraction,
    with or without a currency sign or unit ("$62.50", "12.0 oz", "39.1"), a date or a time. Such a value is no
    entity: a price repeats across products that have nothing else in common, and a product's list price,
    one-to-one with it on most rows, agreed with the other columns as well as the product's own key did
    (`dependencies.measures`).

    Example:
        >>> _amounts(["$62.50", "62.50 USD", "$4.99"]), _amounts(["SKU-4112", "10018"])
        (True, False)
    """
    text = pd.Series(list(values), dtype=object).map(str).str.strip()
    return dependencies.measures(text.str.replace(r"^[^\d+-]+|[^\d]+$", "", regex=True).tolist())


def names_one_entity(column: str) -> bool:
    """Whether a column may name an entity by its name: not a part of a person's name ("last_name", "Surname",
    "first_name"), which many people share; a whole name ("name", "customer_name") may.

    Example:
        >>> names_one_entity("flight"), names_one_entity("name"), names_one_entity("LastName")
        (True, True, False)
    """
    if not holds_person_names(column):
        return True
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", column)]
    return not any(_NAME_PART.search(w) for w in words)


def _in_groups(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Which of `rows` fall in a group (by `keys`, factor codes) of `MIN_GROUP` of them or more."""
    if not rows.any():
        return rows
    sizes = np.bincount(keys[rows], minlength=int(keys.max()) + 1)
    return rows & (sizes[np.maximum(keys, 0)] >= MIN_GROUP)


def _mode_rows(keys: np.ndarray, values: np.ndarray) -> int:
    """How many rows hold their group's most common value (groups by `keys`; both as factor codes)."""
    pairs, counts = np.unique(keys.astype(np.int64) * (int(values.max()) + 1) + values, return_counts=True)
    group = pairs // (int(values.max()) + 1)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return int(np.maximum.reduceat(counts, starts).sum())


def _top_share(codes: np.ndarray) -> float:
    """The share of a column's known cells its most common value holds."""
    known = codes[codes >= 0]
    return 0.0 if known.size == 0 else np.bincount(known).max() / known.size


def contradicted(before: pd.DataFrame, after: pd.DataFrame, column: str, key: str) -> pd.Series:
    """Per row of `after`: whether `column` changed there into a value that the other rows of its entity
    (`key`, as `after` has it) contradict: at least two of them hold one other value, more than hold the new one
    (alone or with a note after it: "7:16 a.m. (Estimated)" holds "7:16 a.m.")."""
    old, new, keys = _text(before[column]), _text(after[column]), _text(after[key])
    # the same value written with other spaces is no new value; a spelling of "no value" says nothing
    changed = (_spaced(old).fillna("\0") != _spaced(new).fillna("\0")) & keys.notna() & new.notna()
    out = pd.Series(False, index=after.index)
    if not changed.any():
        return out
    counts = pd.DataFrame({"k": keys, "v": new}).dropna().groupby(["k", "v"], sort=False).size()
    groups: dict = {}
    for (k, v), n in counts.items():
        groups.setdefault(k, []).append((n, v))
    for i in changed.index[changed]:
        k, v = keys[i], new[i]
        # the same value with a note after it ("7:16 a.m. (Estimated)") agrees with it
        held = sum(n - (w == v) for n, w in groups.get(k, ()) if _agrees(w, v))
        top = max((n for n, w in groups.get(k, ()) if not _agrees(w, v)), default=0)
        out[i] = top >= 2 and top > held
    return out


def _agrees(other: str, value: str) -> bool:
    """Whether `other` holds `value`, alone or with a note after it (either way round)."""
    return other == value or other.startswith(value + " ") or value.startswith(other + " ")


def _text(series: pd.Series) -> pd.Series:
    """Cells as stripped text; blanks and spellings of "no value" ("N/A", "Not Available") as missing."""
    text = series.astype("string").str.strip()
    known = text.notna() & (text != "")
    known[known] = ~text[known].map(is_null_token).astype(bool)
    return text.astype(object).where(known, None)


def _spaced(values: pd.Series) -> pd.Series:
    """Values with every run of spaces written as one space."""
    return values.str.replace(r"\s+", " ", regex=True)
