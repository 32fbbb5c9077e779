"""Learning speed: offline learning seconds per dataset, and the tool's own seconds per model call.

Run: `python benchmarks/learning_speed.py [--datasets beers customers] [--repeat N] [--own-rows N]
[--replay patients products transactions] [--timeout S]`. Prints two tables and writes
benchmarks/results/learning_speed.json. Only paths relative to this file are used (../shared beside the
repository root), so the same script measures an older checkout when copied into it and run with a Python
where that checkout is installed (`pip install -e .`; the script stops when the package or its prompts would
come from elsewhere).

1. Offline learning: `learning.learn()` with the rules analyst and default settings otherwise, on a fresh
   temporary workdir, for each pair of ../shared/benchmarks/data (its dirty.csv) and for `customers`, a
   customer export of `--own-rows` rows and 10 columns this script writes (seeded, the same bytes every run)
   into a temporary folder: name, email, city, state, zip, phone, signup date, plan, amount, status, with
   typos in cities, case slips in states, N/A tokens, stray whitespace, dates in other formats, zips that lost
   their leading zero and rows whose city breaks the zip -> city dependency.
2. Replay: a recorded model run of benchmarks/results/transcripts/<case> (the queue folder of
   ../shared/tools/file_llm_server.py: NNNN.request.json, NNNN.response.txt, log.jsonl) is learned again as it
   was recorded (benchmarks/instructed/<case> with its instructions, default settings, model `openai/agent`),
   against tests/llm_server.py on 127.0.0.1 answering every call at once with the next recorded answer.
   The tool's own time is the wall time of `learn()` minus the time some call was waiting for the server.
   A request that is not byte for byte the recorded one (the prompts changed since) still gets the next
   answer in order; the table says how many were as recorded and the JSON where the first one differed.
   Calls beyond the transcript are answered "clean". Beside the replays: the seconds a fresh Python takes to
   import the model client (litellm and the OpenAI client's resources) once pandas and Dagster are imported,
   which every cold learning with a model pays before its first call.

Each learning runs in a process of its own (this script with `--learn-one`), so every run starts cold, as
`smolclean learn` does. Wall time is `learn()`'s alone (not Python's start and imports); CPU is the user and
system time of that process and every process below it (fork server, chunk workers, sandboxes) less the
process's CPU before `learn()`: this script makes itself the subreaper of the tree so no orphan's time is lost.
The 1-minute load average is read just before and just after each `learn()`; on a shared machine it includes
other jobs, and the learning's own processes raise it. `--repeat N` runs every case N times, the cases taking
turns, and reports the run of median wall time.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import hashlib
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent  # the checkout measured: its package comes first on every process's path
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))  # the OpenAI-compatible server of the tests
from common import describe_machine, machine_info, quiet_logs, table, write_results  # noqa: E402

DATA = REPO.parent / "shared" / "benchmarks" / "data"
TRANSCRIPTS = HERE / "results" / "transcripts"
PAIRS = ("beers", "flights", "hospital", "rayyan", "tax_50k")
OWN = "customers"
REPLAY_CASES = ("patients", "products", "transactions")
#: The issue's bars: offline learning seconds per file (machine idle), the tool's own seconds per call (median).
TARGETS = {"offline_learning_s": 60.0, "own_s_per_call_median": 3.0}
#: The answer to a call the transcript holds none for.
CLEAN_REPLY = "<issues>\n</issues>\n<status>clean</status>"


# ------------------------------------------------------------------------------------------- own file

#: (zip, city, state): several zips per city, Massachusetts and New Jersey zips with a leading zero.
PLACES = [
    ("60601", "Chicago", "IL"), ("60614", "Chicago", "IL"), ("60657", "Chicago", "IL"), ("80202", "Denver", "CO"),
    ("80205", "Denver", "CO"), ("02108", "Boston", "MA"), ("02115", "Boston", "MA"), ("02139", "Cambridge", "MA"),
    ("98101", "Seattle", "WA"), ("98109", "Seattle", "WA"), ("78701", "Austin", "TX"), ("78704", "Austin", "TX"),
    ("77002", "Houston", "TX"), ("30303", "Atlanta", "GA"), ("33101", "Miami", "FL"), ("97201", "Portland", "OR"),
    ("04101", "Portland", "ME"), ("07102", "Newark", "NJ"), ("07030", "Hoboken", "NJ"), ("10001", "New York", "NY"),
    ("10016", "New York", "NY"), ("19103", "Philadelphia", "PA"), ("85004", "Phoenix", "AZ"),
    ("94103", "San Francisco", "CA"), ("90012", "Los Angeles", "CA"), ("92101", "San Diego", "CA"),
    ("55401", "Minneapolis", "MN"), ("37203", "Nashville", "TN"), ("48226", "Detroit", "MI"), ("63101", "St. Louis", "MO"),
]
FIRST = ("James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan "
         "Joseph Jessica Thomas Sarah Carlos Maria Wei Mei Ahmed Fatima Olga Ivan Priya Arjun Sofia Lucas").split()
LAST = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson "
        "Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Chen Patel Kim Nguyen Novak").split()
DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "acme.io")
PLANS = {"Basic": 9.0, "Pro": 29.0, "Team": 79.0, "Enterprise": 249.0}
STATUSES = ("active", "active", "active", "cancelled", "paused")
AREA_CODES = {"Chicago": "312", "Denver": "303", "Boston": "617", "Cambridge": "617", "Seattle": "206",
              "Austin": "512", "Houston": "713", "Atlanta": "404", "Miami": "305", "Portland": "503", "Newark": "973",
              "Hoboken": "201", "New York": "212", "Philadelphia": "215", "Phoenix": "602", "San Francisco": "415",
              "Los Angeles": "213", "San Diego": "619", "Minneapolis": "612", "Nashville": "615", "Detroit": "313",
              "St. Louis": "314"}


def customer_export(rows: int, seed: int = 7) -> list[dict[str, str]]:
    """A customer export of `rows` rows as a user's CRM writes it, with the dirt such files carry (see the
    module docstring); every cell is text, as in the CSV."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(rows):
        zip_code, city, state = PLACES[rng.integers(len(PLACES))]
        first, last = FIRST[rng.integers(len(FIRST))], LAST[rng.integers(len(LAST))]
        plan = list(PLANS)[rng.choice(4, p=[0.45, 0.3, 0.17, 0.08])]
        day = np.datetime64("2019-01-01") + int(rng.integers(0, 2000))
        row = {
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{rng.integers(1, 999)}@{DOMAINS[rng.integers(len(DOMAINS))]}",
            "city": city, "state": state, "zip": zip_code,
            "phone": f"({AREA_CODES[city]}) 555-{rng.integers(0, 10_000):04d}",
            "signup_date": str(day),
            "plan": plan,
            "amount": f"{PLANS[plan] * (1 + int(rng.integers(0, 4)) * 0.5):.2f}",
            "status": STATUSES[rng.integers(len(STATUSES))],
        }
        _dirty(row, rng)
        out.append(row)
    return out


