"""Cutting a CSV into blocks of whole records when one quoted value spans many lines.

Run: `python benchmarks/csv_blocks.py [--lines 2000 8000 50000]`. Prints a table and writes
benchmarks/results/csv_blocks.json.

`smolclean apply`'s own process and every exported module cut CSV/TSV drops into blocks of whole records
(`drop_io.delimited_blocks`) before the workers parse them. A quoted value that holds line breaks, with a
quote on each of its lines (`""` inside), is the hard case: each line must be looked at once, so the time
grows with the size of the record, not with the square of its number of lines. Each size is timed as the
median of three runs, on a file holding the long record between two short ones.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import describe_machine, machine_info, table, write_results  # noqa: E402
from smolclean_dagster.core.drop_io import delimited_blocks  # noqa: E402


def long_record_csv(path: Path, lines: int) -> int:
    """Write a CSV whose second record holds a quoted value of `lines` lines, each with a `""` inside."""
    value = "\n".join(f'line {i} says ""hello"", then more text' for i in range(lines))
    path.write_text(f'id,text,tail\n1,short,a\n2,"{value}",b\n3,short,c\n', encoding="utf-8")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[2000, 4000, 8000, 50000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.csv"
        for lines in args.lines:
            size = long_record_csv(path, lines)
            times = []
            for _ in range(3):
                started = time.perf_counter()
                blocks = list(delimited_blocks(path, ",", 10_000))
                times.append(time.perf_counter() - started)
            assert sum(n for _, n, _ in blocks) == 3
            seconds = statistics.median(times)
            rows.append({"lines": lines, "bytes": size, "seconds": round(seconds, 4),
                         "mb_per_s": round(size / seconds / 1e6, 1)})
    info = machine_info()
    print(f"Cutting a CSV with one quoted value of N lines into blocks ({describe_machine(info)})")
    print(table(["lines in the value", "file bytes", "seconds (median of 3)", "MB/s"],
                [[r["lines"], r["bytes"], r["seconds"], r["mb_per_s"]] for r in rows]))
    print(write_results("csv_blocks", {"machine": info, "runs": rows}))


if __name__ == "__main__":
    main()
