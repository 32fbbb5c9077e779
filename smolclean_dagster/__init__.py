"""smolclean-dagster: an LLM agent that writes, tests and ships pandas cleaning modules, as Dagster assets.

Example:
    >>> from smolclean_dagster import DatasetSettings, build_defs
    >>> defs = build_defs(DatasetSettings(name="customers", workdir="smolclean-work"))
"""

from .component import SmolcleanComponent
from .core.errors import SmolcleanError
from .factory import build_defs
from .resources import LLMResource, SandboxResource
from .settings import DatasetSettings

__all__ = ["DatasetSettings", "LLMResource", "SandboxResource", "SmolcleanComponent", "SmolcleanError", "build_defs"]