def _dirty(row: dict[str, str], rng) -> None:
    """Soil one row in place: each slip on its own small share of the rows."""
    import numpy as np

    roll = rng.random(12)
    if roll[0] < 0.02:  # a city typed with a letter lost or doubled
        k = int(rng.integers(1, len(row["city"]) - 1))
        row["city"] = row["city"][:k] + row["city"][k + (1 if rng.random() < 0.5 else -1):]
    elif roll[0] < 0.04:
        row["city"] = row["city"].lower()
    elif roll[0] < 0.05:  # the zip -> city dependency broken: another city's name
        row["city"] = PLACES[rng.integers(len(PLACES))][1]
    if roll[1] < 0.03:
        row["state"] = row["state"].lower()
    elif roll[1] < 0.04:
        row["state"] = row["state"].capitalize()
    if roll[2] < 0.03 and row["zip"].startswith("0"):  # opened in a spreadsheet on the way
        row["zip"] = row["zip"].lstrip("0")
    if roll[3] < 0.03:
        row["name"] = str(rng.choice([f" {row['name']}", f"{row['name']}  ", row["name"].replace(" ", "  ")]))
    elif roll[3] < 0.05:
        row["name"] = row["name"].upper()
    if roll[4] < 0.03:
        row["email"] = str(rng.choice(["N/A", "", "n/a"]))
    elif roll[4] < 0.05:
        row["email"] = row["email"].capitalize() + " "
    digits = re.sub(r"\D", "", row["phone"])
    if roll[5] < 0.10:
        row["phone"] = f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"
    elif roll[5] < 0.14:
        row["phone"] = f"+1 {digits[:3]}.{digits[3:6]}.{digits[6:]}"
    elif roll[5] < 0.15:
        row["phone"] = "N/A"
    day = np.datetime64(row["signup_date"]).astype(object)
    if roll[6] < 0.04:
        row["signup_date"] = day.strftime("%m/%d/%Y")
    elif roll[6] < 0.05:
        row["signup_date"] = day.strftime("%d %b %Y")
    if roll[7] < 0.03:
        row["plan"] = row["plan"].lower()
    elif roll[7] < 0.04:
        row["plan"] += " "
    if roll[8] < 0.03:
        row["amount"] = "$" + row["amount"]
    elif roll[8] < 0.05:
        row["amount"] = str(rng.choice(["N/A", ""]))
    if roll[9] < 0.03:
        row["status"] = row["status"].capitalize() if rng.random() < 0.7 else row["status"].upper()
    elif roll[9] < 0.04:
        row["status"] = f" {row['status']}"


