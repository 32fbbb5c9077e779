"""What validation's cost check measures: CPU time per cell a function touches, for the rules' templates on
the Raha/Baran benchmarks and for a few functions written by hand (vectorised, and loops over cells).

Run: `python benchmarks/cost_per_cell.py [--datasets beers hospital] [--data DIR]`.

For every dataset folder under ../shared/benchmarks/data (dirty.csv) it runs the agent loop with the rules
analyst on the first chunk of 500 rows, with the held-out rows and a sample of 5,000 rows drawn across the
file, exactly as learning does, and records every cost the check measured (`validate.measure_cost`) with its
verdict. Then it measures the hand-written functions on 5,000 rows of 40 text columns, each with its own
values. Writes `benchmarks/results/cost_per_cell.json`; the limit is `validate.MAX_COST_PER_CELL_S`.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd

from common import describe_machine, machine_info, quiet_logs, table, write_results
from smolclean_dagster.core import validate
from smolclean_dagster.core.analysts.rules import RulesAnalyst
from smolclean_dagster.core.functions import CleaningFunction
from smolclean_dagster.core.loop import ChunkWork, LoopSettings, run_chunk
from smolclean_dagster.core.plan import split_drop
from smolclean_dagster.core.registry import RegistryStore
from smolclean_dagster.core.sandbox import Sandbox

DATA = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "data"
WIDE = [f"note{k:02d}" for k in range(40)]
HAND_WRITTEN = {
    "`.str.strip().str.lower()` over 40 columns": (
        "def tidy(df):\n    df = df.copy()\n    for c in df.columns:\n"
        "        df[c] = df[c].str.strip().str.lower()\n    return df\n"),
    "`.str` strip, lower and a regex replace over 40 columns": (
        "def tidy(df):\n    df = df.copy()\n    for c in df.columns:\n"
        "        df[c] = df[c].str.strip().str.lower().str.replace(r'\\s+', ' ', regex=True)\n    return df\n"),
    "a list comprehension with a cheap function over 40 columns": (
        "def tidy(df):\n    df = df.copy()\n    for c in df.columns:\n"
        "        df[c] = [x.strip().lower() for x in df[c]]\n    return df\n"),
    "`iterrows` fixing one column": (
        "def tidy(df):\n    df = df.copy()\n    out = []\n    for _, row in df.iterrows():\n"
        "        out.append(row['note00'].strip())\n    df['note00'] = out\n    return df\n"),
    "a list comprehension with a heavy function on one column": (
        "def tidy(df):\n    df = df.copy()\n    def slow(x):\n        for _ in range(40_000):\n"
        "            x = x.strip()\n        return x.lower()\n    df['note00'] = [slow(x) for x in df['note00']]\n"
        "    return df\n"),
}


def rules_costs(name: str, data: Path, sandbox: Sandbox) -> list[dict]:
    """Every cost the check measured while the rules analyst worked on the first chunk of `name`."""
    df = pd.read_csv(data / name / "dirty.csv", dtype=str, keep_default_na=False)
    plan = split_drop(df, dataset=name, drop=name, chunk_size=500, holdout_fraction=0.05)
    chunk = plan.chunks[0].id
    measured: list[dict] = []
    measure = validate.measure_cost

    def recording(fn, rows, runner, **kwargs):
        per_cell, cells, out = measure(fn, rows, runner, **kwargs)
        measured.append({"dataset": name, "function": fn.name, "us_per_cell": round(per_cell * 1e6, 2),
                         "cells": cells})
        return per_cell, cells, out

    validate.measure_cost = recording
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = ChunkWork(dataset=name, drop=name, chunk_id=chunk, rows=plan.chunk_rows(df, chunk),
                             holdout=plan.holdout_rows(df).iloc[:500], reference=plan.visible_rows(df, limit=20_000),
                             sample=plan.visible_rows(df, limit=validate.COST_ROWS))
            store = RegistryStore(Path(tmp) / "registry.json", name)
            verdicts = {s.function_name: s.accepted for s in run_chunk(work, RulesAnalyst(), store, sandbox,
                                                                         LoopSettings(max_steps=12, timeout_s=60))
                        if s.kind == "verdict"}
    finally:
        validate.measure_cost = measure
    for row in measured:
        row["accepted"] = verdicts.get(row["function"])
    return measured


def hand_written_costs(sandbox: Sandbox) -> list[dict]:
    rows = pd.DataFrame({c: [f"  Note {c} {i} " if i % 2 else f"note {c} {i}" for i in range(validate.COST_ROWS)]
                         for c in WIDE}, dtype=object)
    out = []
    for label, code in HAND_WRITTEN.items():
        per_cell, cells, _ = validate.measure_cost(CleaningFunction.from_code(code), rows, sandbox, timeout_s=120)
        out.append({"function": label, "us_per_cell": round(per_cell * 1e6, 2), "cells": cells})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["beers", "flights", "hospital", "rayyan", "tax_50k"])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    quiet_logs()
    info = machine_info()
    with Sandbox() as sandbox:
        templates = [row for name in args.datasets for row in rules_costs(name, args.data, sandbox)]
        hand = hand_written_costs(sandbox)
    limit = validate.MAX_COST_PER_CELL_S * 1e6
    print(f"limit: {validate.COST_LIMIT}; {describe_machine(info)}\n")
    print(table(["dataset", "rules' function", "us per cell", "cells", "accepted"],
                [[r["dataset"], r["function"], r["us_per_cell"], r["cells"], r["accepted"]] for r in templates]))
    print()
    print(table(["hand-written function", "us per cell", "cells", "within the limit"],
                [[r["function"], r["us_per_cell"], r["cells"], r["us_per_cell"] <= limit] for r in hand]))
    path = write_results("cost_per_cell", {"machine": info, "limit_us_per_cell": limit, "templates": templates,
                                           "hand_written": hand})
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
