"""Production storage: the learning flow, unchanged, on a Dagster instance kept in a real PostgreSQL server,
configured by the documented deploy/postgres/dagster.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

from local_servers import postgres_server
from smolclean_dagster import DatasetSettings
from smolclean_dagster.learning.embedded import learn

DEPLOY_YAML = Path(__file__).resolve().parents[1] / "deploy" / "postgres" / "dagster.yaml"


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as server:
        server.create_database("smolclean")
        yield server


def test_learning_on_postgres_storage_keeps_runs_and_materializations_there(postgres, messy_csv, tmp_path, monkeypatch):
    for var, value in {"DAGSTER_PG_HOST": postgres.host, "DAGSTER_PG_PORT": str(postgres.port),
                       "DAGSTER_PG_DB": "smolclean", "DAGSTER_PG_USERNAME": postgres.user,
                       "DAGSTER_PG_PASSWORD": ""}.items():
        monkeypatch.setenv(var, value)  # the chunk processes of a wave inherit them
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY_YAML, home / "dagster.yaml")
    settings = DatasetSettings(name="people", workdir=tmp_path / "work", chunk_size=10, chunk_budget=2, concurrency=2)

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        outcome = learn(settings, messy_csv, instance)
        runs = instance.get_runs()
        chunks = instance.get_dynamic_partitions("people_chunks")

    assert outcome.validation.passed and outcome.functions >= 1 and outcome.module.exists()
    assert len(chunks) == outcome.chunks == 2  # one wave of two chunks, run side by side in two processes
    assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)

    # Everything is in the database, read back with SQL, not through Dagster.
    rows = postgres.query("smolclean", "SELECT run_id, status FROM runs")
    assert {r[0] for r in rows} == {r.run_id for r in runs}
    materialized = postgres.query(
        "smolclean",
        "SELECT asset_key, partition, count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
        "GROUP BY asset_key, partition",
    )
    by_asset = {}
    for key, partition, count in materialized:
        by_asset.setdefault(dg.AssetKey.from_db_string(key).to_user_string(), {})[partition] = count
    assert set(by_asset["people/chunk_functions"]) == set(chunks)  # one trace per chunk partition
    assert set(by_asset["people/raw_data"]) == set(by_asset["people/cleaned_data"]) == {"people.csv"}
    assert {"people/registry", "people/validation", "people/cleaning_module"} <= set(by_asset)
    checks = postgres.query(
        "smolclean", "SELECT check_name, execution_status FROM asset_check_executions WHERE asset_key = %s",
        (dg.AssetKey(["people", "validation"]).to_string(),),
    )
    assert {"module_compiles", "no_row_lost", "idempotent", "quality_not_worse"} <= {c for c, s in checks if s == "SUCCEEDED"}
    partitions = postgres.query("smolclean", "SELECT partitions_def_name, partition FROM dynamic_partitions")
    assert ("people_drops", "people.csv") in partitions
    # ... and no SQLite database was written beside the configuration.
    assert not list(home.rglob("*.db"))
