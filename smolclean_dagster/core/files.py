"""Files replaced whole: a reader sees the old file or the new one, never a part of either.

Used for everything smolclean stores or hands to people: the registry, stored records, settings, cached
LLM replies, and the exported module, its tests, report and chart, which people commit and teammates
or containers running as another user read. So a written file gets the permissions any program's new
file gets (0644 under the usual umask 022), not the 0600 of a private temporary file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path | str, data: str | bytes) -> None:
    """Write `data` (text as UTF-8, or bytes) to `path` through a synced temporary file renamed over it.

    Example:
        >>> write_atomic(Path("work/modules/customers/report.md"), "# customers\\n")  # doctest: +SKIP
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (setting it races other threads)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
