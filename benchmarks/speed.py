"""Speed and cost: apply throughput, learning wall time, LLM calls per drop size, code-location load time.

Run: `python benchmarks/speed.py [--only apply waves calls load] [--rows 1000000]`. Prints a table per
part and writes benchmarks/results/speed.json.

1. apply: an exported module (learned by the rules analyst from the first rows of a synthetic messy
   customer file) cleans the whole file (1M rows by default), file to file, three ways:
   - smolclean: `apply_module`, streaming batches through sandbox workers (2), Parquet out;
   - in-process: the same module exec'd in this process, pandas reads the CSV, `clean(df)`, Parquet out
     (what the sandbox costs);
   - record at a time: the same logic as plain Python functions over one dict per row (csv.DictReader in,
     csv.DictWriter out): the design of recursive-data-cleaner's apply. The record functions are built
     from the constants of the module's functions, and checked to give the module's output.
2. waves: `learn()` with the LLM analyst on a drop whose dirt sits in 16 different chunks, against a
   local OpenAI-compatible server that answers every call after 2 s; concurrency 4 vs 1.
3. calls: `learn()` with the LLM analyst (a scripted model that writes two functions and then says
   clean) on a drop and on ten times its rows (the same rows repeated with fresh ids): calls and tokens.
   Prompt tokens are counted as characters / 4 of what the server received.
4. load: `python -c "import smolclean_dagster.location"` on a workdir with two datasets, median of 3.
"""

from __future__ import annotations

import argparse
import ast
import csv
import datetime as dt
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
from common import RESULTS_DIR, describe_machine, machine_info, quiet_logs, table, write_results  # noqa: E402

