"""The Dagster instance of a workdir: one for every tool, so what one did the others see.

`smolclean learn`, `demo`, `ui`, `approve` and `rollback`, `dg dev` in a dg project and a deployment's processes
find it the same way:

- `DAGSTER_HOME`, as Dagster's own commands read it: from a `.env` file in the current folder (which `dg dev` and
  `dagster dev` load; `dg scaffold defs smolclean_dagster.SmolcleanComponent` writes one in a dg project), else
  from the environment (a deployment sets it for every process);
- otherwise `<workdir>/dagster_home`, made on first use.

The instance holds what was done: the runs, the cleanings, the sensors' cursors. A drop is cleaned once per module
version and learned from at most once because the instance remembers it; without a DAGSTER_HOME, `dg dev` and
`dagster dev` keep theirs in a temporary folder they delete when they stop, and after a restart every drop would
be cleaned and learned from again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import dagster as dg

from .core.errors import SettingsError

HOME_VARIABLE = "DAGSTER_HOME"
#: Where Dagster's commands keep the instance they make when DAGSTER_HOME is not set (deleted when they stop).
TEMPORARY_HOME_PREFIX = ".tmp_dagster_home_"

#: No telemetry; smolclean's logs in the runs' logs; queued runs looked for every second, not every five: a
#: learning run is a chain of short runs the learning sensor queues one after another (nine or more per drop).
_DAGSTER_YAML = """\
telemetry:
  enabled: false
python_logs:
  managed_python_loggers: [smolclean]
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""


def dagster_home(workdir: Path | str, folder: Path | None = None) -> Path:
    """The folder of the instance a workdir's tools use, read from `folder` (default: the current one) as Dagster reads it.

    Example:
        >>> dagster_home("work").name  # doctest: +SKIP
        'dagster_home'
    """
    env_file = (Path.cwd() if folder is None else Path(folder)) / ".env"
    home, where = _home_in(env_file), str(env_file)
    if not home:
        home, where = os.environ.get(HOME_VARIABLE), "the environment"
    if not home:
        return (Path(workdir) / "dagster_home").resolve()
    path = Path(home).expanduser()
    if not path.is_absolute():
        raise SettingsError(f"{HOME_VARIABLE}={home} (in {where}) is not an absolute path, which Dagster requires; "
                            "give the full path of the instance's folder")
    return path


def workdir_instance(workdir: Path | str) -> dg.DagsterInstance:
    """The Dagster instance of `workdir` (see the module's docstring), its folder and settings made on first use."""
    home = dagster_home(workdir)
    if not home.exists() or home == (Path(workdir) / "dagster_home").resolve():
        prepare_home(home)
        _seed_storage(home)
    instance = dg.DagsterInstance.from_config(str(home))
    quick_runs(instance)
    storage = instance.event_log_storage
    if hasattr(storage, "index_connection") and not storage.has_table("dynamic_partitions"):
        # A process killed while the storage was being created can leave it without some tables; make the
        # missing ones (only those: nothing stored is touched), rather than stop every later run with "run
        # `dagster instance migrate`".
        from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata

        with storage.index_connection() as connection:
            SqlEventLogStorageMetadata.create_all(connection)
    return instance


def prepare_home(home: Path) -> None:
    """Make an instance's folder, with smolclean's settings (no telemetry, smolclean's logs in the runs' logs)
    unless it has its own `dagster.yaml`."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(_DAGSTER_YAML, encoding="utf-8")


#: The storage of a new instance with smolclean's settings: its tables, indexes and migration marks, and nothing
#: stored. Made once per Dagster version in the user's cache and copied into each new instance: making it takes
#: about a second of every first learning in a workdir.
_STORAGE_FILES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def _seed_storage(home: Path) -> None:
    """Give a new instance with smolclean's settings (no storage yet) the empty storage made once before."""
    config = home / "dagster.yaml"
    if any((home / part).exists() for part in ("history", "schedules", "storage")) or not config.is_file() \
            or config.read_text(encoding="utf-8") != _DAGSTER_YAML:
        return  # an instance in use, or one with its own settings (its storage may be elsewhere): Dagster makes it
    template = _storage_template()
    if template is None:
        return
    for name in _STORAGE_FILES:
        target = home / name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.part")
        shutil.copyfile(template / name, partial)
        os.replace(partial, target)  # a storage file is whole or absent, never half-copied


