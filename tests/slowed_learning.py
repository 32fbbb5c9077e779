"""`learn()` with one chunk of every parallel wave held back, as a machine under load would: run as a script.

    python slowed_learning.py SETTINGS_JSON DROP first|last FINISHED

`first` holds back the first chunk of each wave (in the drop's order) until every other chunk of its wave has
finished, `last` the last one; every chunk's id is appended to the file FINISHED as its agent loop ends, so a
test sees the order the chunks finished in. The hold-back is patched into the chunk assets' module here, at import:
the pool's worker processes import the main module of the process that started them, so they run it too.
Nothing of this is part of smolclean.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from smolclean_dagster.learning import chunk_assets

#: Most seconds a chunk is held back (a wave with more chunks than workers could otherwise wait for ever).
HOLD_BACK_S = 120.0

_run_chunk = chunk_assets.run_chunk


def _held_back_run_chunk(work, *args, **kwargs):
    which = sys.argv[3] if len(sys.argv) > 3 else ""
    first = all(work.chunk_id < other for other in work.hidden)
    last = all(work.chunk_id > other for other in work.hidden)
    if work.hidden and ((which == "first" and first) or (which == "last" and last)):
        deadline = time.monotonic() + HOLD_BACK_S
        while not work.hidden <= _finished() and time.monotonic() < deadline:
            time.sleep(0.1)
    yield from _run_chunk(work, *args, **kwargs)
    with open(sys.argv[4], "a", encoding="utf-8") as finished:
        finished.write(work.chunk_id + "\n")


def _finished() -> set[str]:
    path = Path(sys.argv[4])
    return set(path.read_text(encoding="utf-8").split()) if path.exists() else set()


chunk_assets.run_chunk = _held_back_run_chunk


if __name__ == "__main__":
    from smolclean_dagster.learning.embedded import learn
    from smolclean_dagster.settings import DatasetSettings

    settings = DatasetSettings.model_validate_json(sys.argv[1])
    learn(settings, Path(sys.argv[2]))
