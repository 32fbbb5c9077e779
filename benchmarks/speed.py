"""Speed and cost: cleaning drops, learning wall time, LLM calls per drop size, code-location load time.

Run: `python benchmarks/speed.py [--only apply waves calls load] [--jsonl-rows 200000] [--csv-mb 1024]`. Prints
a table per part and writes benchmarks/results/speed.json.

1. apply: a patients drop (18 fields, see benchmarks/patients.py), as a 200k-row JSONL (typed values) and as
   a 1 GB CSV, generated into a temporary folder, cleaned by a model-written-style module (nine functions:
   mapping tables, regexes, date parsing, a whitespace pass over every text column). Each way runs as its
   own process, and /proc is polled for the peak RSS and PSS of its whole process tree:
   - read and write only: the module's `__main__` with no function (what reading and writing cost alone);
   - standalone: `python clean_patients.py IN OUT` (the module's own streaming `__main__`);
   - smolclean apply: `python -m smolclean_dagster.cli apply ...` (sandbox workers, one per core by default);
   - record at a time: the same logic over one dict per row (benchmarks/patients.py records), checked to give
     the module's values on the first 20,000 rows.
   Output in the input's format. The standalone and apply outputs are compared byte for byte. Each way runs
   three times on the JSONL (once on the CSV), the ways taking turns; the median run's time is reported.
2. waves: `learn()` with the LLM analyst on a drop whose dirt sits in 16 different chunks, against a
   local OpenAI-compatible server that answers every call after 2 s; concurrency 4 vs 1.
3. calls: `learn()` with the LLM analyst (a scripted model that writes two functions and then says
   clean) on a drop and on ten times its rows (the same rows repeated with fresh ids): calls and tokens.
   Prompt tokens are counted as characters / 4 of what the server received.
4. load: `python -c "import smolclean_dagster.location"` on a workdir with two datasets, median of 3.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the scripted OpenAI-compatible server of the tests
from common import RESULTS_DIR, describe_machine, machine_info, quiet_logs, run_measured, table, write_results  # noqa: E402

TARGETS = {
    "apply_vs_record": 10.0,  # `smolclean apply` rows/s on the JSONL at least this many times record-at-a-time's
    "apply_jsonl_rows_per_s": 50_000,  # ... and at least this many rows/s
    "peak_rss_mb": 300,  # both ways of applying, on both files: peak RSS of the whole process tree
    "standalone_vs_apply": 1.5,  # the standalone module's time at most this many times `smolclean apply`'s
    "waves_speedup": 3.0,  # concurrency 4 at least this many times faster than 1
    "calls_growth": 1.5,  # calls for 10x rows at most this many times the calls for 1x
    "load_seconds": 3.0,
}


# ------------------------------------------------------------------------------------------- data

def messy_customers(rows: int, seed: int = 0, start_id: int = 1) -> pd.DataFrame:
    """A synthetic customer export with the usual dirt: padding, case variants, null tokens, typos,
    money with currency and separators, dates in three formats, yes/no spelled five ways."""
    rng = np.random.default_rng(seed)
    pick = lambda options, p=None: rng.choice(np.array(options, dtype=object), size=rows, p=p)  # noqa: E731
    cities = pick(["Boston", "Chicago", "Austin", "Denver", "Seattle", "Portland", "Atlanta", "Miami"])
    city_dirt = rng.random(rows)
    cities = np.where(city_dirt < 0.05, np.char.upper(cities.astype(str)).astype(object), cities)
    cities = np.where((city_dirt >= 0.05) & (city_dirt < 0.10), np.char.add(" ", cities.astype(str)).astype(object), cities)
    plans = pick(["Basic", "Premium", "Enterprise", "Basic ", "Premum", "N/A"], p=[0.4, 0.3, 0.2, 0.04, 0.02, 0.04])
    spend = rng.gamma(2.0, 300.0, rows).round(2)
    money = np.where(rng.random(rows) < 0.3, [f"${v:,.2f}" for v in spend], spend.astype(str)).astype(object)
    money = np.where(rng.random(rows) < 0.03, "N/A", money)
    days = (np.datetime64("2015-01-01") + rng.integers(0, 3000, rows)).astype("datetime64[D]").astype(object)
    style = rng.integers(0, 3, rows)
    signup = [d.isoformat() if s == 0 else d.strftime("%m/%d/%Y") if s == 1 else d.strftime("%B %d, %Y")
              for d, s in zip(days, style)]
    active = pick(["yes", "no", "Y", "N", "true", "false", "yes", "no"])
    first = pick(["Ann", "Bob", "Cara", "Dan", "Eve", "Finn", "Gia", "Hal"])
    last = pick(["Lee", "Stone", "Diaz", "Roe", "Khan", "Ng", "Olsen", "Park"])
    names = np.char.add(np.char.add(first.astype(str), " "), last.astype(str)).astype(object)
    names = np.where(rng.random(rows) < 0.05, np.char.add(names.astype(str), "  ").astype(object), names)
    return pd.DataFrame({
        "customer_id": [str(i) for i in range(start_id, start_id + rows)],
        "name": names, "city": cities, "plan": plans, "monthly_spend": money,
        "signup_date": signup, "is_active": active,
    })


def write_csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------------------------- 1. apply

def _rows(stdout: str) -> int:
    return int(re.search(r"cleaned (\d+) rows", stdout).group(1))


def _same_file(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while block := fa.read(1 << 24):
            if block != fb.read(1 << 24):
                return False
    return True


def _same_records(module_out: Path, records_out: Path, limit: int = 20_000) -> bool:
    """The record-at-a-time loop gives the module's values on the first `limit` rows."""
    if module_out.suffix == ".jsonl":
        with module_out.open(encoding="utf-8") as fa, records_out.open(encoding="utf-8") as fb:
            return all(json.loads(x) == json.loads(y) for x, y, _ in zip(fa, fb, range(limit)))
    with module_out.open(encoding="utf-8", newline="") as fa, records_out.open(encoding="utf-8", newline="") as fb:
        return all(x == y for x, y, _ in zip(csv.reader(fa), csv.reader(fb), range(limit)))