def _cache_folder() -> Path | None:
    """smolclean's folder in the user's cache (XDG_CACHE_HOME, else ~/.cache), not made here; None without a home."""
    try:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "smolclean"
    except RuntimeError:  # no home folder to keep a cache in
        return None


def _storage_template() -> Path | None:
    """The folder of the empty storage `_seed_storage` copies, made on first use; None where it cannot be made
    (then Dagster makes each instance's storage itself, as it always can)."""
    digest = hashlib.sha256(_DAGSTER_YAML.encode()).hexdigest()[:8]
    cache = _cache_folder()
    if cache is None:
        return None
    template = cache / f"dagster-{dg.__version__}-{digest}"
    if all((template / name).is_file() for name in _STORAGE_FILES):
        return template
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".dagster-", dir=cache) as tmp:
            made = Path(tmp) / "home"
            prepare_home(made)
            dg.DagsterInstance.from_config(str(made)).dispose()
            if not all((made / name).is_file() for name in _STORAGE_FILES):
                return None  # another Dagster lays its storage out otherwise: leave it to make its own
            with contextlib.suppress(OSError):  # another process made it meanwhile: theirs is as good
                os.replace(made, template)
    except OSError:
        return None
    return template if all((template / name).is_file() for name in _STORAGE_FILES) else None


def quick_runs(instance: dg.DagsterInstance) -> None:
    """Let the runs this process makes on `instance` start quicker, storing the same: each run's event log
    starts from a copy of an empty one (`_quick_run_shards`), and each step's output is kept in the same files
    without live `tail` processes (`_quick_compute_logs`). Only this process's instance is changed: another
    process (the UI, a deployment's daemon) runs as Dagster always does. The learning flow makes seven runs
    or more for one drop, three of them before the first model call."""
    _quick_run_shards(instance)
    _quick_compute_logs(instance)


def _quick_compute_logs(instance: dg.DagsterInstance) -> None:
    """Keep each step's stdout and stderr in the files Dagster's local compute log manager writes (the UI
    shows them as before), and show them on this process's own output as they are written.

    Dagster's manager shows them through processes: for each step it starts two `tail` processes and two Python
    processes that watch for orphans, and stops them when the step ends (about 0.15 s and a Python start-up of
    CPU per step, each learning run's steps included). A thread of this process copies what the files gain
    instead (`_Mirror`)."""
    from dagster._core.execution.compute_logs import redirect_to_file
    from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
    from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
    from dagster._utils import ensure_file, touch_file

    manager = instance.compute_log_manager
    if type(manager) is not LocalComputeLogManager or "capture_logs" in vars(manager):
        return

    @contextlib.contextmanager
    def capture_logs(log_key):
        paths = [manager.get_captured_local_path(log_key, IO_TYPE_EXTENSION[kind])
                 for kind in (ComputeIOType.STDOUT, ComputeIOType.STDERR)]
        for path in paths:
            ensure_file(path)
        with _Mirror(paths, (sys.stdout, sys.stderr)):
            with redirect_to_file(sys.stdout, paths[0]), redirect_to_file(sys.stderr, paths[1]):
                yield CapturedLogContext(log_key)
        touch_file(manager.complete_artifact_path(log_key))  # as Dagster's: the capture is complete

    manager.capture_logs = capture_logs


class _Mirror:
    """Copy what each file gains to the stream it captures (its file descriptor as it was before the capture),
    every `INTERVAL` seconds and once more when the capture ends, from a thread of this process."""

    INTERVAL = 0.2

    def __init__(self, paths: list[str], streams: tuple) -> None:
        self._targets = []
        for path, stream in zip(paths, streams):
            try:
                fd = os.dup(stream.fileno())
            except (AttributeError, OSError, ValueError):  # no descriptor (a test's capture): Dagster shows none
                continue
            stream.flush()
            self._targets.append([path, os.path.getsize(path), fd])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="smolclean-step-output", daemon=True)

    def __enter__(self) -> _Mirror:
        if self._targets:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._targets:
            self._stop.set()
            self._thread.join()
        for _, _, fd in self._targets:
            os.close(fd)

    def _run(self) -> None:
        while True:
            last = self._stop.wait(self.INTERVAL)
            for target in self._targets:
                target[1] = _copy_since(*target)
            if last:
                return


def _copy_since(path: str, start: int, fd: int) -> int:
    """Write what the file at `path` holds after byte `start` to descriptor `fd`; where it ends now."""
    with contextlib.suppress(OSError):
        with open(path, "rb") as captured:
            captured.seek(start)
            data = captured.read()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return start + len(data)
    return start


