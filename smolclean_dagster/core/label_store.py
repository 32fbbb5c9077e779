"""A drop's labels kept with its dataset's other records, so every step of its learning is held to them."""

from __future__ import annotations

import pandas as pd

from .errors import SmolcleanError
from .drops import is_text_drop
from .labels import ROW, Labels
from .plan import ChunkPlan
from .storage import DatasetStore
from .validate import as_text

#: The records a drop's labels are kept as in its dataset's store.
LABELS = "labels"


def save_labels(store: DatasetStore, drop: str, labels: Labels) -> bool:
    """Keep a drop's labels with its other records, so every chunk of its learning is held to them; True when
    they are new or differ from the ones kept before."""
    truth = labels.truth.reset_index()
    path = store.path(LABELS, drop, "parquet")
    if path.exists() and as_text(store.load_frame(LABELS, drop)).equals(as_text(truth)):
        return False
    store.save_frame(LABELS, truth, drop)
    return True


def stored_labels(store: DatasetStore, drop: str, raw: pd.DataFrame) -> Labels | None:
    """The labels kept for `drop` (whose rows as read are `raw`), or None when it has none."""
    if not store.path(LABELS, drop, "parquet").exists():
        return None
    truth = store.load_frame(LABELS, drop)
    numbers = [int(n) for n in truth.pop(ROW)]
    rows = raw.iloc[[n - 1 for n in numbers]].copy()
    rows.index = truth.index = pd.Index(numbers, name=ROW)
    return Labels(source=f"the labels of {drop}", rows=rows, truth=truth[list(raw.columns)], drop=drop,
                  text=is_text_drop(drop))


def forget_learning(store: DatasetStore, drop: str) -> None:
    """Forget that `drop` was learned from (its chunk plan and its chunks' traces), so that its next learning
    analyses its chunks again: with new labels, what was learned before was not held to them. The registry's
    functions stay, and are held to the labels when the registry is published."""
    try:
        plan = store.load_model("chunks", ChunkPlan, drop)
    except SmolcleanError:
        return
    for chunk in plan.chunks:
        for record in ("chunk_functions", "chunk_issues"):
            store.path(record, chunk.id, "json").unlink(missing_ok=True)
    store.path("chunks", drop, "json").unlink(missing_ok=True)


def every_label(store: DatasetStore) -> list[Labels]:
    """The labels kept for every drop of the dataset, in drop order."""
    folder = store.root / LABELS
    drops = sorted(p.name[: -len(".parquet")] for p in folder.glob("*.parquet")) if folder.is_dir() else []
    return [labels for drop in drops if (labels := stored_labels(store, drop, store.load_frame("raw_data", drop)))]


__all__ = ["LABELS", "every_label", "forget_learning", "save_labels", "stored_labels"]
