"""The errors a sandboxed run can end in, split by whose fault it is.

`FunctionFailed` and `GateRejected` are the model's fault: their messages are written to be shown to the
model so it can fix its code. The others say the sandbox stopped something or could not do its job.
"""

from __future__ import annotations

from ..errors import SmolcleanError


class SandboxError(SmolcleanError):
    """Base of every sandbox error; raised as is when the sandbox itself cannot be used."""


class GateRejected(SandboxError):
    """The code was refused by the static gate before it ran; `.reasons` lists each problem with its line.

    Example:
        >>> err = GateRejected(["line 3: `open(...)` is not allowed"])
        >>> err.reasons
        ['line 3: `open(...)` is not allowed']
    """

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = list(reasons)
        listed = "\n".join(f"- {r}" for r in self.reasons)
        super().__init__(f"the code was rejected before running; fix these and try again:\n{listed}")


class SandboxTimeout(SandboxError):
    """The call passed its deadline; its worker was SIGKILLed and a fresh one started."""


class ResourceLimitExceeded(SandboxError):
    """The call hit a memory, CPU, file-size or output-size cap."""


class SandboxCrashed(SandboxError):
    """The call was blocked by a kernel layer, its worker died, or it returned something that is not a frame."""


class FunctionFailed(SandboxError):
    """The generated code raised a Python exception; the message is meant for the model.

    `exc_type` and `exc_message` are the exception's type name and text; `line` is the line of the
    generated code where it was raised (None when it was raised outside the generated code).
    """

    def __init__(self, message: str, *, exc_type: str = "", exc_message: str = "", line: int | None = None):
        super().__init__(message)
        self.exc_type = exc_type
        self.exc_message = exc_message
        self.line = line


class InputError(SandboxError):
    """A batch sent as the input file's bytes could not be parsed; `index` is the bad line's place in the batch
    (None when no one line is to blame)."""

    def __init__(self, message: str, *, index: int | None = None):
        super().__init__(message)
        self.index = index if isinstance(index, int) else None
