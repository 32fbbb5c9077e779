"""The dg Component: one cleaned dataset declared in a `defs.yaml`, built by the `build_defs(...)` factory.

In a dg project, `dg scaffold defs smolclean_dagster.SmolcleanComponent customers` writes
`defs/customers/defs.yaml`; edit the drop folder, the instructions, the model and the limits there. Every
attribute is a `DatasetSettings` field (the LLM's is spelled `model` in YAML); unset ones keep its default. The
scaffold also sets DAGSTER_HOME in the project's `.env` (unless one is set), so `dg dev` keeps its instance in the
workdir, where smolclean's commands find it (instance.py).
"""

# No `from __future__ import annotations`: dg derives the YAML schema from the evaluated field annotations.
import json
import logging
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Literal

import dagster as dg
from pydantic import BaseModel

from .factory import build_defs
from .instance import keep_project_instance
from .settings import DatasetSettings

log = logging.getLogger("smolclean.component")
#: The workdir a scaffolded dataset gets, relative to the project root.
DEFAULT_WORKDIR = "smolclean-work"


def _setting(field: str, yaml_name: str | None = None) -> dg.Resolver:
    """The YAML side of one settings field: its description (with the default) comes from `DatasetSettings`."""
    info = DatasetSettings.model_fields[field]
    description = info.description or field.replace("_", " ")
    if not info.is_required():
        default = info.get_default(call_default_factory=True)
        shown = "unset" if default is None else json.dumps(str(default) if isinstance(default, Path) else default)
        description += f" (default: {shown})"
    if yaml_name is None:
        return dg.Resolver.default(description=description)
    # A renamed field needs its own resolver: the default one keeps the attribute's name in YAML.
    annotation = info.annotation
    return dg.Resolver(lambda context, value: value, model_field_name=yaml_name, model_field_type=annotation,
                       description=description)


class SmolcleanScaffoldParams(BaseModel):
    """What `dg scaffold defs smolclean_dagster.SmolcleanComponent NAME` may be told (all optional)."""

    name: str | None = None
    drop_folder: str | None = None
    glob: str | None = None
    instructions: str | None = None
    model: str | None = None


_DEFS_YAML = """\
type: {type_name}

# One cleaned dataset. Every attribute is a smolclean DatasetSettings field; unset ones keep their defaults.
# Relative paths start at the project root, except an '@file' of instructions, which starts in this folder.
attributes:
  # Prefixes the dataset's asset keys: {name}/raw_data ... {name}/cleaned_data.
  name: {name}
  # Storage, the exported module and the cleaned drops.
  workdir: {workdir}
  # The folder the sensor watches for new drops, and which files in it are drops.
  drop_folder: {drop_folder}
  glob: {glob}
  # What you want, in words (or "@instructions.md").
  instructions: {instructions}
  # Unset: the offline rules analyst. Any litellm model string for the LLM analyst, e.g.
  #   model: openai/gpt-4o-mini
  #   api_key: "{{{{ env.OPENAI_API_KEY }}}}"
{model}\
  # Limits: rows per chunk, chunks analysed per drop, analyst steps (model calls) per drop, model tokens per
  # drop, analyst steps per chunk, chunks at a time.
  chunk_size: {chunk_size}
  chunk_budget: {chunk_budget}
  step_budget: {step_budget}
  token_budget: {token_budget}
  max_steps: {max_steps}
  concurrency: {concurrency}
"""


class SmolcleanScaffolder(dg.Scaffolder[SmolcleanScaffoldParams]):
    """Writes a commented `defs.yaml` for a new dataset, named after its folder unless told otherwise."""

    @classmethod
    def get_scaffold_params(cls) -> type[SmolcleanScaffoldParams]:
        return SmolcleanScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[SmolcleanScaffoldParams]) -> None:
        params = request.params or SmolcleanScaffoldParams()
        name = params.name or _dataset_name(request.target_path.name)
        request.target_path.mkdir(parents=True, exist_ok=True)
        text = _DEFS_YAML.format(
            type_name=request.type_name,
            name=name,
            workdir=json.dumps(DEFAULT_WORKDIR),
            drop_folder=json.dumps(params.drop_folder or f"data/{name}/drops"),
            glob=json.dumps(params.glob or "*.csv"),
            instructions=json.dumps(params.instructions or ""),
            model=f"  model: {json.dumps(params.model)}\n" if params.model else "",
            **{limit: DatasetSettings.model_fields[limit].default
               for limit in ("chunk_size", "chunk_budget", "step_budget", "token_budget", "max_steps", "concurrency")},
        )
        (request.target_path / "defs.yaml").write_text(text, encoding="utf-8")
        _create_drop_folder(request, params.drop_folder or f"data/{name}/drops")
        root = request.project_root or Path.cwd()
        home = keep_project_instance(root, root / DEFAULT_WORKDIR)
        if home is not None:
            log.info("`dg dev` keeps its Dagster instance in %s (DAGSTER_HOME in %s)", home, root / ".env")


def _create_drop_folder(request: dg.ScaffoldRequest, drop_folder: str) -> None:
    """Create the folder the new dataset's sensor watches (relative to the project root, as the Component
    reads it), so the project runs as scaffolded; one named in the settings is never created later."""
    folder = Path(drop_folder).expanduser()
    if not folder.is_absolute():
        folder = (request.project_root or Path.cwd()) / folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. a folder on a share not mounted here: the sensor's tick will say so
        log.warning("could not create the drop folder %s: %s; create it before the sensor runs", folder, exc)


