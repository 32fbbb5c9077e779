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
    api_base: str | None = Field(
        default=None, description="base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1"
    )
    api_key: str | None = Field(default=None, description="API key of the model's provider (never saved to the workdir)")
    llm_timeout_s: float = Field(default=120.0, gt=0, description="seconds one LLM request may take")
    llm_max_attempts: int = Field(default=5, ge=1, le=20, description="attempts per LLM call, the first included")
    llm_backoff_s: float = Field(
        default=1.0, ge=0, description="first wait before retrying a failed LLM call; doubles with each attempt"
    )
    llm_rpm: float | None = Field(default=None, gt=0, description="LLM requests per minute at most (per process)")
    llm_cache: bool = Field(default=True, description="keep LLM replies on disk so unchanged re-runs make no calls")
    analyst: Literal["rules", "llm", "hybrid"] | None = Field(
        default=None, description="defaults to 'rules' without a model and 'hybrid' with one"
    )
    chunk_size: int = Field(default=50, gt=0, le=100_000, description="rows per chunk the analyst sees")
    chunk_budget: int = Field(default=12, gt=0, description="most chunks analysed per drop")
    step_budget: int = Field(
        default=80, gt=0, le=1000,
        description="most analyst steps (model calls with a model) per drop, shared by its chunks",
    )
    token_budget: int = Field(
        default=300_000, ge=0,
        description="most model tokens (prompt and reply) per drop, shared by its chunks like step_budget; 0: no limit",
    )
    max_steps: int = Field(
        default=40, gt=0, le=1000, description="most analyst steps one chunk may take (its share of step_budget is often less)"
    )
    planning_interval: int = Field(
        default=4, gt=0, description="chunks per wave: the registry is consolidated and published after each wave"
    )
    concurrency: int = Field(default=2, gt=0, le=64, description="chunks analysed at once (separate processes)")
    labels: Path | None = Field(
        default=None,
        description="a corrected label sample of one of the dataset's drops (named after the drop, as `smolclean "
                    "label` writes it): every learning of that drop is held to it",
    )
    holdout_fraction: float = Field(
        default=0.2, ge=0.0, lt=0.9, description="share of the drop's rows held out to validate functions on"
    )
    require_strong_sandbox: bool = Field(
        default=False, description="refuse to run generated code when a sandbox layer is missing here"
    )
    timeout_s: float = Field(default=20.0, gt=0, description="seconds one generated function may run in the sandbox")
    apply_batch_size: int = Field(default=10_000, gt=0, description="rows per batch when a drop is cleaned")
    apply_workers: int | None = Field(
        default=None, gt=0, le=64,
        description="sandbox workers cleaning batches side by side; unset: one per core (memory: batch size x workers)",
    )
    cleaned_format: Literal["parquet", "csv"] = Field(default="parquet", description="format of cleaned drops")
    residual_threshold: float = Field(
        default=0.01, ge=0.0, le=1.0,
        description="most share of a column's sampled cells the detectors may still flag in a cleaned drop (0.01 = 1%)",
    )
    learn_on_residual: Literal["auto", "on_request"] = Field(
        default="auto",
        description="when a cleaned drop fails its residual or entity check: 'auto' learns from it at once, "
        "'on_request' waits for you to materialize <name>/drop_learning for that drop",
    )
    stable_ticks: int = Field(default=2, ge=1, le=100, description="looks in a row a file must not change to be picked up")
    sensor_interval_s: int = Field(default=15, ge=5, le=3600, description="seconds between looks at the drop folder")
    reclean_cron: str = Field(
        default="*/15 * * * *", description="cron of the schedule re-cleaning drops cleaned by an older module"
    )
    promote: Literal["manual", "auto"] = Field(
        default="manual",
        description="how a proposed module version goes live: 'manual' waits for `smolclean approve`, 'auto' "
        "promotes it when validation passed, no instruction item is open and its shadow check changes less than "
        "promote_max_changed_share of the cells",
    )
    promote_max_changed_share: float = Field(
        default=0.05, ge=0.0, le=1.0,
        description="with promote: auto, most share of the sampled cells a proposed version may clean differently "
        "than the live one and still go live on its own (0.05 = 5%)",
    )

    @field_validator("name")
    @classmethod
    def _name_is_a_key(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", v):
            raise ValueError("must start with a letter or '_' and hold only letters, digits and '_' (max 63)")
        return v

    @field_validator("api_base")
    @classmethod
    def _api_base_is_a_url(cls, v: str | None) -> str | None:
        from .core.analysts.client import check_api_base

        return check_api_base(v)

    @field_validator("reclean_cron")
    @classmethod
    def _cron_has_five_fields(cls, v: str) -> str:
        if len(v.split()) != 5:
            raise ValueError("must be a cron string with five fields, e.g. '*/15 * * * *'")
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

    def labels_of(self, drop: Path | str) -> Path | None:
        """The `labels` setting when it is the corrected sample of `drop` (the same stem), else None."""
        if self.labels is None or Path(self.labels).stem != Path(drop).stem:
            return None
        return Path(self.labels)

    @property
    def labels_dir(self) -> Path:
        """Where the label samples of drops are written (`to_label/`) and corrected files are handed back."""
        return self.workdir / "labels" / self.name

    def check_drop_folder(self) -> Path:
        """The drop folder, which must exist when the setting names it (a typo would watch nothing for ever).

        The default folder, <workdir>/drops/<name>, is created by `smolclean learn` and may not exist yet.
        """
        folder = self.drops_dir
        if self.drop_folder is not None and not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise SettingsError(
                f"setting 'drop_folder' of dataset {self.name!r}: {folder} {what}; create it or correct the setting"
            )
        return folder

    @property
    def storage_dir(self) -> Path:
        return self.workdir / "storage" / self.name

    @property
    def module_dir(self) -> Path:
        return self.workdir / "modules" / self.name

    @property
    def cleaned_dir(self) -> Path:
        return self.workdir / "cleaned" / self.name

    def cleaned_path(self, drop: Path | str) -> Path:
        """Where the cleaned output of the drop file `drop` goes: named after it, in `cleaned_format`."""
        return self.cleaned_dir / f"{Path(drop).stem}.{self.cleaned_format}"

    @property
    def analyst_kind(self) -> str:
        return self.analyst or ("hybrid" if self.model else "rules")

    @property
    def reads_instructions(self) -> bool:
        """True when the analyst is a model: the rules' templates do not read the user's instructions."""
        return self.analyst_kind != "rules"

    def make_analyst(self):
        """The analyst these settings ask for (litellm is imported only when the LLM is first called)."""
        from .core.analysts import make_analyst

        return make_analyst(
            self.analyst_kind,
            model=self.model,
            api_base=self.api_base,
            api_key=self.api_key,
            cache_dir=self.storage_dir / "llm_cache" if self.llm_cache else None,
            timeout_s=self.llm_timeout_s,
            max_attempts=self.llm_max_attempts,
            backoff_s=self.llm_backoff_s,
            rpm=self.llm_rpm,
        )

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


    @classmethod
    def for_workdir(cls, workdir: Path | str, name: str, **values: object) -> DatasetSettings:
        """The dataset's settings saved in `workdir` (`datasets/<name>.yaml`, when there is one) with `values`
        over them, as `smolclean learn` uses them: what the command line says wins.

        Example:
            >>> s = DatasetSettings.for_workdir("work", "customers", llm_timeout_s="1800")  # doctest: +SKIP
        """
        path = settings_file(Path(workdir), name)
        saved = _read_settings_file(path) if path.is_file() else {}
        saved.pop("name", None)
        merged = {**saved, **values, "name": name, "workdir": Path(workdir)}
        return cls.load(**{k: v for k, v in merged.items() if v is not None})


def parse_overrides(pairs: list[str]) -> dict[str, str | None]:
    """`KEY=VALUE` pairs of the command line (`--set llm_timeout_s=1800`) as settings; `KEY=` unsets one.

    Values stay text: the settings model converts and validates them like any other source.

    Example:
        >>> parse_overrides(["llm_timeout_s=1800", "llm_rpm="])
        {'llm_timeout_s': '1800', 'llm_rpm': None}
    """
    out: dict[str, str | None] = {}
    known = DatasetSettings.model_fields
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError(f"--set {pair!r}: expected KEY=VALUE, e.g. --set llm_timeout_s=1800")
        if key in ("name", "workdir"):
            raise SettingsError(f"--set {key}=...: give the dataset's {key} with --{key} instead")
        if key not in known:
            names = ", ".join(n for n in known if n not in ("name", "workdir"))
            raise SettingsError(f"--set {key}=...: setting {key!r} does not exist; the settings are: {names}")
        out[key] = value if value != "" else None
    return out


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
    from .core.files import write_atomic

    data = settings.model_dump(mode="json", exclude={"api_key", "workdir"}, exclude_none=True)
    path = settings_file(settings.workdir, settings.name)
    write_atomic(path, yaml.safe_dump(data, sort_keys=True))
    return path


def add_instructions(workdir: Path | str, name: str, texts: list[str]) -> str:
    """Add `texts` as instruction items of dataset `name` in its settings file in `workdir` (an answer to a question
    learning asked), keeping every other setting as written there; returns the instructions now saved.

    Example:
        >>> add_instructions("work", "customers", ["Write 'N/A' as empty in column 'email'."])  # doctest: +SKIP
        "- Write 'N/A' as empty in column 'email'."
    """
    from .core.files import write_atomic
    from .core.instructions import with_items

    path = settings_file(Path(workdir), name)
    if not path.is_file():
        raise SettingsError(f"dataset {name!r} has no settings file {path} (it is declared in code or in a dg "
                            f"component): add to its setting 'instructions': {' '.join(texts)}")
    data = _read_settings_file(path)
    data["instructions"] = with_items(str(data.get("instructions") or ""), texts)
    DatasetSettings.load(workdir=Path(workdir), **{**data, "name": name})  # still valid settings, or the error says why
    write_atomic(path, yaml.safe_dump(data, sort_keys=True))
    return data["instructions"]


def load_workdir(workdir: Path | str) -> list[DatasetSettings]:
    """Every dataset configured in a workdir, in name order."""
    workdir = Path(workdir)
    out = []
    for path in sorted((workdir / "datasets").glob("*.yaml")):
        out.append(DatasetSettings.load(workdir=workdir, **_read_settings_file(path)))
    return out


def _read_settings_file(path: Path) -> dict[str, object]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a mapping of settings")
    return data
