"""Cleaning drops, as an asset: each drop cleaned by the live module version, with its checks.

module_version (module_versions.py: proposed or live) -> cleaned_data (per drop)
"""

# No `from __future__ import annotations`: Dagster reads the asset functions' type hints as classes.

import dagster as dg

from ..asset_keys import DatasetKeys
from ..core.agreement import check_drop
from ..core.apply import apply_module, read_registry_revision
from ..core.errors import SmolcleanError
from ..core.questions import load_questions
from ..core.storage import DatasetStore
from ..core.watch import FileState
from ..drop_folder import find_drop_file
from ..metadata import findings_metadata
from ..partitions import drops_partitions
from ..resources import SandboxResource
from ..settings import DatasetSettings
from .checks import agreement_metadata, cleaned_check_results, cleaned_check_specs
from .live_module import VERSION_TAG, CleanConfig, cleaning_module_for


def cleaned_data_asset(s: DatasetSettings, keys: DatasetKeys) -> dg.AssetsDefinition:
    """`<name>/cleaned_data`: a drop cleaned by the live module version, per drop."""
    drops = drops_partitions(s.name)

    @dg.asset(key=keys.key("cleaned_data"), partitions_def=drops, group_name=keys.group,
              deps=[keys.key("module_version")], check_specs=cleaned_check_specs(keys.key("cleaned_data"), drops),
              kinds={"pandas", s.cleaned_format})
    def cleaned_data(context: dg.AssetExecutionContext, smolclean_sandbox: SandboxResource,
                     config: CleanConfig) -> dg.MaterializeResult:
        """The drop cleaned by the live module version (or the one the run's config names) in parallel sandbox
        batches, named after the drop, with the version that cleaned it and the issues the detectors still find
        (checks: every row kept, residual issues under the threshold, changes that agree with the other rows of their
        entity)."""
        module, number = cleaning_module_for(s, config.version)
        context.instance.add_run_tags(context.run.run_id, {VERSION_TAG: str(number) if number else "unversioned"})
        src = find_drop_file(s, context.partition_key)
        source, state = module.read_text(encoding="utf-8"), FileState.of(src)
        sandbox = smolclean_sandbox.get()
        try:
            result = apply_module(
                source, src, s.cleaned_path(src), sandbox=sandbox, batch_size=s.apply_batch_size,
                workers=s.apply_workers,
                on_batch=lambda n, rows: context.log.info(f"{src.name}: batch {n} done, {rows} rows"),
            )
            # the entity check cleans the drop's first rows once more, to see exactly what clean() changed
            agreement = check_drop(source, src, sandbox)
        except SmolcleanError as exc:  # the drop cannot be read, or cannot be cleaned where the settings say
            raise dg.Failure(description=str(exc), metadata={"file": dg.MetadataValue.path(str(src)),
                                                            "reason": dg.MetadataValue.text(str(exc))}) from exc
        if not agreement.passed:
            context.log.warning(f"{src.name}: the module's changes disagree with the other rows of their entity: "
                                f"{agreement.describe()}")
        report, revision = result.residual, read_registry_revision(source)
        return dg.MaterializeResult(
            metadata={
                "output": dg.MetadataValue.path(str(result.output)),
                "source": dg.MetadataValue.path(str(src)),
                "source_fingerprint": dg.MetadataValue.text(state.fingerprint),
                "rows_in": dg.MetadataValue.int(result.rows_in),
                "rows_out": dg.MetadataValue.int(result.rows_out),
                "batches": dg.MetadataValue.int(result.batches),
                "workers": dg.MetadataValue.int(result.workers),
                "seconds": dg.MetadataValue.float(result.seconds),
                "rows_per_s": dg.MetadataValue.float(result.rows_per_s),
                "registry_revision": dg.MetadataValue.int(revision if revision is not None else -1),
                "version": dg.MetadataValue.int(number or -1),
                "module": dg.MetadataValue.path(str(module)),
                "residual_share": dg.MetadataValue.float(report.share),
                "residual_passed": dg.MetadataValue.bool(report.passes(s.residual_threshold)),
                "residual_rows_sampled": dg.MetadataValue.int(report.rows_sampled),
                **{f"residual_{k}": v for k, v in findings_metadata(list(report.findings)).items()},
                "entity_passed": dg.MetadataValue.bool(agreement.passed),
                **{f"entity_{k}": v for k, v in agreement_metadata(agreement).items()},
                "sandbox": dg.MetadataValue.text(sandbox.level.describe()),
            },
            check_results=cleaned_check_results(result, s.residual_threshold, agreement,
                                                questions=load_questions(DatasetStore(s.storage_dir, s.name))),
        )

    return cleaned_data
