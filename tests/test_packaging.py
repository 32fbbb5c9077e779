"""The wheel a user installs: one copy of the prompt templates, found and rendered from an installed wheel."""

from __future__ import annotations

import os
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
        check=True, capture_output=True, text=True,
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
        check=True, capture_output=True, text=True,
    )
    script = (
        "import smolclean_dagster, pandas as pd\n"
        "from smolclean_dagster.core.analysts.base import AnalysisRequest\n"
        "from smolclean_dagster.core.analysts.prompts import analysis_messages, render\n"
        "print(smolclean_dagster.__file__)\n"
        "req = AnalysisRequest(dataset='customers', chunk_id='c0', step=1, chunk=pd.DataFrame({'a': [' x']}))\n"
        "print('RENDERED', 'customers' in analysis_messages(req)[1]['content'])\n"
        "print('MERGE', len(render('consolidation', dataset='d', functions=[], instructions='', allowed_imports=[])))\n"
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
