"""Resources: the sandbox pool that runs every piece of generated code, and the LLM connection."""

from __future__ import annotations

import dagster as dg

from .core.sandbox import Sandbox, shared_sandbox
from .settings import DatasetSettings

#: The Dagster pool of the steps that call the LLM (a chunk's agent loop): caps how many run at once.
LLM_POOL = "smolclean_llm"


class SandboxResource(dg.ConfigurableResource):
    """The sandbox: warm, locked-down worker processes for generated code.

    Example:
        >>> defs = dg.Definitions(assets=[...], resources={"smolclean_sandbox": SandboxResource()})  # doctest: +SKIP
    """

    require_strong: bool = False
    memory_mb: int = 2048

    def get(self) -> Sandbox:
        """The sandbox of this process for this configuration (started on first use, closed when the process
        exits): runs executed one after another in one process reuse its warm workers."""
        return shared_sandbox(self.require_strong, self.memory_mb)


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
