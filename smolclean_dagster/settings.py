"""Per-dataset settings: from Python, a YAML file, or the environment. Bad settings fail at load."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .core.errors import SettingsError


class DatasetSettings(BaseModel):
    """Everything smolclean needs to know about one dataset.

    Example:
        >>> s = DatasetSettings(name="customers", workdir="work")
        >>> s.drop_folder
        PosixPath('work/drops/customers')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="dataset name: letters, digits and '_'; prefixes its Dagster asset keys")
    workdir: Path = Field(default=Path("smolclean-work"), description="where storage, modules and outputs live")
    drop_folder: Path | None = Field(default=None, description="folder the sensor watches; <workdir>/drops/<name>")
    glob: str = Field(default="*", description="which files in the drop folder are drops")
    instructions: str = Field(default="", description="what the user wants, in words; '@FILE' reads a file")
    model: str | None = Field(default=None, description="litellm model string; unset = the offline rules analyst")
    api_base: str | None = None
    api_key: str | None = None
    analyst: Literal["rules", "llm", "hybrid"] | None = Field(
        default=None, description="defaults to 'rules' without a model and 'hybrid' with one"
    )
    chunk_size: int = Field(default=50, gt=0, le=100_000)
    chunk_budget: int = Field(default=12, gt=0, description="most chunks analysed per drop")
    max_steps: int = Field(default=6, gt=0, le=100)
    planning_interval: int = Field(default=4, gt=0)
    concurrency: int = Field(default=2, gt=0, le=64)
    holdout_fraction: float = Field(default=0.2, ge=0.0, lt=0.9)
    require_strong_sandbox: bool = False
    timeout_s: float = Field(default=20.0, gt=0)
    apply_batch_size: int = Field(default=50_000, gt=0)

    @field_validator("name")
    @classmethod
    def _name_is_a_key(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", v):
            raise ValueError("must start with a letter or '_' and hold only letters, digits and '_' (max 63)")
        return v

    @field_validator("instructions")
    @classmethod
    def _read_instructions_file(cls, v: str) -> str:
        if v.startswith("@"):
            path = Path(v[1:]).expanduser()
            if not path.is_file():
                raise ValueError(f"instructions file {path} does not exist")
            return path.read_text(encoding="utf-8")
        return v

    @property
    def drops_dir(self) -> Path:
        return self.drop_folder or self.workdir / "drops" / self.name

    @property
    def storage_dir(self) -> Path:
        return self.workdir / "storage" / self.name

    @property
    def module_dir(self) -> Path:
        return self.workdir / "modules" / self.name

    @property
    def cleaned_dir(self) -> Path:
        return self.workdir / "cleaned" / self.name

    @property
    def analyst_kind(self) -> str:
        return self.analyst or ("hybrid" if self.model else "rules")

    @classmethod
    def load(cls, **values: object) -> DatasetSettings:
        """Build settings, filling model/API settings from SMOLCLEAN_* variables; errors name the setting."""
        env = {"model": "SMOLCLEAN_MODEL", "api_base": "SMOLCLEAN_API_BASE", "api_key": "SMOLCLEAN_API_KEY"}
        for field, var in env.items():
            if values.get(field) is None and os.environ.get(var):
                values[field] = os.environ[var]
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValidationError as exc:
            raise SettingsError(_describe(exc, values.get("name"))) from exc


def _describe(exc: ValidationError, name: object) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "settings"
        parts.append(f"setting {where!r}: {err['msg']}")
    return f"invalid settings for dataset {name!r}: " + "; ".join(parts)


def settings_file(workdir: Path, name: str) -> Path:
    """Where a dataset's settings are kept in a workdir, so every tool serves the same datasets."""
    return Path(workdir) / "datasets" / f"{name}.yaml"


def save_settings(settings: DatasetSettings) -> Path:
    """Store a dataset's settings in its workdir (the API key is never written)."""
    from .core.registry import write_atomic

    data = settings.model_dump(mode="json", exclude={"api_key", "workdir"}, exclude_none=True)
    path = settings_file(settings.workdir, settings.name)
    write_atomic(path, yaml.safe_dump(data, sort_keys=True))
    return path


def load_workdir(workdir: Path | str) -> list[DatasetSettings]:
    """Every dataset configured in a workdir, in name order."""
    workdir = Path(workdir)
    out = []
    for path in sorted((workdir / "datasets").glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise SettingsError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise SettingsError(f"{path}: expected a mapping of settings")
        out.append(DatasetSettings.load(workdir=workdir, **data))
    return out
