"""Detector: a yes/no column that spells its two values several ways ("yes", "Y", "true", "1", "no", "F")."""

from __future__ import annotations

import pandas as pd

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
    case variant (the case detector's job).

    Example:
        >>> col = ColumnValues.of("active", pd.Series(["yes", "yes", "no", "Y", "true", "0"]))
        >>> detect(col).params["mapping"]
        {'0': 'no', 'no': 'no', 'true': 'yes', 'y': 'yes', 'yes': 'yes'}
    """
    values = column.meaningful
    if values.empty:
        return None
    keys = pd.Series(values.index, dtype=object).str.casefold()
    known = keys.isin(SPELLINGS).to_numpy()
    if values[known].sum() < MIN_BOOLEAN_SHARE * values.sum() or keys[known].nunique() <= 2:
        return None
    frame = pd.DataFrame({"value": values.index[known].astype(str), "n": values.to_numpy()[known], "key": keys[known]})
    if frame["key"].str.isdigit().all():
        return None
    frame["pair"] = frame["key"].map(lambda k: SPELLINGS[k][0])
    frame["truth"] = frame["key"].map(lambda k: SPELLINGS[k][1])
    pair = frame.groupby("pair")["n"].sum().sort_values(ascending=False, kind="stable").index[0]
    canonical = {truth: _spelling(frame, pair, truth) for truth in (True, False)}
    mapping = {key: canonical[truth] for key, truth in sorted(zip(frame["key"], frame["truth"]))}
    changed = frame[frame["value"] != frame["truth"].map(canonical)]
    if changed.empty:
        return None
    counts = pd.Series(changed["n"].to_numpy(), index=changed["value"].to_numpy())
    n = int(counts.sum())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=(
            f"{n} cells of {column.name!r} spell yes/no differently from the usual "
            f"{canonical[True]!r}/{canonical[False]!r}"
        ),
        examples=top_examples(counts),
        params={"mapping": mapping, "true": canonical[True], "false": canonical[False]},
    )


def _spelling(frame: pd.DataFrame, pair: tuple[str, str], truth: bool) -> str:
    """The most frequent written form of one side of `pair`, or the pair's word in the case of the other side."""
    side = frame[(frame["pair"] == pair) & (frame["truth"] == truth)].sort_values(
        ["n", "value"], ascending=[False, True], kind="stable"
    )
    if not side.empty:
        return str(side["value"].iloc[0])
    word = pair[0 if truth else 1]
    other = _spelling(frame, pair, not truth)
    if other.isupper():
        return word.upper()
    return word.title() if other[:1].isupper() else word
