"""The wheel a user installs: one copy of the prompt templates, found and rendered from an installed wheel; and what
each install brings: the versions of constraints.txt, and only the extras the user chooses."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


DEPLOYMENTS = {"postgres": ("**PostgreSQL.**", "dagster-postgres"), "celery": ("**Celery.**", "dagster-celery"),
               "k8s": ("**Kubernetes.**", "dagster-k8s")}
#: What must stay out of a code location unless the user chooses it.
KEPT_OUT = {"celery", "kubernetes", "playwright", "pytest"}
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
NAME = canonicalize_name(PROJECT["name"])


def _pins() -> dict[str, str]:
    """constraints.txt: each distribution's tested version, names and versions only."""
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line.strip())
        assert match, f"constraints.txt: {line!r} is not NAME==VERSION"
        name = canonicalize_name(match[1])
        assert name not in pins, f"constraints.txt pins {name} twice"
        pins[name] = match[2]
    return pins


def _declared() -> dict[str, list[Requirement]]:
    """pyproject.toml's requirements: the core dependencies under "", then each extra."""
    return {"": [Requirement(r) for r in PROJECT["dependencies"]]} | {
        extra: [Requirement(r) for r in reqs] for extra, reqs in PROJECT["optional-dependencies"].items()
    }


@functools.cache
def _installed_requirements(name: str) -> tuple[Requirement, ...]:
    try:
        return tuple(Requirement(r) for r in metadata.requires(name) or ())
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} is not installed, so what it brings cannot be read: install with the README's test command")


def _closure(extras: frozenset[str]) -> set[str]:
    """Every distribution `pip install ".[extras]"` brings: the requirements pyproject.toml declares for those extras,
    then each installed distribution's own (its metadata), markers evaluated for this interpreter and platform."""
    declared = _declared()
    brought: set[str] = set()
    todo, seen = [(NAME, extras)], set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        brought.add(name)
        if name == NAME:
            reqs = [*declared[""], *(r for extra in sorted(wanted) for r in declared[extra])]
        else:
            reqs = _installed_requirements(name)
        for req in reqs:
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted or {""}):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return brought - {NAME}


def test_constraints_pin_each_requirement_once_within_the_range_pyproject_declares():
    pins = _pins()
    for extra, reqs in _declared().items():
        for req in reqs:
            name = canonicalize_name(req.name)
            if name == NAME:
                continue
            where = f"{req.name} ({'the ' + extra + ' extra' if extra else 'dependencies'})"
            assert not any(s.operator in ("==", "===") for s in req.specifier), \
                f"{where}: pyproject.toml declares a range, the version lives in constraints.txt"
            assert name in pins, f"{where} has no version in constraints.txt"
            assert req.specifier.contains(pins[name], prereleases=True), \
                f"{where}: constraints.txt's {pins[name]} is outside pyproject.toml's {req.specifier}"
    stale = set(pins) - _closure(frozenset({"test"}))
    assert not stale, f"constraints.txt pins what no install brings: {sorted(stale)}"
    lines = [line for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["-c constraints.txt", "-e .[test]"], "requirements.txt: the test environment, versions in constraints.txt"


def test_each_deployment_has_an_extra_named_in_its_docs_section():
    declared = _declared()
    extras = {extra: {canonicalize_name(r.name) for r in reqs} for extra, reqs in declared.items()}
    docs = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    for extra, (heading, distribution) in DEPLOYMENTS.items():
        assert distribution in extras[extra], f"the {extra} extra does not install {distribution}"
        section = docs[docs.index(heading):].split("\n\n")[0]
        assert f'pip install -c constraints.txt ".[{extra}]"' in section
    assert extras["dg"] == {"dagster-dg-cli", "dagster-dg-core", "create-dagster"}
    (everything,) = declared["all"]
    assert canonicalize_name(everything.name) == NAME and everything.extras == {"postgres", "celery", "k8s", "dg"}


def _dagster_project_install() -> frozenset[str]:
    """The extras of the README's install for a Dagster project (its "In your Dagster project" section)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## In your Dagster project"):].split("\n## ")[0]
    (command,) = re.findall(r"^pip install .*$", section, flags=re.M)
    match = re.fullmatch(r'pip install -c (\S*/)?constraints\.txt "(\S*/)?smolclean-dagster\[([\w,]*)\]"', command)
    assert match, f"the README's install for a Dagster project is not the repository with constraints.txt: {command}"
    return frozenset(filter(None, match[3].split(",")))


def test_a_code_location_gets_neither_celery_kubernetes_playwright_nor_pytest_unless_an_extra_names_them():
    kept_in = _closure(_dagster_project_install()) & KEPT_OUT
    assert not kept_in, f"the README's install for a Dagster project brings {sorted(kept_in)}"
    expected = {"": set(), "llm": set(), "postgres": set(), "dg": set(), "celery": {"celery"}, "k8s": {"kubernetes"},
                "all": {"celery", "kubernetes"}, "test": KEPT_OUT}
    assert set(expected) == set(_declared()), "a new extra: say here which of the kept-out packages it brings"
    brought = {extra: _closure(frozenset({extra} - {""})) & KEPT_OUT for extra in expected}
    assert brought == expected
