"""Public entry point of the sandbox: run untrusted pandas cleaning code in locked-down processes.

Example:
    >>> import pandas as pd
    >>> from smolclean_dagster.sandbox import run_function
    >>> run_function("def f(df):\\n    return df.dropna()\\n", pd.DataFrame({"a": [1.0, None]}))
         a
    0  1.0
"""

from .core.sandbox import (
    ALLOWED_IMPORTS,
    BatchRunner,
    FunctionFailed,
    GateRejected,
    ResourceLimitExceeded,
    Sandbox,
    SandboxCrashed,
    SandboxError,
    SandboxLevel,
    SandboxTimeout,
    check_function,
    check_module,
    default_sandbox,
    run_function,
)

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
]
