"""A dataset's drop folder as Dagster sees it: the file a drop partition names."""

from __future__ import annotations

from pathlib import Path

from .core.drops import drop_key
from .core.errors import SmolcleanError
from .settings import DatasetSettings


def find_drop_file(settings: DatasetSettings, key: str) -> Path:
    """The file in the dataset's drop folder whose partition key is `key`."""
    folder = settings.drops_dir
    candidates = [p for p in folder.glob("*") if p.is_file() and drop_key(p) == key] if folder.is_dir() else []
    if not candidates:
        raise SmolcleanError(f"drop {key!r}: no such file in {folder}; put the file there or remove the partition")
    return candidates[0]
