"""Bad settings fail at load, or at the first call when only the server can tell, with a message naming the setting."""

from __future__ import annotations

import re

import socket
import subprocess
import sys

import dagster as dg
import pytest

from llm_server import ScriptedLLM, fail
from smolclean_dagster import DatasetSettings, build_defs
from smolclean_dagster.core.errors import AnalystError, SettingsError, SmolcleanError
from smolclean_dagster.learning.embedded import learn

SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on leaving: nothing listens there


@pytest.mark.parametrize(
    ("values", "setting"),
    [
        ({"chunk_size": 0}, "chunk_size"),
        ({"api_base": "localhost:8000/v1"}, "api_base"),
        ({"llm_max_attempts": 0}, "llm_max_attempts"),
        ({"llm_backoff_s": -1}, "llm_backoff_s"),
        ({"name": "my-data"}, "name"),
    ],
)
def test_a_bad_value_fails_at_load_naming_the_setting(values, setting):
    with pytest.raises(SettingsError) as err:
        DatasetSettings.load(**{"name": "people", **values})
    assert f"setting {setting!r}" in str(err.value)


def test_chunk_size_0_on_the_command_line_is_refused_before_anything_runs(messy_csv, tmp_path):
    proc = subprocess.run([*SMOLCLEAN, "learn", str(messy_csv), "--name", "people", "--workdir", str(tmp_path / "w"),
                           "--chunk-size", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "setting 'chunk_size'" in proc.stderr and "greater than 0" in proc.stderr
    assert not (tmp_path / "w").exists()


def test_a_missing_drop_folder_is_named_when_learning_and_when_the_sensor_looks(messy_csv, tmp_path):
    settings = DatasetSettings(name="people", workdir=tmp_path / "work", drop_folder=tmp_path / "inbox-typo")
    with pytest.raises(SettingsError) as err:
        learn(settings, messy_csv, dg.DagsterInstance.ephemeral())
    assert "setting 'drop_folder'" in str(err.value) and "inbox-typo" in str(err.value) and "does not exist" in str(err.value)
    assert not (tmp_path / "inbox-typo").exists()  # not created behind the user's back

    # The sensor's tick does not fail every 15 s: it is skipped, saying which setting and what to do.
    sensor = build_defs(settings).resolve_sensor_def("people_drop_folder")
    with dg.instance_for_test() as instance:
        skipped = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(skipped, dg.SkipReason)
    assert re.search(r"setting 'drop_folder'.*inbox-typo does not exist; create it", skipped.skip_message)
    assert not (tmp_path / "inbox-typo").exists()

    # The default folder (<workdir>/drops/<name>) may not exist yet: nothing to complain about.
    default = DatasetSettings(name="people", workdir=tmp_path / "fresh")
    result = build_defs(default).resolve_sensor_def("people_drop_folder")(dg.build_sensor_context(
        instance=dg.DagsterInstance.ephemeral()))
    assert not result.run_requests


def _request_once(settings: DatasetSettings) -> None:
    """The first LLM call of an analyst made from these settings (what the first chunk step does)."""
    settings.make_analyst().client.complete([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("model", ["gpt4o-typo", "openai/no-such-model"])
def test_a_wrong_model_name_fails_at_the_first_call_naming_the_setting(tmp_path, model):
    with ScriptedLLM(responder=lambda r: fail(404, message=f"The model `{r.body.get('model')}` does not exist")) as llm:
        settings = DatasetSettings(name="people", workdir=tmp_path, analyst="llm", model=model, api_base=llm.api_base,
                                   api_key="test", llm_backoff_s=0.01, llm_cache=False)
        with pytest.raises(AnalystError) as err:
            _request_once(settings)
        assert len(llm.requests) <= 1  # never retried: another attempt would fail the same way
    message = str(err.value)
    assert "setting 'model'" in message and model in message


def test_an_unreachable_api_base_fails_the_learning_run_naming_the_setting(messy_csv, tmp_path):
    api_base = f"http://127.0.0.1:{_closed_port()}/v1"
    settings = DatasetSettings(name="people", workdir=tmp_path / "work", analyst="llm", model="openai/test-model",
                               api_base=api_base, api_key="test", llm_max_attempts=2, llm_backoff_s=0.01,
                               concurrency=1, chunk_budget=1)
    with pytest.raises(SmolcleanError) as err:
        learn(settings, messy_csv, dg.DagsterInstance.ephemeral())
    message = str(err.value)
    assert "failed 2 time(s)" in message and api_base in message and "setting 'api_base'" in message
    assert not settings.module_dir.exists()
