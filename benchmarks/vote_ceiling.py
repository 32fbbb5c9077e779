"""How far any vote among sources can reach on a pair whose rows are sources' reports on entities (flights).

Run: `python benchmarks/vote_ceiling.py [--data DIR ...] [--datasets flights] [--no-write]`.

Labels teach a vote which sources to trust; this script gives the vote more than any labels can: each source's
true share of right reports in each column, read from the clean file. Each entity then takes, per column, the
value its reports score highest, a report counting by the log-odds of its source's true share (and, in the last
vote, divided among sources that copy each other, as learning counts them). The script prints, per pair:

- the cells no vote can reach (the right value is not among the entity's reports);
- exact precision, recall and F1 of each vote, changing every cell that differs from its entity's voted value;
- the best F1 at precision >= 0.95 when only the entities whose voted value leads the runner-up's score by a
  margin are changed, a margin per column chosen with the truth (as learning chooses them with labels);
- the F1 if only the cells a vote puts right were changed (a perfect judge of which votes to trust: the most a
  vote could reach with this weighing).

It writes them to `benchmarks/results/vote_ceiling.json`.
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

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _f1(right: int, wrong: int, errors: int) -> tuple[float, float, float]:
    precision = right / (right + wrong) if right + wrong else 0.0
    recall = right / errors if errors else 0.0
    return precision, recall, 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _vote(dirty: pd.DataFrame, clean: pd.DataFrame, entity: str, column: str, weight: np.ndarray):
    """Per changed cell of one weighted vote in a column: whether it is right, and its entity's lead (the voted
    value's score less the runner-up's)."""
    reports = pd.DataFrame({"entity": dirty[entity], "value": dirty[column], "weight": weight})
    reports = reports[reports["value"] != ""]
    scores = reports.groupby(["entity", "value"], sort=True)["weight"].sum().reset_index()
    ranked = scores.sort_values(["weight", "value"], ascending=[False, True], kind="stable")
    top = ranked.drop_duplicates("entity")
    runner_up = ranked[~ranked.index.isin(top.index)].drop_duplicates("entity").set_index("entity")["weight"]
    lead = top.set_index("entity")["weight"].sub(runner_up, fill_value=0.0)
    voted = dirty[entity].map(dict(zip(top["entity"], top["value"])))
    changed = voted.notna() & (voted != dirty[column])
    return (voted == clean[column])[changed].to_numpy(), dirty[entity][changed].map(lead).to_numpy()


def _best_margins(right: list[np.ndarray], lead: list[np.ndarray], errors: int) -> float:
    """The best exact F1 at precision >= 0.95 over the margins a changed cell's entity must lead by, one margin per
    column: for each price of a wrong change, each column takes the margin that gains it the most right changes
    less that price times its wrong ones."""
    curves = []  # per column, per margin: right and wrong changes kept
    for r, l in zip(right, lead):
        order = np.argsort(-l, kind="stable")
        r, l = r[order], l[order]
        ends = np.r_[np.flatnonzero(np.diff(l) != 0), len(l) - 1] if len(l) else np.array([], dtype=int)
        kept_right, kept_wrong = np.cumsum(r)[ends], np.cumsum(~r)[ends]
        curves.append((np.r_[0, kept_right], np.r_[0, kept_wrong]))
    best = 0.0
    for price in np.geomspace(0.5, 500, 400):
        picks = [int(np.argmax(cr - price * cw)) for cr, cw in curves]
        kept_right = sum(int(cr[i]) for (cr, _), i in zip(curves, picks))
        kept_wrong = sum(int(cw[i]) for (_, cw), i in zip(curves, picks))
        p, _, f1 = _f1(kept_right, kept_wrong, errors)
        if p >= 0.95:
            best = max(best, f1)
    return best


def ceiling(dirty: pd.DataFrame, clean: pd.DataFrame) -> dict | None:
    """The vote bounds of one pair, or None where its rows are no sources' reports."""
    found = dependencies.reporting_sources(dirty)
    if not found:
        return None
    entity, source = next(iter(found.items()))
    codes = {c: pd.factorize(dependencies.cell_keys(dirty[c])) for c in dirty.columns}
    copies = dependencies._source_weights(entity, source, list(dirty.columns), {c: v[0] for c, v in codes.items()},
                                          {c: v[1] for c, v in codes.items()})
    columns = [c for c in dirty.columns if c not in (entity, source) and (dirty[c] != clean[c]).any()]
    totals = {"errors": 0, "unreachable": 0}
    votes = {"one report, one vote": {}, "true shares": {}, "true shares, copies counted once": {}}
    for c in columns:
        errors = dirty[c] != clean[c]
        reported = set(zip(dirty[entity], dirty[c]))
        reachable = pd.Series([(e, v) in reported for e, v in zip(clean[entity], clean[c])], index=clean.index)
        totals["errors"] += int(errors.sum())
        totals["unreachable"] += int((errors & ~reachable).sum())
        share = (~errors).groupby(dirty[source]).mean().clip(1e-3, 1 - 1e-3)
        log_odds = dirty[source].map(np.log(share / (1 - share))).to_numpy()
        for name, weight in zip(votes, (np.ones(len(dirty)), log_odds, log_odds * copies)):
            right, lead = _vote(dirty, clean, entity, c, weight)
            votes[name].setdefault("right", []).append(right)
            votes[name].setdefault("lead", []).append(lead)
    out = {"entity": entity, "source": source, "columns": columns, **totals, "votes": {}}
    for name, found in votes.items():
        best = _best_margins(found["right"], found["lead"], totals["errors"])
        right = np.concatenate(found["right"])
        p, r, f1 = _f1(int(right.sum()), int((~right).sum()), totals["errors"])
        out["votes"][name] = {"right": int(right.sum()), "wrong": int((~right).sum()), "precision": round(p, 3),
                              "recall": round(r, 3), "f1": round(f1, 3),
                              "f1_at_precision_95": round(best, 3),
                              "f1_right_changes_only": round(_f1(int(right.sum()), 0, totals["errors"])[2], 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", type=Path, default=[SHARED / "data", SHARED / "zeroed"],
                        help="folders of <dataset>/dirty.csv + clean.csv (default: ../shared/benchmarks/data and zeroed)")
    parser.add_argument("--datasets", nargs="*", default=None, help="dataset folder names (default: all)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    rows, results = [], {}
    for folder in args.data:
        for pair in sorted(p for p in folder.iterdir() if (p / "dirty.csv").exists() and (p / "clean.csv").exists()):
            if args.datasets and pair.name not in args.datasets:
                continue
            dirty, clean = _read(pair / "dirty.csv"), _read(pair / "clean.csv")
            if dirty.shape != clean.shape:
                continue
            found = ceiling(dirty, clean)
            if found is None:
                continue
            name = f"{folder.name}/{pair.name}"
            results[name] = found
            for vote, v in found["votes"].items():
                rows.append([name, found["errors"], found["unreachable"], vote, v["precision"], v["recall"], v["f1"],
                             v["f1_at_precision_95"], v["f1_right_changes_only"]])
    print(table(["pair", "errors", "no vote reaches", "vote", "P", "R", "exact F1",
                 "best F1 at P >= 0.95 (margins per column chosen with the truth)", "F1, only the right changes made (P 1)"], rows))
    if not rows:
        print("no pair here has rows that are sources' reports on entities")
    if not args.no_write and results:
        print(f"written: {write_results('vote_ceiling', {'machine': machine_info(), 'pairs': results})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
