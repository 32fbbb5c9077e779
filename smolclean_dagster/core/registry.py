"""The registry: the ordered list of accepted cleaning functions with provenance, stored as JSON.

Writes are atomic (temporary file, fsync, rename) and serialised by a lock file, so a crash never
leaves a half-written registry and concurrent chunk steps never lose or duplicate an entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import RegistryError
from .files import write_atomic  # noqa: F401  (also importable from here, where it used to live)
from .functions import CleaningFunction
from .instructions import Declined, InstructionItem, ItemState, item_states, split_instructions

#: Items a model's own plan holds at most: lines it adds later beyond these are not recorded.
MAX_PLAN_ITEMS = 20


class Provenance(BaseModel):
    """Where an accepted function came from."""

    model_config = ConfigDict(frozen=True)

    drop: str
    chunk: str
    step: int
    analyst: str
    model: str | None = None
    prompt_hash: str | None = None
    #: The model's reply that wrote the function: two versions learned from the same prompt with another
    #: reply differ because the model answered differently, not because of anything learning did.
    reply_hash: str | None = None


class Example(BaseModel):
    """One cell before and after a function ran."""

    model_config = ConfigDict(frozen=True)

    column: str
    before: str | None
    after: str | None


class Evidence(BaseModel):
    """What validation saw when the function was accepted."""

    model_config = ConfigDict(frozen=True)

    rows_checked: int = 0
    holdout_rows: int = 0
    cells_changed: int = 0
    columns_changed: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    rows_dropped: int = 0


class DroppedFunction(BaseModel):
    """A function validation took out of the module, and why: the module is exported with what holds."""

    model_config = ConfigDict(frozen=True)

    name: str
    reason: str


class RegistryEntry(BaseModel):
    """One accepted function with its provenance and validation evidence."""

    model_config = ConfigDict(frozen=True)

    function: CleaningFunction
    provenance: Provenance
    evidence: Evidence = Field(default_factory=Evidence)
    merged_from: tuple[str, ...] = Field(default=(), description="functions consolidation merged into this one")
    serves: tuple[str, ...] = Field(default=(), description="the instruction items (their text) this function carries out")
    asked_name: str = Field(default="", description="the name the analyst gave, when another function had it")


class Registry(BaseModel):
    """The versioned, ordered list of accepted functions for one dataset.

    Example:
        >>> reg = Registry(dataset="customers")
        >>> reg.version, len(reg.entries)
        (0, 0)
    """

    model_config = ConfigDict(frozen=True)

    # No timestamp: learning the same drop with the same settings and replies gives the same registry, byte
    # for byte, so a diff between two versions shows what changed; when a version was made is in the history
    # of the registry asset's materializations (a file stored with a timestamp still loads).
    dataset: str
    version: int = 0
    entries: tuple[RegistryEntry, ...] = ()
    declined: tuple[Declined, ...] = Field(default=(), description="instruction items the analyst declined, and why")
    dropped: tuple[DroppedFunction, ...] = Field(default=(), description="functions validation took out, and why")
    plan: tuple[str, ...] = Field(default=(), description="with no instructions: the model's own items, in its words")

    @property
    def functions(self) -> list[CleaningFunction]:
        return [e.function for e in self.entries]

    def coverage(self, items: tuple[InstructionItem, ...] | list[InstructionItem]) -> tuple[ItemState, ...]:
        """Each instruction item's state: served by which functions, declined and why, or open."""
        served: dict[str, tuple[str, ...]] = {}
        for e in self.entries:
            for text in e.serves:
                served[text] = (*served.get(text, ()), e.function.name)
        return item_states(items, served, self.declined)

    def with_declined(
        self, declined: list[Declined] | tuple[Declined, ...], beside: frozenset[str] = frozenset()
    ) -> Registry:
        """A new version recording `declined` items (a newer reason for the same item replaces the older).

        A decline by one of the chunks `beside` (running beside the decliner's) is kept: which of the two
        reasons stands is decided when the wave is published, in chunk order (`in_chunk_order`).
        """
        fresh = {d.item: d for d in declined}
        if not fresh or all(d in self.declined for d in fresh.values()):
            return self
        kept = tuple(d for d in self.declined if d.item not in fresh or d.chunk in beside)
        return self.model_copy(update={"declined": kept + tuple(fresh.values()), "version": self.version + 1})

    def items_for(self, instructions: str) -> tuple[InstructionItem, ...]:
        """The items learning works to: the user's instructions, or with none the model's own plan.

        Example:
            >>> Registry(dataset="d", plan=("unify the spellings of city",)).items_for("")[0].text
            'unify the spellings of city'
        """
        return split_instructions(instructions) or tuple(
            InstructionItem(number=i, text=text) for i, text in enumerate(self.plan, 1)
        )

    def with_plan(self, plan: tuple[str, ...] | list[str], *, extend: bool = False) -> Registry:
        """A new version recording the model's own plan. Kept once written: a later plan does not replace it,
        but one written by a model that was shown it (`extend`) adds its new lines, up to `MAX_PLAN_ITEMS`.

        Example:
            >>> reg = Registry(dataset="d").with_plan(["city: unify spellings"])
            >>> reg.with_plan(["zip: pad to 5 digits"]).plan
            ('city: unify spellings',)
            >>> reg.with_plan(["City: unify spellings", "zip: pad to 5 digits"], extend=True).plan
            ('city: unify spellings', 'zip: pad to 5 digits')
        """
        if not plan or (self.plan and not extend):
            return self
        held = {" ".join(p.casefold().split()) for p in self.plan}
        new = [p for p in dict.fromkeys(plan) if " ".join(p.casefold().split()) not in held]
        added = tuple(new[:max(0, MAX_PLAN_ITEMS - len(self.plan))])
        if not added:
            return self
        return self.model_copy(update={"plan": self.plan + added, "version": self.version + 1})

    def names(self) -> set[str]:
        return {e.function.name for e in self.entries}

    def find(self, function: CleaningFunction) -> RegistryEntry | None:
        """The entry holding `function`'s code, also when it was stored under a suffixed name."""
        key = _code_key(function)
        return next((e for e in self.entries if _code_key(e.function) == key), None)

    def with_entry(self, entry: RegistryEntry, beside: frozenset[str] = frozenset()) -> Registry:
        """A new version with `entry` appended; an identical function is not added twice.

        A name already taken by different code gets a numeric suffix, so module names stay unique. The same
        function accepted by one of the chunks `beside` (running beside the entry's chunk, which does not see
        their functions) is added all the same: each chunk then goes on from its own, and publishing the wave
        keeps the one of the first chunk (`in_chunk_order`), whichever chunk was faster. A function of the same
        concern as one of theirs (`CleaningFunction.concern`: one rule on the same columns) keeps its name: the
        two are one job, which the wave's consolidation makes one function under that name, so the name the
        chunk's trace records is the one the module holds.
        """
        if self.without_chunks(beside).find(entry.function) is not None:
            return self
        concern = entry.function.concern
        entry = _unique_name(entry, {e.function.name for e in self.entries if e.provenance.chunk not in beside
                                     or concern is None or e.function.concern != concern})
        return self.model_copy(update={"entries": (*self.entries, entry), "version": self.version + 1})

    def without_dropped(self, dropped: Sequence[DroppedFunction]) -> Registry:
        """The next version of the registry with the `dropped` functions taken out, each with its reason."""
        names = {d.name for d in dropped}
        return self.model_copy(update={"entries": tuple(e for e in self.entries if e.function.name not in names),
                                       "version": self.version + 1, "dropped": (*self.dropped, *dropped)})

    def without_chunks(self, chunks: frozenset[str] | set[str]) -> Registry:
        """The registry as a chunk sees it when `chunks` run beside it: their functions and declines left out."""
        if not chunks:
            return self
        return self.model_copy(update={
            "entries": tuple(e for e in self.entries if e.provenance.chunk not in chunks),
            "declined": tuple(d for d in self.declined if d.chunk not in chunks),
        })

    def in_chunk_order(self, chunks: list[str] | tuple[str, ...]) -> Registry:
        """The registry as if the chunks of a wave that ran side by side (`chunks`, in order) had run one after
        another, whichever finished first: their entries in the chunks' order, then accepted order, after every
        other entry, named in that order; a function two of them accepted once, from the first; and of two
        reasons they gave to decline one item, the later chunk's. The version stays: it counts what was
        accepted, which does not depend on the order either (the unordered registry is never exported)."""
        rank = {c: i for i, c in enumerate(chunks)}
        kept = [e for e in self.entries if e.provenance.chunk not in rank]
        if any(e.provenance.chunk not in rank for e in self.entries[len(kept):]):
            return self  # published before (another drop's last wave): its place in the module stays
        # Within one chunk, acceptance order is its own (sequential) order, also across a resumed run.
        placed = sorted((rank[e.provenance.chunk], i) for i, e in enumerate(self.entries) if e.provenance.chunk in rank)
        entries = list(kept)
        first = {_code_key(e.function): i for i, e in enumerate(entries)}
        for _, i in placed:
            entry = self.entries[i]
            twin = first.get(_code_key(entry.function))
            if twin is not None:  # accepted by an earlier chunk too: the items it serves go with that one
                serves = tuple(dict.fromkeys((*entries[twin].serves, *entry.serves)))
                entries[twin] = entries[twin].model_copy(update={"serves": serves})
                continue
            entry = _renamed(entry, entry.asked_name or entry.function.name)
            first[_code_key(entry.function)] = len(entries)
            entries.append(_unique_name(entry, {e.function.name for e in entries}))
        reasons = {d.item: d for _, _, d in sorted((rank[d.chunk], i, d) for i, d in enumerate(self.declined)
                                                    if d.chunk in rank)}
        declined = tuple(d for d in self.declined if d.chunk not in rank) + tuple(reasons.values())
        if tuple(entries) == self.entries and declined == self.declined:
            return self
        return self.model_copy(update={"entries": tuple(entries), "declined": declined})

    def with_entries(self, entries: list[RegistryEntry]) -> Registry:
        """A new version holding exactly `entries` (consolidation); unchanged entries keep the version."""
        if tuple(entries) == self.entries:
            return self
        return self.model_copy(update={"entries": tuple(entries), "version": self.version + 1})


