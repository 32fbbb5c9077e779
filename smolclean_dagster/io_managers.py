"""IO managers: frames as Parquet and records (registry, plans, traces) as JSON, one folder per dataset."""

from __future__ import annotations

import dagster as dg
import pandas as pd
from pydantic import BaseModel

from .core.storage import DatasetStore


def _partition(context: dg.OutputContext | dg.InputContext) -> str | None:
    return context.asset_partition_key if context.has_asset_partitions else None


class FramesIOManager(dg.ConfigurableIOManager):
    """Stores DataFrames as Parquet under `<storage_dir>/<asset>/<partition>.parquet`."""

    storage_dir: str
    dataset: str

    def _store(self) -> DatasetStore:
        return DatasetStore(self.storage_dir, self.dataset)

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        path = self._store().save_frame(context.asset_key.path[-1], obj, _partition(context))
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        upstream = context.upstream_output
        return self._store().load_frame(upstream.asset_key.path[-1], _partition(context))


class RecordsIOManager(dg.ConfigurableIOManager):
    """Stores pydantic records as JSON under `<storage_dir>/<asset>/<partition>.json`.

    The type to load comes from the input's annotation, so downstream assets must annotate it.
    """

    storage_dir: str
    dataset: str

    def _store(self) -> DatasetStore:
        return DatasetStore(self.storage_dir, self.dataset)

    def handle_output(self, context: dg.OutputContext, obj: BaseModel) -> None:
        path = self._store().save_model(context.asset_key.path[-1], obj, _partition(context))
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> BaseModel:
        cls = context.dagster_type.typing_type
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise TypeError(f"input {context.name!r} must be annotated with a pydantic model type to be loaded")
        return self._store().load_model(context.upstream_output.asset_key.path[-1], cls, _partition(context))
