"""SandboxLevel: which isolation layers a sandbox really has on this machine, for metadata and policy."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# What each layer stops, in the words a reader of run metadata needs.
LAYER_PURPOSE = {
    "rlimits": "memory, CPU time and file-size caps",
    "netns": "an empty network namespace (no network at all)",
    "landlock": "no file access outside the Python libraries, no writes anywhere",
    "seccomp": "no new processes, programs, sockets or access to other processes",
    "fresh_fork": "a fresh process per candidate, so one candidate cannot poison the next",
}


class SandboxLevel(BaseModel):
    """The isolation layers a Sandbox's workers reported at start; `strong` when every layer is active.

    Example:
        >>> level = SandboxLevel.from_layers({"rlimits": True, "netns": False, "landlock": True,
        ...                                    "seccomp": True, "fresh_fork": True}, notes=["netns: EPERM"])
        >>> level.strong, level.missing
        (False, ['netns'])
        >>> level.describe()
        'weak sandbox: rlimits, landlock, seccomp, fresh_fork active; missing netns (netns: EPERM)'
    """

    model_config = ConfigDict(frozen=True)

    layers: dict[str, bool]
    strong: bool
    notes: list[str] = Field(default_factory=list)

    @classmethod
    def from_layers(cls, layers: dict[str, bool], notes: list[str] | tuple[str, ...] = ()) -> SandboxLevel:
        """Build the level from the layers a worker reported (every known layer present, unknown ones kept)."""
        full = {name: bool(layers.get(name, False)) for name in LAYER_PURPOSE}
        full.update({name: bool(on) for name, on in layers.items() if name not in full})
        return cls(layers=full, strong=all(full.values()), notes=list(notes))

    @property
    def missing(self) -> list[str]:
        """The layers that are not active."""
        return [name for name, on in self.layers.items() if not on]

    def describe(self) -> str:
        """One line for logs and run metadata."""
        active = ", ".join(name for name, on in self.layers.items() if on) or "no layers"
        if self.strong:
            return f"strong sandbox: {active} active"
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"weak sandbox: {active} active; missing {', '.join(self.missing)}{notes}"
