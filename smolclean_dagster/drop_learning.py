"""Learning from a drop: the dataset's agent run on one drop that the module does not clean well enough.

`<name>/drop_learning` (per drop) runs the very same learning flow as `smolclean learn`, through
`learning.learn`: the drop is read and chunked, the agent works chunk by chunk (each chunk its own run
and partition, so every trace shows up as usual), the registry is published, validated and re-exported,
and the drop is cleaned again with the new module. Those are ordinary runs on the same instance, started
from inside this asset's run, so they work the same under `smolclean ui` (daemon, run launcher) as
under `dg.materialize` in a test. Its own materialization records what the drop taught the agent.

It runs when a cleaned drop fails its residual check and `learn_on_residual` is "auto" (the residual
sensor requests it), for the first drop of a dataset with no module yet, or when you launch the job
`<name>_learn_from_drop` (or materialize the asset) for a drop in the UI.
"""


import dagster as dg

from .assets import find_drop_file
from .core.registry_changes import registry_changes
from .core.storage import DatasetStore
from .drop_runs import Cleaning, cleaned_key, latest_cleaning, learning_key
from .partitions import drops_partitions
from .settings import DatasetSettings


def build_drop_learning(s: DatasetSettings) -> dg.AssetsDefinition:
    """The `drop_learning` asset of one dataset."""
    store = DatasetStore(s.storage_dir, s.name)

    @dg.asset(key=learning_key(s.name), partitions_def=drops_partitions(s.name), group_name=s.name,
              deps=[cleaned_key(s.name)], kinds={"python"})
    def drop_learning(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        """What the agent learned from this drop: the functions added, changed (same name, new code: merged or
        extended) and removed, the registry versions, the module version it made (proposed, or live) and the
        drop's residual share before and after (the learning flow runs on the drop, then the drop is cleaned
        again by the live version)."""
        from .learning import learn  # learning builds Definitions through the factory, which imports this module

        path = find_drop_file(s, context.partition_key)
        before = store.registry.load()
        cleaned_before = latest_cleaning(context.instance, s.name, context.partition_key)
        context.log.info(f"learning from {path} (registry version {before.version}, {len(before.entries)} functions)")
        outcome = learn(s, path, context.instance, learning_run=context.run.run_id)  # its runs name this one
        changes = registry_changes(before, store.registry.load())
        version = store.versions.load().latest
        cleaned_after = latest_cleaning(context.instance, s.name, context.partition_key)
        return dg.MaterializeResult(
            metadata={
                "registry_version_before": dg.MetadataValue.int(changes.version_before),
                "registry_version_after": dg.MetadataValue.int(changes.version_after),
                "functions_added": dg.MetadataValue.int(len(changes.added)),
                "functions_changed": dg.MetadataValue.int(len(changes.changed)),
                "functions_removed": dg.MetadataValue.int(len(changes.removed)),
                "changes": dg.MetadataValue.md(changes.markdown()),
                "module_version": dg.MetadataValue.int(version.number if version else -1),
                "module_version_state": dg.MetadataValue.text(version.state if version else "no version"),
                "chunks_analysed": dg.MetadataValue.int(outcome.chunks),
                "held_out_check": dg.MetadataValue.text("passed" if outcome.validation.passed else "FAILED"),
                "module": dg.MetadataValue.path(str(outcome.module)),
                "cleaned": dg.MetadataValue.path(str(outcome.cleaned)),
                **_residual("before", cleaned_before),
                **_residual("after", cleaned_after),
            }
        )

    return drop_learning


def _residual(when: str, cleaning: Cleaning | None) -> dict[str, dg.MetadataValue]:
    """The drop's residual share `when` ("before"/"after"), or why there is none."""
    if cleaning is None or cleaning.residual_share is None:
        return {f"residual_share_{when}": dg.MetadataValue.text("not measured: the drop had not been cleaned")}
    return {f"residual_share_{when}": dg.MetadataValue.float(cleaning.residual_share)}
