"""Resources: the sandbox pool that runs every piece of generated code."""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from .sandbox import Sandbox


class SandboxResource(dg.ConfigurableResource):
    """The sandbox: warm, locked-down worker processes for generated code.

    Example:
        >>> defs = dg.Definitions(assets=[...], resources={"smolclean_sandbox": SandboxResource()})  # doctest: +SKIP
    """

    require_strong: bool = False
    memory_mb: int = 2048

    _sandbox: Sandbox | None = PrivateAttr(default=None)

    def get(self) -> Sandbox:
        """The sandbox for this run (started on first use, closed at the end of the step)."""
        if self._sandbox is None:
            self._sandbox = Sandbox(require_strong=self.require_strong, memory_mb=self.memory_mb)
        return self._sandbox

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
