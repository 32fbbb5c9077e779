"""Kubernetes (dagster-k8s), the documented configuration in deploy/k8s/: the code location it serves puts
every step in a pod of its own, and the pod that would run a chunk's agent loop, rendered by dagster-k8s from
the Helm values and the executor configuration, sees the shared workdir, the LLM secret and the instance.
No cluster is needed: the Job manifests are built exactly as the executor would submit them."""

from __future__ import annotations

import runpy
from pathlib import Path

import dagster as dg
import pytest
import yaml

pytest.importorskip("dagster_k8s")

from dagster_k8s import K8sRunLauncher
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import UserDefinedDagsterK8sConfig, construct_dagster_k8s_job
from kubernetes.client import ApiClient

from smolclean_dagster import DatasetSettings
from smolclean_dagster.settings import save_settings

K8S = Path(__file__).resolve().parents[1] / "deploy" / "k8s"


def _yaml(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text(encoding="utf-8"))


def _deployment() -> dict:
    (deployment,) = _yaml("values.yaml")["dagster-user-deployments"]["deployments"]
    return deployment


def _env(deployment: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in deployment["env"]}


def test_the_k8s_code_location_runs_every_step_with_the_k8s_executor(tmp_path, monkeypatch):
    workdir = tmp_path / "work"
    save_settings(DatasetSettings(name="people", workdir=workdir))
    monkeypatch.setenv("SMOLCLEAN_WORKDIR", str(workdir))
    defs = runpy.run_path(str(K8S / "definitions.py"))["defs"]
    assert isinstance(defs, dg.Definitions)
    jobs = defs.resolve_all_job_defs()
    assert {"people_clean_drop", "people_learn_from_drop"} <= {j.name for j in jobs}
    for job in jobs:
        assert job.executor_def.name == "k8s", job.name
    # The configuration from executor.yaml is the executor's, checked against dagster-k8s's schema.
    config = dg.validate_run_config(jobs[0], {})["execution"]["k8s"]
    assert config["max_concurrent"] == 4
    assert config["step_k8s_config"]["container_config"]["resources"]["limits"]["memory"] == "2Gi"


def test_the_helm_values_image_and_shared_storage_fit_together():
    deployment = _deployment()
    workdir = _env(deployment)["SMOLCLEAN_WORKDIR"]
    # The code server serves the definitions file at the place the Dockerfile puts the repository.
    dockerfile = (K8S / "Dockerfile").read_text(encoding="utf-8").splitlines()
    (root,) = [line.split()[1] for line in dockerfile if line.startswith("WORKDIR ")]
    assert "COPY . ." in dockerfile
    assert deployment["dagsterApiGrpcArgs"] == ["--python-file", f"{root}/deploy/k8s/definitions.py"]
    # The workdir is on the mounted volume, which is the ReadWriteMany claim of shared-storage.yaml.
    (mount,) = deployment["volumeMounts"]
    assert workdir.startswith(mount["mountPath"] + "/")
    (volume,) = [v for v in deployment["volumes"] if v["name"] == mount["name"]]
    objects = {(o["kind"], o["metadata"]["name"]): o
               for o in yaml.safe_load_all((K8S / "shared-storage.yaml").read_text(encoding="utf-8"))}
    claim = objects[("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # steps on any node share it
    # Every secret the values name is defined, with the keys that are read from it.
    for secret in deployment["envSecrets"]:
        assert ("Secret", secret["name"]) in objects
    pg_secret = objects[("Secret", _yaml("values.yaml")["global"]["postgresqlSecretName"])]
    assert "postgresql-password" in pg_secret["stringData"]
    assert {"SMOLCLEAN_MODEL", "SMOLCLEAN_API_KEY"} <= set(objects[("Secret", "smolclean-llm")]["stringData"])


def test_a_chunk_step_pod_sees_the_shared_workdir_the_llm_secret_and_the_instance(tmp_path):
    values, deployment = _yaml("values.yaml"), _deployment()
    # The run launcher as the chart configures it (no cluster is contacted while building manifests).
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "none", "user": {}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
    }), encoding="utf-8")
    launcher = K8sRunLauncher(
        service_account_name="dagster", instance_config_map="dagster-instance",
        postgres_password_secret=values["global"]["postgresqlSecretName"], dagster_home="/opt/dagster/dagster_home",
        load_incluster_config=False, kubeconfig_file=str(kubeconfig),
        k8s_client_batch_api=object(), k8s_client_core_api=object(),
    )
    # What includeConfigInLaunchedRuns hands to runs and their steps, then the executor's step configuration.
    code_location = K8sContainerContext.create_from_config({"k8s": {
        "env": deployment["env"], "env_secrets": [s["name"] for s in deployment["envSecrets"]],
        "volumes": deployment["volumes"], "volume_mounts": deployment["volumeMounts"],
    }})
    step_config = _yaml("executor.yaml")["execution"]["config"]["step_k8s_config"]
    context = code_location.merge(K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(step_config)))
    image = f"{deployment['image']['repository']}:{deployment['image']['tag']}"
    job = construct_dagster_k8s_job(
        context.get_k8s_job_config(image, launcher), ["dagster", "api", "execute_step"], "dagster-step-chunk",
        pod_name="dagster-step-chunk", component="step_worker", user_defined_k8s_config=context.run_k8s_config,
    )
    pod = ApiClient().sanitize_for_serialization(job)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}

    assert env["SMOLCLEAN_WORKDIR"]["value"] == _env(deployment)["SMOLCLEAN_WORKDIR"]
    assert {"mountPath": "/shared", "name": "smolclean-shared"} in container["volumeMounts"]
    assert {"name": "smolclean-shared", "persistentVolumeClaim": {"claimName": "smolclean-shared"}} in pod["volumes"]
    assert {"secretRef": {"name": "smolclean-llm"}} in container["envFrom"]
    assert env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "key": "postgresql-password", "name": "dagster-postgresql-secret"}
    assert container["resources"] == {"limits": {"memory": "2Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert container["image"] == image and pod["restartPolicy"] == "Never"
