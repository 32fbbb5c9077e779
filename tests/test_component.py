"""The dg Component as a user meets it: `dg scaffold defs` in an existing dg project, a YAML file, and the
project's definitions loading with our assets, quietly (no deprecation or supersession warnings)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import dagster as dg
import pytest
import yaml
from pydantic.warnings import PydanticDeprecatedSince20

from smolclean_dagster import DatasetSettings, SmolcleanComponent, build_defs
from smolclean_dagster.core.errors import SettingsError

ROOT_MODULE = "smolclean_dg_shop"
TYPE = "smolclean_dagster.SmolcleanComponent"
DG = shutil.which("dg", path=os.path.dirname(sys.executable)) or shutil.which("dg")


class _Strict:
    """Deprecation, supersession and preview warnings as errors, so a deprecated or superseded Dagster API on
    our code paths fails the test (SupersessionWarning is a FutureWarning).

    Not ours, so allowed: Dagster's own use of a deprecated pydantic helper while it parses YAML, and the
    BetaWarning Dagster raises on its own internal call when it resolves any asset check."""

    def __enter__(self):
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        for category in (DeprecationWarning, FutureWarning, dg.PreviewWarning):
            warnings.simplefilter("error", category)
        warnings.filterwarnings("ignore", category=PydanticDeprecatedSince20, module=r"dagster\.")
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


def _dg(project: Path, *args: str) -> subprocess.CompletedProcess:
    home = project / ".dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    proc = subprocess.run([DG, *args], cwd=project, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, f"dg {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def dg_project(tmp_path: Path, monkeypatch) -> Path:
    """An existing dg project, as `create-dagster project` lays it out (pyproject with [tool.dg], a defs folder)."""
    project = tmp_path / "shop"
    package = project / ROOT_MODULE
    (package / "defs").mkdir(parents=True)
    (project / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [project]
        name = "shop"
        version = "0.1.0"
        requires-python = ">=3.11"
        dependencies = ["dagster", "smolclean-dagster"]

        [tool.dg]
        directory_type = "project"

        [tool.dg.project]
        root_module = "{ROOT_MODULE}"
        """), encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "defs" / "__init__.py").write_text("", encoding="utf-8")
    (package / "definitions.py").write_text(textwrap.dedent("""\
        from pathlib import Path

        import dagster as dg


        @dg.definitions
        def defs() -> dg.Definitions:
            return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
        """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(project))
    yield project
    for name in [m for m in sys.modules if m == ROOT_MODULE or m.startswith(ROOT_MODULE + ".")]:
        del sys.modules[name]


@pytest.mark.skipif(DG is None, reason="the dg CLI (dagster-dg-cli, in requirements.txt) is not installed")
def test_scaffolded_datasets_load_with_their_assets_in_a_dg_project(dg_project: Path):
    _dg(dg_project, "scaffold", "defs", TYPE, "customers")
    _dg(dg_project, "scaffold", "defs", TYPE, "order-exports", "--glob", "*.jsonl", "--instructions", "dates as ISO")

    customers = dg_project / ROOT_MODULE / "defs" / "customers" / "defs.yaml"
    spec = yaml.safe_load(customers.read_text(encoding="utf-8"))
    assert spec["type"] == TYPE
    assert spec["attributes"]["name"] == "customers"
    assert spec["attributes"]["drop_folder"] == "data/customers/drops"
    orders = yaml.safe_load((customers.parent.parent / "order-exports" / "defs.yaml").read_text(encoding="utf-8"))
    attrs = orders["attributes"]
    assert (attrs["name"], attrs["glob"], attrs["instructions"]) == ("order_exports", "*.jsonl", "dates as ISO")

    # The user edits the YAML: instructions from a file beside it, tighter limits.
    (customers.parent / "instructions.md").write_text("Dates as ISO 8601.\n", encoding="utf-8")
    spec["attributes"].update(instructions="@instructions.md", chunk_budget=3)
    customers.write_text(yaml.safe_dump(spec), encoding="utf-8")

    # What `dg dev` / `dg list defs` see.
    listed = json.loads(_dg(dg_project, "list", "defs", "--json").stdout)
    keys = {a["asset_key"] for a in listed["assets"]}
    for dataset in ("customers", "order_exports"):
        assert {f"{dataset}/raw_data", f"{dataset}/chunk_functions", f"{dataset}/cleaning_module",
                f"{dataset}/cleaned_data"} <= keys
    assert {"customers_drop_folder", "order_exports_drop_folder"} <= {s["name"] for s in listed["sensors"]}

    # The same definitions in-process, with warnings as errors: the exact set `build_defs` makes.
    with _Strict():
        defs = dg.load_from_defs_folder(path_within_project=dg_project)
        graph_keys = defs.resolve_asset_graph().get_all_asset_keys()
    expected = build_defs(
        DatasetSettings(name="customers", workdir=dg_project / "smolclean-work"),
        DatasetSettings(name="order_exports", workdir=dg_project / "smolclean-work"),
    ).resolve_asset_graph().get_all_asset_keys()
    assert graph_keys == expected


def test_a_drop_in_the_yaml_drop_folder_is_read_by_the_loaded_assets(dg_project: Path):
    folder = dg_project / ROOT_MODULE / "defs" / "people"
    folder.mkdir()
    (folder / "defs.yaml").write_text(yaml.safe_dump(
        {"type": TYPE, "attributes": {"name": "people", "drop_folder": "inbox/people", "glob": "*.csv"}}
    ), encoding="utf-8")
    drops = dg_project / "inbox" / "people"
    drops.mkdir(parents=True)
    (drops / "jan.csv").write_text("id,city\n1, new york\n2,Boston\n", encoding="utf-8")

    with _Strict():
        defs = dg.load_from_defs_folder(path_within_project=dg_project)
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("people_drops", ["jan.csv"])
            result = dg.materialize(
                [defs.resolve_assets_def(dg.AssetKey(["people", "raw_data"]))], partition_key="jan.csv",
                instance=instance,
            )
    assert result.success
    raw = result.asset_materializations_for_node("people__raw_data")[0]
    assert raw.metadata["rows"].value == 2
    # Relative paths start at the project root, wherever the process runs.
    assert raw.metadata["source"].value == str(drops / "jan.csv")
    assert (dg_project / "smolclean-work" / "storage" / "people").is_dir()


def test_yaml_attributes_become_settings(tmp_path: Path):
    (tmp_path / "rules.md").write_text("Keep the leading zeros of ids.\n", encoding="utf-8")
    component = SmolcleanComponent.resolve_from_yaml(textwrap.dedent("""\
        name: customers
        drop_folder: /srv/drops/customers
        instructions: "@rules.md"
        model: openai/gpt-4o-mini
        api_key: "{{ env.SMOLCLEAN_TEST_KEY }}"
        chunk_budget: 4
        max_steps: 3
        """), scope={"env": {"SMOLCLEAN_TEST_KEY": "sk-test"}})
    settings = component.settings(project_root=tmp_path / "project", folder=tmp_path)
    assert settings.model == "openai/gpt-4o-mini" and settings.analyst_kind == "hybrid"
    assert settings.api_key == "sk-test" and "sk-test" not in repr(component)
    assert settings.instructions == "Keep the leading zeros of ids.\n"
    assert settings.drops_dir == Path("/srv/drops/customers")
    assert settings.workdir == tmp_path / "project" / "smolclean-work"
    assert (settings.chunk_budget, settings.max_steps) == (4, 3)
    assert settings.chunk_size == DatasetSettings.model_fields["chunk_size"].default  # unset keeps the default


def test_bad_yaml_attributes_fail_at_load_naming_the_setting():
    component = SmolcleanComponent.resolve_from_yaml("name: customers\nchunk_size: 0\n")
    with pytest.raises(SettingsError, match="chunk_size"):
        component.settings()


def test_every_dataset_setting_can_be_set_from_yaml():
    """The YAML schema and DatasetSettings list the same fields: what Python can set, a defs.yaml can."""
    yaml_fields = set(SmolcleanComponent.model().model_fields)
    assert yaml_fields == set(DatasetSettings.model_fields)


def test_the_component_is_registered_for_dg():
    from dagster.components.core.package_entry import discover_entry_point_package_objects

    found = {f"{key.namespace}.{key.name}": obj for key, obj in discover_entry_point_package_objects().items()}
    assert found.get(TYPE) is SmolcleanComponent
