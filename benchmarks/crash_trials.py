"""Crash trials: `smolclean learn` killed with SIGKILL at random moments, then run again.

Each trial starts the CLI in its own process group on a fresh workdir, kills the whole group
(orchestrator, spawned chunk processes, sandbox workers) at a random moment of a run, and checks:

- every stored file is whole: the working registry loads, every JSON record parses, every Parquet
  frame reads, the module (if any) parses; no half-written file has taken a real file's name;
- running `smolclean learn` again completes, without running again any chunk whose trace was stored
  before the kill (its trace file is untouched);
- the module it ends with is the module of an uninterrupted run (the text without its `Updated:` line)
  with the same functions in the same order, and the cleaned drop is the same.

Run: `python benchmarks/crash_trials.py [--trials 10] [--seed 8]`. Prints a table and writes
benchmarks/results/crash_trials.json. tests/test_crashes.py runs a few trials of the same code.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

NAME = "crashy"
SMOLCLEAN = [sys.executable, "-m", "smolclean_dagster.cli"]


@dataclass(frozen=True)
class Setup:
    """The learning run the trials interrupt. The default: 120 rows in 6 regions of dirt, one kind each,
    chunks of 10 rows, a budget of 6 chunks (the planner chooses as many as show dirt not seen yet)."""

    rows: int = 120
    regions: int = 6
    budget: int = 6
    concurrency: int = 1
    code: Path | None = None  # a copy of the package every run imports (see freeze_code)


def freeze_code(folder: Path) -> Path:
    """Copy the package into `folder`, so that every run of a series uses the same code even while the
    working tree changes (a module compared with an earlier run's must come from the same analyst)."""
    import shutil

    import smolclean_dagster

    shutil.copytree(Path(smolclean_dagster.__file__).parent, folder / "smolclean_dagster",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def make_drop(folder: Path, setup: Setup) -> Path:
    """A CSV whose dirt differs from region to region."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["id,name,city,signup,spend,active"]
    cities = ["Oslo", "Bergen", "Tromso"]
    rows = setup.rows
    for i in range(rows):
        region = i * setup.regions // rows
        name = f"Person {i}" if region != 0 else f"  Person {i} "
        city = cities[i % 3] if region != 1 else [" oslo", "OSLO", "Oslo "][i % 3]
        signup = f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}" if region != 2 else f"{i % 12 + 1:02d}/{i % 28 + 1:02d}/2024"
        spend = f"{(i * 37) % 900 + 10}.50" if region != 3 else ["$1200.50", "N/A", "$85.00"][i % 3]
        active = "true" if i % 2 else "false"
        if region == 4:
            active = ["yes", "Y", "no", "N"][i % 4]
        if region == 5:
            city = ["Oslo", "none", "Bergen", "-"][i % 4]
        lines.append(f"{i},{name},{city},{signup},{spend},{active}")
    path = folder / f"{NAME}.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def learn_command(drop: Path, workdir: Path, setup: Setup) -> list[str]:
    return [*SMOLCLEAN, "learn", str(drop), "--name", NAME, "--workdir", str(workdir), "--analyst", "rules",
            "--chunk-size", "10", "--chunk-budget", str(setup.budget), "--concurrency", str(setup.concurrency)]


@dataclass
class Run:
    """One `smolclean learn` process: whether it finished, how long it ran, what it said."""

    finished: bool
    returncode: int | None
    seconds: float
    stderr: str = ""
    workers_at_kill: tuple[int, ...] = ()  # the run's sandbox workers when it was killed


def run_learn(drop: Path, workdir: Path, setup: Setup, *, kill_after: float | None = None, timeout: float = 600.0) -> Run:
    """Run `smolclean learn` in its own process group; with `kill_after`, SIGKILL the group then."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SMOLCLEAN_MODEL", None)
    if setup.code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(setup.code), *filter(None, [env.get("PYTHONPATH")])])
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        # `python -m` puts the working directory first on sys.path: run where no other copy of the package is.
        proc = subprocess.Popen(learn_command(drop, workdir, setup), stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True, env=env, cwd=setup.code)
        try:
            proc.wait(timeout=kill_after if kill_after is not None else timeout)
        except subprocess.TimeoutExpired:
            workers = tuple(sorted(pid for pid in sandbox_workers() if _descends_from(pid, proc.pid)))
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _wait_group_gone(proc.pid)
            return Run(False, None, time.monotonic() - started, workers_at_kill=workers)
        err.seek(0)
        return Run(True, proc.returncode, time.monotonic() - started, err.read().decode(errors="replace")[-3000:])


