"""Running code in the sandbox: results, the error each failure maps to, recovery, batches and threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from smolclean_dagster.sandbox import (
    FunctionFailed,
    GateRejected,
    ResourceLimitExceeded,
    Sandbox,
    SandboxCrashed,
    SandboxError,
    SandboxLevel,
    SandboxTimeout,
    run_function,
)

STRIP = '''
import pandas as pd


def strip_names(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around `name` and drop rows without one."""
    df = df.copy()
    df["name"] = df["name"].str.strip()
    return df[df["name"] != ""]
'''

MODULE = '''"""Exported cleaning module."""
import pandas as pd

VERSION = "1"


def strip_names(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around `name`."""
    return df.assign(name=df["name"].str.strip())


def scale(df: pd.DataFrame) -> pd.DataFrame:
    """Express `x` in percent."""
    return df.assign(x=(df["x"] * 100).round(1))


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Apply every function in order."""
    for fn in FUNCTIONS:
        df = fn(df)
    return df


FUNCTIONS = [strip_names, scale]

if __name__ == "__main__":
    raise SystemExit("never runs in the sandbox")
'''


@pytest.fixture
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "id": np.arange(1000),
        "name": [f"  Name {i} " if i % 10 else "  " for i in range(1000)],
        "x": rng.random(1000),
        "when": pd.date_range("2024-01-01", periods=1000, freq="h"),
    })


def test_run_function_returns_the_cleaned_frame(frame):
    out = run_function(STRIP, frame)
    expected = frame.assign(name=frame["name"].str.strip())
    pd.testing.assert_frame_equal(out, expected[expected["name"] != ""])


def test_column_names_and_order_are_kept_as_returned(sandbox, frame):
    code = "def f(df):\n    return df[['x', 'id']].rename(columns={'x': 'Zeta', 'id': 'alpha'})\n"
    assert list(sandbox.run(code, frame).columns) == ["Zeta", "alpha"]


def test_a_raising_function_gives_function_failed_with_type_text_and_line(sandbox, frame):
    code = "import pandas as pd\n\ndef f(df):\n    df = df.copy()\n    df['y'] = df['nmae'].str.strip()\n    return df\n"
    with pytest.raises(FunctionFailed) as info:
        sandbox.run(code, frame)
    err = info.value
    assert str(err) == "KeyError: 'nmae' at line 5: `df['y'] = df['nmae'].str.strip()`"
    assert (err.exc_type, err.line) == ("KeyError", 5)


def test_an_error_while_loading_the_code_is_the_functions_fault(sandbox, frame):
    code = "import pandas as pd\nimport zoneinfo\n\ndef f(df, tz=zoneinfo.ZoneInfo('Nowhere/Atlantis')):\n    return df\n"
    with pytest.raises(FunctionFailed, match="ZoneInfoNotFoundError.*line 4"):
        sandbox.run(code, frame)


def test_gate_runs_before_anything_executes(sandbox, frame):
    with pytest.raises(GateRejected, match="line 2: `open` is not allowed"):
        sandbox.run("def f(df):\n    return open('/etc/passwd')\n", frame)


def test_an_endless_loop_times_out_and_the_next_call_works(frame):
    # stopped by its CPU time limit, not by the wall clock: a busy machine gives a busy function its full limit
    with Sandbox(workers=1) as sb:
        with pytest.raises(SandboxTimeout, match="did not finish within 1 s of CPU time"):
            sb.run("def f(df):\n    while True:\n        pass\n", frame, timeout_s=1.0)
        assert len(sb.run(STRIP, frame)) == 900


def test_a_huge_allocation_hits_the_memory_cap(sandbox, frame):
    with pytest.raises(ResourceLimitExceeded, match="ran out of memory.*line 2"):
        sandbox.run("def f(df):\n    block = bytearray(10 * 2**30)\n    return df\n", frame)


def test_returning_something_that_is_not_a_frame_is_refused(sandbox, frame):
    with pytest.raises(SandboxCrashed, match="returned Series, not a pandas DataFrame"):
        sandbox.run("def f(df):\n    return df['x']\n", frame)


def test_a_frame_that_arrow_cannot_carry_is_the_functions_fault(sandbox, frame):
    # Mixed JSON values (numbers beside text) travel; Python sets are neither JSON nor an Arrow type.
    with pytest.raises(FunctionFailed, match="cannot be stored.*one type"):
        sandbox.run("def f(df):\n    return df.assign(mixed=[{1}, 'a'] * 500)\n", frame)


def test_typed_values_cross_the_sandbox_as_the_same_python_values(sandbox):
    typed = pd.DataFrame({
        "id": pd.Series([0, 1, None], dtype=object),
        "tags": pd.Series([["a", "b"], [], None], dtype=object),
        "meta": pd.Series([{"k": 1}, {"k": {"deep": [1.0, True]}}, None], dtype=object),
        "mixed": pd.Series([1.0, "x", False], dtype=object),
        "name": pd.Series(["Ann", None, ""], dtype=object),
    })
    out = sandbox.run("def f(df):\n    return df\n", typed)
    assert out.to_dict("list") == typed.to_dict("list")
    assert [type(v) for v in out["mixed"]] == [float, str, bool] and type(out["id"][0]) is int
    assert all(out[c].dtype == object for c in out.columns)


def test_output_over_the_cap_is_refused(frame):
    with Sandbox(workers=1, max_output_mb=1) as sb:
        with pytest.raises(ResourceLimitExceeded, match="output cap"):
            sb.run("import numpy as np\nimport pandas as pd\n\ndef f(df):\n    return pd.DataFrame({'a': np.zeros(10**6)})\n",
                   frame)


def test_the_worker_environment_has_none_of_the_parents_variables(frame, monkeypatch):
    # The gate keeps `os` out of generated code, so read the environment through the unscreened path
    # the attack tests use; the environment is what the worker process was started with.
    monkeypatch.setenv("FAKE_API_KEY", "sk-test-should-not-leak")
    with Sandbox(workers=1) as sb:
        code = "import os\nimport pandas as pd\n\ndef f(df):\n    return pd.DataFrame({'k': sorted(os.environ)})\n"
        names = set(sb._run_unscreened(code, frame)["k"])
    assert "FAKE_API_KEY" not in names
    assert names <= {"PATH", "LANG", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                     "ARROW_DEFAULT_MEMORY_POOL"}
    assert "FAKE_API_KEY" in os.environ


def test_module_mode_calls_clean_and_never_runs_the_main_block(sandbox, frame):
    out = sandbox.run(MODULE, frame, module=True)
    assert out["name"].iloc[1] == "Name 1" and out["x"].max() <= 100


def test_batch_runner_reuses_one_worker_and_matches_run(sandbox, frame):
    batches = [frame.iloc[i : i + 250] for i in range(0, 1000, 250)]
    expected = [sandbox.run(MODULE, batch, module=True) for batch in batches]
    with sandbox.batch_runner(MODULE, recycle_after=3) as runner:
        got = [runner.run(batch) for batch in batches]
        assert (runner.calls, runner.sessions) == (4, 2)  # recycled after 3 calls
    for want, have in zip(expected, got):
        pd.testing.assert_frame_equal(want, have)
    with pytest.raises(SandboxError, match="closed"):
        runner.run(frame)


def test_batch_runner_surfaces_function_errors_and_keeps_going(sandbox, frame):
    code = MODULE.replace("for fn in FUNCTIONS:", "if len(df) == 1:\n        raise ValueError('one row')\n    for fn in FUNCTIONS:")
    with sandbox.batch_runner(code) as runner:
        with pytest.raises(FunctionFailed, match="ValueError: one row at line 20"):
            runner.run(frame.head(1))
        assert len(runner.run(frame.head(5))) == 5
        assert runner.sessions == 1


def test_batch_runner_recovers_from_a_timeout(frame):
    code = MODULE.replace("for fn in FUNCTIONS:", "while len(df) == 1:\n        pass\n    for fn in FUNCTIONS:")
    with Sandbox(workers=1) as sb, sb.batch_runner(code, timeout_s=1.0) as runner:
        assert len(runner.run(frame.head(5))) == 5
        with pytest.raises(SandboxTimeout):
            runner.run(frame.head(1))
        assert len(runner.run(frame.head(5))) == 5
        assert runner.sessions == 2


def test_concurrent_threads_get_their_own_replies(sandbox, frame):
    results: dict[int, int] = {}

    def call(n: int) -> None:
        results[n] = len(sandbox.run(f"def f(df):\n    return df.head({n})\n", frame))

    threads = [threading.Thread(target=call, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {n: n for n in range(1, 9)}


def test_level_reports_every_layer(sandbox):
    level = sandbox.level
    assert isinstance(level, SandboxLevel)
    assert set(level.layers) == {"rlimits", "netns", "landlock", "seccomp", "fresh_fork"}
    assert level.strong == all(level.layers.values())
    assert level.describe().startswith("strong sandbox" if level.strong else "weak sandbox")


def test_require_strong_starts_when_every_layer_is_available(sandbox):
    if not sandbox.level.strong:
        pytest.skip(f"this machine gives a weak sandbox: {sandbox.level.describe()}")
    with Sandbox(require_strong=True, workers=1) as sb:
        assert sb.level.strong


def test_closed_sandbox_refuses_calls(frame):
    sb = Sandbox(workers=1)
    sb.close()
    with pytest.raises(SandboxError, match="closed"):
        sb.run(STRIP, frame)


def test_a_killed_caller_leaves_no_working_folder_behind(tmp_path):
    # A run killed mid-way (or a process ending without closing its pool) never reaches Sandbox.close().
    script = tmp_path / "caller.py"
    script.write_text(
        "import os, sys\n"
        "import pandas as pd\n"
        "from smolclean_dagster.sandbox import Sandbox\n"
        "sandbox = Sandbox(workers=1)\n"
        "sandbox.run(sys.argv[1], pd.DataFrame({'name': [' a ']}))\n"
        "print(' '.join(os.listdir(os.environ['TMPDIR'])), flush=True)\n"
        "os.kill(os.getpid(), 9)\n")
    folder = tmp_path / "tmp"
    folder.mkdir()
    out = subprocess.run([sys.executable, str(script), STRIP], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TMPDIR": str(folder)})
    assert out.stdout.split() and out.stdout.split()[0].startswith("smolclean-sandbox-"), out.stderr[-2000:]
    deadline = time.monotonic() + 10
    while os.listdir(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.listdir(folder) == []
