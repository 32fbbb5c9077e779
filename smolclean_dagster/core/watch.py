"""Watching a drop folder: which files are finished and new, which are still being written, which can't be read.

The sensor of each dataset calls `observe` once per tick with what `scan_folder` sees, and keeps the
returned `WatchCursor` (JSON) as its cursor. The rules, in the user's words (docs/drop-folders.md):

- A file is picked up once its size and modification time are the same on `stable_ticks` looks in a row
  (default 2), so a file still being copied in is left alone until it stops changing.
- Names starting with "." and names ending in .tmp, .part, .partial or .crdownload are never picked up:
  write to such a name and rename when done to hand over a file atomically.
- A file is handled once. A file with the same name but another size or modification time is a new
  version of that drop: it is picked up again (once stable) and its cleaned output is replaced.
- A file that cannot be read is reported with the reason once per version, and the others go on.
"""

from __future__ import annotations

import codecs
import json
import logging
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .drops import drop_format
from .errors import DropReadError

log = logging.getLogger("smolclean.watch")

#: Names that say "not finished yet": hidden files (editors, rsync) and the usual partial-download suffixes.
IN_PROGRESS_PREFIXES = (".",)
IN_PROGRESS_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")

#: How much of a file `probe_drop` reads: enough for a header line, never the whole file.
PROBE_BYTES = 1 << 16


@dataclass(frozen=True)
class FileState:
    """One file in a drop folder as seen now: its name, size and modification time (ns)."""

    name: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path | str) -> FileState:
        """The state of the file at `path` now."""
        st = Path(path).stat()
        return cls(Path(path).name, st.st_size, st.st_mtime_ns)

    @property
    def fingerprint(self) -> str:
        """What identifies this version of the file: size and modification time."""
        return f"{self.size}-{self.mtime_ns}"


def is_in_progress_name(name: str) -> bool:
    """Whether a file name says the file is not finished (hidden, or a temporary/partial suffix).

    Example:
        >>> is_in_progress_name(".orders.csv"), is_in_progress_name("orders.csv.part"), is_in_progress_name("orders.csv")
        (True, True, False)
    """
    return name.startswith(IN_PROGRESS_PREFIXES) or name.lower().endswith(IN_PROGRESS_SUFFIXES)


