"""Cleaning quality on the Raha/Baran dirty/clean benchmarks: the learning flow with the rules analyst
(zero labels), scored cell by cell beside the published numbers of other systems.

Run: `python benchmarks/quality.py [--datasets beers hospital] [--data DIR ...] [--keep DIR] [--instructions TEXT]`.
With a model: `--model openai/agent --api-base http://127.0.0.1:8765/v1 [--llm-log QUEUE/log.jsonl]` learns with
the hybrid analyst (the model decides every step) and counts its calls and tokens from the endpoint's log.

For every dataset folder (dirty.csv + clean.csv) under ../shared/benchmarks/data and ../shared/benchmarks/zeroed
(the same tables with another generator's errors; shown as "zeroed/<name>") it learns a module with
the real flow, `smolclean_dagster.learning.embedded.learn()`, on a fresh temporary workdir (Dagster runs, chunk
waves, the sandbox, validation, export), cleans the whole dirty file with the exported module (the
`cleaned_data` asset: sandboxed batches), and scores the cleaned cells against clean.csv.

Then the next drop: a module is learned the same way from the first half of the rows only, and cleans the
second half as `smolclean apply` does (sandboxed batches); those cells are scored against the second half
of clean.csv. That is the product's use: a module learned once cleans files it never saw. Beside it, the
whole-file module's score on the same second half, so the two compare on the same cells.

Exact F1 is the headline and the only figure printed beside the published numbers; the
representation-insensitive score is a separate, labelled column of our own table.

Scoring follows Raha/Baran (raha/dataset.py): every cell read as a string (dtype=str,
keep_default_na=False), normalised (html.unescape, runs of tab/newline/space -> one space, strip),
cells aligned by POSITION (the headers of dirty and clean differ for hospital and beers). A null the
module writes counts as the empty string.

- exact: an error is a cell whose normalised dirty value differs from the clean one; a change is a cell
  whose cleaned value differs from the dirty one; a change is correct when it equals the clean value.
  precision = correct / changes, recall = correct / errors, F1 their harmonic mean.
- representation-insensitive: the same, with "differs" and "equals" read through `same_value` below:
  two cells are the same value when they are equal ignoring case, both spell "no value" ("" or a null
  marker such as "N/A"), are the same number ("12.0" = "12", "01907" = "1907", float noise
  "0.055999999999999994" = "0.056"), the same time of day ("7:10 a.m." = "07:10"), or the same date
  read with day, month and year in some order (two-digit years 1969-2068: "1/1/14" = "2014-01-01" =
  "1/14/01", the Excel-mangled form rayyan's clean file holds). Errors that are only a representation
  then stop counting as errors, and changes that only rewrite a representation stop counting as changes:
  the score neither rewards nor punishes them. It cannot reward destroying information: a change counts
  only when the new value differs in substance from the dirty one AND means what the clean one means.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import itertools
import json
import logging
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import describe_machine, machine_info, quiet_logs, table, write_results  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks"
DATA = SHARED / "data"
#: Folders scored by default: the published pairs, and the same tables with another generator's errors.
DEFAULT_DATA = (DATA, SHARED / "zeroed")
#: Do no harm: a cell the module changes must come out right; this precision is the bar in both settings.
PRECISION_BAR = 0.95

#: Published F1 of error correction (see ../shared/research/landscape.md for the sources).
PUBLISHED = {
    "Baran, perfect detection": {"hospital": .87, "flights": 1.0, "beers": .90, "rayyan": .52, "tax_50k": .81},
    "Raha + Baran, 20 labelled tuples": {"hospital": .67, "flights": .67, "beers": .90, "rayyan": .28, "tax_50k": .80},
    "Raha + Baran, re-run (mimir)": {"hospital": .637, "flights": .576, "beers": .897, "rayyan": .394, "tax_50k": .701},
    "Raha + Mimir, 20 labels + GPT": {"hospital": .695, "flights": .39, "beers": .961, "rayyan": .549, "tax_50k": .543},
    "HoloClean, perfect detection + DCs": {"hospital": .83, "flights": .76, "beers": .01, "rayyan": 0, "tax_50k": .11},
    "GIDCL, 20 labels + fine-tuned 7B": {"hospital": .97, "flights": .93, "beers": .97, "rayyan": .86, "tax_50k": .95},
    "Jellyfish-13B": {"hospital": .77, "flights": .73, "beers": .69, "rayyan": .58, "tax_50k": .74},
    "Garf": {"hospital": .61, "flights": .35, "beers": .04, "rayyan": .37, "tax_50k": .56},
    "FM prompting (Narayan et al.)": {"hospital": .481, "flights": .014, "beers": .439, "rayyan": .002, "tax_50k": .006},
}
#: The issue's targets: (score, F1 at least).
TARGETS = {"beers": ("exact", 0.95), "hospital": ("exact", 0.75), "flights": ("exact", 0.60),
           "rayyan": ("insensitive", 0.28), "tax_50k": ("insensitive", 0.80)}
#: Rows of the files the published numbers were measured on, where ours differ: said beside every figure.
PUBLISHED_ROWS = {"tax_50k": 200_000}
ORDER = ("beers", "hospital", "flights", "rayyan", "tax_50k")


# ---------------------------------------------------------------------------------------------- scoring

def normalise(value: str) -> str:
    """Raha/Baran's value normaliser: html-unescape, collapse tab/newline/space runs, strip."""
    return re.sub(r"[\t\n ]+", " ", html.unescape(value)).strip("\t\n ")


