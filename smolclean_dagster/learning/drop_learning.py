"""Learning from a drop: the dataset's agent run on one drop that the module does not clean well enough.

Materializing `<name>/drop_learning` for a drop starts a learning run and returns at once: it records where
the learning starts from (the registry, the drop's residual share) and tags its own run as the learning run.
The sensor `<name>_learning` (sensor.py) then submits the runs of the same flow as `smolclean learn`:
the drop is read and chunked, each wave's chunks run side by side (one run per chunk partition, on whatever
runs the deployment's steps: processes, Celery workers, Kubernetes pods), the registry is published, validated
and re-exported, and the drop is cleaned again with the new module. When that is done, the sensor records what
the drop taught the agent as this asset's materialization (`lesson`). No run waits on another.

It runs when a cleaned drop fails its residual check and `learn_on_residual` is "auto" (the residual
sensor requests it), for the first drop of a dataset with no module yet, when a corrected label sample of the drop
is saved into the dataset's labels folder (the sensor `<name>_labels_folder` requests it, naming the file in the
run tag `smolclean/labels`: the labels are kept with the drop first, and its chunks analysed again, held to
them), or when you launch the job `<name>_learn_from_drop` (or materialize the asset) for a drop in the UI.
"""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
from pydantic import BaseModel, ConfigDict

from ..assets import find_drop_file
from ..cleaning.drop_runs import (DROP_TAG, LABELS_TAG, LEARNING_TAG, cleaned_key, latest_cleaning, learning_key,
                        learning_sensor_name)
from ..core.errors import SmolcleanError
from ..core.export import module_filename
from ..core.label_store import forget_learning, save_labels
from ..core.labels import read_labels
from ..core.learning_flow import forget_for_new_items
from ..core.plan import ChunkPlan
from ..core.quality import ValidationReport
from ..core.registry import Registry
from ..core.registry_changes import registry_changes
from ..core.storage import DatasetStore
from ..partitions import drops_partitions
from ..settings import DatasetSettings
from .runs import LEARNING_RUN_TAG, learning_in_progress

#: Where the start of each learning run is stored (one record per learning run).
STARTS = "learning_starts"


class LessonStart(BaseModel):
    """Where a learning run from a drop starts: the registry before it, and the drop's residual share then."""

    model_config = ConfigDict(frozen=True)

    learning_run: str
    drop: str
    registry: Registry
    residual_share_before: float | None = None


def build_drop_learning(s: DatasetSettings) -> dg.AssetsDefinition:
    """The `drop_learning` asset of one dataset."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=learning_key(s.name), partitions_def=drops_partitions(s.name), group_name=s.name,
              deps=[cleaned_key(s.name)], kinds={"python"}, output_required=False)
    def drop_learning(context: dg.AssetExecutionContext) -> Iterator[dg.AssetObservation]:
        """What the agent learned from this drop: the functions added, changed (same name, new code: merged or
        extended) and removed, the registry revisions, the version it made (proposed, or live) and the
        drop's residual share before and after (the learning flow runs on the drop, then the drop is cleaned
        again by the live version). Materializing it starts that learning; it is materialized when the learning
        ends, by the sensor `<name>_learning` that submits the learning's runs."""
        drop, learning_run = context.partition_key, context.run.run_id
        path = find_drop_file(s, drop)
        busy = learning_in_progress(context.instance, s.name, besides=learning_run)
        if busy is not None:
            raise dg.Failure(description=f"learning run {busy} of {s.name!r} is still going: one learning at a time "
                             "learns into the dataset's registry; launch this again once it has ended")
        labels = context.run.tags.get(LABELS_TAG)
        if labels:
            _keep_labels(context, store, path, Path(labels))
        if s.reads_instructions:
            _ask_for_new_items(context, store, s.instructions)
        before = store.registry.load()
        cleaning = latest_cleaning(context.instance, s.name, drop)
        store.save_model(STARTS, LessonStart(learning_run=learning_run, drop=drop, registry=before,
                                             residual_share_before=cleaning.residual_share if cleaning else None),
                         learning_run)
        # The tags that make this run the learning run the sensor drives (a run launched from the UI has none yet).
        context.instance.add_run_tags(learning_run,
                                      {LEARNING_TAG: s.name, DROP_TAG: drop, LEARNING_RUN_TAG: learning_run})
        context.log.info(f"learning from {path} (registry revision {before.version}, {len(before.entries)} functions): "
                         f"the sensor {learning_sensor_name(s.name)} submits its runs, tagged "
                         f"smolclean/learning_run={learning_run}")
        yield dg.AssetObservation(
            asset_key=learning_key(s.name), partition=drop,
            metadata={"learning_run": dg.MetadataValue.text(learning_run),
                      "registry_revision_before": dg.MetadataValue.int(before.version),
                      **_residual("before", cleaning.residual_share if cleaning else None),
                      **({"labels": dg.MetadataValue.path(labels)} if labels else {})},
            description="learning started",
        )

    return drop_learning