def bench_apply(jsonl_rows: int, csv_mb: float, workers: int | None, work: Path, batch_size: int,
                kinds: tuple[str, ...] = ("jsonl", "csv"), repeats: dict[str, int] | None = None) -> dict:
    """The patients drop as JSONL and as CSV, each cleaned four ways, each way a process of its own."""
    import patients

    repeats = {"jsonl": 3, "csv": 1, **(repeats or {})}
    module, nothing = work / "clean_patients.py", work / "clean_nothing.py"
    module.write_text(patients.module_source(), encoding="utf-8")
    nothing.write_text(patients.module_source("nothing", functions=False), encoding="utf-8")
    out: dict = {"functions": [name for name in re.findall(r"^def (\w+)\(df", module.read_text(), re.M) if name != "clean"],
                 "workers": workers or "one per core", "batch_rows": batch_size, "runs_per_way": repeats, "files": {}}
    python = sys.executable
    for kind, size in (("jsonl", {"rows": jsonl_rows}), ("csv", {"size_mb": csv_mb})):
        if kind not in kinds:
            continue
        src = work / f"patients.{kind}"
        print(f"apply: writing {src.name} ({size}) ...")
        rows = patients.write_patients(src, **size)
        outputs = {way: work / f"out_{way}.{kind}" for way in ("read_write_only", "standalone", "smolclean_apply",
                                                                 "record_at_a_time")}
        commands = {
            "read_write_only": [python, str(nothing), str(src), str(outputs["read_write_only"]), str(batch_size)],
            "standalone": [python, str(module), str(src), str(outputs["standalone"]), str(batch_size)],
            "smolclean_apply": [python, "-m", "smolclean_dagster.cli", "apply", str(module), str(src), "-o",
                                str(outputs["smolclean_apply"]), "--batch-size", str(batch_size)]
                               + (["--workers", str(workers)] if workers else []),
            "record_at_a_time": [python, str(HERE / "patients.py"), "records", str(src), str(outputs["record_at_a_time"])],
        }
        # Each way `repeats` times, the ways taking turns, so a slow spell of a shared machine hits them alike;
        # the median run's time is reported, with every run's time, and the highest peaks of all runs.
        timed: dict[str, list[dict]] = {way: [] for way in commands}
        for run in range(repeats[kind]):
            for way, cmd in commands.items():
                print(f"  {kind}: {way.replace('_', ' ')} (run {run + 1} of {repeats[kind]}) ...")
                result = run_measured(cmd)
                timed[way].append({**result, "rows": _rows(result.pop("stdout"))})
        runs = {}
        for way, results in timed.items():
            median = sorted(results, key=lambda r: r["seconds"])[len(results) // 2]
            runs[way] = {**median, "rows_per_s": round(median["rows"] / median["seconds"]),
                         "seconds_of_each_run": [r["seconds"] for r in results],
                         "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
                         "peak_pss_mb": max(r["peak_pss_mb"] for r in results)}
        entry = {
            "rows": rows, "file_mb": round(src.stat().st_size / 1e6, 1), "runs": runs,
            "measured": {"date": machine_info()["date"], "load_average_1min_after": round(os.getloadavg()[0], 2)},
            "standalone_same_as_apply": _same_file(outputs["standalone"], outputs["smolclean_apply"]),
            "records_same_as_module": _same_records(outputs["standalone"], outputs["record_at_a_time"]),
            "apply_vs_record_rows_per_s": round(runs["smolclean_apply"]["rows_per_s"]
                                                / runs["record_at_a_time"]["rows_per_s"], 1),
            "standalone_time_vs_apply": round(runs["standalone"]["seconds"] / runs["smolclean_apply"]["seconds"], 2),
            "read_write_share_of_standalone": round(runs["read_write_only"]["seconds"] / runs["standalone"]["seconds"], 2),
        }
        out["files"][kind] = entry
        for path in [src, *outputs.values()]:
            path.unlink(missing_ok=True)
    return out


# ------------------------------------------------------------------------------------------- 2./3. LLM

CLEAN_REPLY = "<issues>\n</issues>\n<status>clean</status>"
STRIP = '''import pandas as pd


def strip_text(df: pd.DataFrame) -> pd.DataFrame:
    """Strip whitespace around the text of every column."""
    df = df.copy()
    for column in df.columns:
        values = df[column]
        text = values.where(values.apply(isinstance, args=(str,))).astype(object)
        df[column] = values.mask(text.notna(), text.str.strip())
    return df
'''
NULLS = '''import pandas as pd


def nulls_to_none(df: pd.DataFrame) -> pd.DataFrame:
    """Turn the null tokens "N/A" and "null" into real nulls, in every column."""
    df = df.copy()
    for column in df.columns:
        values = df[column]
        text = values.where(values.apply(isinstance, args=(str,))).astype(object)
        df[column] = values.mask(text.str.strip().str.casefold().isin(["n/a", "null"]), None)
    return df
'''


def _reply(text: str, request, delay_s: float = 0.0):
    from llm_server import reply

    return reply(text, prompt_tokens=max(1, len(request.prompt) // 4), completion_tokens=max(1, len(text) // 4),
                 delay_s=delay_s)


def scripted_model(request):
    """A model that writes `strip_text`, then `nulls_to_none`, then says clean (it reads the module's
    function list in the prompt, as a real model does)."""
    for name, code in (("strip_text", STRIP), ("nulls_to_none", NULLS)):
        if f"`{name}`" not in request.prompt:
            return _reply(f"<issues>\n- text: {name}\n</issues>\n<code>\n```python\n{code}```\n</code>\n"
                          "<status>needs_more_work</status>", request)
    return _reply(CLEAN_REPLY, request)


def llm_settings(name: str, workdir: Path, api_base: str, **values):
    from smolclean_dagster.settings import DatasetSettings

    return DatasetSettings(name=name, workdir=workdir, analyst="llm", model="openai/test-model", api_base=api_base,
                           api_key="test-key", llm_cache=False, **values)


def dirt_in_sixteen_chunks(chunks: int = 16, chunk_size: int = 50) -> pd.DataFrame:
    """One column per chunk, padded with spaces only inside that chunk: each chunk shows new dirt."""
    n = chunks * chunk_size
    df = pd.DataFrame({"id": [str(i) for i in range(n)]})
    for c in range(chunks):
        values = np.array([f"v{i % 7}" for i in range(n)], dtype=object)
        inside = np.arange(c * chunk_size, (c + 1) * chunk_size)
        values[inside[::3]] = [f" v{i % 7} " for i in inside[::3]]
        df[f"col{c:02d}"] = values
    return df


def bench_waves(work: Path, delay_s: float, chunks: int) -> dict:
    from llm_server import ScriptedLLM

    from smolclean_dagster.learning.embedded import learn

    drop = write_csv(dirt_in_sixteen_chunks(chunks), work / "sixteen.csv")
    out = {"chunks": chunks, "server_delay_s": delay_s, "runs": {}}
    for concurrency in (4, 1):
        print(f"waves: {chunks} chunks, model answering after {delay_s:g} s, concurrency {concurrency} ...")
        with ScriptedLLM(responder=lambda r: _reply(CLEAN_REPLY, r, delay_s)) as llm:
            settings = llm_settings("sixteen", work / f"waves_{concurrency}", llm.api_base, concurrency=concurrency,
                                    chunk_budget=chunks, planning_interval=chunks, max_steps=2)
            started, clock = time.perf_counter(), time.monotonic()
            outcome = learn(settings, drop, log_level="ERROR")
            seconds = time.perf_counter() - started
            calls = sorted(r.at - clock for r in llm.requests)
            out["runs"][str(concurrency)] = {
                "seconds": round(seconds, 1), "chunks": outcome.chunks, "calls": len(llm.requests),
                # where the time goes: before the first call (reading, planning, starting workers), the calls
                # themselves, and after the last (validation, export, cleaning the drop)
                "first_call_at_s": round(calls[0], 1) if calls else None,
                "last_call_done_at_s": round(calls[-1] + delay_s, 1) if calls else None,
                # whether the chunks' calls really overlapped: the most calls the server held at one moment
                "most_calls_at_once": max((sum(1 for other in calls if start <= other < start + delay_s)
                                           for start in calls), default=0),
            }
    out["speedup"] = round(out["runs"]["1"]["seconds"] / out["runs"]["4"]["seconds"], 2)
    out["ideal_speedup"] = 4.0
    # What perfect overlap would give: the one-at-a-time run's own time before its first call and after its last
    # answer (instance, reading, planning, importing litellm; validation, export, cleaning), and its chunks in
    # rounds of four, each round as long as one of its chunks. Fixed costs bound the speed-up below 4.
    one = out["runs"]["1"]
    if one["first_call_at_s"] is not None:
        per_chunk = (one["last_call_done_at_s"] - one["first_call_at_s"]) / chunks
        bound = one["first_call_at_s"] + -(-chunks // 4) * per_chunk + one["seconds"] - one["last_call_done_at_s"]
        out["speedup_bound"] = round(one["seconds"] / bound, 2)
    return out


def bench_calls(work: Path, rows: int) -> dict:
    from llm_server import ScriptedLLM

    from smolclean_dagster.learning.embedded import learn

    base = messy_customers(rows, seed=1)
    big = pd.concat([messy_customers(rows, seed=1, start_id=1 + k * rows) for k in range(10)], ignore_index=True)
    out = {"runs": {}}
    for label, df in (("1x", base), ("10x", big)):
        print(f"calls: learning from {len(df):,} rows with a scripted model ...")
        drop = write_csv(df, work / f"customers_{label}.csv")
        with ScriptedLLM(responder=scripted_model) as llm:
            outcome = learn(llm_settings("customers", work / f"calls_{label}", llm.api_base), drop, log_level="ERROR")
            prompt = sum(len(r.prompt) // 4 for r in llm.requests)
            out["runs"][label] = {"rows": len(df), "calls": len(llm.requests), "prompt_tokens": prompt,
                                  "chunks": outcome.chunks, "functions": outcome.functions}
    out["calls_growth"] = round(out["runs"]["10x"]["calls"] / out["runs"]["1x"]["calls"], 2)
    out["tokens_growth"] = round(out["runs"]["10x"]["prompt_tokens"] / out["runs"]["1x"]["prompt_tokens"], 2)
    return out


# ------------------------------------------------------------------------------------------- 4. load

def bench_load(work: Path, repeats: int = 3) -> dict:
    from smolclean_dagster.settings import DatasetSettings, save_settings

    workdir = work / "location"
    for name in ("customers", "orders"):
        save_settings(DatasetSettings(name=name, workdir=workdir))
        (workdir / "drops" / name).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SMOLCLEAN_WORKDIR": str(workdir), "DAGSTER_HOME": str(workdir / "dagster_home")}
    (workdir / "dagster_home").mkdir(exist_ok=True)
    timings = []
    print(f"load: importing the code location {repeats} times ...")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import smolclean_dagster.location"], env=env, check=True,
                       capture_output=True)
        timings.append(time.perf_counter() - started)
    return {"datasets": 2, "seconds": [round(t, 2) for t in timings], "median_s": round(statistics.median(timings), 2)}


# ------------------------------------------------------------------------------------------- report

def report(results: dict) -> str:
    parts = [f"Machine: {describe_machine(results['machine'])}"]
    if "apply" in results:
        a = results["apply"]
        for kind, f in a["files"].items():
            rows = [[way.replace("_", " "), r["seconds"], " ".join(f"{x:g}" for x in r.get("seconds_of_each_run", [])),
                     f"{r['rows_per_s']:,}", r["peak_rss_mb"], r["peak_pss_mb"], r["peak_processes"]]
                    for way, r in f["runs"].items()]
            parts.append(
                f"1. apply, {kind.upper()}: {f['rows']:,} rows ({f['file_mb']} MB), {len(a['functions'])} functions, "
                f"workers: {a['workers']}, batches of {a['batch_rows']:,} rows\n"
                + table(["way", "seconds (median)", "each run", "rows/s", "peak RSS MB (tree)", "peak PSS MB (tree)",
                         "processes"], rows)
                + f"\nsmolclean apply vs record at a time: {f['apply_vs_record_rows_per_s']}x rows/s (target >= "
                f"{TARGETS['apply_vs_record']:g}x on JSONL, and >= {TARGETS['apply_jsonl_rows_per_s']:,} rows/s); "
                f"standalone time vs apply: {f['standalone_time_vs_apply']}x (target <= {TARGETS['standalone_vs_apply']:g}x); "
                f"peak RSS target <= {TARGETS['peak_rss_mb']} MB; reading and writing alone: "
                f"{f['read_write_share_of_standalone']:.0%} of the standalone time; standalone output == apply output: "
                f"{f['standalone_same_as_apply']}; record loop gives the module's values: {f['records_same_as_module']}"
                + (f"\nsmolclean apply's processes, each at its own peak (RSS/PSS MB; the sandbox zygotes are the "
                   f"children, the workers they fork the grandchildren): "
                   + ", ".join(f"{p['place']} {p['peak_rss_mb']}/{p['peak_pss_mb']}"
                               for p in f["runs"]["smolclean_apply"]["by_process"])
                   if f["runs"]["smolclean_apply"].get("by_process") else "")
                + "".join(f"\n{way.replace('_', ' ')}: RSS MB of each process at the tree's peak: "
                          f"{' + '.join(map(str, f['runs'][way]['rss_mb_at_peak']))}"
                          for way in ("standalone", "smolclean_apply") if f["runs"][way].get("rss_mb_at_peak")))
    if "waves" in results:
        w = results["waves"]
        rows = [[c, r["chunks"], r["calls"], r.get("most_calls_at_once"), r["first_call_at_s"], r["last_call_done_at_s"],
                 r["seconds"]] for c, r in w["runs"].items()]
        parts.append(f"2. learning, {w['chunks']} chunks, model answers after {w['server_delay_s']:g} s\n"
                     + table(["concurrency", "chunks", "LLM calls", "calls at once", "first call at s",
                              "last call done at s", "total s"], rows)
                     + f"\nspeedup: {w['speedup']}x (target >= {TARGETS['waves_speedup']:g}x)"
                     + (f"; perfect overlap of the one-at-a-time run's chunks would give {w['speedup_bound']}x"
                        if "speedup_bound" in w else ""))
    if "calls" in results:
        c = results["calls"]
        rows = [[k, f"{r['rows']:,}", r["chunks"], r["calls"], f"{r['prompt_tokens']:,}", r["functions"]]
                for k, r in c["runs"].items()]
        parts.append("3. LLM cost per drop size\n" + table(["drop", "rows", "chunks", "calls", "prompt tokens", "functions"], rows)
                     + f"\ncalls for 10x rows: {c['calls_growth']}x (target <= {TARGETS['calls_growth']:g}x); "
                     f"prompt tokens: {c['tokens_growth']}x")
    if "load" in results:
        lo = results["load"]
        parts.append(f"4. code location load ({lo['datasets']} datasets): median {lo['median_s']} s of {lo['seconds']} "
                     f"(target <= {TARGETS['load_seconds']:g} s)")
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=["apply", "waves", "calls", "load"], default=None)
    parser.add_argument("--jsonl-rows", type=int, default=200_000, help="rows of the apply benchmark's JSONL")
    parser.add_argument("--csv-mb", type=float, default=1024, help="size of the apply benchmark's CSV")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers of smolclean apply (default: per core)")
    parser.add_argument("--batch-size", type=int, default=10_000, help="rows per batch, both ways of applying")
    parser.add_argument("--files", nargs="*", choices=["jsonl", "csv"], default=["jsonl", "csv"],
                        help="which files the apply part cleans (the other's last results are kept)")
    parser.add_argument("--jsonl-runs", type=int, default=3, help="runs of each way on the JSONL (the median is reported)")
    parser.add_argument("--csv-runs", type=int, default=1, help="runs of each way on the CSV (the median is reported)")
    parser.add_argument("--chunks", type=int, default=16, help="chunks of the waves benchmark")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the test model takes per call")
    parser.add_argument("--calls-rows", type=int, default=1000, help="rows of the smaller drop of the calls benchmark")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write results/speed.json")
    args = parser.parse_args(argv)
    quiet_logs()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    parts = args.only or ["apply", "waves", "calls", "load"]
    results: dict = {"machine": machine_info(), "targets": TARGETS}
    with tempfile.TemporaryDirectory(prefix="smolclean-speed-") as tmp:
        work = Path(tmp)
        if "apply" in parts:
            (work / "apply").mkdir()
            results["apply"] = bench_apply(args.jsonl_rows, args.csv_mb, args.workers, work / "apply", args.batch_size,
                                           tuple(args.files), {"jsonl": args.jsonl_runs, "csv": args.csv_runs})
        if "waves" in parts:
            (work / "waves").mkdir()
            results["waves"] = bench_waves(work / "waves", args.delay, args.chunks)
        if "calls" in parts:
            (work / "calls").mkdir()
            results["calls"] = bench_calls(work / "calls", args.calls_rows)
        if "load" in parts:
            results["load"] = bench_load(work)
    for part in parts:  # each part says when and under what load it ran: a partial re-run keeps the others
        results[part]["measured"] = {"date": results["machine"]["date"],
                                     "load_average_1min": results["machine"]["load_average_1min"]}
    previous = RESULTS_DIR / "speed.json"
    if args.only and previous.exists():
        before = json.loads(previous.read_text(encoding="utf-8"))
        if "apply" in results and "files" in before.get("apply", {}):  # a file not cleaned this time keeps its results
            results["apply"]["files"] = {**before["apply"]["files"], **results["apply"]["files"]}
        results = {**before, **results}
    print()
    print(report(results))
    if not args.no_write:
        print(f"wrote {write_results('speed', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
