"""What the sandbox costs: in-process vs a fresh fork per call vs a reused batch worker, on 1k and 100k rows.

Run: `python benchmarks/sandbox_bench.py [--repeats 30]`. Prints a table of medians and writes
benchmarks/results/sandbox.json. The in-process row runs the same code with plain exec(), which is only
acceptable here because the code is ours.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

from smolclean_dagster.core.sandbox import wire
from smolclean_dagster.core.sandbox.gate import prepare
from smolclean_dagster.sandbox import Sandbox

RESULTS = Path(__file__).with_name("results") / "sandbox.json"

MODULE = '''"""A typical accepted cleaning module."""
import pandas as pd


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Strip names, parse money and dates, drop duplicate ids."""
    df = df.copy()
    df["name"] = df["name"].str.strip().str.title()
    df["spend"] = pd.to_numeric(df["spend"].str.replace(r"[$,]", "", regex=True), errors="coerce")
    df["signup"] = pd.to_datetime(df["signup"], errors="coerce", format="mixed")
    return df.drop_duplicates(subset=["id"])
'''


def make_frame(rows: int) -> pd.DataFrame:
    """A messy frame shaped like a real drop: text with padding, money strings, mixed dates."""
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "id": rng.integers(0, rows, rows),
        "name": [f"  name {i % 997} " for i in range(rows)],
        "spend": [f"${v:,.2f}" if v > 5 else "N/A" for v in rng.random(rows) * 2000],
        "signup": np.where(rng.random(rows) > 0.5, "2023-01-05", "03/14/2023"),
    })


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up call, not timed
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - started) * 1e3)
    return statistics.median(timings)


def measure(repeats: int) -> dict:
    namespace: dict = {}
    exec(compile(MODULE, "<bench>", "exec"), namespace)  # noqa: S102  (our own code, see the docstring)
    in_process = namespace["clean"]
    results: dict = {"rows": {}}
    with Sandbox(workers=1) as sb:
        results["level"] = sb.level.describe()
        results["gate_ms"] = median_ms(lambda: prepare(MODULE, module=True), repeats)
        with sb.batch_runner(MODULE, recycle_after=10_000) as runner:
            for rows in (1_000, 100_000):
                df = make_frame(rows)
                n = repeats if rows <= 10_000 else max(5, repeats // 3)
                results["rows"][str(rows)] = {
                    "in_process_ms": median_ms(lambda: in_process(df), n),
                    "arrow_roundtrip_ms": median_ms(lambda: wire.decode_frame(wire.encode_frame(df)), n),
                    "fork_per_call_ms": median_ms(lambda: sb.run(MODULE, df, module=True), n),
                    "batch_worker_ms": median_ms(lambda: runner.run(df), n),
                    "repeats": n,
                }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    results = measure(args.repeats)
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "kernel": platform.release(), "pandas": pd.__version__,
                          "load_average_1min": round(os.getloadavg()[0], 2)}  # medians drift on a busy box
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

    columns = ("in_process_ms", "arrow_roundtrip_ms", "fork_per_call_ms", "batch_worker_ms")
    print(f"sandbox: {results['level']}")
    print(f"AST gate: {results['gate_ms']:.2f} ms (median)")
    print(f"{'rows':>8} | " + " | ".join(f"{c.removesuffix('_ms'):>16}" for c in columns) + "   (median ms)")
    for rows, row in results["rows"].items():
        print(f"{rows:>8} | " + " | ".join(f"{row[c]:>16.1f}" for c in columns))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