#: Spellings of "no value" for the representation-insensitive comparison (compared case-folded).
NULL_MARKERS = frozenset({"", "n/a", "na", "n.a.", "#n/a", "null", "none", "nan", "nil", "-", "--", "?", "<na>"})
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?")
_TIME = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:([ap])\.?\s?m\.?)?", re.IGNORECASE)
_NUMERIC_DATE = re.compile(r"(\d{1,4})[/.-](\d{1,2}|\d{4})[/.-](\d{1,4})(?:[ T](.+))?")
_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_WORD_DATE = re.compile(r"(?i)(?:(\d{1,4})[\s,./-]+)?([a-z]{3,9})\.?(?:[\s,./-]+(\d{1,4}))?(?:[\s,./-]+(\d{1,4}))?")


def _number(v: str) -> str | None:
    if not _NUMBER.fullmatch(v):
        return None
    try:
        return f"{float(v.replace(',', '')):.12g}"
    except ValueError:
        return None


def _time(v: str) -> tuple[int, int, int] | None:
    m = _TIME.fullmatch(v)
    if not m:
        return None
    hour, minute, second = int(m[1]), int(m[2]), int(m[3] or 0)
    if m[4]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m[4].lower() == "p" else 0)
    return (hour, minute, second) if hour < 24 and minute < 60 and second < 60 else None


def _year(part: str) -> int:
    y = int(part)
    if len(part) <= 2:
        return y + (1900 if y >= 69 else 2000)
    return y


def _dates(v: str) -> frozenset[tuple] | None:
    """Every reading of a date-looking value as (year, month, day, time); None when it is no date.

    Day, month and year may come in any order (a reading is kept when it is a real calendar date); a
    month name with one number gives (None, month, day) and (year, month, None) readings."""
    m = _NUMERIC_DATE.fullmatch(v)
    if m:
        clock = None
        if m[4]:
            clock = _time(m[4].strip())
            if clock is None:
                return None
        readings = set()
        for y, mo, d in itertools.permutations((m[1], m[2], m[3])):
            if len(mo) > 2 or len(d) > 2 or len(y) == 3:
                continue
            try:
                readings.add((dt.date(_year(y), int(mo), int(d)), clock))
            except ValueError:
                continue
        return frozenset(readings) or None
    m = _WORD_DATE.fullmatch(v)
    if not m or m[2][:3].lower() not in _MONTHS or m[2].lower() not in _month_names(m[2][:3].lower()):
        return None
    month = _MONTHS[m[2][:3].lower()]
    numbers = [p for p in (m[1], m[3], m[4]) if p]
    readings = set()
    if len(numbers) == 1:
        n = numbers[0]
        if 1 <= int(n) <= 31 and len(n) <= 2:
            readings.add(((None, month, int(n)), None))
        readings.add(((_year(n), month, None), None))
    elif len(numbers) == 2:
        for y, d in itertools.permutations(numbers):
            if len(d) <= 2:
                try:
                    readings.add((dt.date(_year(y), month, int(d)), None))
                except ValueError:
                    continue
    return frozenset(readings) or None


