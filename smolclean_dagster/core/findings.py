"""Finding: one kind of dirt a detector found in one column, with what a rule needs to fix it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Finding(BaseModel):
    """One kind of dirt found in one column.

    `kind` is the detector's name (e.g. "whitespace", "null_tokens"); `count` the cells affected;
    `examples` a few raw values; `params` what a rule needs to fix it (e.g. the token list, a mapping).

    Example:
        >>> Finding(kind="null_tokens", column="ibu", count=3, message="3 cells hold null tokens ('N/A')",
        ...         examples=("N/A",), params={"tokens": ["n/a"]}).kind
        'null_tokens'
    """

    model_config = ConfigDict(frozen=True)

    kind: str
    column: str
    count: int
    message: str
    examples: tuple[str, ...] = ()
    params: dict[str, Any] = Field(default_factory=dict)
