"""Every dataset setting from the command line: `smolclean learn --set KEY=VALUE`, over the workdir's saved YAML."""

from __future__ import annotations

import pytest
import yaml

from bad_drops import write_good
from smolclean_dagster.cli import main
from smolclean_dagster.core.plan import ChunkPlan
from smolclean_dagster.core.storage import DatasetStore
from smolclean_dagster.settings import DatasetSettings


@pytest.mark.parametrize(
    ("pair", "expect"),
    [
        ("llm_timeout_s=soon", "setting 'llm_timeout_s'"),
        ("chunk_size=0", "setting 'chunk_size': Input should be greater than 0"),
        ("learn_on_residual=sometimes", "setting 'learn_on_residual'"),
        ("llm_timeout", "--set 'llm_timeout': expected KEY=VALUE"),
        ("llm_timout_s=1800", "setting 'llm_timout_s' does not exist; the settings are: drop_folder, glob,"),
        ("name=other", "give the dataset's name with --name"),
    ],
)
def test_a_bad_setting_on_the_command_line_is_named_and_nothing_is_stored(tmp_path, capfd, pair, expect):
    workdir = tmp_path / "work"
    good = write_good(tmp_path / "customers.csv")
    assert main(["learn", str(good), "--name", "customers", "--workdir", str(workdir), "--set", pair]) == 2
    err = capfd.readouterr().err
    assert expect in err and "Traceback" not in err, err
    assert not workdir.exists()


def test_saved_settings_are_used_and_the_command_line_overrides_them(tmp_path, capfd):
    workdir = tmp_path / "work"
    saved = workdir / "datasets" / "customers.yaml"
    saved.parent.mkdir(parents=True)
    saved.write_text(yaml.safe_dump({"name": "customers", "chunk_size": 15, "max_steps": 3, "llm_rpm": 30,
                                     "instructions": "keep ids as they are"}), encoding="utf-8")
    good = write_good(tmp_path / "customers.csv", rows=60)
    code = main(["learn", str(good), "--name", "customers", "--workdir", str(workdir), "--concurrency", "1",
                 "--set", "llm_timeout_s=1800", "--set", "max_steps=2", "--set", "llm_rpm=", "--set", "chunk_budget=3"])
    assert code == 0, capfd.readouterr().err
    now = DatasetSettings.model_validate({**yaml.safe_load(saved.read_text(encoding="utf-8")), "workdir": workdir})
    assert now.chunk_size == 15 and now.instructions == "keep ids as they are"  # from the saved file
    assert (now.llm_timeout_s, now.max_steps, now.llm_rpm, now.chunk_budget, now.concurrency) == (1800, 2, None, 3, 1)
    plan = DatasetStore(now.storage_dir, "customers").load_model("chunks", ChunkPlan, "customers.csv")
    assert {c.stop - c.start for c in plan.chunks} == {15}  # the saved chunk size is what learning used
    assert len(plan.selected) <= 3