def _month_names(abbr: str) -> set[str]:
    full = dt.date(2000, _MONTHS[abbr], 1).strftime("%B").lower()
    return {abbr, full, "sept"} if abbr == "sep" else {abbr, full}


def same_value(a: str, b: str) -> bool:
    """Whether two normalised cells mean the same value, representation aside (see the module docstring)."""
    if a == b:
        return True
    fa, fb = a.casefold(), b.casefold()
    if fa == fb:
        return True
    if fa in NULL_MARKERS or fb in NULL_MARKERS:
        return fa in NULL_MARKERS and fb in NULL_MARKERS
    na, nb = _number(a), _number(b)
    if na is not None or nb is not None:
        return na == nb
    ta, tb = _time(a), _time(b)
    if ta is not None or tb is not None:
        return ta == tb
    da, db = _dates(a), _dates(b)
    return da is not None and db is not None and bool(da & db)


@dataclass
class Score:
    """Cell-level error-correction counts and the scores they give."""

    errors: int = 0
    changes: int = 0
    correct: int = 0

    @property
    def precision(self) -> float:
        return self.correct / self.changes if self.changes else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.errors if self.errors else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def add(self, other: Score) -> None:
        self.errors += other.errors
        self.changes += other.changes
        self.correct += other.correct

    def as_dict(self) -> dict:
        return {**asdict(self), "precision": round(self.precision, 4), "recall": round(self.recall, 4),
                "f1": round(self.f1, 4)}


@dataclass
class DatasetScore:
    exact: Score = field(default_factory=Score)
    insensitive: Score = field(default_factory=Score)
    columns: dict[str, dict] = field(default_factory=dict)


def score_frames(dirty: pd.DataFrame, clean: pd.DataFrame, cleaned: pd.DataFrame) -> DatasetScore:
    """Score `cleaned` against `clean`, both against `dirty`, cell by cell, aligned by position."""
    if dirty.shape != clean.shape or dirty.shape != cleaned.shape:
        raise SystemExit(f"shapes differ: dirty {dirty.shape}, clean {clean.shape}, cleaned {cleaned.shape}")
    result = DatasetScore()
    memo: dict[tuple[str, str], bool] = {}

    def same(a: str, b: str) -> bool:
        key = (a, b) if a <= b else (b, a)
        if key not in memo:
            memo[key] = same_value(a, b)
        return memo[key]

    for j, name in enumerate(dirty.columns):
        d = [normalise(v) for v in dirty.iloc[:, j]]
        c = [normalise(v) for v in clean.iloc[:, j]]
        o = [normalise(v) for v in cleaned.iloc[:, j]]
        exact, loose = Score(), Score()
        for dv, cv, ov in zip(d, c, o):
            exact.errors += dv != cv
            if ov != dv:
                exact.changes += 1
                exact.correct += ov == cv
            if dv != cv or ov != dv:  # equal strings are the same value: skip the costly comparison
                loose.errors += not same(dv, cv)
                if not same(ov, dv):
                    loose.changes += 1
                    loose.correct += same(ov, cv)
        result.exact.add(exact)
        result.insensitive.add(loose)
        result.columns[str(name)] = {"exact": exact.as_dict(), "insensitive": loose.as_dict()}
    return result


