"""A function that breaks a blocking check on held-out rows is taken out before validation, so a learning
run always ends with a module of what holds, and the report says what was taken out and why."""

from __future__ import annotations

import dagster as dg

from smolclean_dagster import DatasetSettings
from smolclean_dagster.assets import build_dataset_assets
from smolclean_dagster.core.drops import drop_key
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.registry import Provenance, RegistryEntry
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.factory import build_defs
from smolclean_dagster.learning.embedded import place_drop

SHOUT = '''def shout_city(df):
    """Append an exclamation mark to `city` (not idempotent)."""
    df = df.copy()
    df["city"] = df["city"] + "!"
    return df
'''


def test_a_function_failing_a_blocking_check_is_taken_out_and_the_module_exported(messy_csv, tmp_path):
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
        assert evaluations == {"module_compiles": True, "no_row_lost": True, "idempotent": True,
                               "quality_not_worse": True}
        assert result.success
    registry = store.registry.load()
    assert "shout_city" not in registry.names()
    assert [d.name for d in registry.dropped] == ["shout_city"]
    assert "second clean() changed the rows again" in registry.dropped[0].reason
    module = (settings.module_dir / "clean_people.py").read_text(encoding="utf-8")
    assert "def shout_city" not in module
    report = (settings.module_dir / "report.md").read_text(encoding="utf-8")
    assert "Taken out of the module by validation" in report and "`shout_city`" in report
