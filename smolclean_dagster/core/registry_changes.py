"""What a learning run changed in a registry: functions added, changed (same name, new code) and removed.

Names alone do not tell: consolidation merges functions, and a merged function may keep the name of one it
replaced (whitespace fixes on two columns become one function), so a run that extended the module can end
with the very names it started with. Functions are compared by name and code; a function whose new code came
from the same prompt as the old, answered by another reply, is said to be the model's doing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Registry, RegistryEntry


@dataclass(frozen=True)
class FunctionChange:
    """One function the run added, changed or removed."""

    name: str
    columns: tuple[str, ...]
    summary: str
    merged_from: tuple[str, ...] = ()
    merged_into: str | None = None
    #: The model answered the same prompt with another reply: nothing learning saw had changed.
    model_varied: bool = False


@dataclass(frozen=True)
class RegistryChanges:
    """The difference between the registry before a learning run and after it.

    Example:
        >>> RegistryChanges(version_before=3, version_after=3).markdown()
        'No change: the module is the same as before (registry revision 3).'
    """

    version_before: int
    version_after: int
    added: tuple[FunctionChange, ...] = ()
    changed: tuple[FunctionChange, ...] = ()
    removed: tuple[FunctionChange, ...] = ()

    def markdown(self) -> str:
        """One line per function the run added, changed or removed."""
        lines = [f"- added {_describe(c)}" for c in self.added]
        lines += [f"- changed {_describe(c)}" for c in self.changed]
        lines += [
            f"- removed `{c.name}`" + (f" (merged into `{c.merged_into}`)" if c.merged_into else "")
            for c in self.removed
        ]
        if not lines:
            return f"No change: the module is the same as before (registry revision {self.version_after})."
        return "\n".join(lines)


def registry_changes(before: Registry, after: Registry) -> RegistryChanges:
    """Compare two versions of one dataset's registry."""
    old = {e.function.name: e for e in before.entries}
    new = {e.function.name: e for e in after.entries}
    merged_into = {source: e.function.name for e in after.entries for source in e.merged_from}
    added = tuple(_change(e) for name, e in new.items() if name not in old)
    changed = tuple(_change(e, old[name]) for name, e in new.items()
                    if name in old and e.function.code != old[name].function.code)
    removed = tuple(
        FunctionChange(name=name, columns=e.function.columns, summary=e.function.summary,
                       merged_into=merged_into.get(name))
        for name, e in old.items() if name not in new
    )
    return RegistryChanges(before.version, after.version, added, changed, removed)


def _change(entry: RegistryEntry, old: RegistryEntry | None = None) -> FunctionChange:
    f, p = entry.function, entry.provenance
    varied = old is not None and p.prompt_hash is not None and p.prompt_hash == old.provenance.prompt_hash \
        and p.reply_hash != old.provenance.reply_hash
    return FunctionChange(name=f.name, columns=f.columns, summary=f.summary, merged_from=entry.merged_from,
                          model_varied=varied)


def _describe(change: FunctionChange) -> str:
    merged = f"; merged from {', '.join(f'`{n}`' for n in change.merged_from)}" if change.merged_from else ""
    varied = "; the model answered the same prompt with another reply" if change.model_varied else ""
    return f"`{change.name}` ({', '.join(change.columns) or 'all columns'}): {change.summary}{merged}{varied}"