def _dataset_name(folder: str) -> str:
    """A valid dataset name from a folder name ('customer-exports' -> 'customer_exports')."""
    name = re.sub(r"\W", "_", folder)
    return name if re.match(r"[A-Za-z_]", name) else f"_{name}"


@dg.scaffold_with(SmolcleanScaffolder)
@dataclass
class SmolcleanComponent(dg.Component, dg.Resolvable):
    """One cleaned dataset as a dg Component: its learning flow, cleaning of drops, sensors and schedule.

    It builds the same Definitions as `build_defs(DatasetSettings(...))`. Relative `workdir` and
    `drop_folder` are taken from the project root, an `instructions: "@file"` from the component's folder.

    Example (`defs/customers/defs.yaml`, as `dg scaffold defs smolclean_dagster.SmolcleanComponent customers`
    writes it, then edited):

    .. code-block:: yaml

        type: smolclean_dagster.SmolcleanComponent
        attributes:
          name: customers
          drop_folder: data/customers/drops
          glob: "*.csv"
          instructions: "@instructions.md"
          model: openai/gpt-4o-mini
          api_key: "{{ env.OPENAI_API_KEY }}"
          chunk_budget: 8

    From Python:
        >>> SmolcleanComponent(name="customers", drop_folder="data/customers/drops").settings().name
        'customers'
    """

    name: Annotated[str, _setting("name")]
    workdir: Annotated[str | None, _setting("workdir")] = None
    drop_folder: Annotated[str | None, _setting("drop_folder")] = None
    glob: Annotated[str | None, _setting("glob")] = None
    instructions: Annotated[str | None, _setting("instructions")] = None
    # `model` would shadow Resolvable.model(), the schema of this class; the YAML still says `model`.
    llm_model: Annotated[str | None, _setting("model", yaml_name="model")] = None
    api_base: Annotated[str | None, _setting("api_base")] = None
    api_key: Annotated[str | None, _setting("api_key")] = field(default=None, repr=False)
    analyst: Annotated[Literal["rules", "llm", "hybrid"] | None, _setting("analyst")] = None
    llm_timeout_s: Annotated[float | None, _setting("llm_timeout_s")] = None
    llm_max_attempts: Annotated[int | None, _setting("llm_max_attempts")] = None
    llm_backoff_s: Annotated[float | None, _setting("llm_backoff_s")] = None
    llm_rpm: Annotated[float | None, _setting("llm_rpm")] = None
    llm_cache: Annotated[bool | None, _setting("llm_cache")] = None
    chunk_size: Annotated[int | None, _setting("chunk_size")] = None
    chunk_budget: Annotated[int | None, _setting("chunk_budget")] = None
    step_budget: Annotated[int | None, _setting("step_budget")] = None
    token_budget: Annotated[int | None, _setting("token_budget")] = None
    max_steps: Annotated[int | None, _setting("max_steps")] = None
    planning_interval: Annotated[int | None, _setting("planning_interval")] = None
    concurrency: Annotated[int | None, _setting("concurrency")] = None
    labels: Annotated[str | None, _setting("labels")] = None
    holdout_fraction: Annotated[float | None, _setting("holdout_fraction")] = None
    require_strong_sandbox: Annotated[bool | None, _setting("require_strong_sandbox")] = None
    timeout_s: Annotated[float | None, _setting("timeout_s")] = None
    apply_batch_size: Annotated[int | None, _setting("apply_batch_size")] = None
    apply_workers: Annotated[int | None, _setting("apply_workers")] = None
    cleaned_format: Annotated[Literal["parquet", "csv"] | None, _setting("cleaned_format")] = None
    residual_threshold: Annotated[float | None, _setting("residual_threshold")] = None
    learn_on_residual: Annotated[Literal["auto", "on_request"] | None, _setting("learn_on_residual")] = None
    stable_ticks: Annotated[int | None, _setting("stable_ticks")] = None
    sensor_interval_s: Annotated[int | None, _setting("sensor_interval_s")] = None
    reclean_cron: Annotated[str | None, _setting("reclean_cron")] = None
    promote: Annotated[Literal["manual", "auto"] | None, _setting("promote")] = None
    promote_max_changed_share: Annotated[float | None, _setting("promote_max_changed_share")] = None

    def settings(self, project_root: Path | None = None, folder: Path | None = None) -> DatasetSettings:
        """The dataset's settings: relative paths anchored at `project_root` (and `folder` for '@file')."""
        values: dict[str, object] = {
            ("model" if f.name == "llm_model" else f.name): getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) is not None
        }
        for path_field in ("workdir", "drop_folder", "labels"):
            if project_root is not None and path_field in values:
                values[path_field] = Path(project_root) / str(values[path_field])  # absolute stays absolute
        if project_root is not None and "workdir" not in values:
            values["workdir"] = Path(project_root) / DatasetSettings.model_fields["workdir"].get_default()
        instructions = values.get("instructions")
        if folder is not None and isinstance(instructions, str) and instructions.startswith("@"):
            values["instructions"] = "@" + str(Path(folder) / Path(instructions[1:]).expanduser())
        return DatasetSettings.load(**values)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_defs(self.settings(project_root=context.project_root, folder=context.path))
