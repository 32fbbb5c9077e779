"""A drop's label sample as an asset: the rows whose correction teaches the agent the most, in a file to correct.

`<name>/label_sample` (per drop; materialized from the UI when you want to label a drop, never by a learning) writes
the rows `core.labels.pick_rows` picks, as read, `_row` first, to `<workdir>/labels/<name>/to_label/`, named after
the drop. Correct the cells that are wrong and save the file into `<workdir>/labels/<name>/` under the same name:
the sensor `<name>_labels_folder` (operations/sensors.py) then learns from the drop again, held to your corrections.
"""

# No `from __future__ import annotations`: Dagster reads the asset functions' type hints as classes.

import dagster as dg
import pandas as pd

from ..asset_keys import DatasetKeys
from ..core.labels import ROW, write_label_sample
from ..core.labels_folder import TO_LABEL, sample_name
from ..drop_folder import find_drop_file
from ..metadata import frame_preview
from ..partitions import drops_partitions
from ..settings import DatasetSettings


def label_sample_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/label_sample`: the rows of a drop worth a person's correction, written to a file, per drop."""

    @dg.asset(key=keys.key("label_sample"), partitions_def=drops_partitions(s.name), group_name=keys.group,
              ins={"raw_data": dg.AssetIn(keys.key("raw_data"))}, kinds={"pandas"})
    def label_sample(context: dg.AssetExecutionContext, raw_data: pd.DataFrame) -> dg.MaterializeResult:
        """The rows of this drop whose correction teaches the agent the most, in a file to correct by hand (`path`):
        together they hold every kind of dirt the detectors suspect in each column, and its rare values. Correct
        the cells that are wrong and save the file, under the same name, into the labels folder (`hand_back`):
        the drop is then learned from again, held to your corrections, and proposes a new module version."""
        drop = find_drop_file(s, context.partition_key)
        out, rows = write_label_sample(drop, s.labels_dir / TO_LABEL / sample_name(drop), drop=raw_data)
        sample = raw_data.iloc[[r - 1 for r in rows]]
        context.log.info(f"{len(rows)} rows of {drop.name} to correct: {out}; save the corrected file as "
                         f"{s.labels_dir / out.name}")
        return dg.MaterializeResult(metadata={
            "path": dg.MetadataValue.path(str(out)),
            "hand_back": dg.MetadataValue.path(str(s.labels_dir / out.name)),
            "rows": dg.MetadataValue.int(len(rows)),
            "row_numbers": dg.MetadataValue.text(", ".join(map(str, rows))),
            "preview": frame_preview(sample.assign(**{ROW: rows})[[ROW, *sample.columns]], rows=len(rows)),
        })

    return label_sample
