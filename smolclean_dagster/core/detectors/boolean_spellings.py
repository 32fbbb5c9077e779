"""Detector: a yes/no column that spells its two values several ways ("yes", "Y", "true", "1", "no", "F")."""

from __future__ import annotations

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "boolean_spellings"

#: A column is boolean when this share of its values are boolean spellings.
MIN_BOOLEAN_SHARE = 0.95
#: Each pair of spellings that belong together, keyed by case-folded spelling: (pair, truth).
PAIRS = (("true", "false"), ("t", "f"), ("yes", "no"), ("y", "n"), ("1", "0"), ("on", "off"))
SPELLINGS = {word: (pair, truth) for pair in PAIRS for word, truth in zip(pair, (True, False))}


def detect(column: ColumnValues) -> Finding | None:
    """Find boolean columns with more than one spelling per value; params map each case-folded spelling
    to the canonical one: the pair used by most cells, in the case the data uses most.

    A column of "Y"/"N" only, or of "0"/"1" only, is consistent and not flagged; "yes"/"Yes" alone is a
    case variant (the case detector's job); "True"/"false" is two spellings, flagged.

    Example:
        >>> import pandas as pd
        >>> col = ColumnValues.of("active", pd.Series(["yes", "yes", "no", "Y", "true", "0"]))
        >>> detect(col).params["mapping"]
        {'0': 'no', 'no': 'no', 'true': 'yes', 'y': 'yes', 'yes': 'yes'}
    """
    values = column.meaningful
    known = {v: n for v, n in values.items() if v.casefold() in SPELLINGS}
    keys = {v.casefold() for v in known}
    if sum(known.values()) < MIN_BOOLEAN_SHARE * sum(values.values()):
        return None
    if len(keys) < 2 or all(k.isdigit() for k in keys):  # one side only, or numbers only
        return None
    if len(keys) == 2 and len(known) > 2:  # one word per side, some in two cases: the case detector's job
        return None
    by_pair: dict[tuple[str, str], int] = {}
    for value, n in known.items():
        pair = SPELLINGS[value.casefold()][0]
        by_pair[pair] = by_pair.get(pair, 0) + n
    pair = max(by_pair, key=lambda p: (by_pair[p], p))
    canonical = {truth: _spelling(known, pair, truth) for truth in (True, False)}
    mapping = {key: canonical[SPELLINGS[key][1]] for key in sorted(keys)}
    changed = {v: n for v, n in known.items() if v != canonical[SPELLINGS[v.casefold()][1]]}
    if not changed:
        return None
    n = sum(changed.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=(
            f"{n} cells of {column.name!r} spell yes/no differently from the usual "
            f"{canonical[True]!r}/{canonical[False]!r}"
        ),
        examples=top_examples(changed),
        params={"mapping": mapping, "true": canonical[True], "false": canonical[False]},
    )


def _spelling(known: dict[str, int], pair: tuple[str, str], truth: bool) -> str:
    """One side of `pair` written in the case most of the pair's cells use, the same for both sides: a
    column never ends up with "false" beside "True"."""
    cases = {"lower": 0, "upper": 0, "title": 0}
    for value, n in known.items():
        if SPELLINGS[value.casefold()][0] == pair and value.upper() != value.lower():
            case = "upper" if value.isupper() else "lower" if value.islower() else "title"
            cases[case] += n
    case = max(cases, key=lambda c: (cases[c], c == "lower"))
    word = pair[0 if truth else 1]
    return word.upper() if case == "upper" or (case == "title" and len(word) == 1) else word.title() if case == "title" else word