def read_text_frame(path: Path) -> pd.DataFrame:
    """A CSV as the benchmarks read it: every cell the string written."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def cleaned_as_text(path: Path) -> pd.DataFrame:
    """The cleaned output with every cell as text; nulls the module wrote are empty strings."""
    from smolclean_dagster.core.validate import as_text

    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype=str, keep_default_na=False)
    return as_text(df).fillna("")


# ---------------------------------------------------------------------------------------------- learning

@dataclass
class Run:
    dataset: str  # the folder's name, prefixed by its collection unless it is the published data ("zeroed/beers")
    rows: int
    columns: int
    seconds: float
    functions: int
    chunks: int
    function_names: list[str]
    score: DatasetScore
    #: The whole-file module on the second half of the rows, and the first half's module on the same rows.
    whole_on_second_half: DatasetScore | None = None
    next_drop: DatasetScore | None = None
    next_drop_functions: list[str] = field(default_factory=list)
    next_drop_seconds: float = 0.0
    #: Model calls and tokens of each learning run (whole file, next drop), read off the endpoint's log.
    usage: dict = field(default_factory=dict)


def learn_and_score(folder: Path, workdir: Path, options: dict) -> Run:
    """Learn a module from folder/dirty.csv with the rules analyst and score the cleaned drop."""
    from smolclean_dagster.learning.embedded import learn
    from smolclean_dagster.settings import DatasetSettings

    name = label(folder)
    settings = DatasetSettings(name=folder.name, workdir=workdir, **_analyst(options))
    dirty = read_text_frame(folder / "dirty.csv")
    clean = read_text_frame(folder / "clean.csv")
    labels = user_labels(folder / "dirty.csv", dirty, clean, workdir.parent / f"{workdir.name}_labels.csv",
                         options.get("labels", 0))
    started = time.perf_counter()
    outcome = learn(settings, folder / "dirty.csv", log_level="ERROR", labels=labels)
    seconds = time.perf_counter() - started
    cleaned = cleaned_as_text(outcome.cleaned)
    half = len(dirty) // 2
    return Run(
        dataset=name, rows=len(dirty), columns=dirty.shape[1], seconds=round(seconds, 1),
        functions=outcome.functions, chunks=outcome.chunks,
        function_names=_function_names(settings),
        score=score_frames(dirty, clean, cleaned),
        whole_on_second_half=score_frames(*(f.iloc[half:].reset_index(drop=True) for f in (dirty, clean, cleaned))),
    )


def next_drop(folder: Path, workdir: Path, options: dict, run: Run) -> None:
    """Learn from the first half of folder/dirty.csv, clean the second half with that module as
    `smolclean apply` does, and score the second half: `run.next_drop`."""
    from smolclean_dagster.core.apply import apply_module
    from smolclean_dagster.learning.embedded import learn
    from smolclean_dagster.sandbox import Sandbox
    from smolclean_dagster.settings import DatasetSettings

    dirty = read_text_frame(folder / "dirty.csv")
    clean = read_text_frame(folder / "clean.csv")
    half = len(dirty) // 2
    first, second = workdir / "first_half.csv", workdir / "second_half.csv"
    workdir.mkdir(parents=True, exist_ok=True)
    dirty.iloc[:half].to_csv(first, index=False)
    dirty.iloc[half:].to_csv(second, index=False)
    settings = DatasetSettings(name=folder.name, workdir=workdir / "work", **_analyst(options))
    # the user labels rows of the first drop only: the second is the drop the module has never seen
    labels = user_labels(first, dirty.iloc[:half], clean.iloc[:half], workdir / "first_half_labels.csv",
                         options.get("labels", 0))
    started = time.perf_counter()
    outcome = learn(settings, first, log_level="ERROR", labels=labels)
    sandbox = Sandbox()
    try:
        out = workdir / "second_half.cleaned.parquet"
        apply_module(outcome.module.read_text(encoding="utf-8"), second, out, sandbox=sandbox)
    finally:
        sandbox.close()
    run.next_drop_seconds = round(time.perf_counter() - started, 1)
    run.next_drop_functions = _function_names(settings)
    tail = [f.iloc[half:].reset_index(drop=True) for f in (dirty, clean)]
    run.next_drop = score_frames(*tail, cleaned_as_text(out))


def user_labels(drop: Path, dirty: pd.DataFrame, clean: pd.DataFrame, out: Path, n: int) -> Path | None:
    """Play the user of `smolclean label`: the `n` rows it picks from the drop, with their clean values (the
    drop's header, `_row` first), as the file `--labels` reads. Nothing else of the clean file is looked at."""
    if not n:
        return None
    from smolclean_dagster.core.labels import ROW, pick_rows

    picked = pick_rows(dirty.reset_index(drop=True), n)
    truth = clean.reset_index(drop=True).iloc[picked].copy()
    truth.columns = dirty.columns  # the clean file may name its columns otherwise; cells align by position
    truth.insert(0, ROW, [p + 1 for p in picked])
    out.parent.mkdir(parents=True, exist_ok=True)
    truth.to_csv(out, index=False)
    return out


def _analyst(options: dict) -> dict:
    """Settings of the analyst: the rules, or with a model the hybrid analyst (the model decides every step)."""
    settings = {k: v for k, v in options.items() if k != "labels"}  # the labels are the user's, not a setting
    if not options.get("model"):
        return {"analyst": "rules", **settings}
    # whoever answers may take longer than an API does
    return {"analyst": "hybrid", "llm_timeout_s": 3600.0, **settings}


def llm_usage(log: Path | None, since: int) -> dict:
    """Calls and estimated tokens the endpoint logged after its first `since` lines (one JSON line per call with
    `prompt_tokens`, `completion_tokens` and `source`, "cache" for a reply it answered from its cache)."""
    if log is None or not log.exists():
        return {}
    lines = [json.loads(line) for line in log.read_text().splitlines()[since:] if line.strip()]
    return {"calls": len(lines), "answered_from_cache": sum(1 for r in lines if r.get("source") == "cache"),
            "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in lines),
            "completion_tokens": sum(r.get("completion_tokens", 0) for r in lines),
            "largest_prompt_tokens": max((r.get("prompt_tokens", 0) for r in lines), default=0)}


def _log_lines(log: Path | None) -> int:
    return len(log.read_text().splitlines()) if log is not None and log.exists() else 0


def label(folder: Path) -> str:
    """A dataset's name in results: its folder's, prefixed by its collection unless that is the published data."""
    return folder.name if folder.parent.resolve() == DATA.resolve() else f"{folder.parent.name}/{folder.name}"


def _function_names(settings) -> list[str]:
    from smolclean_dagster.core.storage import DatasetStore

    return [e.function.name for e in DatasetStore(settings.storage_dir, settings.name).registry.load().entries]


# ---------------------------------------------------------------------------------------------- report

def report(runs: list[Run], machine: dict, options: dict) -> str:
    rows = []
    for r in runs:
        e, i = r.score.exact, r.score.insensitive
        kind, goal = TARGETS.get(r.dataset, (None, None))
        got = (e if kind == "exact" else i).f1 if kind else None
        nxt = r.next_drop.exact.f1 if r.next_drop else None
        nxt_p = _precision(r.next_drop.exact) if r.next_drop else None
        same = r.whole_on_second_half.exact.f1 if r.whole_on_second_half else None
        held = _holds(e) and (r.next_drop is None or _holds(r.next_drop.exact))
        rows.append([r.dataset, f"{r.rows}x{r.columns}", e.errors, e.changes, _precision(e), e.recall, e.f1,
                     None if r.next_drop is None else r.next_drop.exact.changes, nxt_p, nxt, same,
                     "yes" if held else "NO", i.precision, i.recall, i.f1,
                     f"{kind} >= {goal}: {'met' if got >= goal else 'NOT met'}" if kind else "-",
                     r.functions, r.chunks, f"{r.seconds:.0f}"])
    ours = table(
        ["dataset", "size", "errors", "changes", "P", "R", "exact F1 (whole file)", "changes (next drop)",
         "P (next drop)", "exact F1 (next drop)", "exact F1 (whole-file module, 2nd half)",
         f"P >= {PRECISION_BAR} both", "P (repr.)", "R (repr.)", "F1 (repr.-insensitive, whole file)", "target",
         "functions", "chunks", "learn+clean s"],
        rows,
    )
    runs = [r for r in runs if r.dataset in PUBLISHED["Garf"]]  # published figures exist for the original pairs only
    names = [r.dataset for r in runs]
    headers = [f"{n} ({_size_note(n, r.rows)})" if n in PUBLISHED_ROWS else n for n, r in zip(names, runs)]
    published = [[system, *[scores.get(n) for n in names]] for system, scores in PUBLISHED.items()]
    who = options.get("analyst", "rules")
    n = options.get("labels", 0)
    published.insert(0, [f"smolclean, {who}, {n} labels: exact F1, whole file", *[r.score.exact.f1 for r in runs]])
    published.insert(1, [f"smolclean, {who}, {n} labels: exact F1, next drop",
                         *[r.next_drop.exact.f1 if r.next_drop else None for r in runs]])
    beside = table(["F1 of error correction", *headers], published)
    settings = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in options.items())
    return (f"Machine: {describe_machine(machine)}\nSettings: {settings}\n\n{ours}\n\n{beside}\n"
            "(next drop: learned from the first half of the rows, scored on the second half)")


