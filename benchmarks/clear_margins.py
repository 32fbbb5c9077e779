"""How far a labelled vote's margins reach, and what they settle wrong, on made-up reports of many sources.

Run: `python benchmarks/clear_margins.py [--drops 60] [--no-write]`.

Each drop is 100 entities (say flights), each reported by 9 sites (3 right on 60-85% of them, 6 on 30-60%, each
wrong on its own) and by 9 mirrors of one feed, wrong together on a share of the entities (`--together`: 0.6 and
0.8 by default) and right together on the rest, with slips of their own; a tenth of the reports are missing. Two
columns are reported. A person labels one row of each of 20 entities. `dependencies.learn` then weighs the
sources by the labels; where the weighed votes settle too few labelled entities, the clear votes repair the
entities whose value leads by a margin, the lowest of `CLEAR_MARGINS` the labelled entities validate, and that
`MIN_BACKERS` sources of some weight report. The script counts, over every drop, the entities the repair tables
settle right and wrong: as the code does, with steps of 1 (1, 2, 3) for margins, and with one source enough to
settle an entity; it writes them to `benchmarks/results/clear_margins.json`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_info, table, write_results  # noqa: E402
from smolclean_dagster.core.detectors import dependencies  # noqa: E402

COLUMNS = ("arr", "dep")


def reports(seed: int, together: float, entities: int = 100) -> tuple[pd.DataFrame, dict[str, dict[str, str]]]:
    """One drop of source x entity reports and each entity's right values."""
    rng = np.random.default_rng(seed)
    sites = [(f"site{i}", rng.uniform(0.6, 0.85)) for i in range(3)]
    sites += [(f"site{i}", rng.uniform(0.3, 0.6)) for i in range(3, 9)]
    rows, truth = [], {}

    def slip(hour: int) -> str:
        return f"{hour}:{rng.integers(0, 60):02d} p.m."

    for t in range(entities):
        entity, hour = f"E{t}", 1 + t % 11
        right = {c: f"{hour}:{(7 * t + 13 * k) % 60:02d} p.m." for k, c in enumerate(COLUMNS)}
        feed = {c: f"{hour}:{(7 * t + 13 * k + rng.integers(1, 5)) % 60:02d} p.m." for k, c in enumerate(COLUMNS)}
        wrong = {c: rng.random() < together for c in COLUMNS}
        for source, p in sites:
            if rng.random() >= 0.1:
                rows.append({"entity": entity, "src": source,
                             **{c: right[c] if rng.random() < p else slip(hour) for c in COLUMNS}})
        for k in range(9):
            if rng.random() >= 0.1:
                fed = {c: feed[c] if wrong[c] else right[c] for c in COLUMNS}
                rows.append({"entity": entity, "src": f"mirror{k}",
                             **{c: fed[c] if rng.random() < 0.9 else slip(hour) for c in COLUMNS}})
        truth[entity] = right
    return pd.DataFrame(rows, dtype=object), truth


def settled(frame: pd.DataFrame, truth: dict, labelled: pd.DataFrame, margins: tuple[float, ...],
            backers: int) -> tuple[int, int]:
    """Entities the learned repair tables settle right and wrong, with these margins and backers."""
    kept = dependencies.CLEAR_MARGINS, dependencies.MIN_BACKERS
    dependencies.CLEAR_MARGINS, dependencies.MIN_BACKERS = margins, backers
    try:
        learned = dependencies.learn(frame, truth=labelled)
    finally:
        dependencies.CLEAR_MARGINS, dependencies.MIN_BACKERS = kept
    right = wrong = 0
    for d in learned.dependencies:
        for key, value in d.mapping.items():
            right, wrong = (right + 1, wrong) if truth[key][d.dependent] == value else (right, wrong + 1)
    return right, wrong


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drops", type=int, default=60, help="made-up drops per share (default: 60)")
    parser.add_argument("--together", type=float, nargs="+", default=[0.6, 0.8],
                        help="shares of the entities the mirrors report wrong together (default: 0.6 0.8)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    code = dependencies.CLEAR_MARGINS, dependencies.MIN_BACKERS
    variants = {"the code's (CLEAR_MARGINS, MIN_BACKERS)": code,
                "margins in steps of 1 (1, 2, 3)": ((1.0, 2.0, 3.0), code[1]),
                "one source settles an entity": (code[0], 1)}
    rows, results = [], []
    for together in args.together:
        totals = {name: [0, 0] for name in variants}
        for seed in range(args.drops):
            frame, truth = reports(seed, together)
            picked = np.random.default_rng(1000 + seed).choice(sorted(truth), 20, replace=False)
            labelled = frame[frame["entity"].isin(picked)].groupby("entity").head(1).copy()
            for c in COLUMNS:
                labelled[c] = labelled["entity"].map(lambda e, c=c: truth[e][c])
            for name, (margins, backers) in variants.items():
                right, wrong = settled(frame, truth, labelled, margins, backers)
                totals[name][0] += right
                totals[name][1] += wrong
        for name, (right, wrong) in totals.items():
            rows.append([together, name, right, wrong])
            results.append({"mirrors_wrong_together": together, "votes": name, "right": right, "wrong": wrong})
    print(table(["mirrors wrong together", "votes", "entities settled right", "settled wrong"], rows))
    print(f"({args.drops} drops each; margins in use: {', '.join(f'{m:g}' for m in code[0])}; "
          f"sources backing a voted value: at least {code[1]})")
    if not args.no_write:
        path = write_results("clear_margins", {"machine": machine_info(), "drops": args.drops, "results": results})
        print(f"written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