def _quick_run_shards(instance: dg.DagsterInstance) -> None:
    """Let `instance` start each run's event log from a copy of the empty one made once (`_run_shard_template`).

    Dagster's SQLite event log keeps each run's events in a database of its own, and a process making one
    creates its tables and marks its migrations, reading every migration script to learn the newest (0.15 s
    per run on an idle 2-core machine, a third of a second and more under load). A copy of an empty one, made
    by Dagster itself, is the same database; where the copy cannot be made, Dagster makes it as always. A
    database another process made meanwhile is never written over."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    storage = instance.event_log_storage
    if type(storage) is not SqliteEventLogStorage or "_initdb" in vars(storage):
        return
    template = _run_shard_template()
    if template is None:
        return
    made = storage._initdb

    def initdb(engine, for_index_shard: bool = False) -> None:
        target = Path(engine.url.database or "")
        if not for_index_shard and target.suffix == ".db" and target.stem != "index" and not target.exists():
            partial = target.with_name(f".{target.name}.{os.getpid()}.part")
            try:
                shutil.copyfile(template, partial)
                os.link(partial, target)  # whole or absent, and never over one made meanwhile
            except OSError:
                pass  # made meanwhile, or no links here: Dagster checks it and makes what is missing
            else:
                return
            finally:
                partial.unlink(missing_ok=True)
        made(engine, for_index_shard)

    storage._initdb = initdb


def _run_shard_template() -> Path | None:
    """An empty run event log database made by this Dagster version, made once in the user's cache; None where it
    cannot be made."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    cache = _cache_folder()
    if cache is None:
        return None
    template = cache / f"dagster-{dg.__version__}-run-events.db"
    if template.is_file():
        return template
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".dagster-", dir=cache) as tmp:
            storage = SqliteEventLogStorage(tmp)
            with storage.run_connection("run"):
                pass
            storage.dispose()
            made = Path(tmp) / "run.db"
            if not made.is_file() or any(Path(tmp).glob("run.db-*")):
                return None  # laid out otherwise, or not closed clean: leave it to Dagster
            with contextlib.suppress(OSError):  # another process made it meanwhile: theirs is as good
                os.replace(made, template)
    except OSError:
        return None
    return template if template.is_file() else None


def keep_project_instance(project_root: Path, workdir: Path) -> Path | None:
    """In a dg project, have `dg dev` keep its instance in `<workdir>/dagster_home`: `DAGSTER_HOME` in the project's
    `.env`, which `dg dev` loads (and smolclean's commands read, run from the project). Dagster wants the path
    absolute, so a project moved elsewhere needs the line changed.

    Nothing is written when DAGSTER_HOME is set already, in the environment or in `.env`: that instance is used.
    Returns the instance's folder when the line was written.
    """
    env_file = project_root / ".env"
    if os.environ.get(HOME_VARIABLE) or _home_in(env_file):
        return None
    home = (workdir / "dagster_home").resolve()
    prepare_home(home)
    text = env_file.read_text(encoding="utf-8") if env_file.is_file() else ""
    lines = [*([text.rstrip("\n")] if text.strip() else []),
             "# The Dagster instance of `dg dev` and of smolclean's commands run here: runs, cleanings, sensor cursors.",
             f"{HOME_VARIABLE}={shlex.quote(str(home))}"]
    env_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return home


def _home_in(env_file: Path) -> str | None:
    """The DAGSTER_HOME a `.env` file sets, read as Dagster reads it (python-dotenv)."""
    from dotenv import dotenv_values

    return dotenv_values(env_file).get(HOME_VARIABLE) if env_file.is_file() else None


def is_temporary(instance: dg.DagsterInstance) -> bool:
    """Whether `instance` is the temporary one `dg dev`/`dagster dev` make without DAGSTER_HOME (gone when they stop)."""
    root = getattr(instance, "root_directory", None)
    return bool(root) and Path(root).name.startswith(TEMPORARY_HOME_PREFIX)


def temporary_instance_warning(workdir: Path) -> str:
    """What to do when the UI runs on a temporary instance."""
    return (f"this Dagster instance is a temporary folder ({HOME_VARIABLE} is not set), deleted when `dg dev` stops: "
            "after a restart every drop would be cleaned and learned from again, and `smolclean approve` would not "
            f"be seen here. Set {HOME_VARIABLE}={(workdir / 'dagster_home').resolve()} in the project's .env (or the "
            "environment) and restart")
