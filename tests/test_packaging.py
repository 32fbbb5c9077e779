"""The wheel a user installs: one copy of the prompt templates, found and rendered from an installed wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built offline from a copy of the sources (building in place would leave build/ behind)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("smolclean_dagster", "prompts"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src), "-w", str(out)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (found,) = out.glob("smolclean_dagster-*.whl")
    return found


def test_the_templates_live_once_in_the_top_level_prompts_folder():
    assert sorted(p.name for p in (ROOT / "prompts").glob("*.yaml")) == ["analysis.yaml", "consolidation.yaml"]
    assert not list((ROOT / "smolclean_dagster").rglob("*.yaml")), "a second copy of a template inside the package"


def test_the_wheel_ships_each_template_once_and_every_module(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for template in ("analysis.yaml", "consolidation.yaml"):
        assert [n for n in names if n.endswith("/" + template)] == [f"smolclean_dagster/prompts/{template}"]
    sources = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "smolclean_dagster").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert sources - set(names) == set(), "modules missing from the wheel: list their package in pyproject.toml"


def test_an_installed_wheel_finds_and_renders_its_templates(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    script = (
        "import smolclean_dagster, pandas as pd\n"
        "from smolclean_dagster.core.analysts.base import AnalysisRequest\n"
        "from smolclean_dagster.core.analysts.prompts import analysis_messages, merge_messages\n"
        "print(smolclean_dagster.__file__)\n"
        "req = AnalysisRequest(dataset='customers', chunk_id='c0', step=1, chunk=pd.DataFrame({'a': [' x']}))\n"
        "print('RENDERED', 'customers' in analysis_messages(req)[1]['content'])\n"
        "print('MERGE', len(merge_messages('d', [])))\n"
    )
    # The wheel's copy comes first on the path; the editable install's finder only answers after it.
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert Path(lines[0]).is_relative_to(target)
    assert lines[1] == "RENDERED True"
    assert lines[2] == "MERGE 2"


def test_the_test_summary_says_what_was_skipped_and_which_system_package_is_missing():
    """On a machine without chromium (here: a PATH that cannot find it) the UI test is skipped, and says why."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ui_browser.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "what this run did not check" in out, out
    assert re.search(r"\d+ test\(s\) skipped: chromium is not installed \(apt-get install chromium", out), out
    assert "chromium MISSING" in out and "redis-server MISSING" in out
    assert re.search(r"to run those tests: apt-get install .*chromium", out)


DEPLOYMENTS = {"postgres": ("**PostgreSQL.**", "dagster_postgres"), "celery": ("**Celery.**", "dagster_celery"),
               "k8s": ("**Kubernetes.**", "dagster_k8s")}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def test_each_deployment_has_an_extra_pinned_as_requirements_and_named_in_its_docs_section(wheel):
    from packaging.requirements import Requirement

    metadata = zipfile.ZipFile(wheel).read("smolclean_dagster-0.1.0.dist-info/METADATA").decode()
    extras: dict[str, dict[str, str]] = {}
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" in line:
            req = Requirement(line.removeprefix("Requires-Dist:").strip())
            extra = re.search(r'extra == "(\w+)"', str(req.marker)).group(1)
            extras.setdefault(extra, {})[req.name.lower()] = str(req.specifier).removeprefix("==") or ",".join(sorted(req.extras))
    pins = _pins()
    readme = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    for extra, (heading, module) in DEPLOYMENTS.items():
        assert module.replace("_", "-") in extras[extra], f"the {extra} extra does not install {module}"
        for name, version in extras[extra].items():
            assert version == pins[name], f"{name} is {version} in the {extra} extra, {pins[name]} in requirements.txt"
        section = readme[readme.index(heading):].split("\n\n")[0]
        assert f'pip install "smolclean-dagster[{extra}]"' in section
    assert extras["dg"] == {n: pins[n] for n in ("dagster-dg-cli", "dagster-dg-core", "create-dagster")}
    assert extras["all"] == {"smolclean-dagster": "celery,dg,k8s,postgres"}