def write_export(rows: int, folder: Path) -> Path:
    """The export as `folder/customers.csv`."""
    path = folder / f"{OWN}.csv"
    records = customer_export(rows)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return path


# ------------------------------------------------------------------------------- one learning, measured

def learn_one(spec_path: Path) -> None:
    """`--learn-one SPEC`: run one `learn()` as SPEC (JSON) says, write what it measured to SPEC's "result"."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    quiet_logs()
    from smolclean_dagster.learning.embedded import learn
    from smolclean_dagster.settings import DatasetSettings

    settings = DatasetSettings(workdir=Path(spec["workdir"]), **spec["settings"])
    cpu_before = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()
    started = time.monotonic()
    outcome = learn(settings, Path(spec["source"]), log_level="ERROR")
    ended = time.monotonic()
    module = outcome.module.read_text(encoding="utf-8")
    Path(spec["result"]).write_text(json.dumps({
        "started": started, "ended": ended, "cpu_before_learn_s": cpu_before,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "functions": outcome.functions, "chunks": outcome.chunks,
        "module_sha256": hashlib.sha256(module.encode()).hexdigest()[:16],
        "function_names": re.findall(r"^def (\w+)\(df", module, re.MULTILINE),
    }), encoding="utf-8")


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _become_subreaper() -> bool:
    """Orphans of the measured tree (a fork server outliving its parent) become this process's children, so
    their CPU is counted once reaped. Linux only."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap(grace_s: float = 15.0) -> int:
    """Wait for the orphans handed to this process (its only children once the measured process has ended);
    those still running after `grace_s` are killed, so their CPU counts here and not in the next case's. Returns
    how many had to be killed."""
    deadline, killed = time.monotonic() + grace_s, 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid == 0:
            if time.monotonic() > deadline and not killed:
                left = [int(p) for task in Path(f"/proc/{os.getpid()}/task").iterdir()
                        for p in (task / "children").read_text().split()]
                for orphan in left:
                    os.kill(orphan, 9)
                killed = len(left)
            time.sleep(0.05)


@dataclass
class Measured:
    """One `learn()` in a process of its own: seconds, CPU, load and what it learned."""

    wall_s: float | None
    cpu_s: float | None
    load_before: list[float]
    load_after: list[float]
    functions: int | None = None
    chunks: int | None = None
    module_sha256: str | None = None
    function_names: list[str] = field(default_factory=list)
    started: float = 0.0  # time.monotonic() of `learn()`'s start and end, for the replay's call times
    ended: float = 0.0
    stopped: str | None = None  # why there is no figure: out of time, or the run failed
    output_tail: str = ""  # the end of a failed run's output
    orphans_killed: int = 0  # processes of the run still alive 15 s after it ended