def scan_folder(folder: Path | str, pattern: str = "*") -> list[FileState]:
    """The finished-looking files in `folder` matching `pattern`, by name; a missing folder holds none.

    Example:
        >>> scan_folder("work/drops/customers", "*.csv")   # doctest: +SKIP
        [FileState(name='2024-06.csv', size=5120, mtime_ns=1718000000000000000)]
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    seen = []
    for path in folder.glob(pattern):
        if is_in_progress_name(path.name):
            continue
        try:
            st = path.stat()
        except OSError:  # removed between listing and stat: it is simply not there any more
            continue
        if stat.S_ISREG(st.st_mode):
            seen.append(FileState(path.name, st.st_size, st.st_mtime_ns))
    return sorted(seen, key=lambda f: f.name)


class WatchedFile(BaseModel):
    """What the cursor remembers about one file: the version last seen, how often, and what became of it."""

    model_config = ConfigDict(frozen=True)

    size: int
    mtime_ns: int
    seen: int = 1
    status: Literal["pending", "handled", "rejected"] = "pending"
    reason: str = ""

    def same_version(self, f: FileState) -> bool:
        return (self.size, self.mtime_ns) == (f.size, f.mtime_ns)


class WatchCursor(BaseModel):
    """The sensor's memory of a drop folder, stored as its cursor (JSON).

    Example:
        >>> WatchCursor.from_json(None).files
        {}
    """

    model_config = ConfigDict(frozen=True)

    files: dict[str, WatchedFile] = {}

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | None) -> WatchCursor:
        """The cursor stored as `text`; an empty or unreadable one starts afresh (every file is looked at again)."""
        if not text:
            return cls()
        try:
            return cls.model_validate_json(text)
        except (ValidationError, ValueError):
            log.warning("the drop folder cursor is not readable; starting afresh: %.200s", text)
            return cls()

    def with_status(self, f: FileState, status: Literal["pending", "handled", "rejected"], reason: str = "") -> WatchCursor:
        """A copy where file `f` (this version of it) has `status`."""
        previous = self.files.get(f.name)
        seen = previous.seen if previous and previous.same_version(f) else 1
        entry = WatchedFile(size=f.size, mtime_ns=f.mtime_ns, seen=seen, status=status, reason=reason)
        return self.model_copy(update={"files": {**self.files, f.name: entry}})


@dataclass(frozen=True)
class TickPlan:
    """What one look at the folder found.

    `ready`: stable files not handled yet (new files and new versions), to be handled now.
    `settling`: files that changed since the last look or were not seen often enough yet.
    `cursor`: the updated memory; ready files are still "pending" in it until `with_status` marks them.
    """

    cursor: WatchCursor
    ready: tuple[FileState, ...]
    settling: tuple[FileState, ...]


def observe(cursor: WatchCursor, files: list[FileState], *, stable_ticks: int = 2) -> TickPlan:
    """Compare what is in the folder now with the cursor: which files are ready, which still settling.

    Files gone from the folder are forgotten, so a file put back later is new again.

    Example:
        >>> f = FileState("a.csv", 10, 1)
        >>> first = observe(WatchCursor(), [f])
        >>> first.ready, [s.name for s in first.settling]
        ((), ['a.csv'])
        >>> [r.name for r in observe(first.cursor, [f]).ready]
        ['a.csv']
    """
    if stable_ticks < 1:
        raise ValueError("stable_ticks must be at least 1")
    entries: dict[str, WatchedFile] = {}
    ready, settling = [], []
    for f in files:
        previous = cursor.files.get(f.name)
        if previous is not None and previous.same_version(f):
            if previous.status != "pending":
                entries[f.name] = previous
                continue
            entry = previous.model_copy(update={"seen": previous.seen + 1})
        else:  # a new file, or a new version of a known one
            entry = WatchedFile(size=f.size, mtime_ns=f.mtime_ns)
        entries[f.name] = entry
        (ready if entry.seen >= stable_ticks else settling).append(f)
    return TickPlan(WatchCursor(files=entries), tuple(ready), tuple(settling))


def probe_drop(path: Path | str) -> str | None:
    """Why a drop cannot be read, from a cheap look at its start (None when it looks readable).

    Only the first bytes are read, so a file that is broken further down fails later, in its cleaning
    run, with the line and the reason.

    Example:
        >>> probe_drop("export.xlsx")   # doctest: +ELLIPSIS
        "export.xlsx: unknown file extension '.xlsx'; smolclean reads ..."
    """
    path = Path(path)
    try:
        fmt = drop_format(path)
    except DropReadError as exc:
        return str(exc)
    try:
        with path.open("rb") as fh:
            head = fh.read(PROBE_BYTES)
    except OSError as exc:
        return f"{path}: cannot open the file ({exc.strerror or exc})"
    if not head.strip():
        return f"{path}: the file is empty"
    if fmt == "parquet":
        return _probe_parquet(path)
    try:
        # incremental: a multi-byte character cut at the end of the probe is not an error
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        return f"{path}: not valid UTF-8 at byte {exc.start}; re-encode the file as UTF-8"
    if fmt == "json" and not text.lstrip().startswith("["):
        return f"{path}: expected a JSON array of objects ('[' first)"
    if fmt == "jsonl":
        return _probe_jsonl(path, text, complete=len(head) < PROBE_BYTES)
    return None


def _probe_jsonl(path: Path, text: str, *, complete: bool) -> str | None:
    first, sep, _ = text.lstrip().partition("\n")
    if not sep and not complete:
        return None  # a first record longer than the probe: leave it to the cleaning run
    try:
        record = json.loads(first)
    except json.JSONDecodeError as exc:
        return f"{path}: line 1 is not valid JSON: {exc.msg}"
    if not isinstance(record, dict):
        return f"{path}: record 1 is {type(record).__name__}, expected an object"
    return None


def _probe_parquet(path: Path) -> str | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
    except (pa.ArrowException, OSError) as exc:
        return f"{path}: not a readable Parquet file ({exc})"
    return None
