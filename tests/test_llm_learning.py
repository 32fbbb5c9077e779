"""`smolclean learn` with a model: the whole Dagster flow over real HTTP to an OpenAI-compatible server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import dagster as dg

from llm_server import ScriptedLLM, reply

# not title case: "NEW YORK", "new york" and "New York" are each on six rows, so nothing says which is wrong
CITY = '''def strip_city(df):
    """Remove the spaces around `city` ("Chicago " -> "Chicago")."""
    df = df.copy()
    df["city"] = df["city"].str.strip()
    return df
'''


def _respond(request):
    # Propose the city fix until the registry shown in the prompt holds it, then say clean.
    if "strip_city" in request.prompt:
        return reply("<think>nothing left</think>\n<issues>\n</issues>\n<status>clean</status>", prompt_tokens=300,
                     completion_tokens=10)
    return reply(f"<issues>\n- city: case variants\n</issues>\n<code>\n```python\n{CITY}```\n</code>\n"
                 "<status>needs_more_work</status>", prompt_tokens=500, completion_tokens=80)


def _learn(csv, workdir, api_base):
    cmd = [sys.executable, "-m", "smolclean_dagster.cli", "learn", str(csv), "--name", "people", "--workdir", str(workdir),
           "--analyst", "llm", "--concurrency", "1", "--chunk-budget", "3"]
    env = {**os.environ, "SMOLCLEAN_MODEL": "openai/test-model", "SMOLCLEAN_API_BASE": api_base,
           "SMOLCLEAN_API_KEY": "test-key"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _chunk_metadata(workdir):
    with dg.DagsterInstance.from_config(str(workdir / "dagster_home")) as instance:
        records = instance.fetch_materializations(dg.AssetKey(["people", "chunk_functions"]), limit=100).records
        return [r.asset_materialization.metadata for r in records]


def test_learning_with_a_model_over_http_and_a_rerun_served_from_the_cache(messy_csv, tmp_path):
    workdir = tmp_path / "work"
    with ScriptedLLM(responder=_respond) as llm:
        first = _learn(messy_csv, workdir, llm.api_base)
        assert first.returncode == 0, first.stderr
        calls = len(llm.requests)
        assert calls >= 2
        assert all(r.headers.get("Authorization") == "Bearer test-key" for r in llm.requests)
        module = (workdir / "modules" / "people" / "clean_people.py").read_text()
        assert "def strip_city(df):" in module and "openai/test-model" in module
        meta = _chunk_metadata(workdir)
        assert sum(m["llm_calls"].value for m in meta) == calls
        assert sum(m["prompt_tokens"].value for m in meta) >= 500
        assert any("strip_city" in m["trace"].value and "500/80" in m["trace"].value for m in meta)

        # Learning again from scratch with unchanged inputs asks the server nothing: every reply is cached.
        for folder in ("chunk_functions", "chunk_issues", "chunks", "registry", "validation"):
            shutil.rmtree(workdir / "storage" / "people" / folder, ignore_errors=True)
        (workdir / "storage" / "people" / "working_registry.json").unlink()
        again = _learn(messy_csv, workdir, llm.api_base)
        assert again.returncode == 0, again.stderr
        assert len(llm.requests) == calls
        assert (workdir / "modules" / "people" / "clean_people.py").read_text().split("Functions:")[1] \
            == module.split("Functions:")[1]
        latest = _chunk_metadata(workdir)[: len(meta)]
        assert sum(m["llm_cached_calls"].value for m in latest) == calls
        assert sum(m["llm_calls"].value for m in latest) == 0
