"""Peak memory and speed of `smolclean apply` on a big CSV: the whole process tree, orchestrator and sandbox workers.

Run: `python benchmarks/apply_memory.py [--size-mb 1024] [--workers 1 2] [--batch-size 20000] [--keep DIR]`.

It writes a messy CSV of about `--size-mb` MB in a temporary folder (customers-like columns with padding,
case variants, money strings, mixed dates, null tokens), writes a typical cleaning module, and runs the
real command (`python -m smolclean_dagster.cli apply MODULE CSV -o OUT.parquet`) once per worker count.
While it runs, /proc is polled every 50 ms for every process in the command's tree (the CLI, the sandbox
zygotes and their forked children) and two sums are kept:

- RSS: resident memory of each process added up. Pages a zygote shares with its forked child are counted
  twice, so this overstates what the machine really spends; it is the conservative number.
- PSS: proportional set size (shared pages split between the processes sharing them): what the tree
  really costs the machine.

Target: peak RSS of the tree <= 600 MB on a 1 GB file. Prints a table and writes
benchmarks/results/apply_memory.json.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import describe_machine, machine_info, run_measured, table, write_results  # noqa: E402

TARGET_RSS_MB = 600
POLL_S = 0.05

MODULE = '''"""Cleaning module for dataset 'customers' (benchmark).

Registry version: 1
"""

import pandas as pd


def strip_text(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around names and cities."""
    df = df.copy()
    for column in ("name", "city"):
        df[column] = df[column].str.strip()
    return df


def unify_city(df: pd.DataFrame) -> pd.DataFrame:
    """Write each city in its usual case ("new york" -> "New York")."""
    df = df.copy()
    canonical = {"new york": "New York", "boston": "Boston", "chicago": "Chicago", "austin": "Austin"}
    key = df["city"].str.lower()
    known = key.isin(canonical.keys())
    df.loc[known, "city"] = key[known].map(canonical)
    return df


def null_tokens(df: pd.DataFrame) -> pd.DataFrame:
    """Turn "N/A" and "-" into real nulls in spend."""
    df = df.copy()
    df["spend"] = df["spend"].where(~df["spend"].isin(["N/A", "-"]), None)
    return df


def parse_spend(df: pd.DataFrame) -> pd.DataFrame:
    """Read "$1,200.50" as the number 1200.5."""
    df = df.copy()
    df["spend"] = pd.to_numeric(df["spend"].str.replace(r"[$,]", "", regex=True), errors="coerce")
    return df


def iso_dates(df: pd.DataFrame) -> pd.DataFrame:
    """Write signup dates as ISO (03/14/2023 -> 2023-03-14)."""
    df = df.copy()
    us = df["signup"].str.match(r"^\\d{2}/\\d{2}/\\d{4}$", na=False)
    parts = df.loc[us, "signup"].str.split("/", expand=True)
    if len(parts):
        df.loc[us, "signup"] = parts[2] + "-" + parts[0] + "-" + parts[1]
    return df


def booleans(df: pd.DataFrame) -> pd.DataFrame:
    """Spell active as true/false."""
    df = df.copy()
    df["active"] = df["active"].str.lower().map({"yes": "true", "y": "true", "true": "true",
                                                 "no": "false", "n": "false", "false": "false"})
    return df


FUNCTIONS = [strip_text, unify_city, null_tokens, parse_spend, iso_dates, booleans]


def clean(df: pd.DataFrame) -> pd.DataFrame:
    """Apply every cleaning function in order."""
    for function in FUNCTIONS:
        df = function(df)
    return df
