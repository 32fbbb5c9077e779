"""The schedule of a dataset: clean again every drop whose cleaned output another module than the live one made.

Each cleaning records the registry revision its module was exported from (`registry_revision` in the
materialization's metadata, beside `version`, the approved version); when another version goes live (approved,
promoted, or rolled back to), the drops cleaned before are cleaned again, once each time a version goes live
(run keys).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from ..assets import find_drop_file
from ..cleaning.drop_runs import clean_request, latest_cleanings
from ..cleaning.live_module import live_version, module_label, times_live
from ..core.errors import SmolcleanError
from ..core.watch import FileState
from ..partitions import drops_partitions
from ..settings import DatasetSettings


def build_reclean_schedule(s: DatasetSettings, clean_job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    """Every `reclean_cron`, request a cleaning of each drop cleaned by another module than the live one (another
    registry revision)."""
    name = s.name
    drops = drops_partitions(name)

    @dg.schedule(
        name=f"{name}_reclean_stale", cron_schedule=s.reclean_cron, job=clean_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Cleans again the drops of {name!r} whose cleaned output another module version than the live one made.",
    )
    def reclean_stale(context: dg.ScheduleEvaluationContext):
        number, revision = live_version(s)
        if revision is None:
            return dg.SkipReason(f"no cleaning module for {name!r} yet")
        requests = []
        for cleaning in latest_cleanings(context.instance, name):
            if cleaning.registry_revision is None or cleaning.registry_revision == revision:
                continue
            if not context.instance.has_dynamic_partition(drops.name, cleaning.drop):
                continue  # the drop was removed from the partitions on purpose
            file = _drop_file(s, cleaning.drop)
            if file is None:
                context.log.info(f"{cleaning.drop}: its file is gone from {s.drops_dir}; not cleaning it again")
                continue
            requests.append(clean_request(name, cleaning.drop, FileState.of(file).fingerprint,
                                          registry_revision=revision, times_live=times_live(s)))
        if not requests:
            return dg.SkipReason(f"every cleaned drop of {name!r} was made by {module_label(number, revision)}")
        context.log.info(f"cleaning {len(requests)} drop(s) again with {module_label(number, revision)}")
        return requests

    return reclean_stale


def _drop_file(s: DatasetSettings, key: str) -> Path | None:
    try:
        return find_drop_file(s, key)
    except SmolcleanError:
        return None
