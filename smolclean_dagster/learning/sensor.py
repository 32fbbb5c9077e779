"""The sensor that advances learning runs in a deployment: each tick, the runs their next step needs.

A learning run is started by a run of `<name>_learn_from_drop` (the `drop_learning` asset, drop_learning.py).
From then on this sensor looks at the learning run's runs on the instance and at the store, and requests the
runs of the next step (learning_runs.advance_learning) as soon as the previous step's runs have all succeeded:
read the drop, choose a wave, the wave's chunks (one run per chunk partition, requested together), publish,
export, clean. Requests go through the instance's run queue and launcher like any other run, so the chunk steps
run where the deployment runs steps (the multiprocess executor's processes, Celery workers, Kubernetes pods).
Run keys make every request idempotent across ticks. When the drop is cleaned, the tick records the learning
run's lesson as the drop's `drop_learning` materialization. A learning run whose run failed or was canceled stops
there: re-executing that run lets it go on, and a new learning run of the drop resumes its unfinished wave.
"""

from __future__ import annotations

import json

import dagster as dg

from ..assets import LLM_POOL
from ..cleaning.drop_runs import DROP_TAG, learning_sensor_name
from ..core.learning_flow import FlowStep
from ..settings import DatasetSettings
from .drop_learning import lesson
from .runs import advance_learning, ensure_pool_limit, learning_starts, started

#: Seconds between ticks. A tick is a few queries, and each step of a learning waits for one: a short interval
#: keeps a learning's wall time close to its runs' own.
TICK_S = 5
#: Learning runs the cursor remembers (newest last): older ones are no longer among the latest starts.
_REMEMBERED = 50
_DONE = "done"


def build_learning_sensor(s: DatasetSettings, jobs: list) -> dg.SensorDefinition:
    """The `<name>_learning` sensor: submits the runs of every learning run of the dataset that has not ended."""
    name = s.name

    @dg.sensor(
        name=learning_sensor_name(name), jobs=jobs, minimum_interval_seconds=TICK_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Advances each learning run of {name!r} (started by {name}_learn_from_drop): requests the runs of "
        "its next step once the last step's runs have succeeded, and records what the drop taught the agent.",
    )
    def learning(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        # The cursor: learning runs that ended (DONE), or stopped at a failed run (its id: told once, and a
        # re-execution of that run lets the learning run go on).
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        runs: list[dg.RunRequest] = []
        events: list[dg.AssetMaterialization] = []
        notes: list[str] = []
        for start in learning_starts(context.instance, name):
            learning_run = start.run_id
            if seen.get(learning_run) == _DONE or not started(start):
                continue  # ended, or not started yet (its run is queued or running), or its start failed
            advance = advance_learning(context.instance, s, start.tags[DROP_TAG], learning_run)
            if advance.failed is not None:
                if seen.get(learning_run) != advance.failed.run_id:
                    context.log.warning(f"learning run {learning_run} stopped: its run {advance.failed.run_id} "
                                        f"({advance.failed.job_name}) {advance.failed.status.value.lower()}; "
                                        "re-execute that run to go on, or learn from the drop again")
                    seen[learning_run] = advance.failed.run_id
                continue
            seen.pop(learning_run, None)
            if advance.done:
                events.append(lesson(s, context.instance, learning_run))
                context.log.info(f"learning run {learning_run} ended: its drop is cleaned by the new module")
                seen[learning_run] = _DONE
            elif advance.waiting:
                notes.append(f"learning run {learning_run}: {len(advance.waiting)} run(s) still going")
            else:
                if advance.step is FlowStep.ANALYSE_CHUNKS:
                    ensure_pool_limit(context.instance, LLM_POOL)
                context.log.info(f"learning run {learning_run}: {advance.step.value}, {len(advance.requests)} run(s)")
                runs += advance.requests
        return dg.SensorResult(
            run_requests=runs, asset_events=events, cursor=json.dumps(dict(list(seen.items())[-_REMEMBERED:])),
            skip_reason=None if runs or events else ("; ".join(notes) or "no learning run to advance"),
        )

    return learning
