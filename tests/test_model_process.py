"""The model process (core/model_process.py): litellm is imported and called in a child process, so that a
learning run's first call does not wait for the import; errors and retries read as they do in-process.

Each test runs a fresh Python process (the one a user's `smolclean learn` is), against the scripted
OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from llm_server import ScriptedLLM, fail, reply

CALLS = textwrap.dedent('''
    import json, os, signal, sys
    from smolclean_dagster.core.analysts.client import LLMClient, LLMSettings
    from smolclean_dagster.core.errors import AnalystError
    from smolclean_dagster.core.model_process import model_process

    client = LLMClient(LLMSettings(model="openai/test-model", api_base=sys.argv[1], api_key="k", backoff_s=0.01))
    seen = {"child": model_process()._proc.pid if model_process() else None}
    first = client.complete([{"role": "user", "content": "first"}])
    seen["first"] = [first.text, first.usage.attempts, first.usage.prompt_tokens]
    try:
        client.complete([{"role": "user", "content": "second"}])
    except AnalystError as exc:
        seen["refused"] = str(exc)
    seen["imported_here"] = sorted(m for m in ("litellm", "openai") if m in sys.modules)
    if sys.argv[2] == "kill":  # the child dies between two calls: the next call is made here
        os.kill(seen["child"], signal.SIGKILL)
        os.waitpid(seen["child"], 0)
        seen["after_kill"] = client.complete([{"role": "user", "content": "third"}]).text
        seen["imported_after_kill"] = "litellm" in sys.modules
    print(json.dumps(seen))
''')


def _run(api_base: str, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CALLS, api_base, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_calls_are_made_in_the_model_process_with_retries_and_errors_as_in_process():
    with ScriptedLLM([fail(429, retry_after="0"), reply("hello", prompt_tokens=321), fail(401)]) as llm:
        seen = _run(llm.api_base, "keep")
    assert seen["child"] is not None
    # the 429 was retried (two attempts), the reply and its tokens came back
    assert seen["first"] == ["hello", 2, 321]
    # a refused key reads as it does when litellm runs in this process
    assert "refused the API key" in seen["refused"] and "AuthenticationError 401" in seen["refused"]
    # the learning process itself never imported litellm or the OpenAI client: the child made every call
    assert seen["imported_here"] == []
    assert len(llm.requests) == 3


def test_a_model_process_that_dies_leaves_the_calls_to_the_learning_process():
    with ScriptedLLM([reply("one"), fail(401), reply("three")]) as llm:
        seen = _run(llm.api_base, "kill")
    assert seen["first"][0] == "one"
    assert seen["after_kill"] == "three"
    assert seen["imported_after_kill"] is True
