"""What every benchmark shares: the machine it ran on, result files, and plain-text tables."""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().with_name("results")
REPO = Path(__file__).resolve().parents[1]


def machine_info() -> dict:
    """Enough about the machine to compare runs: CPUs, memory, Python, library versions, load, date."""
    import pandas as pd
    import pyarrow as pa

    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pandas": pd.__version__,
        "pyarrow": pa.__version__,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    try:
        import dagster

        info["dagster"] = dagster.__version__
    except ImportError:  # pragma: no cover - dagster is a dependency
        pass
    return info


def describe_machine(info: dict) -> str:
    """One line for a table's caption."""
    return (
        f"{info['cpus']} CPU(s) ({info.get('cpu_model') or 'unknown CPU'}), {info.get('memory_gb')} GB RAM, "
        f"Python {info['python']}, pandas {info['pandas']}, {info['date'][:10]}"
    )


def write_results(name: str, payload: dict) -> Path:
    """Write `benchmarks/results/<name>.json` and return its path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A GitHub-flavoured markdown table (it also reads well in a terminal)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def quiet_logs() -> None:
    """Keep Dagster's and smolclean's own logging out of the benchmark's output."""
    import logging
    import warnings

    logging.getLogger("dagster").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    sys.stdout.reconfigure(line_buffering=True)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def process_tree(root: int) -> dict[int, int]:
    """The pid `root` and every process below it (sandbox zygotes, their forked children), each with its depth
    under `root` (0 for `root`)."""
    todo, seen = [(root, 0)], {}
    while todo:
        pid, depth = todo.pop()
        seen[pid] = depth
        todo += [(child, depth + 1) for child in _children(pid)]
    return seen


def proc_kb(path: str, field: str) -> int:
    """One `Field: N kB` value of a /proc file, 0 when the process is gone."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_measured(cmd: list[str], poll_s: float = 0.05) -> dict:
    """Run a command to its end, polling /proc for the memory of its whole process tree.

    Returns seconds, peak RSS (each process's resident memory added up: pages a zygote shares with its
    forked child count twice, the conservative number), peak PSS (shared pages split: what the tree really
    costs), the most processes at once, each process's own peaks by its place in the tree (`by_process`:
    the command, then its children and their children, as "parent", "child", "grandchild"), each process's
    RSS at the moment of the tree's peak in the same order (`rss_mb_at_peak`), and the command's stdout.
    """
    import subprocess
    import time

    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = peak_procs = 0
    at_peak: dict[int, int] = {}
    depth: dict[int, int] = {proc.pid: 0}
    own: dict[int, list[int]] = {}
    while proc.poll() is None:
        pids = process_tree(proc.pid)
        depth.update(pids)
        sizes = {p: (proc_kb(f"/proc/{p}/status", "VmRSS:"), proc_kb(f"/proc/{p}/smaps_rollup", "Pss:")) for p in pids}
        for pid, (rss_kb, pss_kb) in sizes.items():
            before = own.get(pid, [0, 0])
            own[pid] = [max(before[0], rss_kb), max(before[1], pss_kb)]
        rss, pss = sum(r for r, _ in sizes.values()), sum(p for _, p in sizes.values())
        if rss > peak_rss:
            at_peak = {pid: r for pid, (r, _) in sizes.items() if r}
        peak_rss, peak_pss, peak_procs = max(peak_rss, rss), max(peak_pss, pss), max(peak_procs, len(pids))
        time.sleep(poll_s)
    stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{stderr[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak_rss / 1024), "peak_pss_mb": round(peak_pss / 1024),
            "peak_processes": peak_procs,
            "by_process": [{"place": ("parent", "child", "grandchild")[min(depth.get(pid, 2), 2)],
                            "peak_rss_mb": round(r / 1024), "peak_pss_mb": round(p / 1024)}
                           for pid, (r, p) in sorted(own.items(), key=lambda kv: (depth.get(kv[0], 2), kv[0])) if r],
            "rss_mb_at_peak": [round(at_peak[pid] / 1024) for pid in sorted(at_peak, key=lambda p: (depth.get(p, 2), p))],
            "stdout": stdout}
