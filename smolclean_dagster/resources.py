"""Resources: the sandbox pool that runs every piece of generated code, and the LLM connection."""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from .sandbox import Sandbox
from .settings import DatasetSettings


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


class LLMResource(dg.ConfigurableResource):
    """The LLM connection for datasets whose settings name no model: any litellm model string.

    A dataset's own `model`/`api_base`/`api_key` (or SMOLCLEAN_MODEL, SMOLCLEAN_API_BASE, SMOLCLEAN_API_KEY)
    win over these. Calls, cached calls, attempts, tokens, cost and latency land in each chunk's
    materialization metadata without the asset author doing anything. litellm is imported on the first call.

    Example:
        >>> from smolclean_dagster import DatasetSettings, LLMResource, build_defs
        >>> defs = build_defs(
        ...     DatasetSettings(name="customers"),
        ...     llm=LLMResource(model="openai/gpt-4o-mini", api_key=dg.EnvVar("OPENAI_API_KEY")),
        ... )
    """

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None

    def analyst_for(self, settings: DatasetSettings):
        """The analyst for a dataset: its settings, with this connection filling what they leave unset."""
        fill = {k: getattr(self, k) for k in ("model", "api_base", "api_key")
                if getattr(settings, k) is None and getattr(self, k)}
        return settings.model_copy(update=fill).make_analyst()
