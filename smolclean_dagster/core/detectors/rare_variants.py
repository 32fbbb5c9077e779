"""Detector: rare values one or two typing errors away from a frequent value of a categorical column
("Premum" beside 120 "Premium"; "birminghxm" beside "birmingham"; "Los nAgeles" beside "Los Angeles"), written
backwards ("ESLAF" beside "FALSE"), or holding a stray character the column's values never use ("TRU\u0140E"
beside "TRUE").

Do no harm: a map goes from a value of one or two cells to one far more frequent (by cells), within an edit
distance that grows with the word's length; a frequent value is never rewritten, and a rare value whose
nearest frequent values are equally close stays as it is (nothing says which was meant).

What the fix carries to the next drop is the column, not only the slips seen: its valid values with the rows
that held them (`vocabulary`), so the function decides a value it never saw by the same evidence (a value of
the column is never rewritten; another one is judged as `variant_mapping` judges a value of one cell).

A rare value close to a frequent one can be another entity of its own ("Irvine" beside a hundred "Irving",
"Bristow" beside "Bristol"). Where another column says which entity a value is (`companions`: a city's rows
agree on their state), a row whose cell there differs from what the frequent value's rows hold is another
entity's, and keeps its value; a rare value whose rows mostly differ so is no slip at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd
from rapidfuzz import process
from rapidfuzz.distance import OSA, Levenshtein

from ..findings import Finding
from .cells import ColumnValues, holds_person_names, normalise, top_examples, without_stray

KIND = "rare_variants"

#: A column is categorical when it has at most this many distinct values per cell (or this many values
#: in all, so that a 50-row chunk of a 15-city column still counts).
MAX_DISTINCT_SHARE = 0.1
MAX_DISTINCT_ANYWAY = 20
#: A frequent value has at least this many cells, and this many times the cells of its rare variant.
MIN_FREQUENT_CELLS = 5
MIN_FREQUENCY_RATIO = 5
#: A rare value holds at most this share of the cells (or 2 cells): two real categories can both be
#: common and one letter apart ("Basic", "Basics"), typos are not common.
MAX_RARE_SHARE = 0.005
#: Shorter words are too close to each other by nature ("cat", "car") to call one a typo of another.
MIN_LENGTH = 5
#: Characters per allowed edit (at least one edit): 1 edit below 20 characters, 2 below 30, ...
#: Real neighbouring categories differ by a word ("Red Ale", "Red Lager"), typos by a letter or two.
CHARS_PER_EDIT = 10
#: Two neighbouring letters swapped are one slip in a value this long ("Los nAgeles"); in a shorter word they
#: count as two edits, as they often make another word there ("Dairy", "Diary"; "Trail", "Trial").
MIN_SWAP_LENGTH = CHARS_PER_EDIT
#: Bound the fuzzy matching work on very wide vocabularies.
MAX_RARE_VALUES = 2000
#: Corrections kept at most (the table a function embeds stays reviewable and under the gate's limit).
MAX_CORRECTIONS = 300
#: A value the function never saw counts as one cell: what it is a slip of needs this many.
UNSEEN_TARGET_CELLS = max(MIN_FREQUENT_CELLS, MIN_FREQUENCY_RATIO)
#: Valid values a function embeds at most, those on most rows first (and every correction's target): a
#: categorical column of a 2,000-row drop has at most 200; beyond the bound a rare value of a very wide column
#: is judged as a value never seen (as the detector judges a value of one row), never the frequent ones.
MAX_VOCABULARY = 400

#: Words only: in codes ("scip-card-2", "AA-3859") one character is a different thing, not a typo.
WORD = r"[^\d]*[^\W\d_][^\d]*"
_WORD = re.compile(WORD)


def detect(column: ColumnValues) -> Finding | None:
    """Find rare spellings close to a frequent one; params map each to the frequent spelling. Columns of
    people's names (see `holds_person_names`) are left alone: a rare name is a person's own spelling.

    `vocabulary` holds the column's other values with their cells: what a value never seen is judged by.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("plan", pd.Series(["Premium"] * 6 + ["Premum", "Basic", "Basic"]))
        >>> detect(col).params
        {'mapping': {'Premum': 'Premium'}, 'vocabulary': {'Premium': 6, 'Basic': 2}}
    """
    if holds_person_names(column.name):  # "Smyth" beside forty "Smith" is somebody's name, not a typo
        return None
    mapping = variant_mapping(column.meaningful)
    if not mapping:
        return None
    return finding(column, mapping, vocabulary(column.meaningful, mapping))


def finding(column: ColumnValues, mapping: dict[str, str], valid: dict[str, int], **params: object) -> Finding:
    """The finding of `mapping`'s slips in `column`: their cells, an example, the valid values (`vocabulary`)."""
    variants = {value: column.meaningful.get(value, 0) for value in mapping}
    n = sum(variants.values())
    first = next(iter(mapping))
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=(
            f"{n} cells of {column.name!r} hold {len(mapping)} rare spelling(s) close to a frequent value "
            f"(e.g. {first!r} -> {mapping[first]!r})"
        ),
        examples=top_examples(variants),
        params={"mapping": mapping, "vocabulary": valid, **params},
    )


