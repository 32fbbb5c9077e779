"""The daemon's part in a deployment, done in this process: tick the sensor `<name>_learning` as the daemon does
(cursor kept, asset events reported) and run the runs it requests, until it requests none (`drive_learning`); tick
any sensor and run what it requests (`Daemon`). Nothing of this is part of smolclean."""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg

#: Most ticks one learning run may take (each step of it takes one).
MAX_TICKS = 100


@dataclass
class LearningTicks:
    """Every tick's requests, so a test can tell which runs were requested together."""

    requested: list[list[dg.RunRequest]] = field(default_factory=list)
    lessons: list[dg.AssetMaterialization] = field(default_factory=list)


def drive_learning(defs: dg.Definitions, instance: dg.DagsterInstance, dataset: str) -> LearningTicks:
    """Tick `<dataset>_learning` and run its requests in-process until a tick requests nothing."""
    sensor = defs.resolve_sensor_def(f"{dataset}_learning")
    ticks, cursor = LearningTicks(), None
    for _ in range(MAX_TICKS):
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))
        cursor = result.cursor
        for event in result.asset_events:
            instance.report_runless_asset_event(event)
            ticks.lessons.append(event)
        if not result.run_requests:
            return ticks
        ticks.requested.append(list(result.run_requests))
        for request in result.run_requests:
            defs.resolve_job_def(request.job_name).execute_in_process(
                instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False)
    raise AssertionError(f"the learning of {dataset!r} did not end within {MAX_TICKS} ticks")


class Daemon:
    """A deployment's sensors ticked as the daemon ticks them (each keeps its cursor, requested partitions are
    added) and the runs they request executed in this process."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.cursors: dict[str, str | None] = {}

    def tick(self, sensor: str) -> dg.SensorResult:
        context = dg.build_sensor_context(instance=self.instance, cursor=self.cursors.get(sensor))
        result = self.defs.resolve_sensor_def(sensor)(context)
        self.cursors[sensor] = result.cursor
        for request in result.dynamic_partitions_requests or []:
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def run(self, request: dg.RunRequest) -> None:
        job = self.defs.resolve_job_def(request.job_name)
        assert job.execute_in_process(instance=self.instance, partition_key=request.partition_key,
                                      tags=request.tags).success
