"""Shared fixtures (a small messy CSV, a sandbox) and the summary of what a test run could not check here."""

from __future__ import annotations

import ctypes.util
import glob
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

#: Debian's packages the end-to-end tests need (.ci/run installs them), and how to tell each is there.
SYSTEM_PACKAGES: dict[str, Callable[[], bool]] = {
    "libseccomp2": lambda: ctypes.util.find_library("seccomp") is not None,
    "postgresql": lambda: bool(glob.glob("/usr/lib/postgresql/*/bin/initdb")),
    "redis-server": lambda: shutil.which("redis-server") is not None,
    "chromium": lambda: (shutil.which("chromium") or shutil.which("chromium-browser")) is not None,
}

MESSY_CSV = """id,name,city,signup,spend,active
1,  Ann Lee ,new york,2023-01-05,$1200.50,yes
2,Bob Stone,New York,2023-02-11,$85.00,no
3,Cara  Diaz,NEW YORK,03/14/2023,N/A,Y
4,Dan Roe,Boston,2023-04-02,$1500.00,true
5,Eve Park,boston,2023-05-19,$2000.00,no
6,Finn Ode,Boston,2023-06-30,N/A,yes
7,Gus Hale,Chicago ,07/04/2023,$320.10,no
8,Hana Yu,Chicago,2023-08-15,$45.99,yes
9,Ivan Orr,chicago,2023-09-01,$1000.00,N
10,Jo Kim,Chicago,2023-10-10,$12.00,yes
"""


@pytest.fixture
def messy_csv(tmp_path: Path) -> Path:
    """A CSV with whitespace, case variants, currency, null tokens, mixed dates and boolean spellings."""
    rows = MESSY_CSV.strip().splitlines()
    header, body = rows[0], rows[1:]
    # 60 rows so that there are several chunks and held-out rows.
    lines = [header] + [
        ",".join([str(i * 10 + int(r.split(",")[0]))] + r.split(",")[1:]) for i in range(6) for r in body
    ]
    path = tmp_path / "input" / "people.csv"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def sandbox():
    from smolclean_dagster.sandbox import Sandbox

    with Sandbox() as sb:
        yield sb


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say what this run did not check and why: skipped tests by reason, and the system packages missing here.

    A skipped test is not a passed one: on a machine without PostgreSQL, Redis or Chromium the deployment
    and UI tests are skipped, and the summary says so instead of a bare count.
    """
    skipped = terminalreporter.stats.get("skipped", [])
    missing = [name for name, present in SYSTEM_PACKAGES.items() if not present()]
    if not skipped and not missing:
        return
    terminalreporter.section("what this run did not check")
    reasons = Counter(_skip_reason(report) for report in skipped)
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.write_line(f"{count} test(s) skipped: {reason}")
    terminalreporter.write_line(
        "system packages of the end-to-end tests: "
        + ", ".join(f"{name} {'MISSING' if name in missing else 'installed'}" for name in SYSTEM_PACKAGES)
    )
    if missing:
        terminalreporter.write_line(f"to run those tests: apt-get install {' '.join(missing)} (.ci/run installs them)")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")
