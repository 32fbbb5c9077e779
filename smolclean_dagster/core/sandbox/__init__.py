"""The sandbox that runs LLM-written pandas cleaning code outside the orchestrator's process.

Layers, outermost first: a static gate (`gate.py`) with messages for the model; a pool of warm worker
processes (`pool.py`, `process.py`) that speak Arrow IPC over pipes (`wire.py`) and fork a fresh
child per call (`worker.py`); inside each child the kernel layers (`lockdown.py`): rlimits, an empty
network namespace, Landlock and seccomp. `SandboxLevel` reports which layers this machine provides.
"""

from .errors import (
    FunctionFailed,
    GateRejected,
    ResourceLimitExceeded,
    SandboxCrashed,
    SandboxError,
    SandboxTimeout,
)
from .gate import ALLOWED_IMPORTS, check_function, check_module
from .level import SandboxLevel
from .batch import BatchRunner
from .pool import Sandbox, default_sandbox, run_function, shared_sandbox

__all__ = [
    "ALLOWED_IMPORTS",
    "BatchRunner",
    "FunctionFailed",
    "GateRejected",
    "ResourceLimitExceeded",
    "Sandbox",
    "SandboxCrashed",
    "SandboxError",
    "SandboxLevel",
    "SandboxTimeout",
    "check_function",
    "check_module",
    "default_sandbox",
    "run_function",
    "shared_sandbox",
]
