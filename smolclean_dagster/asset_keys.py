"""How one dataset's assets are named in Dagster: keys prefixed by the dataset's name, one group, two IO managers."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg


@dataclass(frozen=True)
class DatasetKeys:
    """The Dagster names of one dataset's assets, shared by every builder of them.

    Example:
        >>> DatasetKeys("customers").key("registry").to_user_string()
        'customers/registry'
    """

    dataset: str

    def key(self, asset: str) -> dg.AssetKey:
        """The key of the dataset's asset `asset`: `<dataset>/<asset>`."""
        return dg.AssetKey([self.dataset, asset])

    @property
    def group(self) -> str:
        """The asset group holding every asset of the dataset."""
        return self.dataset

    @property
    def frames(self) -> str:
        """The IO manager that stores frames (raw drops) as Parquet."""
        return f"{self.dataset}_frames"

    @property
    def records(self) -> str:
        """The IO manager that stores records (plans, traces, the registry, reports) as JSON."""
        return f"{self.dataset}_records"