def _wait_group_gone(pgid: int, timeout: float = 10.0) -> None:
    """Wait until no process of the killed group is left (sandbox workers included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def sandbox_workers() -> set[int]:
    """Process ids of live sandbox workers (they run in their own session, outside the killed group)."""
    script = b"smolclean_dagster/core/sandbox/worker.py"  # the live package's or a frozen copy's
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if script in (proc / "cmdline").read_bytes():
                found.add(int(proc.name))
        except OSError:
            continue
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    return False


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def orphans_after(workers: tuple[int, ...], timeout: float = 5.0) -> list[int]:
    """The killed run's sandbox workers still alive `timeout` s after the kill (they should exit at once)."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in workers if _alive(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def storage_dir(workdir: Path) -> Path:
    return workdir / "storage" / NAME


def module_path(workdir: Path) -> Path:
    return workdir / "modules" / NAME / f"clean_{NAME}.py"


def traces(workdir: Path) -> dict[str, tuple[int, str]]:
    """Each stored chunk trace: (modification time, content hash), to tell whether a chunk ran again."""
    folder = storage_dir(workdir) / "chunk_functions"
    return {p.stem: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def damaged_files(workdir: Path) -> list[str]:
    """Stored files that do not load: registry, JSON records, Parquet frames, the module. Empty when all load."""
    import pandas as pd

    from smolclean_dagster.core.registry import Registry, RegistryStore

    problems = []
    storage = storage_dir(workdir)
    try:
        RegistryStore(storage / "working_registry.json", NAME).load()
    except Exception as exc:  # noqa: BLE001 - any failure to load is what we count
        problems.append(f"working registry: {exc}")
    published = storage / "registry" / "_.json"
    if published.exists():
        try:
            Registry.model_validate_json(published.read_text(encoding="utf-8"))
        except Exception as exc:  # noqa: BLE001
            problems.append(f"published registry: {exc}")
    for path in sorted(storage.rglob("*.json")) if storage.is_dir() else []:
        if path.name.startswith("."):
            continue
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{path.relative_to(workdir)}: {exc}")
    for path in sorted(storage.rglob("*.parquet")) if storage.is_dir() else []:
        if path.name.startswith("."):
            continue
        try:
            pd.read_parquet(path)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{path.relative_to(workdir)}: {exc}")
    module = module_path(workdir)
    if module.exists():
        try:
            ast.parse(module.read_text(encoding="utf-8"))
        except SyntaxError as exc:
            problems.append(f"module: {exc}")
    return problems


def leftovers(workdir: Path) -> list[str]:
    """Temporary files a killed writer left (harmless: real names are only ever replaced whole)."""
    return sorted(str(p.relative_to(workdir)) for p in workdir.rglob(".*.tmp"))


def module_text(workdir: Path) -> str:
    """The module without its `Updated:` line (the only line that differs between equal runs)."""
    text = module_path(workdir).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("Updated: "))


def function_names(workdir: Path) -> list[str]:
    from smolclean_dagster.core.registry import RegistryStore

    return [f.name for f in RegistryStore(storage_dir(workdir) / "working_registry.json", NAME).load().functions]


def cleaned_hash(workdir: Path) -> str:
    path = workdir / "cleaned" / NAME / f"{NAME}.parquet"
    import pandas as pd

    return hashlib.sha256(pd.read_parquet(path).to_csv(index=False).encode()).hexdigest()


@dataclass
class Baseline:
    """What an uninterrupted run ends with."""

    seconds: float
    module: str
    functions: list[str]
    cleaned: str
    chunks: int


def baseline(root: Path, drop: Path, setup: Setup) -> Baseline:
    workdir = root / "baseline"
    run = run_learn(drop, workdir, setup)
    if run.returncode != 0:
        raise RuntimeError(f"the uninterrupted run failed: {run.stderr}")
    return Baseline(run.seconds, module_text(workdir), function_names(workdir), cleaned_hash(workdir),
                    len(traces(workdir)))


@dataclass
class Trial:
    """One kill and the run after it."""

    kill_after_s: float
    killed: bool
    chunks_done_at_kill: int
    registry_entries_at_kill: int | None
    module_at_kill: bool
    damaged_after_kill: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    workers_at_kill: int = 0
    orphan_workers: list[int] = field(default_factory=list)
    resumed_ok: bool = False
    resume_s: float = 0.0
    chunks_redone: list[str] = field(default_factory=list)
    same_module: bool = False
    same_functions: bool = False
    same_cleaned: bool = False
    error: str = ""

    @property
    def passed(self) -> bool:
        return (not self.damaged_after_kill and not self.orphan_workers and self.resumed_ok
                and not self.chunks_redone and self.same_module and self.same_functions and self.same_cleaned)


