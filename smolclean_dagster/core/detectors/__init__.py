"""The issue detectors, one module each, run in the order below.

Each module has a `KIND` (the Finding kind it reports) and `detect(column: ColumnValues) -> Finding | None`
over one column's text cells. To add a detector: write `detectors/<kind>.py` with both, add it to
`DETECTORS` at the place it should run (the rules analyst fixes findings in this order, so later
detectors see values the earlier fixes produced), and, if the rules analyst should fix it, add a template
in `analysts/rule_templates/` and a rule in `analysts/rules.py`.

`dependencies` is the one detector that reads whole frames (a dependency between columns shows only over
many rows): the rules analyst runs it over the drop's reference rows itself, after the ones below.
"""

from __future__ import annotations

from . import (
    boolean_spellings,
    broken_text,
    case_variants,
    date_format,
    escaped_quotes,
    marker_suffixes,
    null_tokens,
    number_format,
    rare_variants,
    whitespace,
)
from .cells import NULL_TOKENS, ColumnValues, is_null_token

#: Priority order: whitespace first (every later fix then sees stripped values), null tokens before any
#: value-level rule (so "N/A" is never mistaken for a category or a number), damaged text before spelling,
#: spelling before formats.
DETECTORS = (
    whitespace, null_tokens, broken_text, escaped_quotes, marker_suffixes, case_variants, rare_variants,
    number_format, date_format, boolean_spellings,
)

#: Finding kinds in priority order.
KINDS = tuple(d.KIND for d in DETECTORS)

__all__ = ["DETECTORS", "KINDS", "NULL_TOKENS", "ColumnValues", "is_null_token"]