def _code_key(function: CleaningFunction) -> str:
    """The code with the function's own name left out: a function renamed to `fix_2` is still the same code."""
    return function.code.replace(f"def {function.name}(", "def _(", 1)


def _unique_name(entry: RegistryEntry, taken: set[str]) -> RegistryEntry:
    name = entry.function.name
    if name not in taken:
        return entry
    n = 2
    while f"{name}_{n}" in taken:
        n += 1
    return _renamed(entry, f"{name}_{n}").model_copy(update={"asked_name": entry.asked_name or name})


def _renamed(entry: RegistryEntry, new: str) -> RegistryEntry:
    """`entry` with its function called `new` (its `def` line changed to match)."""
    if new == entry.function.name:
        return entry
    return entry.model_copy(update={"function": entry.function.renamed(new),
                                    "asked_name": "" if new == entry.asked_name else entry.asked_name})


class RegistryStore:
    """The registry of one dataset on disk: load, save and locked read-modify-write.

    Example:
        >>> store = RegistryStore(Path("work/registry.json"), dataset="customers")   # doctest: +SKIP
        >>> store.update(lambda reg: reg.with_entry(entry))                          # doctest: +SKIP
    """

    def __init__(self, path: Path | str, dataset: str):
        self.path = Path(path)
        self.dataset = dataset

    def load(self) -> Registry:
        if not self.path.exists():
            return Registry(dataset=self.dataset)
        try:
            reg = Registry.model_validate_json(self.path.read_text(encoding="utf-8"))
        except (ValidationError, ValueError) as exc:
            raise RegistryError(
                f"{self.path}: the registry file is not valid ({exc.__class__.__name__}); "
                "restore it from version control or delete it to start over"
            ) from exc
        if reg.dataset != self.dataset:
            raise RegistryError(f"{self.path}: holds dataset {reg.dataset!r}, expected {self.dataset!r}")
        return reg

    def save(self, registry: Registry) -> None:
        write_atomic(self.path, dump_registry(registry))

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the registry's lock file (across processes) for a read-modify-write."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def update(self, change: Callable[[Registry], Registry]) -> Registry:
        """Apply `change` to the stored registry under the lock and store the result if it changed."""
        with self.locked():
            before = self.load()
            after = change(before)
            if after is not before:
                self.save(after)
            return after


def dump_registry(registry: Registry) -> str:
    """The registry as stable, readable JSON (same registry, same bytes)."""
    return json.dumps(registry.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