def vocabulary(values: dict[str, int], mapping: dict[str, str]) -> dict[str, int]:
    """The column's valid values with their cells: every value but the slips, those on most cells first, at
    most `MAX_VOCABULARY` (and every value a slip becomes, so a fixed value is never judged again).

    Example:
        >>> vocabulary({"Premium": 6, "Premum": 1, "Basic": 2}, {"Premum": "Premium"})
        {'Premium': 6, 'Basic': 2}
    """
    ranked = sorted(((v, n) for v, n in values.items() if v not in mapping), key=lambda item: (-item[1], item[0]))
    kept = dict(ranked[:MAX_VOCABULARY])
    kept.update({v: values.get(v, 0) for v in mapping.values() if v not in kept})
    return kept


def variant_mapping(values: dict[str, int]) -> dict[str, str]:
    """From value->cells counts: {rare spelling: frequent spelling}, chains resolved, sorted by key."""
    total = sum(values.values())
    if total == 0 or len(values) > max(MAX_DISTINCT_ANYWAY, MAX_DISTINCT_SHARE * total):
        return {}
    ranked = sorted(
        ((v, n) for v, n in values.items() if len(v) >= MIN_LENGTH and _WORD.fullmatch(v)),
        key=lambda item: (-item[1], item[0]),
    )
    frequent = [(v, n) for v, n in ranked if n >= MIN_FREQUENT_CELLS]
    if not frequent:
        return {}
    choices = [v.casefold() for v, _ in frequent]
    most = frequent[0][1]
    rare = [(v, n) for v, n in ranked if n <= max(2, MAX_RARE_SHARE * total) and n * MIN_FREQUENCY_RATIO <= most]
    targets: dict[str, str] = {}
    for value, n in rare[-MAX_RARE_VALUES:]:
        allowed = max(1, len(value) // CHARS_PER_EDIT)
        limit = sum(1 for _, m in frequent if m >= n * MIN_FREQUENCY_RATIO)  # `frequent` is sorted by cells
        scorer = OSA.distance if len(value) >= MIN_SWAP_LENGTH else Levenshtein.distance
        close = process.extract(value.casefold(), choices[:limit], scorer=scorer, score_cutoff=allowed, limit=2)
        if close and close[0][1] > 0 and (len(close) == 1 or close[1][1] > close[0][1]):
            targets[value] = frequent[close[0][2]][0]  # distance 0 is a case variant: the case detector's job
    targets.update(garbled_mapping(values))
    resolved = {}
    for value, target in sorted(targets.items()):
        while target in targets:  # cells grow along a chain, so it ends
            target = targets[target]
        resolved[value] = target
    kept = sorted(resolved, key=lambda v: (-values[v], v))[:MAX_CORRECTIONS]
    return {v: resolved[v] for v in sorted(kept)}


#: A garbled value is matched only when it is this long: short words reverse into other words ("no", "on").
MIN_GARBLED_LENGTH = 4


def garbled_mapping(values: dict[str, int]) -> dict[str, str]:
    """{rare value: frequent value} for rare values that ARE a frequent value once stray characters are removed
    (characters beyond ASCII the column's frequent values never use) or once read backwards. Exact matches
    only, so a value of any column kind qualifies; the frequent value needs `MIN_FREQUENT_CELLS` cells and
    `MIN_FREQUENCY_RATIO` times the rare value's.

    Example:
        >>> garbled_mapping({"TRUE": 40, "FALSE": 38, "TRU\u0140E": 1, "ESLAF": 1, "EURT": 9})
        {'ESLAF': 'FALSE', 'TRU\u0140E': 'TRUE'}
    """
    frequent = {v: n for v, n in values.items() if n >= MIN_FREQUENT_CELLS}
    if not frequent:
        return {}
    letters = {c for v in frequent for c in v.casefold()}
    out: dict[str, str] = {}
    for value, n in values.items():
        if value in frequent or len(value) < MIN_GARBLED_LENGTH:
            continue
        for candidate in (without_stray(value, letters), value[::-1]):
            if candidate != value and frequent.get(candidate, 0) >= n * MIN_FREQUENCY_RATIO:
                out[value] = candidate
                break
    return dict(sorted(out.items()))


#: A column is a value's companion when this share of the value's rows holding something there hold the same,
#: on `MIN_FREQUENT_CELLS` rows or more ("Irving": state "TX" on every row).
COMPANION_SHARE = 0.9


def companion_text(value: object) -> str | None:
    """A cell as companions compare it: text stripped and case-folded, a number as written, else None (an empty
    cell or a null says nothing about which entity a row is).

    Example:
        >>> companion_text(" tx "), companion_text(2139), companion_text(""), companion_text(None)
        ('tx', '2139', None, None)
    """
    if isinstance(value, str):
        return value.strip().casefold() or None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return str(value)
    return None


def companions(rows: pd.DataFrame, column: str, values: Iterable[str]) -> tuple[str | None, dict[str, str]]:
    """The other column of `rows` that says which entity a value of `column` is, and what the rows of each of
    `values` hold there: (column, {value: companion text}), or (None, {}) when no column does.

    A column qualifies for a value when `COMPANION_SHARE` of the value's rows holding something there hold the
    same; the column taken is the one that qualifies for the most rows of `values`, as long as it tells two of
    them apart (a column holding "USD" on every row says nothing).

    Example:
        >>> rows = pd.DataFrame({"city": ["Irving"] * 6 + ["Irvine"] * 2 + ["Boston"] * 5,
        ...                      "state": ["TX"] * 6 + ["CA"] * 2 + ["ma"] * 5, "currency": ["USD"] * 13})
        >>> companions(rows, "city", ["Irving", "Boston"])
        ('state', {'Boston': 'ma', 'Irving': 'tx'})
    """
    if column not in rows.columns or rows.empty:
        return None, {}
    keys = rows[column].map(lambda v: normalise(v) if isinstance(v, str) else None)
    wanted = set(values)
    best: tuple[int, int, str, dict[str, str]] | None = None
    for place, other in enumerate(rows.columns):
        if other == column:
            continue
        pairs = pd.DataFrame({"key": keys, "held": rows[other].map(companion_text)}).dropna()
        pairs = pairs[pairs["key"].isin(wanted)]
        if pairs.empty:
            continue
        counts = pairs.groupby(["key", "held"]).size()
        totals = counts.groupby(level=0).sum()
        tops = counts.sort_values(ascending=False, kind="stable").groupby(level=0).head(1)
        held, covered = {}, 0
        for (key, text), n in tops.items():
            if n >= MIN_FREQUENT_CELLS and n >= COMPANION_SHARE * totals[key]:
                held[key], covered = text, covered + int(totals[key])
        if len(set(held.values())) < 2:
            continue
        if best is None or covered > best[0]:
            best = (covered, -place, str(other), dict(sorted(held.items())))
    return (best[2], best[3]) if best else (None, {})


def contradicted(rows: pd.DataFrame, column: str, mapping: dict[str, str], companion: str,
                 held: dict[str, str]) -> set[str]:
    """The rare values of `mapping` whose rows mostly hold something else in `companion` than the rows of the value
    they would become: each another entity, no slip.

    Example:
        >>> rows = pd.DataFrame({"city": ["Irvine", "Irvine", "Irvig"], "state": ["CA", "CA", "TX"]})
        >>> contradicted(rows, "city", {"Irvine": "Irving", "Irvig": "Irving"}, "state", {"Irving": "tx"})
        {'Irvine'}
    """
    if column not in rows.columns or companion not in rows.columns:
        return set()
    keys = rows[column].map(lambda v: normalise(v) if isinstance(v, str) else None)
    texts = rows[companion].map(companion_text)
    out = set()
    for value, target in mapping.items():
        expected = held.get(target)
        if expected is None:
            continue
        seen = texts[(keys == value) & texts.notna()]
        if (seen != expected).sum() > (seen == expected).sum():
            out.add(value)
    return out
