"""The runs that clean drops and learn from them: their jobs, how they are requested and tagged, and what
the instance says about earlier ones. Shared by the drop folder sensor, the residual sensor and the
re-cleaning schedule.

Run keys make every request idempotent: a drop version (file name + size + modification time) is
cleaned once per live module (its registry revision, and how many times it went live) and learned from at
most once (and once more per version of a corrected label file of it), however many ticks see it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from ..core.watch import FileState
from ..settings import DatasetSettings
from .live_module import module_label

#: Every run that starts a learning of a dataset carries this tag (value: the dataset), so only one runs at a time.
LEARNING_TAG = "smolclean/learning"
#: The drop version a learning run learns from ("<drop key>@<fingerprint>").
LEARNED_FROM_TAG = "smolclean/learned_from"
DROP_TAG = "smolclean/drop"
#: The corrected file (label sample) a learning run keeps with its drop before it learns (its path).
LABELS_TAG = "smolclean/labels"


def cleaned_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([name, "cleaned_data"])


def learning_key(name: str) -> dg.AssetKey:
    return dg.AssetKey([name, "drop_learning"])


def clean_job_name(name: str) -> str:
    return f"{name}_clean_drop"


def learn_job_name(name: str) -> str:
    return f"{name}_learn_from_drop"


def learning_sensor_name(name: str) -> str:
    """The sensor that submits the runs of the dataset's learning runs started in the deployment."""
    return f"{name}_learning"


def drop_jobs(s: DatasetSettings, *, deployment_executor: bool = False) -> list[dg.UnresolvedAssetJobDefinition]:
    """The two per-drop jobs of a dataset: clean a drop, and learn from a drop (launch it from the UI).

    Each is one step, so by default it runs in the run's own process: no step subprocess to start (seconds
    per drop). With a `deployment_executor` (Celery, Kubernetes) given to `build_defs`, they use that one,
    so the cleaning of drops runs where the deployment's steps run.
    """
    executor = None if deployment_executor else dg.in_process_executor
    return [
        dg.define_asset_job(
            clean_job_name(s.name), selection=dg.AssetSelection.assets(cleaned_key(s.name)),
            executor_def=executor,
            description=f"Clean one drop of {s.name!r} with the live module version, or the version its config names "
            f"(ops: {s.name}__cleaned_data: config: version); launched by the drop folder sensor.",
        ),
        dg.define_asset_job(
            learn_job_name(s.name), selection=dg.AssetSelection.assets(learning_key(s.name)),
            executor_def=executor,
            description=f"Start the agent of {s.name!r} on one drop: the sensor {learning_sensor_name(s.name)} then "
            "submits its runs (a run per chunk of each wave), re-exports the module and cleans the drop again.",
        ),
    ]


def clean_request(name: str, key: str, fingerprint: str, *, registry_revision: int | None = None,
                  times_live: int = 1) -> dg.RunRequest:
    """Clean drop `key` (this version of its file) with the live module (exported from `registry_revision`,
    live for the `times_live`-th time: a version made live again after a rollback cleans the drops again).

    The run key keeps the shape it always had (`:v<revision>`), so requests made before the revision had its own
    name still count: a drop is cleaned at most once per live module.
    """
    live = f":v{registry_revision}" if registry_revision is not None else ""
    live += f"-{times_live}" if registry_revision is not None and times_live > 1 else ""
    return dg.RunRequest(
        run_key=f"clean:{key}@{fingerprint}{live}", job_name=clean_job_name(name), partition_key=key,
        tags={DROP_TAG: key},
    )


def learning_request(name: str, key: str, fingerprint: str, *, labels: Path | None = None) -> dg.RunRequest:
    """Learn from drop `key` (this version of its file); the run ends by cleaning it again.

    With `labels` (a corrected label sample of the drop), the learning first keeps them with the drop, and is held
    to them: each version of that file starts one learning.
    """
    run_key, tags = f"learn:{key}@{fingerprint}", {DROP_TAG: key, LEARNING_TAG: name,
                                                  LEARNED_FROM_TAG: f"{key}@{fingerprint}"}
    if labels is not None:
        run_key += f":labels:{labels.name}@{FileState.of(labels).fingerprint}"
        tags[LABELS_TAG] = str(labels)
    return dg.RunRequest(run_key=run_key, job_name=learn_job_name(name), partition_key=key, tags=tags)


def already_learned(instance: dg.DagsterInstance, key: str, fingerprint: str) -> bool:
    """Whether a learning run was ever launched for this version of drop `key` (whatever its outcome)."""
    return bool(instance.get_runs(dg.RunsFilter(tags={LEARNED_FROM_TAG: f"{key}@{fingerprint}"}), limit=1))


@dataclass(frozen=True)
class Cleaning:
    """What the latest materialization of one cleaned drop says (from its metadata): among it, the module that
    cleaned it, as the version a person approved (None for a module from before versions) and the registry
    revision that module was exported from (None when unknown)."""

    storage_id: int
    drop: str
    registry_revision: int | None
    fingerprint: str | None
    residual_passed: bool | None
    residual_share: float | None
    entity_passed: bool | None = None  # None: cleaned before the entity check existed
    version: int | None = None

    @property
    def module(self) -> str:
        """The module that cleaned the drop, as log lines name it ("version 1 (registry revision 28)")."""
        return module_label(self.version, self.registry_revision)

    @property
    def failed(self) -> bool:
        """Whether a check that sends a drop back to learning failed: residual issues, or the entity check."""
        return self.residual_passed is False or self.entity_passed is False

    @classmethod
    def of(cls, record: dg.EventLogRecord) -> Cleaning:
        mat = record.asset_materialization
        md = mat.metadata if mat else {}

        def value(label: str):
            return md[label].value if label in md else None

        # a cleaning recorded before the revision had its own name calls it `module_version`
        revision = value("registry_revision") if "registry_revision" in md else value("module_version")
        return cls(
            storage_id=record.storage_id,
            drop=mat.partition if mat else "",
            registry_revision=_known(revision),
            fingerprint=value("source_fingerprint"),
            residual_passed=value("residual_passed"),
            residual_share=value("residual_share"),
            entity_passed=value("entity_passed"),
            version=_known(value("version")),
        )


def _known(number: object) -> int | None:
    """A number the metadata records, or None where it records none (-1, or missing)."""
    return int(number) if isinstance(number, (int, float)) and number >= 0 else None


def latest_cleanings(instance: dg.DagsterInstance, name: str) -> list[Cleaning]:
    """The latest cleaning of every drop of the dataset that was ever cleaned, by drop key."""
    key = cleaned_key(name)
    ids = instance.event_log_storage.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
    out: list[Cleaning] = []
    wanted = sorted(ids.values())
    for start in range(0, len(wanted), 500):
        page = wanted[start : start + 500]
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, storage_ids=page), limit=len(page)
        ).records
        out += [Cleaning.of(r) for r in records]
    return sorted(out, key=lambda c: c.drop)


def cleanings_since(instance: dg.DagsterInstance, name: str, after_storage_id: int, limit: int = 100) -> list[Cleaning]:
    """Cleanings of the dataset's drops recorded after `after_storage_id`, oldest first."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=cleaned_key(name), after_storage_id=after_storage_id), limit=limit,
        ascending=True,
    ).records
    return [Cleaning.of(r) for r in records]


def latest_cleaning(instance: dg.DagsterInstance, name: str, key: str) -> Cleaning | None:
    """The latest cleaning of drop `key`, if it was ever cleaned."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=cleaned_key(name), asset_partitions=[key]), limit=1
    ).records
    return Cleaning.of(records[0]) if records else None

