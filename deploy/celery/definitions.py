"""A code location whose steps run on Celery workers: every dataset configured in the workdir.

Point the webserver/daemon (`dagster dev -f deploy/celery/definitions.py`, or a workspace.yaml entry) and every
worker at this file's location, with the same environment:

    export SMOLCLEAN_WORKDIR=/shared/smolclean-work       # on a filesystem every machine mounts
    export SMOLCLEAN_CELERY_BROKER=redis://redis:6379/0 SMOLCLEAN_CELERY_BACKEND=redis://redis:6379/1
    export DAGSTER_HOME=/shared/dagster_home              # with deploy/postgres/dagster.yaml as dagster.yaml
    dagster-celery worker start -A dagster_celery.app -y deploy/celery/celery.yaml   # on each worker machine
    dagster-daemon run -f deploy/celery/definitions.py    # once: sensors, run queue (or `dagster dev -f ...`)

The daemon ticks the sensors and launches queued runs. Learning needs it: the sensor `<name>_learning` submits a
learning run's runs step by step, each wave's chunks one run each, whose steps the workers run (see
docs/learning-on-a-deployment.md).

Datasets are added to the workdir with `smolclean learn ... --workdir $SMOLCLEAN_WORKDIR` (or by writing
`datasets/<name>.yaml` there).
"""

import os
from pathlib import Path

import yaml
from dagster_celery import celery_executor

from smolclean_dagster import build_defs
from smolclean_dagster.settings import load_workdir

CELERY_CONFIG = yaml.safe_load(Path(__file__).with_name("celery.yaml").read_text(encoding="utf-8"))["execution"]["config"]

defs = build_defs(
    *load_workdir(os.environ.get("SMOLCLEAN_WORKDIR", "smolclean-work")),
    executor=celery_executor.configured(CELERY_CONFIG),
)