'''


def write_csv(path: Path, size_mb: float) -> int:
    """A messy customers CSV of about `size_mb` MB; returns its row count."""
    rng = np.random.default_rng(0)
    cities = np.array([" New York", "new york", "NEW YORK", "Boston ", "boston", "Chicago", "chicago ", "Austin"])
    actives = np.array(["yes", "no", "Y", "N", "true", "false"])
    target, rows, block = size_mb * 1e6, 0, 200_000
    with path.open("w", encoding="utf-8", newline="") as fh:
        fh.write("id,name,email,city,signup,spend,active\n")
        while fh.tell() < target:
            ids = np.arange(rows, rows + block)
            spend = rng.random(block) * 5000
            frame = pd.DataFrame({
                "id": ids,
                "name": pd.Series(ids % 9973).map(lambda i: f"  Customer {i} "),
                "email": pd.Series(ids).map(lambda i: f"c{i}@example.com"),
                "city": cities[ids % len(cities)],
                "signup": np.where(ids % 3 == 0, "03/14/2023", "2023-01-05"),
                "spend": np.where(ids % 11 == 0, "N/A", pd.Series(spend).map(lambda v: f"${v:,.2f}")),
                "active": actives[ids % len(actives)],
            })
            frame.to_csv(fh, header=False, index=False)
            rows += block
    return rows


def run_apply(module: Path, csv: Path, out: Path, *, workers: int, batch_size: int) -> dict:
    """Run `smolclean apply` and poll its process tree's memory until it ends."""
    cmd = [sys.executable, "-m", "smolclean_dagster.cli", "apply", str(module), str(csv), "-o", str(out),
           "--workers", str(workers), "--batch-size", str(batch_size)]
    result = run_measured(cmd, poll_s=POLL_S)
    rows = int(re.search(r"cleaned (\d+) rows", result["stdout"]).group(1))
    return {
        "workers": workers,
        "batch_size": batch_size,
        "rows": rows,
        "seconds_total": result["seconds"],
        "rows_per_s": round(rows / result["seconds"]),
        "peak_rss_mb": result["peak_rss_mb"],
        "peak_pss_mb": result["peak_pss_mb"],
        "peak_processes": result["peak_processes"],
        "output_mb": round(out.stat().st_size / 1e6, 1),
        "within_target": result["peak_rss_mb"] <= TARGET_RSS_MB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024, help="size of the generated CSV (default 1 GB)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to measure")
    parser.add_argument("--batch-size", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, help="keep the generated files in this folder")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="smolclean-apply-bench-"))
    try:
        csv, module = folder / "customers.csv", folder / "clean_customers.py"
        module.write_text(MODULE, encoding="utf-8")
        started = time.perf_counter()
        rows = write_csv(csv, args.size_mb)
        size_mb = round(csv.stat().st_size / 1e6, 1)
        print(f"wrote {csv.name}: {size_mb} MB, {rows} rows in {time.perf_counter() - started:.0f} s")
        runs = []
        for workers in args.workers:
            result = run_apply(module, csv, folder / f"out_{workers}.parquet", workers=workers, batch_size=args.batch_size)
            runs.append(result)
            print(f"  {workers} worker(s): {result['seconds_total']} s, peak RSS {result['peak_rss_mb']} MB")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in folder.iterdir():
                shutil.copy(path, args.keep / path.name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    info = machine_info()
    payload = {"input_mb": size_mb, "rows": rows, "target_peak_rss_mb": TARGET_RSS_MB, "runs": runs, "machine": info}
    path = write_results("apply_memory", payload)
    print()
    print(f"`smolclean apply` on a {size_mb} MB CSV ({rows:,} rows), {describe_machine(info)}, "
          f"load {info['load_average_1min']}")
    print(table(
        ["workers", "batch rows", "seconds", "rows/s", "peak RSS MB (tree)", "peak PSS MB (tree)", "processes", f"RSS <= {TARGET_RSS_MB} MB"],
        [[r["workers"], r["batch_size"], r["seconds_total"], r["rows_per_s"], r["peak_rss_mb"], r["peak_pss_mb"],
          r["peak_processes"], "yes" if r["within_target"] else "NO"] for r in runs],
    ))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
