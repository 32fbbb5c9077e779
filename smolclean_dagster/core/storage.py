"""DatasetStore: where one dataset's frames (Parquet) and records (JSON) live on disk.

The Dagster IO managers are thin adapters over this class, and core code that needs another
partition's data (a chunk reading its drop) uses the same paths through it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypeVar

import pandas as pd
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from .errors import SmolcleanError
from .files import write_atomic
from .registry import RegistryStore
from .sandbox.wire import frame_to_table, table_to_frame
from .versions import VersionStore

M = TypeVar("M", bound=BaseModel)


class DatasetStore:
    """Files of one dataset under `root`: `<name>/<partition>.parquet|json` and the working registry.

    Example:
        >>> store = DatasetStore(Path("work/storage/customers"), "customers")   # doctest: +SKIP
        >>> store.save_frame("raw_data", df, "customers.csv")                    # doctest: +SKIP
    """

    def __init__(self, root: Path | str, dataset: str):
        self.root = Path(root)
        self.dataset = dataset

    @property
    def registry(self) -> RegistryStore:
        """The working registry: chunk steps accept functions into it as they go."""
        return RegistryStore(self.root / "working_registry.json", self.dataset)

    @property
    def versions(self) -> VersionStore:
        """The module versions: which one is live, the proposed ones, and every change of state."""
        return VersionStore(self.root / "versions", self.dataset)

    def path(self, name: str, partition: str | None, ext: str) -> Path:
        return self.root / name / f"{partition or '_'}.{ext}"

    def save_frame(self, name: str, df: pd.DataFrame, partition: str | None = None) -> Path:
        path = self.path(name, partition, "parquet")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            # The sandbox's Arrow form: JSON values (numbers, lists, objects beside text) come back as they were.
            pq.write_table(frame_to_table(df.reset_index(drop=True)), tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    def load_frame(self, name: str, partition: str | None = None) -> pd.DataFrame:
        path = self.path(name, partition, "parquet")
        if not path.exists():
            raise SmolcleanError(f"{path}: {name} for {partition or self.dataset!r} is not stored yet; materialize it first")
        df = table_to_frame(pq.read_table(path))
        # Typed pandas columns (pandas' string dtype, numbers) come back as object columns with None for nulls,
        # like the drop read raw.
        for i in range(df.shape[1]):
            column = df.iloc[:, i]
            if column.dtype != object:
                df.isetitem(i, column.astype(object).where(column.notna(), None))
        return df

    def save_model(self, name: str, model: BaseModel, partition: str | None = None) -> Path:
        path = self.path(name, partition, "json")
        write_atomic(path, model.model_dump_json(indent=2) + "\n")
        return path

    def load_model(self, name: str, cls: type[M], partition: str | None = None) -> M:
        path = self.path(name, partition, "json")
        if not path.exists():
            raise SmolcleanError(f"{path}: {name} for {partition or self.dataset!r} is not stored yet; materialize it first")
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, ValueError) as exc:
            raise SmolcleanError(f"{path}: not a valid {cls.__name__} record ({exc.__class__.__name__})") from exc

    def models(self, name: str, cls: type[M]) -> list[M]:
        """Every stored record of one kind, in partition-name order."""
        folder = self.root / name
        return [self.load_model(name, cls, p.stem) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
