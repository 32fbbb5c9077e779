"""Every asset and check of one dataset, keys prefixed by its name: the learning flow and the cleaning of drops.

raw_data -> chunks -> chunk_issues -> chunk_functions      (learning/chunk_assets.py: per drop, then per chunk)
    -> registry -> validation -> cleaning_module            (learning/registry_assets.py)
    -> module_version (cleaning/module_versions.py: proposed or live)
    -> cleaned_data (cleaning/cleaned_assets.py: per drop, by the live version)
raw_data -> label_sample (learning/label_assets.py: per drop, on demand: rows to correct by hand)

Each asset has its own builder, taking the dataset's settings and its names in Dagster (`DatasetKeys`).
"""

from __future__ import annotations

import dagster as dg

from .asset_keys import DatasetKeys
from .learning.chunk_assets import (REFERENCE_ROWS, ChunkFindings, chunk_functions_asset, chunk_issues_asset, chunks_asset,
                           locate_chunk, raw_data_asset)
from .cleaning.cleaned_assets import cleaned_data_asset
from .drop_folder import find_drop_file
from .learning.label_assets import label_sample_asset
from .learning.registry_assets import cleaning_module_asset, registry_asset, validation_asset, validation_checks
from .resources import LLM_POOL
from .settings import DatasetSettings

__all__ = ["LLM_POOL", "REFERENCE_ROWS", "ChunkFindings", "DatasetKeys", "build_dataset_assets", "find_drop_file",
           "locate_chunk"]

#: The builders of a dataset's assets, in the order of the flow.
ASSET_BUILDERS = (raw_data_asset, chunks_asset, chunk_issues_asset, chunk_functions_asset, registry_asset,
                  validation_asset, cleaning_module_asset, cleaned_data_asset, label_sample_asset)


def build_dataset_assets(s: DatasetSettings) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every asset and check of one dataset, keys prefixed by its name.

    Example:
        >>> assets, checks = build_dataset_assets(DatasetSettings(name="customers"))
        >>> assets[0].key.to_user_string(), len(checks)
        ('customers/raw_data', 4)
    """
    keys = DatasetKeys(s.name)
    return [build(s, keys) for build in ASSET_BUILDERS], validation_checks(keys)
