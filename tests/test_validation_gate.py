"""The validation stage's blocking checks stop a bad registry from being exported."""

from __future__ import annotations

import dagster as dg

from smolclean_dagster import DatasetSettings
from smolclean_dagster.assets import build_dataset_assets
from smolclean_dagster.core.drops import drop_key
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, RegistryEntry
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.factory import build_defs
from smolclean_dagster.learning import place_drop

SHOUT = '''def shout_city(df):
    """Append an exclamation mark to `city` (not idempotent)."""
    df = df.copy()
    df["city"] = df["city"] + "!"
    return df
'''


def test_a_failing_blocking_check_stops_the_export(messy_csv, tmp_path):
    settings = DatasetSettings(name="people", workdir=tmp_path / "work", concurrency=1)
    path = place_drop(settings, messy_csv)
    key = drop_key(path)
    assets, checks = build_dataset_assets(settings)
    resources = build_defs(settings).resources
    store = DatasetStore(settings.storage_dir, "people")
    entry = RegistryEntry(function=CleaningFunction.from_code(SHOUT, columns=["city"]),
                          provenance=Provenance(drop=key, chunk="manual", step=1, analyst="rules"))
    store.registry.update(lambda reg: reg.with_entry(entry))

    def run(names, partition=None):
        return dg.materialize([*assets, *checks], instance=instance, resources=resources, partition_key=partition,
                              selection=dg.AssetSelection.assets(*[dg.AssetKey(["people", n]) for n in names]),
                              raise_on_error=False)

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("people_drops", [key])
        assert run(["raw_data", "chunks"], key).success
        result = run(["registry", "validation", "cleaning_module"])
        evaluations = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert evaluations["idempotent"] is False
        assert evaluations["module_compiles"] is True and evaluations["no_row_lost"] is True
        assert not result.success
        materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
        assert "people/validation" in materialized and "people/cleaning_module" not in materialized
        assert not (settings.module_dir / "clean_people.py").exists()