TARGETS = {
    "apply_vs_record": 10.0,  # smolclean rows/s at least this many times record-at-a-time's
    "apply_vs_in_process": 1.5,  # smolclean time at most this many times in-process time
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

def learn_module(sample: Path, workdir: Path) -> str:
    """The exported module the rules analyst learns from `sample` (the real flow)."""
    from smolclean_dagster.learning import learn
    from smolclean_dagster.settings import DatasetSettings

    outcome = learn(DatasetSettings(name="customers", workdir=workdir, analyst="rules"), sample, log_level="ERROR")
    return outcome.module.read_text(encoding="utf-8")


def module_constants(source: str) -> list[tuple[str, dict]]:
    """Each function of the module with the constants it assigns (COLUMN, TOKENS, ...), in order."""
    out = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name != "clean":
            constants = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                        and stmt.targets[0].id.isupper():
                    constants[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            out.append((node.name, constants))
    return out


_SPACES = re.compile(r"[^\S\r\n]{2,}")


def _norm(v: str) -> str:
    return _SPACES.sub(" ", v.strip())


def record_functions(source: str) -> list:
    """The module's functions rewritten record at a time: each takes and returns one dict per row."""
    fns = []
    for name, k in module_constants(source):
        if name.startswith("strip_whitespace"):
            def fn(rec, cols=k["COLUMNS"]):
                for c in cols:
                    if isinstance(rec.get(c), str):
                        rec[c] = _norm(rec[c])
                return rec
        elif name.startswith("replace_null_tokens"):
            def fn(rec, tokens=k["TOKENS"]):
                for c, ts in tokens.items():
                    v = rec.get(c)
                    if isinstance(v, str) and v.strip().casefold() in ts:
                        rec[c] = None
                return rec
        elif name.startswith(("unify_case", "fix_misspellings", "unify_booleans")):
            table = k.get("CANONICAL") or k.get("CORRECTIONS") or k.get("SPELLING")
            folded = not name.startswith("fix_misspellings")
            def fn(rec, c=k["COLUMN"], table=table, folded=folded):
                v = rec.get(c)
                if isinstance(v, str):
                    key = _norm(v).casefold() if folded else _norm(v)
                    if key in table:
                        rec[c] = table[key]
                return rec
        elif name.startswith("normalize_numbers"):
            fn = _record_numbers(k["COLUMN"], k["UNITS"])
        elif name.startswith("dates_to_iso"):
            fn = _record_dates(k["COLUMN"], k["FORMATS"])
        else:
            raise SystemExit(f"no record-at-a-time version of {name}; extend benchmarks/speed.py")
        fns.append(fn)
    return fns


def _record_numbers(column: str, units: list[str]):
    import decimal

    unit = "|".join(re.escape(u) for u in sorted(units, key=len, reverse=True)) or "(?!)"
    number = re.compile(r"^(?P<sign>[-+]?)(?:" + unit + r")?\s*(?P<sign2>[-+]?)"
                        r"(?P<number>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)\s*(?:" + unit + r")?$")

    def fn(rec):
        v = rec.get(column)
        if isinstance(v, str) and (m := number.match(v.strip())):
            text = m["sign"] + m["sign2"] + m["number"].replace(",", "")
            if len(text.lstrip("+-").replace(".", "").strip("0")) > 15 and "." in text:
                rounded = format(decimal.Context(prec=15).create_decimal(text).normalize(), "f")
                if len(rounded.lstrip("+-").replace(".", "").strip("0")) <= 12:
                    text = rounded
            rec[column] = text[:-2] if text.endswith(".0") and text[:-2].lstrip("+-").isdigit() else text
        return rec
    return fn


def _record_dates(column: str, formats: list[str]):
    def fn(rec):
        v = rec.get(column)
        if isinstance(v, str):
            text = v.strip()
            for fmt in formats:
                try:
                    parsed = dt.datetime.strptime(text, fmt)
                except ValueError:
                    continue
                layout = "%Y-%m-%d %H:%M:%S" if "%S" in fmt else "%Y-%m-%d %H:%M" if ("%H" in fmt or "%I" in fmt) else "%Y-%m-%d"
                rec[column] = parsed.strftime(layout)
                break
        return rec
    return fn


def apply_record_at_a_time(source: str, src: Path, dst: Path) -> int:
    fns = record_functions(source)
    n = 0
    with src.open(newline="", encoding="utf-8") as fin, dst.open("w", newline="", encoding="utf-8") as fout:
        reader = csv.DictReader(fin)
        writer = csv.DictWriter(fout, fieldnames=reader.fieldnames)
        writer.writeheader()
        for record in reader:
            for fn in fns:
                record = fn(record)
            writer.writerow(record)
            n += 1
    return n


def in_process_clean(source: str):
    namespace: dict = {"__name__": "bench_module"}
    exec(compile(source, "clean_customers.py", "exec"), namespace)  # noqa: S102 - our own exported module
    return namespace["clean"]


def apply_in_process(source: str, src: Path, dst: Path) -> int:
    df = pd.read_csv(src, dtype=str, keep_default_na=False).astype(object)
    out = in_process_clean(source)(df)
    out.to_parquet(dst, index=False)
    return len(out)


def check_same_logic(source: str, sample: pd.DataFrame) -> None:
    """The record functions give the module's output, cell for cell (None and NaN alike)."""
    expected = in_process_clean(source)(sample.astype(object).copy())
    fns = record_functions(source)
    rows = []
    for record in sample.to_dict(orient="records"):
        for fn in fns:
            record = fn(record)
        rows.append(record)
    got = pd.DataFrame(rows, columns=sample.columns)
    left, right = expected.astype(object).where(expected.notna(), None), got.astype(object).where(got.notna(), None)
    if not left.equals(right):
        diff = (left != right) & ~(left.isna() & right.isna())
        col = diff.any().idxmax()
        i = diff[col].idxmax()
        raise SystemExit(f"record-at-a-time logic differs from the module at row {i}, {col}: {right.at[i, col]!r} "
                         f"!= {left.at[i, col]!r}")


def bench_apply(rows: int, workers: int, work: Path) -> dict:
    from smolclean_dagster.core.apply import apply_module
    from smolclean_dagster.sandbox import Sandbox

    print(f"apply: writing a {rows:,}-row messy file and learning a module from its first 5,000 rows ...")
    big = messy_customers(rows)
    src = write_csv(big, work / "customers.csv")
    sample = write_csv(big.head(5000), work / "customers_sample.csv")
    source = learn_module(sample, work / "learn")
    functions = [name for name, _ in module_constants(source)]
    check_same_logic(source, big.head(20_000))
    size_mb = round(src.stat().st_size / 1e6, 1)

    timings = {}
    print(f"  smolclean (sandboxed batches, {workers} workers) ...")
    with Sandbox() as sandbox:
        level = sandbox.level.describe()
        started = time.perf_counter()
        result = apply_module(source, src, work / "out_sandbox.parquet", sandbox=sandbox, workers=workers)
        timings["smolclean"] = (time.perf_counter() - started, result.rows_in)
    print("  in-process (same module, no sandbox) ...")
    started = time.perf_counter()
    n = apply_in_process(source, src, work / "out_in_process.parquet")
    timings["in_process"] = (time.perf_counter() - started, n)
    print("  record at a time ...")
    started = time.perf_counter()
    n = apply_record_at_a_time(source, src, work / "out_records.csv")
    timings["record_at_a_time"] = (time.perf_counter() - started, n)

    ours = pd.read_parquet(work / "out_sandbox.parquet")
    theirs = pd.read_parquet(work / "out_in_process.parquet")
    same = ours.astype(object).where(ours.notna(), None).equals(theirs.astype(object).where(theirs.notna(), None))
    out = {
        "rows": rows, "file_mb": size_mb, "functions": functions, "sandbox": level, "workers": workers,
        "same_output_as_in_process": bool(same),
        "variants": {k: {"seconds": round(s, 2), "rows_per_s": round(n / s)} for k, (s, n) in timings.items()},
    }
    v = out["variants"]
    out["speedup_vs_record"] = round(v["smolclean"]["rows_per_s"] / v["record_at_a_time"]["rows_per_s"], 1)
    out["time_vs_in_process"] = round(v["smolclean"]["seconds"] / v["in_process"]["seconds"], 2)
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

    from smolclean_dagster.learning import learn

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

    from smolclean_dagster.learning import learn

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
        rows = [[k.replace("_", " "), v["seconds"], f"{v['rows_per_s']:,}"] for k, v in a["variants"].items()]
        parts.append(f"1. apply: {a['rows']:,} rows ({a['file_mb']} MB CSV), {len(a['functions'])} functions, "
                     f"file to file; sandbox: {a['sandbox']}\n" + table(["variant", "seconds", "rows/s"], rows)
                     + f"\nsmolclean vs record at a time: {a['speedup_vs_record']}x rows/s (target >= "
                     f"{TARGETS['apply_vs_record']:g}x); time vs in-process: {a['time_vs_in_process']}x (target <= "
                     f"{TARGETS['apply_vs_in_process']:g}x); same output as in-process: {a['same_output_as_in_process']}")
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
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the apply benchmark's file")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers of the apply benchmark")
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
            results["apply"] = bench_apply(args.rows, args.workers, work / "apply")
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
        results = {**json.loads(previous.read_text(encoding="utf-8")), **results}
    print()
    print(report(results))
    if not args.no_write:
        print(f"wrote {write_results('speed', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
