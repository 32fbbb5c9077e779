"""A dataset's labels folder: where a drop's label sample is written for a person, and which drop a corrected
file handed back into it is of.

    <labels folder>/to_label/people.csv   the sample of drop people.csv (`label_sample`), to correct by hand
    <labels folder>/people.csv            the corrected file handed back: its stem names its drop

A JSON drop's sample is JSON lines (`people.json` -> `people.jsonl`), as `write_label_sample` writes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .errors import LabelError
from .labels import sample_format

#: The subfolder of the labels folder that samples are written to (never watched: only handed-back files are).
TO_LABEL = "to_label"


def sample_name(drop: Path | str) -> str:
    """The file name of a drop's label sample, and of the corrected file handed back: the drop's stem with the
    sample's extension.

    Example:
        >>> sample_name("drops/people.json"), sample_name("drops/people.csv")
        ('people.jsonl', 'people.csv')
    """
    return f"{Path(drop).stem}.{sample_format(drop)}"


def drop_of_label(label: Path | str, drops: Iterable[str]) -> str:
    """The drop (a file name among `drops`) that the corrected file `label` is of: the one with the same stem.
    Raises LabelError naming the file when no drop, or more than one, has that stem.

    Example:
        >>> drop_of_label("people.csv", ["people.csv", "orders.json"])
        'people.csv'
    """
    stem, known = Path(label).stem, sorted(drops)
    matches = [d for d in known if Path(d).stem == stem]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise LabelError(f"{label}: drops {', '.join(matches)} all have the stem {stem!r}, so the file does not say "
                         "which one it labels; keep one of them in the drop folder, or rename it")
    shown = ", ".join(known[:5]) + (f" (and {len(known) - 5} more)" if len(known) > 5 else "")
    raise LabelError(f"{label}: no drop is named {stem!r}; name a corrected file after the drop it labels, as its "
                     f"sample in {TO_LABEL}/ is named" + (f" (the drops: {shown})" if known else " (no drop yet)"))


__all__ = ["TO_LABEL", "drop_of_label", "sample_name"]
