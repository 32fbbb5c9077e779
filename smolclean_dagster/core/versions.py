"""Module versions of a dataset: each learning run that changes the registry proposes one; one is live.

Drops are cleaned by the live version only. The first version of a dataset goes live at once; a later one
waits, proposed, until a person approves it (or the `promote: auto` policy does, after its shadow check);
rollback makes an earlier version live again. Every change of state is kept with who, when and why.

On disk, in the dataset's store (`storage/<name>/versions/`): `history.json` (the versions and the audit
trail), and per version `<N>/clean_<name>.py` (the module exactly as exported, so any version can clean)
and `<N>/registry.json` (the registry it was rendered from, for diffs).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import SmolcleanError
from .export import module_filename
from .files import write_atomic
from .registry import Registry, dump_registry
from .registry_changes import RegistryChanges
from .shadow import ShadowDiff
from .trajectory import LearningMetrics

State = Literal["live", "proposed", "retired"]


class VersionError(SmolcleanError):
    """A version that does not exist, or a change of state that cannot be made; the message says what to do."""


class AlreadyLive(VersionError):
    """The version asked to go live is live already: nothing to change."""


class StateChange(BaseModel):
    """One change of a version's state: the audit trail."""

    model_config = ConfigDict(frozen=True)

    version: int
    state: State
    previous: State | None = None
    by: str
    at: str
    why: str


class ModuleVersion(BaseModel):
    """One exported module of the dataset, its state and where it came from."""

    model_config = ConfigDict(frozen=True)

    number: int
    state: State
    created_at: str
    registry_version: int
    learning_run: str = ""
    drop: str = ""
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    shadow: ShadowDiff | None = Field(default=None, description="the cells it would change beside the live version")
    metrics: LearningMetrics | None = Field(default=None, description="what the learning run that made it cost")
    approved_by: str = ""
    waits_because: str = Field(default="", description="why a proposed version waits for a person to approve it")


