"""Detector: text damaged by a wrong decoding: replacement characters ("Voix d'Or\ufffd") and stray
combining marks that attach to no letter they could accent ("m\u0329dicamenteuse")."""

from __future__ import annotations

import re
import unicodedata

from ..findings import Finding
from .cells import ColumnValues, top_examples

KIND = "broken_text"

#: The replacement character and the combining diacritical marks (U+0300-U+036F).
DEBRIS = "[\ufffd\u0300-\u036f]"
_DEBRIS = re.compile(DEBRIS)


def is_broken(value: str) -> bool:
    """True when a value holds a replacement character or a combining mark that NFC cannot compose
    with the letter before it (real accents compose: "e" + U+0301 is "é")."""
    return bool(_DEBRIS.search(value)) and bool(_DEBRIS.search(unicodedata.normalize("NFC", value)))


def detect(column: ColumnValues) -> Finding | None:
    """Find values with decoding debris; the fix removes it (the characters it stands for are lost).

    Example:
        >>> import pandas as pd
        >>> detect(ColumnValues.of("title", pd.Series(["Voix d'Or\ufffd", "caf\u0065\u0301", "plain"]))).count
        1
    """
    broken = {v: n for v, n in column.meaningful.items() if is_broken(v)}
    if not broken:
        return None
    n = sum(broken.values())
    return Finding(
        kind=KIND,
        column=column.name,
        count=n,
        message=f"{n} cells of {column.name!r} hold debris of a wrong decoding (replacement characters, stray accents)",
        examples=top_examples(broken),
        params={"pattern": DEBRIS},
    )