def _precision(score: Score) -> float | str:
    """Precision, or "-" when nothing was changed (no change can be wrong, and none is right)."""
    return score.precision if score.changes else "-"


def _holds(score: Score) -> bool:
    return not score.changes or score.precision >= PRECISION_BAR


def _size_note(name: str, rows: int) -> str:
    return f"ours: {rows:,} rows; published: {PUBLISHED_ROWS[name]:,} rows"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=list(DEFAULT_DATA),
                        help="folders of <dataset>/dirty.csv + clean.csv (default: ../shared/benchmarks/data and zeroed)")
    parser.add_argument("--instructions", default=None, help="the user's instructions for every dataset (default: none)")
    parser.add_argument("--name", default="quality", help="results file name under benchmarks/results (default: quality)")
    parser.add_argument("--datasets", nargs="*", default=None, help="dataset folder names (default: all)")
    parser.add_argument("--keep", type=Path, default=None, help="learn in this workdir and keep it (default: a temp dir)")
    parser.add_argument("--chunk-budget", type=int, default=None, help="chunks analysed per drop (default: the setting's)")
    parser.add_argument("--max-steps", type=int, default=None, help="steps per chunk (default: the setting's)")
    parser.add_argument("--concurrency", type=int, default=None, help="chunks at once (default: the setting's)")
    parser.add_argument("--labels", type=int, default=0, metavar="N",
                        help="play the user: the N rows `smolclean label` picks get their clean values (default: 0)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write results/quality.json")
    parser.add_argument("--no-next-drop", action="store_true", help="skip learning on the first half of each file")
    parser.add_argument("--model", default=None, help="a litellm model string: learn with the hybrid analyst")
    parser.add_argument("--api-base", default=None, help="the model's endpoint (an OpenAI-compatible URL)")
    parser.add_argument("--api-key", default=None, help="the model's key (default: the environment's)")
    parser.add_argument("--llm-log", type=Path, default=None,
                        help="the endpoint's call log (JSON lines with prompt_tokens and completion_tokens): calls and tokens per run")
    args = parser.parse_args(argv)
    quiet_logs()
    logging.basicConfig(level=logging.WARNING)

    folders = [
        p for data in args.data
        for p in sorted((p for p in data.iterdir() if (p / "dirty.csv").is_file() and (p / "clean.csv").is_file()),
                        key=lambda p: (ORDER.index(p.name) if p.name in ORDER else len(ORDER), p.name))
    ]
    if args.datasets:
        unknown = set(args.datasets) - {p.name for p in folders} - {label(p) for p in folders}
        if unknown:
            parser.error(f"no dataset(s) {sorted(unknown)} under {', '.join(map(str, args.data))}")
        folders = [p for p in folders if p.name in args.datasets or label(p) in args.datasets]
    options = {k: v for k, v in (("chunk_budget", args.chunk_budget), ("max_steps", args.max_steps),
                                 ("concurrency", args.concurrency), ("instructions", args.instructions),
                                 ("model", args.model), ("api_base", args.api_base), ("api_key", args.api_key),
                                 ("labels", args.labels or None))
               if v is not None}
    from smolclean_dagster.settings import DatasetSettings

    defaults = DatasetSettings(name="x")
    shown = {k: getattr(defaults, k) for k in ("chunk_size", "chunk_budget", "max_steps", "concurrency")} | options

    machine = machine_info()
    runs = []
    analyst = _analyst(options)["analyst"]
    for folder in folders:
        print(f"{label(folder)}: learning with the {analyst} analyst ...", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"smolclean-quality-{folder.name}-") as tmp:
            whole, nxt_dir = Path(tmp) / "whole", Path(tmp) / "next_drop"
            if args.keep:
                whole, nxt_dir = (args.keep / label(folder).replace("/", "_"),
                                  args.keep / f"{label(folder).replace('/', '_')}_next_drop")
                shutil.rmtree(whole, ignore_errors=True)
            since = _log_lines(args.llm_log)
            runs.append(learn_and_score(folder, whole, options))
            runs[-1].usage["whole"] = llm_usage(args.llm_log, since)
            if not args.no_next_drop:
                since = _log_lines(args.llm_log)
                next_drop(folder, nxt_dir, options, runs[-1])
                runs[-1].usage["next_drop"] = llm_usage(args.llm_log, since)
        r = runs[-1]
        nxt = f", next drop {r.next_drop.exact.f1:.3f}" if r.next_drop else ""
        nxt_p = f" at precision {r.next_drop.exact.precision:.3f}" if r.next_drop else ""
        print(f"  {r.functions} functions from {r.chunks} chunks in {r.seconds:.0f} s: exact F1 {r.score.exact.f1:.3f} "
              f"at precision {r.score.exact.precision:.3f}{nxt}{nxt_p} (representation-insensitive F1 "
              f"{r.score.insensitive.f1:.3f})")
        for setting, used in r.usage.items():
            if used:
                print(f"  model, {setting.replace('_', ' ')}: {used['calls']} calls, {used['prompt_tokens']:,} prompt + "
                      f"{used['completion_tokens']:,} completion tokens (largest prompt {used['largest_prompt_tokens']:,})")
    shown = {"analyst": analyst, **{k: v for k, v in shown.items() if k != "api_key"}}
    text = report(runs, machine, shown)
    print()
    print(text)
    if not args.no_write:
        payload = {
            "machine": machine,
            "settings": shown,
            "data": [_shown_path(d) for d in args.data],
            "datasets": {
                r.dataset: {
                    "rows": r.rows, "columns": r.columns, "seconds": r.seconds, "functions": r.functions,
                    "chunks": r.chunks, "function_names": r.function_names,
                    "exact": r.score.exact.as_dict(), "insensitive": r.score.insensitive.as_dict(),
                    "next_drop": None if r.next_drop is None else {
                        "learned_on_rows": r.rows // 2, "scored_rows": r.rows - r.rows // 2,
                        "seconds": r.next_drop_seconds, "function_names": r.next_drop_functions,
                        "exact": r.next_drop.exact.as_dict(), "insensitive": r.next_drop.insensitive.as_dict(),
                        "whole_file_module_exact": r.whole_on_second_half.exact.as_dict(),
                    },
                    "published_rows": PUBLISHED_ROWS.get(r.dataset),
                    "target": dict(zip(("score", "f1_at_least"), TARGETS[r.dataset])) if r.dataset in TARGETS else None,
                    "columns": r.score.columns,
                    "model_usage": r.usage or None,
                }
                for r in runs
            },
            "published_f1": PUBLISHED,
        }
        print(f"wrote {write_results(args.name, payload)}")
    return 0


def _shown_path(path: Path) -> str:
    """The data folder as written in results: relative to the repository when it is beside it."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(Path("..") / Path(path).resolve().relative_to(root.parent))
    except ValueError:
        return Path(path).name


if __name__ == "__main__":
    sys.exit(main())