class VersionHistory(BaseModel):
    """Every version of one dataset and every change of state, oldest first."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    versions: tuple[ModuleVersion, ...] = ()
    changes: tuple[StateChange, ...] = ()

    @property
    def live(self) -> ModuleVersion | None:
        return next((v for v in self.versions if v.state == "live"), None)

    @property
    def latest(self) -> ModuleVersion | None:
        return self.versions[-1] if self.versions else None

    @property
    def waiting(self) -> tuple[ModuleVersion, ...]:
        """The proposed versions, which wait for a person to approve them, newest first."""
        return tuple(v for v in reversed(self.versions) if v.state == "proposed")

    def get(self, number: int) -> ModuleVersion:
        """Version `number`, or an error listing the versions there are."""
        for v in self.versions:
            if v.number == number:
                return v
        known = ", ".join(str(v.number) for v in self.versions) or "none yet"
        raise VersionError(f"dataset {self.dataset!r} has no version {number} (versions: {known}); "
                           f"see `smolclean versions {self.dataset}`")

    def replaced(self, version: ModuleVersion) -> VersionHistory:
        return self.model_copy(update={"versions": tuple(version if v.number == version.number else v
                                                          for v in self.versions)})

    def with_state(self, number: int, state: State, *, by: str, why: str) -> VersionHistory:
        """Version `number` put in `state`, audited; making one live retires the one that was live."""
        target = self.get(number)
        history, now = self, _now()
        changes = list(self.changes)
        if state == "live":
            current = self.live
            if current is not None and current.number != number:
                history = history.replaced(current.model_copy(update={"state": "retired"}))
                changes.append(StateChange(version=current.number, state="retired", previous="live", by=by, at=now,
                                           why=f"version {number} went live"))
        update: dict[str, object] = {"state": state, "waits_because": ""}
        if state == "live":
            update["approved_by"] = by
        history = history.replaced(target.model_copy(update=update))
        changes.append(StateChange(version=number, state=state, previous=target.state, by=by, at=now, why=why))
        return history.model_copy(update={"changes": tuple(changes)})


class VersionStore:
    """The versions of one dataset on disk: propose, approve, roll back, and the module of any version.

    Example:
        >>> store = VersionStore(Path("work/storage/customers/versions"), "customers")  # doctest: +SKIP
        >>> store.approve(2, by="ann", why="diff reviewed")                             # doctest: +SKIP
    """

    def __init__(self, root: Path | str, dataset: str):
        self.root = Path(root)
        self.dataset = dataset

    @property
    def path(self) -> Path:
        return self.root / "history.json"

    def module_path(self, number: int) -> Path:
        """The module of version `number`, exactly as it was exported."""
        return self.root / str(number) / module_filename(self.dataset)

    def registry(self, number: int) -> Registry:
        """The registry revision `number` was rendered from."""
        path = self.root / str(number) / "registry.json"
        return Registry.model_validate_json(path.read_text(encoding="utf-8"))

    def load(self) -> VersionHistory:
        if not self.path.exists():
            return VersionHistory(dataset=self.dataset)
        try:
            return VersionHistory.model_validate_json(self.path.read_text(encoding="utf-8"))
        except (ValidationError, ValueError) as exc:
            raise VersionError(f"{self.path}: the version history is not valid ({exc.__class__.__name__}); "
                               "restore it from a backup") from exc

    def live_module(self) -> Path | None:
        """The module drops are cleaned with: the live version's; None before the first version."""
        live = self.load().live
        return self.module_path(live.number) if live is not None else None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "history.lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def update(self, change: Callable[[VersionHistory], VersionHistory]) -> VersionHistory:
        """Apply `change` to the stored history under the lock, and store it."""
        with self._locked():
            history = change(self.load())
            write_atomic(self.path, history.model_dump_json(indent=2) + "\n")
            return history

    def propose(self, registry: Registry, source: str, changes: RegistryChanges, *, learning_run: str = "",
                drop: str = "", metrics: LearningMetrics | None = None, by: str = "learning") -> ModuleVersion:
        """A new version for `registry` (exported as `source`): live when it is the first, else proposed.

        A registry already made into a version gives that version back: nothing changed, nothing to approve.
        """
        def add(history: VersionHistory) -> VersionHistory:
            same = next((v for v in history.versions if v.registry_version == registry.version), None)
            if same is not None:
                return history
            number = (history.latest.number if history.latest else 0) + 1
            folder = self.root / str(number)
            write_atomic(folder / "registry.json", dump_registry(registry))
            write_atomic(folder / module_filename(self.dataset), source)
            version = ModuleVersion(
                number=number, state="proposed", created_at=_now(), registry_version=registry.version,
                learning_run=learning_run, drop=drop, added=tuple(c.name for c in changes.added),
                changed=tuple(c.name for c in changes.changed), removed=tuple(c.name for c in changes.removed),
                metrics=metrics,
            )
            history = history.model_copy(update={
                "versions": (*history.versions, version),
                "changes": (*history.changes, StateChange(version=number, state="proposed", by=by, at=_now(),
                                                          why=f"learned from {drop or 'a drop'}")),
            })
            if history.live is None:
                history = history.with_state(number, "live", by=by, why="the first version of the dataset")
            return history

        history = self.update(add)
        return next(v for v in history.versions if v.registry_version == registry.version)

    def record_shadow(self, number: int, shadow: ShadowDiff) -> ModuleVersion:
        """Keep the shadow check of version `number`."""
        history = self.update(lambda h: h.replaced(h.get(number).model_copy(update={"shadow": shadow})))
        return history.get(number)

    def record_waiting(self, number: int, why: str) -> ModuleVersion:
        """Keep why proposed version `number` waits for a person (shown wherever the version is)."""
        history = self.update(lambda h: h.replaced(h.get(number).model_copy(update={"waits_because": why})))
        return history.get(number)

    def approve(self, number: int, *, by: str, why: str = "approved") -> ModuleVersion:
        """Make proposed (or retired) version `number` live; the live one is retired."""
        def go_live(history: VersionHistory) -> VersionHistory:
            if history.get(number).state == "live":
                raise AlreadyLive(f"version {number} of {self.dataset!r} is live already")
            return history.with_state(number, "live", by=by, why=why)

        return self.update(go_live).get(number)

    def rollback(self, to: int | None = None, *, by: str, why: str = "rolled back") -> ModuleVersion:
        """Make version `to` live, by default the one that was live before the current one."""
        def back(history: VersionHistory) -> VersionHistory:
            live = history.live
            if live is None:
                raise VersionError(f"dataset {self.dataset!r} has no live version to roll back from")
            target = to if to is not None else _previous_live(history, live.number)
            if target is None:
                raise VersionError(f"no version of {self.dataset!r} older than {live.number} was ever live: there is none "
                                   "to roll back to; name one with --to")
            if target == live.number:
                raise AlreadyLive(f"version {target} of {self.dataset!r} is live already")
            return history.with_state(target, "live", by=by, why=why)

        history = self.update(back)
        return history.live  # type: ignore[return-value]


def why_not_promoted(*, validation_passed: bool, open_items: Sequence[int], shadow: ShadowDiff | None,
                     limit: float) -> str | None:
    """Why the `promote: auto` policy leaves a proposed version for a person, or None when it goes live: validation
    passed, no instruction item is open and its shadow check changes less than `limit` of the cells.

    Example:
        >>> why_not_promoted(validation_passed=True, open_items=(), limit=0.05,
        ...                  shadow=ShadowDiff(live_version=1, cells=100, changed=2)) is None
        True
    """
    if not validation_passed:
        return "validation failed"
    if open_items:
        return f"instruction item(s) {', '.join(f'#{n}' for n in open_items)} still open"
    if shadow is None:
        return "it has no shadow check"
    if shadow.share >= limit:
        return f"its shadow check changes {shadow.share:.2%} of the cells, not under the limit of {limit:.2%}"
    return None


def _previous_live(history: VersionHistory, current: int) -> int | None:
    """The newest version older than `current` that was ever live (a version never approved is skipped)."""
    earlier = {c.version for c in history.changes if c.state == "live" and c.version < current}
    return max(earlier) if earlier else None


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()
