"""The path of docs/deployment.md ("In your Dagster deployment") for a dg user, command by command, to a running
project with the Component: create-dagster, the project installed, `dg scaffold defs`, `dg check defs`,
`dg list defs`, `dg dev`.

The project gets a virtualenv of its own (the project is installed into it, never into the tests'
environment) that sees this environment's packages, as `pip install smolclean-dagster[dg]` would give it.
Offline: `pip install -e .` runs with `--no-deps --no-build-isolation` (hatchling is in requirements.txt).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from local_servers import free_port, stop_group

BIN = Path(sys.executable).parent
TOOLS = {name: shutil.which(name, path=str(BIN)) for name in ("dg", "create-dagster")}

pytestmark = pytest.mark.skipif(
    None in TOOLS.values(), reason="dg or create-dagster is not installed (both are in requirements.txt)"
)


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """`python3 -m venv .venv` for the project, seeing the packages installed here."""
    env = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    here = sysconfig.get_paths()["purelib"]
    Path(purelib, "_smolclean_test_env.pth").write_text(f"import site; site.addsitedir({here!r})\n", encoding="utf-8")
    return python


def _run(python: Path, cwd: Path, *cmd: str, timeout: float = 180) -> subprocess.CompletedProcess:
    tool = TOOLS.get(cmd[0])
    argv = [str(python), tool, *cmd[1:]] if tool else [str(python), *cmd]
    proc = subprocess.run(argv, cwd=cwd, env=_env(python), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _env(python: Path) -> dict[str, str]:
    """The project's virtualenv activated, and no DAGSTER_HOME: the scaffold gives the project its instance."""
    env = python.parents[1]
    return {**{k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}, "VIRTUAL_ENV": str(env),
            "PATH": f"{env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "DAGSTER_DG_UPDATE_CHECK_ENABLED": "0"}  # offline: create-dagster would ask PyPI for a newer version


def test_the_documented_commands_take_a_dagster_user_to_a_running_project(venv: Path, tmp_path: Path):
    _run(venv, tmp_path, "create-dagster", "project", "shop", "--no-uv-sync")
    shop = tmp_path / "shop"
    _run(venv, shop, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", ".")
    _run(venv, shop, "dg", "scaffold", "defs", "smolclean_dagster.SmolcleanComponent", "customers")
    assert (shop / "src" / "shop" / "defs" / "customers" / "defs.yaml").is_file()
    assert (shop / "data" / "customers" / "drops").is_dir()  # the sensor's folder exists: its ticks do not fail
    home = shop / "smolclean-work" / "dagster_home"  # the instance `dg dev` and the commands use (.env)
    assert f"DAGSTER_HOME={home}" in (shop / ".env").read_text(encoding="utf-8")
    _run(venv, shop, "dg", "check", "defs")
    listed = json.loads(_run(venv, shop, "dg", "list", "defs", "--json").stdout)
    assert {"customers/raw_data", "customers/chunk_functions", "customers/cleaning_module",
            "customers/cleaned_data"} <= {a["asset_key"] for a in listed["assets"]}
    assert {"customers_drop_folder", "customers_learn_on_residual"} <= {s["name"] for s in listed["sensors"]}

    port = free_port()
    ui = subprocess.Popen([str(venv), TOOLS["dg"], "dev", "--port", str(port)], cwd=shop, env=_env(venv),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                assert ui.poll() is None, "dg dev exited"
                assert time.monotonic() < deadline, "dg dev did not serve the UI within 150 s"
                time.sleep(1)
        query = json.dumps({"query": "{ assetNodes { assetKey { path } } }"}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                         headers={"content-type": "application/json"})
        deadline = time.monotonic() + 60
        while True:  # the code location may still be loading
            with urllib.request.urlopen(request, timeout=20) as resp:
                nodes = json.loads(resp.read())["data"]["assetNodes"]
            paths = {"/".join(n["assetKey"]["path"]) for n in nodes}
            if "customers/cleaned_data" in paths or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert {"customers/raw_data", "customers/cleaned_data"} <= paths
        deadline = time.monotonic() + 60
        while not _sensor_ticked(home, "customers_drop_folder"):  # the daemon works in the workdir's instance
            assert time.monotonic() < deadline, "no tick of customers_drop_folder in the workdir's instance"
            time.sleep(1)
        assert not list(shop.glob(".tmp_dagster_home_*"))  # no temporary instance, gone with a restart
    finally:
        stop_group(ui)


def _sensor_ticked(home: Path, sensor: str) -> bool:
    import dagster as dg
    from dagster._core.scheduler.instigation import InstigatorType

    with dg.DagsterInstance.from_config(str(home)) as instance:
        return any(s.instigator_name == sensor and instance.get_ticks(s.instigator_origin_id, s.selector_id, limit=1)
                   for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR))
