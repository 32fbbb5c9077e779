"""The whole learning flow as real Dagster runs on a temporary instance, on real files."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import dagster as dg
import pandas as pd

from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.learning.embedded import learn


def _events(instance: dg.DagsterInstance, key: list[str], partition: str | None = None):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None),
        limit=100,
    ).records
    return [r.asset_materialization for r in records]


def test_learning_the_sample_exports_a_module_that_cleans_it(tmp_path):
    settings = DatasetSettings(name="customers", workdir=tmp_path / "work", chunk_budget=4)
    sample = resources.files("smolclean_dagster") / "sample_data" / "customers.csv"
    with dg.instance_for_test() as instance, resources.as_file(sample) as path:
        outcome = learn(settings, path, instance)

        raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        # every stage materialized, and each chunk partition carries its own trace
        for asset in ("raw_data", "chunks", "registry", "validation", "cleaning_module"):
            assert _events(instance, ["customers", asset]), asset
        chunks = instance.get_dynamic_partitions("customers_chunks")
        assert len(chunks) == outcome.chunks and 1 <= outcome.chunks <= 4  # the budget caps the chunks analysed
        first = _events(instance, ["customers", "chunk_functions"], chunks[0])[0]
        trace = first.metadata["trace"].value
        assert "accepted" in trace and "```python" in trace and "def " in trace
        assert first.metadata["accepted"].value >= 1
        for name in ("module_compiles", "no_row_lost", "idempotent", "quality_not_worse"):
            check = dg.AssetCheckKey(dg.AssetKey(["customers", "validation"]), name)
            record = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check]
            assert record.status.value == "SUCCEEDED", name
        assert outcome.validation.passed, outcome.validation.checks

    # the module is real: it runs in a fresh interpreter, keeps every row and fixes the dirt
    out = tmp_path / "out.csv"
    proc = subprocess.run([sys.executable, "-I", str(outcome.module), str(path), str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    cleaned = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(cleaned) == len(raw)
    assert (cleaned.map(lambda v: v != v.strip()).to_numpy().sum()) < (raw.map(lambda v: v != v.strip()).to_numpy().sum())
    registry = RegistryStore(settings.storage_dir / "working_registry.json", "customers").load()
    assert len(registry.entries) == outcome.functions >= 3
    assert outcome.cleaned.exists() and len(pd.read_parquet(outcome.cleaned)) == len(raw)
    report = outcome.report.read_text()
    assert "## Functions" in report and "## Chunks of `customers.csv`" in report and "quality.png" in report
    assert (outcome.module.parent / "quality.png").read_bytes()[:4] == b"\x89PNG"

    # the tests shipped with the module pass against it in a fresh interpreter, and fail against a broken one
    shipped = outcome.module.parent / "test_clean_customers.py"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(shipped)],
                          capture_output=True, text=True, cwd=outcome.module.parent, timeout=300)
    assert proc.returncode == 0 and " passed" in proc.stdout, proc.stdout + proc.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / shipped.name).write_text(shipped.read_text())
    (broken / outcome.module.name).write_text(outcome.module.read_text().replace("FUNCTIONS = [", "FUNCTIONS = [] or ["
                                                                                  ).replace("    for function in FUNCTIONS:", "    for function in FUNCTIONS[:1]:"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(broken / shipped.name)],
                          capture_output=True, text=True, cwd=broken, timeout=300)
    assert proc.returncode == 1 and " failed" in proc.stdout


def test_loading_the_definitions_does_not_import_litellm(tmp_path):
    code = (
        "import sys\n"
        "from smolclean_dagster import DatasetSettings, build_defs\n"
        f"defs = build_defs(DatasetSettings(name='a', workdir={str(tmp_path)!r}))\n"
        "defs.resolve_all_job_defs()\n"
        "import smolclean_dagster.location\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"SMOLCLEAN_WORKDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_definitions_hold_one_group_per_dataset_with_prefixed_keys(tmp_path):
    defs = build_defs(
        DatasetSettings(name="customers", workdir=tmp_path), DatasetSettings(name="orders", workdir=tmp_path)
    )
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    for name in ("customers", "orders"):
        for asset in ("raw_data", "chunks", "chunk_issues", "chunk_functions", "registry", "validation",
                      "cleaning_module", "cleaned_data"):
            assert f"{name}/{asset}" in keys
