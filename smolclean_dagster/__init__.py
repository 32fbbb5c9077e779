"""smolclean-dagster: an LLM agent that writes, tests and ships pandas cleaning modules, as Dagster assets.

Example:
    >>> from smolclean_dagster import DatasetSettings, build_defs
    >>> defs = build_defs(DatasetSettings(name="customers", workdir="smolclean-work"))

The names below are imported on first use, so `smolclean apply` and the sandbox workers, which need only the
core, do not pay for importing Dagster.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .component import SmolcleanComponent
    from .core.errors import SmolcleanError
    from .factory import build_defs
    from .resources import LLMResource, SandboxResource
    from .settings import DatasetSettings

_HOMES = {
    "DatasetSettings": ".settings",
    "LLMResource": ".resources",
    "SandboxResource": ".resources",
    "SmolcleanComponent": ".component",
    "SmolcleanError": ".core.errors",
    "build_defs": ".factory",
}

__all__ = ["DatasetSettings", "LLMResource", "SandboxResource", "SmolcleanComponent", "SmolcleanError", "build_defs"]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