def measure(settings: dict, source: Path, work: Path, timeout_s: float) -> Measured:
    """Learn `source` with `settings` on a fresh workdir under `work`, in a child process, measured."""
    work.mkdir(parents=True)
    spec = work / "spec.json"
    spec.write_text(json.dumps({"settings": settings, "source": str(source), "workdir": str(work / "workdir"),
                                "result": str(work / "result.json")}), encoding="utf-8")
    cpu_before, load_before = _cpu(resource.RUSAGE_CHILDREN), [round(x, 2) for x in os.getloadavg()]
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--learn-one", str(spec)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, stopped = proc.communicate(timeout=timeout_s)[0] or "", None
        if proc.returncode != 0:
            stopped = f"failed ({proc.returncode}): {output.strip().splitlines()[-1] if output.strip() else ''}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the run's process group: learn() and its fork server and workers
        output = proc.communicate()[0] or ""
        stopped = f"did not finish in {timeout_s:g} s (stopped)"
    orphans = _reap()
    cpu = _cpu(resource.RUSAGE_CHILDREN) - cpu_before
    result = work / "result.json"
    if stopped or not result.exists():
        return Measured(None, round(cpu, 1), load_before, [round(x, 2) for x in os.getloadavg()],
                        stopped=stopped or "wrote no result", output_tail=output[-3000:], orphans_killed=orphans)
    r = json.loads(result.read_text(encoding="utf-8"))
    return Measured(round(r["ended"] - r["started"], 2), round(cpu - r["cpu_before_learn_s"], 1), r["load_before"],
                    r["load_after"], r["functions"], r["chunks"], r["module_sha256"], r["function_names"],
                    r["started"], r["ended"], orphans_killed=orphans)


