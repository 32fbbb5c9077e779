"""Which module cleans a drop: the live version's, or the version a cleaning run's config names.

The drop folder sensor, the residual sensor, the re-cleaning schedule, the `cleaned_data` asset and
`smolclean apply --name` all ask here, so every drop is cleaned by the live version (see core/versions.py).
"""

from pathlib import Path

import dagster as dg

from ..core.apply import read_registry_revision
from ..core.errors import SmolcleanError
from ..core.export import module_filename
from ..core.storage import DatasetStore
from ..core.versions import VersionStore
from ..settings import DatasetSettings

#: Run tag of a cleaning run: the version (the approved one, see core/versions.py) that cleaned the drop.
VERSION_TAG = "smolclean/module_version"


def versions(s: DatasetSettings) -> VersionStore:
    """The dataset's module versions (in its store in the workdir)."""
    return DatasetStore(s.storage_dir, s.name).versions


def live_module(s: DatasetSettings) -> Path | None:
    """The module drops of the dataset are cleaned with: the live version's. A workdir from before versions
    (a module exported, no version recorded) keeps cleaning with its exported module."""
    path = versions(s).live_module()
    if path is not None:
        return path
    exported = s.module_dir / module_filename(s.name)
    return exported if exported.is_file() else None


class CleanConfig(dg.Config):
    """A cleaning run's choice of module version: none means the live one."""

    version: int | None = None


def cleaning_module_for(s: DatasetSettings, number: int | None) -> tuple[Path, int | None]:
    """The module that cleans a drop, and its version number: version `number`, else the live one."""
    if number is not None:
        store = versions(s)
        store.load().get(number)  # an unknown version is refused, naming the versions there are
        return store.module_path(number), number
    path = live_module(s)
    if path is None:
        raise SmolcleanError(f"no cleaning module yet for {s.name!r}; learn one first (`smolclean learn FILE --name "
                             f"{s.name}`, or the job {s.name}_learn_from_drop)")
    return path, live_version(s)[0]


def live_version(s: DatasetSettings) -> tuple[int | None, int | None]:
    """(version number, registry revision) of the live module; (None, None) with no module yet, a number of None
    for a module from before versions, and a revision of -1 for a module whose header names none."""
    path = live_module(s)
    if path is None:
        return None, None
    live = versions(s).load().live
    revision = read_registry_revision(path.read_text(encoding="utf-8"))
    return (live.number if live else None), (-1 if revision is None else revision)


def module_label(number: int | None, revision: int | None) -> str:
    """A module as log lines name it: the version a person approved and the registry revision it was exported
    from ("version 1 (registry revision 28)"), or the revision alone for a module from before versions.

    Example:
        >>> module_label(1, 28), module_label(None, 28)
        ('version 1 (registry revision 28)', 'registry revision 28')
    """
    registry = f"registry revision {revision}"
    return f"version {number} ({registry})" if number is not None else registry


def times_live(s: DatasetSettings) -> int:
    """How many times the live version went live (1 unless it was made live again after a rollback)."""
    history = versions(s).load()
    live = history.live
    return sum(1 for c in history.changes if live and c.version == live.number and c.state == "live") or 1