def _keep_labels(context: dg.AssetExecutionContext, store: DatasetStore, drop: Path, labels: Path) -> None:
    """Keep the corrected rows of `labels` with the drop (its partition), which is then learned again, held to them.

    The file is read again here, as the sensor that requested this run read it: one that went bad since fails the
    run with the row and the column, and nothing of it is stored.
    """
    key = context.partition_key
    try:
        labelled = read_labels(labels, drop)
    except SmolcleanError as exc:
        raise dg.Failure(description=str(exc)) from None
    if save_labels(store, key, labelled):
        forget_learning(store, key)  # its chunks were analysed without these labels: analyse them again
        context.log.info(f"{labelled.summary()}: kept with drop {key}, which is learned from again, held to them")
    else:
        context.log.info(f"{labelled.summary()}: the labels kept with drop {key} already")


def _ask_for_new_items(context: dg.AssetExecutionContext, store: DatasetStore, instructions: str) -> None:
    """Learn the drop from the start again when `instructions` hold items its learning never worked to (they changed
    since), so the model is asked for those; with unchanged instructions its stored learning stands."""
    new = forget_for_new_items(store, context.partition_key, instructions)
    if new:
        which = ", ".join(f"#{i.number}" for i in new)
        context.log.info(f"instruction item(s) {which} are new since drop {context.partition_key} was learned from: "
                         "its chunks are chosen and analysed again for them")


def lesson(s: DatasetSettings, instance: dg.DagsterInstance, learning_run: str) -> dg.AssetMaterialization:
    """The `drop_learning` materialization of an ended learning run: what the drop taught the agent."""
    store = DatasetStore(s.storage_dir, s.name)
    start = store.load_model(STARTS, LessonStart, learning_run)
    changes = registry_changes(start.registry, store.registry.load())
    version = store.versions.load().latest
    plan = store.load_model("chunks", ChunkPlan, start.drop)
    validation = store.load_model("validation", ValidationReport)
    try:
        cleaned = str(s.cleaned_path(find_drop_file(s, start.drop)))
    except SmolcleanError as exc:  # the file was removed since
        cleaned = str(exc)
    after = latest_cleaning(instance, s.name, start.drop)
    return dg.AssetMaterialization(
        asset_key=learning_key(s.name), partition=start.drop,
        metadata={
            "learning_run": dg.MetadataValue.text(learning_run),
            "registry_revision_before": dg.MetadataValue.int(changes.version_before),
            "registry_revision_after": dg.MetadataValue.int(changes.version_after),
            "functions_added": dg.MetadataValue.int(len(changes.added)),
            "functions_changed": dg.MetadataValue.int(len(changes.changed)),
            "functions_removed": dg.MetadataValue.int(len(changes.removed)),
            "changes": dg.MetadataValue.md(changes.markdown()),
            "module_version": dg.MetadataValue.int(version.number if version else -1),
            "module_version_state": dg.MetadataValue.text(version.state if version else "no version"),
            "chunks_analysed": dg.MetadataValue.int(len(plan.selected)),
            "held_out_check": dg.MetadataValue.text("passed" if validation.passed else "FAILED"),
            "module": dg.MetadataValue.path(str(s.module_dir / module_filename(s.name))),
            "cleaned": dg.MetadataValue.path(cleaned),
            **_residual("before", start.residual_share_before),
            **_residual("after", after.residual_share if after else None),
        },
    )


def _residual(when: str, share: float | None) -> dict[str, dg.MetadataValue]:
    """The drop's residual share `when` ("before"/"after"), or why there is none."""
    if share is None:
        return {f"residual_share_{when}": dg.MetadataValue.text("not measured: the drop had not been cleaned")}
    return {f"residual_share_{when}": dg.MetadataValue.float(share)}