def trial(root: Path, drop: Path, base: Baseline, kill_after: float, setup: Setup) -> Trial:
    """Kill a learning run after `kill_after` seconds, check what it left, run again and compare."""
    workdir = root / f"trial-{kill_after:.2f}"
    run = run_learn(drop, workdir, setup, kill_after=kill_after)
    orphans = orphans_after(run.workers_at_kill)
    done = traces(workdir)
    try:
        entries = len(function_names(workdir))
    except Exception:  # noqa: BLE001 - a registry that does not load is reported by damaged_files
        entries = None
    t = Trial(kill_after, not run.finished, len(done), entries, module_path(workdir).exists(),
              damaged_files(workdir), leftovers(workdir), len(run.workers_at_kill), orphans)
    again = run_learn(drop, workdir, setup)
    t.resume_s = round(again.seconds, 2)
    t.resumed_ok = again.returncode == 0
    if not t.resumed_ok:
        t.error = again.stderr
        return t
    after = traces(workdir)
    t.chunks_redone = sorted(c for c, version in done.items() if after.get(c) != version)
    t.same_module = module_text(workdir) == base.module
    t.same_functions = function_names(workdir) == base.functions
    t.same_cleaned = cleaned_hash(workdir) == base.cleaned
    if not t.same_module:
        t.error = _diff(base.module, module_text(workdir))
    return t


def _diff(a: str, b: str) -> str:
    import difflib

    return "\n".join(list(difflib.unified_diff(a.splitlines(), b.splitlines(), "uninterrupted", "resumed", lineterm=""))[:40])


def kill_moments(n: int, seconds: float, seed: int, until: float = 0.9) -> list[float]:
    """`n` kill moments spread over the first `until` of a run of `seconds`: one at random in each of n equal
    slices. (The first run of a session is the slowest, so a late kill may come after a later run ended.)"""
    rng = random.Random(seed)
    start, end = 1.0, seconds * until
    width = (end - start) / n
    return [round(start + width * (i + rng.random()), 2) for i in range(n)]


def main() -> int:
    from common import describe_machine, machine_info, table, write_results

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="smolclean-crash-") as tmp:
        root = Path(tmp)
        setup = Setup(concurrency=args.concurrency, code=freeze_code(root / "code"))
        drop = make_drop(root / "input", setup)
        base = baseline(root, drop, setup)
        print(f"uninterrupted run: {base.seconds:.1f} s, {base.chunks} chunks, {len(base.functions)} functions")
        results = []
        for moment in kill_moments(args.trials, base.seconds, args.seed):
            t = trial(root, drop, base, moment, setup)
            results.append(t)
            print(f"killed at {moment:6.2f} s: {'PASS' if t.passed else 'FAIL'} "
                  f"({t.chunks_done_at_kill} chunk(s) done, resumed in {t.resume_s} s)" + (f"\n{t.error}" if t.error else ""))
    headers = ["kill at s", "killed", "chunks done", "registry entries", "module", "damaged files", "tmp leftovers",
               "workers at kill", "orphan workers", "resume s", "chunks redone", "same module", "same functions",
               "same cleaned", "result"]
    rows = [[f"{t.kill_after_s:.2f}", t.killed, t.chunks_done_at_kill, t.registry_entries_at_kill, t.module_at_kill,
             len(t.damaged_after_kill), len(t.leftovers), t.workers_at_kill, len(t.orphan_workers), t.resume_s,
             len(t.chunks_redone), t.same_module, t.same_functions, t.same_cleaned, "PASS" if t.passed else "FAIL"]
            for t in results]
    print()
    print(table(headers, rows))
    print(f"\n{describe_machine(info)}; uninterrupted run {base.seconds:.1f} s, concurrency {args.concurrency}")
    passed = sum(t.passed for t in results)
    print(f"{passed}/{len(results)} trials passed")
    write_results("crash_trials", {
        "machine": info, "seed": args.seed, "concurrency": args.concurrency,
        "baseline": {"seconds": round(base.seconds, 2), "chunks": base.chunks, "functions": base.functions},
        "trials": [{**asdict(t), "passed": t.passed} for t in results],
    })
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
