"""Column profiles and issue detectors: deterministic, general signals over a raw frame.

One engine, three uses: the rules analyst turns findings into functions, chunk selection looks for
residual findings, and validation counts findings before and after cleaning. The detectors themselves
live in `core/detectors/`, one module each.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict

import pandas as pd
from pydantic import BaseModel, ConfigDict

from .detectors import DETECTORS, KINDS, ColumnValues, is_null_token
from .detectors.cells import value_shape
from .findings import Finding

log = logging.getLogger("smolclean.profile")

__all__ = ["KINDS", "ColumnProfile", "Finding", "detect_column", "detect_issues", "is_null_token", "profile_columns"]

class ColumnProfile(BaseModel):
    """What one column looks like: its dominant value shape and how much of it is missing.

    `dominant_shape` writes digits as 9, capitals as A and other letters as a ("9999-99-99", "Aaaa Aaaa");
    a typed value (JSON, Parquet) has its kind as its shape ("<number>", "<list>"); `dominant_share` is
    its share of the non-empty cells; `null_tokens` counts cells spelling a missing value ("N/A");
    `empty` counts empty strings and real nulls.
    """

    model_config = ConfigDict(frozen=True)

    column: str
    cells: int
    empty: int
    null_tokens: int
    distinct: int
    dominant_shape: str
    dominant_share: float


def profile_columns(df: pd.DataFrame) -> list[ColumnProfile]:
    """Profile every column of `df` (raw strings), in column order.

    Example:
        >>> [p.dominant_shape for p in profile_columns(pd.DataFrame({"d": ["2020-03-22", "N/A", ""]}))]
        ['9999-99-99']
    """
    profiles = []
    for name in df.columns:
        column = ColumnValues.of(name, df[name])
        shapes: dict[str, int] = {}
        for value, n in column.meaningful.items():
            shape = value_shape(value)
            shapes[shape] = shapes.get(shape, 0) + n
        for kind, n in column.typed.items():
            shapes[f"<{kind}>"] = shapes.get(f"<{kind}>", 0) + n
        shape = min(shapes, key=lambda s: (-shapes[s], s)) if shapes else ""
        values = column.n_meaningful + sum(column.typed.values())
        profiles.append(
            ColumnProfile(
                column=str(name),
                cells=len(df),
                empty=len(df) - sum(column.counts.values()) - sum(column.typed.values()),
                null_tokens=sum(column.tokens.values()),
                distinct=len(column.meaningful) + column.typed_distinct,
                dominant_shape=shape,
                dominant_share=round(shapes[shape] / values, 4) if shapes else 0.0,
            )
        )
    return profiles


#: Findings of recently seen columns by their name and content: learning detects over the same reference rows at
#: every step, and a step changes one column or none.
_FOUND: OrderedDict[bytes, list[Finding]] = OrderedDict()
FOUND_KEPT = 512


def detect_column(name: str, series: pd.Series) -> list[Finding]:
    """Run every detector over one column, in priority order."""
    try:
        digest = hashlib.blake2b(repr((name, str(series.dtype), len(series))).encode(), digest_size=16)
        digest.update(pd.util.hash_pandas_object(series, index=False).to_numpy().tobytes())
        key = digest.digest()
    except TypeError:  # cells pandas cannot hash (lists, dicts): detect again
        key = None
    if key is not None and key in _FOUND:
        _FOUND.move_to_end(key)
        return list(_FOUND[key])
    column = ColumnValues.of(name, series)
    found = [f for d in DETECTORS if (f := d.detect(column)) is not None] if column.counts else []
    if key is not None:
        _FOUND[key] = found
        while len(_FOUND) > FOUND_KEPT:
            _FOUND.popitem(last=False)
    return list(found)


def detect_issues(df: pd.DataFrame) -> list[Finding]:
    """Run every detector over every column of `df` (raw strings) and return the findings in a stable order:
    by detector priority (see `detectors.DETECTORS`), then by column order.

    Example:
        >>> df = pd.DataFrame({"city": [" Bend", "Gary", "Gary"], "ibu": ["N/A", "20", "35"]})
        >>> [(f.kind, f.column) for f in detect_issues(df)]
        [('whitespace', 'city'), ('null_tokens', 'ibu')]
    """
    findings = [f for name in df.columns for f in detect_column(name, df[name])]
    findings.sort(key=lambda f: KINDS.index(f.kind))  # stable: column order within a kind
    log.debug("detected %d findings over %d columns", len(findings), len(df.columns))
    return findings
