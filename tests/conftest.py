"""Shared fixtures: a small messy CSV, dataset settings on a temporary workdir, a sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

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
