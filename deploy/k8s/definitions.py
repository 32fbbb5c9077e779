"""A code location whose steps each run in their own Kubernetes pod (dagster-k8s `k8s_job_executor`).

The Helm chart's user-code deployment serves this file (`dagster api grpc --python-file ...`, see values.yaml);
the K8sRunLauncher starts each run as a Kubernetes Job, and this executor starts each step of the run (a
chunk's agent loop, the validation, the cleaning of a drop) as a Job of its own. A learning run's runs are
submitted by the sensor `<name>_learning` (the chart's daemon ticks it), each wave's chunks one run each, so
they run in pods side by side (docs/learning-on-a-deployment.md). Every pod mounts the same
shared volume, because steps hand their outputs to each other through the IO managers' files in the smolclean
workdir; the Dagster instance itself (runs, events, partitions, checks) is in PostgreSQL.

    SMOLCLEAN_WORKDIR=/shared/smolclean-work    # on the ReadWriteMany volume of shared-storage.yaml
"""

import os
from pathlib import Path

import yaml
from dagster_k8s import k8s_job_executor

from smolclean_dagster import build_defs
from smolclean_dagster.settings import load_workdir

EXECUTOR_CONFIG = yaml.safe_load(Path(__file__).with_name("executor.yaml").read_text(encoding="utf-8"))["execution"]["config"]

defs = build_defs(
    *load_workdir(os.environ.get("SMOLCLEAN_WORKDIR", "/shared/smolclean-work")),
    executor=k8s_job_executor.configured(EXECUTOR_CONFIG),
)