def median_run(runs: list[Measured]) -> Measured:
    """The run of median wall time (a stopped run counts as the slowest)."""
    return sorted(runs, key=lambda m: float("inf") if m.wall_s is None else m.wall_s)[len(runs) // 2]


# ------------------------------------------------------------------------------------------------- replay

@dataclass
class Call:
    """One request the replay server answered."""

    arrived: float  # time.monotonic() when the request was read, and when its answer was ready
    answered: float
    as_recorded: bool
    from_transcript: bool


@dataclass
class Replay:
    """Answers each call at once with the transcript's next answer, noting when it came and whether it was the
    recorded request. Called by the server one request at a time."""

    requests: list[list[dict]]
    answers: list[str]
    calls: list[Call] = field(default_factory=list)
    first_difference: str | None = None

    @classmethod
    def load(cls, folder: Path) -> Replay:
        requests = sorted(folder.glob("*.request.json"))
        answers = [p.with_name(p.name.replace(".request.json", ".response.txt")) for p in requests]
        if not requests or not all(a.is_file() for a in answers):
            raise SystemExit(f"{folder}: expected NNNN.request.json with NNNN.response.txt beside each "
                             "(a queue folder of file_llm_server.py)")
        return cls([json.loads(p.read_text(encoding="utf-8"))["messages"] for p in requests],
                   [a.read_text(encoding="utf-8") for a in answers])

    def __call__(self, request):
        from llm_server import reply

        arrived, n = time.monotonic(), len(self.calls)
        messages = request.body.get("messages", [])
        as_recorded = n < len(self.requests) and messages == self.requests[n]
        if not as_recorded and self.first_difference is None:
            self.first_difference = _difference(n, self.requests[n] if n < len(self.requests) else None, messages)
        text = self.answers[n] if n < len(self.answers) else CLEAN_REPLY
        action = reply(text, prompt_tokens=len(request.prompt) // 4, completion_tokens=len(text) // 4)
        self.calls.append(Call(arrived, time.monotonic(), as_recorded, n < len(self.answers)))
        return action


def _difference(n: int, recorded: list[dict] | None, sent: list[dict]) -> str:
    """Where call `n`'s request first differs from the recorded one, in a line."""
    if recorded is None:
        return f"call {n + 1}: beyond the {n} recorded calls"
    for old, new in zip(recorded, sent):
        old_lines, new_lines = str(old.get("content", "")).splitlines(), str(new.get("content", "")).splitlines()
        for j, (a, b) in enumerate(zip(old_lines + [""], new_lines + [""])):
            if a != b:
                return (f"call {n + 1}, {new.get('role', 'message')} message line {j + 1}: "
                        f"recorded {a[:80]!r}, now {b[:80]!r}")
    return f"call {n + 1}: {len(sent)} messages, recorded {len(recorded)}"


def recorded_gaps(folder: Path) -> list[float]:
    """Seconds between an answer and the next request in the recorded run (its log.jsonl: t of each answer,
    wait_s before it, to 0.1 s); the first call's is not in the log."""
    log = folder / "log.jsonl"
    if not log.is_file():
        return []
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [round(b["t"] - b["wait_s"] - a["t"], 1) for a, b in zip(entries, entries[1:])]


def own_time(run: Measured, calls: list[Call]) -> dict:
    """The tool's own seconds: `learn()`'s wall time minus the time some call was waiting for its answer, per
    call and in total; and each call's gap (since the last answer, or since `learn()` started)."""
    waiting, covered_to = 0.0, run.started
    for call in sorted(calls, key=lambda c: c.arrived):  # the union of the waits, overlapping calls counted once
        start, end = max(call.arrived, covered_to), min(call.answered, run.ended)
        waiting += max(0.0, end - start)
        covered_to = max(covered_to, end)
    gaps = []
    for call in calls:
        before = [c.answered for c in calls if c.answered <= call.arrived]
        gaps.append(call.arrived - max([run.started, *before]))
    own = run.wall_s - waiting
    last = max((c.answered for c in calls), default=run.started)
    return {"calls": len(calls), "waiting_s": round(waiting, 3), "own_s": round(own, 1),
            "own_s_per_call": round(own / len(calls), 2) if calls else None,
            "gap_s_median": round(statistics.median(gaps), 2) if gaps else None,
            "gap_s_each": [round(g, 2) for g in gaps], "after_last_answer_s": round(run.ended - last, 1)}


def replay_case(case: str, transcripts: Path, work: Path, timeout_s: float) -> dict:
    """Learn `case` again against its transcript answered instantly; the run, its calls and own time."""
    from instructed import CASES, CASES_DIR
    from llm_server import ScriptedLLM

    folder = transcripts / case
    replay = Replay.load(folder)
    with ScriptedLLM(responder=replay) as llm:
        settings = {"name": case, "model": "openai/agent", "api_base": llm.api_base, "api_key": "x",
                    "instructions": f"@{CASES_DIR / f'{case}.instructions.md'}"}
        run = measure(settings, CASES_DIR / CASES[case][0], work, timeout_s)
    recorded = recorded_gaps(folder)
    return {"run": asdict(run), "recorded_calls": len(replay.answers), "calls_made": len(replay.calls),
            "as_recorded": sum(c.as_recorded for c in replay.calls),
            "beyond_transcript": sum(not c.from_transcript for c in replay.calls),
            "first_difference": replay.first_difference,
            "own": own_time(run, replay.calls) if run.wall_s is not None else None,
            "recorded_gap_s_median": statistics.median(recorded) if recorded else None,
            "recorded_gap_s_each": recorded}


# ------------------------------------------------------------------------------------------------ report

def _s(value: float | None, digits: int = 1) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def _load(m: dict) -> str:
    return f"{m['load_before'][0]:.1f} -> {m['load_after'][0]:.1f}"


def _wall(m: dict, name: str, notes: list[str]) -> str | None:
    """The wall seconds of a run, or "failed"/"stopped" with the reason in `notes`."""
    if m["wall_s"] is not None:
        return _s(m["wall_s"])
    notes.append(f"{name}: {m['stopped']}")
    return "stopped" if "did not finish" in m["stopped"] else "failed"


def report(results: dict) -> str:
    """The tables a run prints: offline learning, then the replayed model runs."""
    parts = []
    if results["offline"]:
        rows, notes = [], []
        for name, r in results["offline"].items():
            m = r["median_run"]
            rows.append([name, r["size"], _wall(m, name, notes), _s(m["cpu_s"]), _load(m), m["functions"], m["chunks"],
                         " / ".join(_s(w) or "-" for w in r["wall_s_each"])])
        parts.append(f"Offline learning (rules analyst, default settings, fresh workdir; median of {results['repeat']} "
                     "run(s))\n"
                     + table(["dataset", "size", "learn s (wall)", "CPU s (tree)", "load 1 min before -> after",
                              "functions", "chunks", "each run s"], rows)
                     + "".join(f"\n{n}" for n in notes)
                     + f"\ntarget: <= {TARGETS['offline_learning_s']:g} s each, on this machine with nothing else running")
    if results["replay"]:
        rows, notes = [], []
        for case, r in results["replay"].items():
            m, own = r["run"], r["own"] or {}
            rows.append([case, f"{r['calls_made']} ({r['recorded_calls']})", r["as_recorded"],
                         _wall(m, case, notes), _s(own.get("waiting_s"), 3), _s(own.get("own_s")),
                         _s(own.get("own_s_per_call"), 2), " / ".join(_s(g, 2) for g in own.get("gap_s_each", [])),
                         _s(own.get("gap_s_median"), 2),
                         _s(own.get("after_last_answer_s")), _s(m["cpu_s"]), _load(m), _s(r["recorded_gap_s_median"])])
            if own and r["as_recorded"] < own["calls"]:
                notes.append(f"{case}: {own['calls'] - r['as_recorded']} of {own['calls']} requests differ from the "
                             f"recording and were answered in order all the same ({r['beyond_transcript']} beyond "
                             f"it, answered clean); the first: {r['first_difference']}")
        parts.append("Replayed model runs, every answer instant (the tool's own time = wall time minus waiting)\n"
                     + table(["case", "calls (recorded)", "as recorded", "learn s (wall)", "waiting s", "own s",
                              "own s / call", "each call's s", "median s per call", "after last answer s",
                              "CPU s (tree)", "load 1 min before -> after", "recorded run: median s per call"], rows)
                     + "".join(f"\n{n}" for n in notes)
                     + (f"\nimporting the model client (litellm and the OpenAI client's resources) "
                        f"in the model process: {results['client_import_s']['cpu_s']:.2f} s of CPU, "
                        f"{results['client_import_s']['wall_s']:.2f} s (median of {results['client_import_s']['runs']}), "
                        "beside the learning's own start; the first call waits for what is left of it"
                        if results.get("client_import_s") else "")
                     + f"\ntarget: median <= {TARGETS['own_s_per_call_median']:g} s of the tool's own time per call")
    return "\n\n".join(parts)


#: What a learning with a model imports before its first call, beyond what a rules learning imports: the model
#: client and the OpenAI client's resources it calls through, imported in the model process that learning starts
#: at once (core/model_process.py), a fresh Python that imports nothing else.
CLIENT_IMPORT = ("import os, time; os.environ.setdefault('LITELLM_LOCAL_MODEL_COST_MAP', 'True'); "
                 "t = time.process_time(); w = time.perf_counter(); "
                 "import litellm, openai.resources; print(time.process_time() - t, time.perf_counter() - w)")


def client_import_seconds(runs: int = 3) -> dict:
    """CPU and wall seconds a fresh Python takes to import the model client, median of `runs`: what the model
    process does while the learning process starts on another core; the first call waits for what is left."""
    cpu, wall = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", CLIENT_IMPORT], capture_output=True, text=True, timeout=120,
                             env=_env(), check=True).stdout.split()
        cpu.append(float(out[-2]))
        wall.append(float(out[-1]))
    return {"cpu_s": round(statistics.median(cpu), 2), "wall_s": round(statistics.median(wall), 2), "runs": runs}


def _env() -> dict[str, str]:
    """The environment of a measured process: this checkout's package first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def _shown(path: Path) -> str:
    """A path as the results file records it: relative to the repository's folder (../shared stays readable), or
    only its name for a file generated in a temporary folder; never this machine's absolute paths."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(REPO.parent):
        return os.path.relpath(resolved, REPO)
    return resolved.name


def checkout() -> dict:
    """Which code is measured: where the package and its prompts import from (this checkout's, or the script
    stops), the commit, and whether either had uncommitted changes."""
    probe = subprocess.run([sys.executable, "-c", "import importlib.resources as r, smolclean_dagster as s; "
                            "print(s.__path__[0]); print(r.files('smolclean_dagster.prompts'))"],
                           env=_env(), capture_output=True, text=True)
    found = probe.stdout.split()
    if probe.returncode != 0 or not all(Path(p).resolve().is_relative_to(REPO) for p in found):
        raise SystemExit(f"smolclean_dagster or its prompts import from {found or probe.stderr[-500:]}, not from "
                         f"{REPO}: install this checkout in the Python you run the script with "
                         f"(pip install -e {REPO}) and run it again")

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""
    return {"package": _shown(Path(found[0])), "prompts": _shown(Path(found[1])), "commit": git("rev-parse", "--short", "HEAD") or None,
            "changed_since_commit": bool(git("status", "--porcelain", "--", "smolclean_dagster", "prompts"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", choices=[*PAIRS, OWN], default=[*PAIRS, OWN],
                        help=f"offline cases: pairs of --data and {OWN!r}, the generated export (none: skip)")
    parser.add_argument("--replay", nargs="*", choices=REPLAY_CASES, default=list(REPLAY_CASES),
                        help="transcripts to replay (none: skip)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each case; the median is reported")
    parser.add_argument("--own-rows", type=int, default=10_000, help=f"rows of the {OWN!r} export")
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the dirty/clean pairs")
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS, help="folder of recorded model runs")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds one learning may take before it is stopped")
    parser.add_argument("--name", default="learning_speed", help="results file: benchmarks/results/<name>.json")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--learn-one", type=Path, help=argparse.SUPPRESS)  # the child process of one measurement
    args = parser.parse_args(argv)
    if args.learn_one:
        learn_one(args.learn_one)
        return 0
    quiet_logs()
    subreaper = _become_subreaper()
    results: dict = {"machine": machine_info(), "checkout": checkout(), "targets": TARGETS, "repeat": args.repeat,
                     "cpu_counts_orphans": subreaper, "offline": {}, "replay": {}}
    print(f"Learning speed ({describe_machine(results['machine'])}, load {results['machine']['load_average_1min']}); "
          f"measuring {REPO} (commit {results['checkout']['commit']}"
          f"{', with uncommitted changes' if results['checkout']['changed_since_commit'] else ''})")
    with tempfile.TemporaryDirectory(prefix="smolclean-learning-speed-") as tmp:
        work = Path(tmp)
        sources = {name: args.data / name / "dirty.csv" for name in args.datasets if name != OWN}
        if OWN in args.datasets:
            sources[OWN] = write_export(args.own_rows, work)
        runs: dict[str, list[Measured]] = {name: [] for name in sources}
        for n in range(args.repeat):  # the cases take turns, so a slow spell of a shared machine hits them alike
            for name, source in sources.items():
                print(f"offline: {name} (run {n + 1} of {args.repeat}) ...")
                runs[name].append(measure({"name": name, "analyst": "rules"}, source, work / f"{name}-{n}", args.timeout))
                print(f"  {runs[name][-1].wall_s or runs[name][-1].stopped} s")
        for name, source in sources.items():
            with source.open(encoding="utf-8", newline="") as fh:
                records = list(csv.reader(fh))
            results["offline"][name] = {"size": f"{len(records) - 1}x{len(records[0])}", "source": _shown(source),
                                        "median_run": asdict(median_run(runs[name])),
                                        "wall_s_each": [m.wall_s for m in runs[name]]}
        for case in args.replay:
            print(f"replay: {case} ...")
            results["replay"][case] = replay_case(case, args.transcripts, work / f"replay-{case}", args.timeout)
        if args.replay:
            results["client_import_s"] = client_import_seconds()
    results["machine"]["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    print()
    print(report(results))
    if not args.no_write:
        print(f"\nwrote {write_results(args.name, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
