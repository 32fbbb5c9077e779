"""The runs of a learning flow as the runs page shows them: a named job per step, and tags tying each run
to its dataset, drop, wave and learning run.

A learning run (`smolclean learn`, or the `drop_learning` asset) is many Dagster runs: reading the drop,
choosing each wave's chunks, one run per chunk, publishing the registry after each wave, validating and
exporting the module, cleaning the drop. Launched as `dg.materialize` they would all be
`__ephemeral_asset_job__`; here each is a job of the dataset's code location, so the runs page can be
filtered by job, and by the tags below (e.g. `smolclean/learning_run` for every run of one learning run).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

import dagster as dg

from .drop_runs import DROP_TAG
from .settings import DatasetSettings

DATASET_TAG = "smolclean/dataset"
WAVE_TAG = "smolclean/wave"
LEARNING_RUN_TAG = "smolclean/learning_run"


@dataclass(frozen=True)
class LearningStep:
    """One kind of run of the learning flow: its job (named after the dataset) and the assets it materializes."""

    suffix: str
    assets: tuple[str, ...]
    description: str

    def job_name(self, dataset: str) -> str:
        return f"{dataset}_{self.suffix}"


READ_DROP = LearningStep("learn_read_drop", ("raw_data",), "Read a drop raw (learning flow).")
CHOOSE_CHUNKS = LearningStep("learn_choose_chunks", ("chunks",), "Choose the next wave of chunks of a drop (learning flow).")
ANALYSE_CHUNK = LearningStep(
    "learn_chunk", ("chunk_issues", "chunk_functions"), "The agent loop on one chunk (learning flow)."
)
PUBLISH_REGISTRY = LearningStep(
    "learn_publish_registry", ("registry",), "Consolidate and publish the registry after a wave (learning flow)."
)
EXPORT_MODULE = LearningStep(
    "learn_export_module", ("registry", "validation", "cleaning_module", "module_version"),
    "Validate the registry on held-out rows, export the module and propose it as a version (learning flow).",
)
STEPS = (READ_DROP, CHOOSE_CHUNKS, ANALYSE_CHUNK, PUBLISH_REGISTRY, EXPORT_MODULE)


def learning_jobs(s: DatasetSettings) -> list[dg.UnresolvedAssetJobDefinition]:
    """The dataset's jobs for the steps of its learning flow (the drop is then cleaned by `<name>_clean_drop`,
    the job the drop folder sensor launches)."""
    return [
        dg.define_asset_job(
            step.job_name(s.name), description=step.description,
            selection=dg.AssetSelection.assets(*[dg.AssetKey([s.name, a]) for a in step.assets]),
        )
        for step in STEPS
    ]


def learning_tags(dataset: str, drop: str, wave: int, learning_run: str) -> dict[str, str]:
    """The tags of one run of a learning flow."""
    return {DATASET_TAG: dataset, DROP_TAG: drop, WAVE_TAG: str(wave), LEARNING_RUN_TAG: learning_run}


def new_learning_run_id() -> str:
    """An id for one learning run that sorts by time and reads as one: `20261123-203812-3f2a`."""
    return f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:4]}"
