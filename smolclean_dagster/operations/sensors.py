"""Sensors of a dataset: its drop folder, cleaned drops that fail their residual or entity check, its labels
folder (corrected label samples), and the learning runs they start (learning/sensor.py).

They are on by default (the residual one only with `learn_on_residual: auto`), so `smolclean ui` cleans
new files and learns from new dirt and from corrections without anyone clicking. The rules for picking files up
live in `core/watch.py` and docs/drop-folders.md.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from ..asset_keys import DatasetKeys
from ..cleaning.drop_runs import (
    Cleaning,
    already_learned,
    clean_request,
    cleaned_key,
    cleanings_since,
    latest_cleaning,
    learn_job_name,
    learning_request,
    learning_sensor_name,
)
from ..cleaning.live_module import live_version, module_label, times_live
from ..core.drops import drop_key
from ..core.errors import SettingsError, SmolcleanError
from ..core.labels import read_labels
from ..core.labels_folder import drop_of_label
from ..core.watch import FileState, WatchCursor, observe, probe_drop, scan_folder
from ..instance import is_temporary, temporary_instance_warning
from ..learning.runs import learning_in_progress
from ..learning.sensor import build_learning_sensor
from ..partitions import drops_partitions
from ..settings import DatasetSettings


def build_drop_folder_sensor(s: DatasetSettings, jobs: list) -> dg.SensorDefinition:
    """Watches the dataset's drop folder: finished new files become drop partitions and get cleaned.

    With no module yet, the first finished drop is learned from (`learn_on_residual: auto`) or the files
    wait, with the reason in the tick (`on_request`). Unreadable files are reported in the tick (log and
    an observation on `<name>/cleaned_data`) once per version, and the other files go on. On a temporary
    instance (`dg dev` without DAGSTER_HOME) each tick warns that a restart would clean everything again.
    """
    name = s.name
    drops = drops_partitions(name)

    @dg.sensor(
        name=f"{name}_drop_folder", jobs=jobs, minimum_interval_seconds=s.sensor_interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Cleans each new file in {s.drops_dir} matching {s.glob!r} once it has stopped changing.",
    )
    def drop_folder(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        # A drop folder named in the settings but missing: each tick says so, naming the setting and what to
        # do (watching nothing silently would look like "no new files"), without failing every 15 seconds.
        try:
            folder = s.check_drop_folder()
        except SettingsError as exc:
            context.log.warning(str(exc))
            return dg.SkipReason(str(exc))
        if is_temporary(context.instance):
            context.log.warning(temporary_instance_warning(s.workdir))
        plan = observe(WatchCursor.from_json(context.cursor), scan_folder(folder, s.glob), stable_ticks=s.stable_ticks)
        cursor, has_module = plan.cursor, live_version(s)[1] is not None
        runs: list[dg.RunRequest] = []
        new_keys: list[str] = []
        events: list[dg.AssetObservation] = []
        notes: list[str] = []
        waiting: list[str] = []
        learning = learning_in_progress(context.instance, name) if not has_module else None
        for f in plan.ready:
            reason = probe_drop(s.drops_dir / f.name)
            if reason:
                context.log.warning(f"not cleaning {f.name}: {reason}")
                events.append(_unreadable(name, f, reason))
                cursor = cursor.with_status(f, "rejected", reason)
                continue
            key = drop_key(f.name)
            if has_module:
                if _cleaned_already(context.instance, name, key, f):
                    context.log.info(f"{f.name}: this version is cleaned already")
                else:
                    runs.append(clean_request(name, key, f.fingerprint))
            elif s.learn_on_residual == "auto" and learning is None and not runs:
                labels = s.labels_of(f.name)
                if labels is not None and not labels.is_file():
                    context.log.warning(f"not learning from {f.name}: labels={labels} (the setting) is no file; save "
                                        "the drop's corrected sample there, or unset the setting")
                    waiting.append(f.name)
                    continue
                context.log.info(f"{f.name}: no module for {name!r} yet, learning one from this drop")
                runs.append(learning_request(name, key, f.fingerprint, labels=labels))
            else:
                waiting.append(f.name)
                continue
            if not context.instance.has_dynamic_partition(drops.name, key) and key not in new_keys:
                new_keys.append(key)
            cursor = cursor.with_status(f, "handled")
        if waiting:
            notes.append(_no_module_note(s, waiting, learning))
        if plan.settling:
            notes.append(f"waiting for {len(plan.settling)} file(s) to stop changing: "
                         + ", ".join(f.name for f in plan.settling[:5]))
        if events:
            notes.append(f"{len(events)} file(s) cannot be read (see the log and {name}/cleaned_data's observations)")
        for note in notes:
            context.log.info(note)
        return dg.SensorResult(
            run_requests=runs,
            cursor=cursor.to_json(),
            dynamic_partitions_requests=[drops.build_add_request(new_keys)] if new_keys else None,
            asset_events=events,
            skip_reason=None if runs else ("; ".join(notes) or f"no new finished file in {s.drops_dir}"),
        )

    return drop_folder


def build_residual_sensor(s: DatasetSettings, jobs: list) -> dg.SensorDefinition:
    """Learns from drops whose cleaned output fails the residual check (dirt left) or the entity check (changes
    the other rows of their entity contradict: learning takes out the function that made them), one drop at a time.

    Running by default when `learn_on_residual` is "auto", stopped (switch it on in the UI) otherwise.
    A drop cleaned by another module than the live one (another registry revision) is cleaned again first instead;
    a drop version is learned from at most once, so a drop whose dirt the agent cannot fix does not loop.
    """
    name = s.name
    status = dg.DefaultSensorStatus.RUNNING if s.learn_on_residual == "auto" else dg.DefaultSensorStatus.STOPPED

    @dg.sensor(
        name=f"{name}_learn_on_residual", jobs=jobs, minimum_interval_seconds=s.sensor_interval_s,
        default_status=status,
        description=f"Runs {learn_job_name(name)} on a drop whose cleaned output still has more dirt than "
        f"residual_threshold={s.residual_threshold}, or whose changes the other rows of their entity contradict.",
    )
    def learn_on_residual(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        busy = learning_in_progress(context.instance, name)
        if busy:
            return dg.SensorResult(
                skip_reason=f"learning run {busy} is still going (the sensor {learning_sensor_name(name)} submits its "
                "runs); waiting for it to end (if the process of one of its runs was killed, that run stays "
                "'started': terminate it in the UI (Runs, the run, Terminate, with force termination); re-executing "
                "it, or learning from the drop again, then goes on where it stopped)",
                cursor=context.cursor,
            )
        after = int(context.cursor or 0)
        live = live_version(s)
        runs: list[dg.RunRequest] = []
        for cleaning in cleanings_since(context.instance, name, after):
            after = cleaning.storage_id
            request = _residual_request(context, s, cleaning, live)
            if request is not None:
                runs.append(request)
                if request.job_name == learn_job_name(name):
                    break  # one learning run at a time: the next failing drop may be fixed by this one
        return dg.SensorResult(
            run_requests=runs, cursor=str(after),
            skip_reason=None if runs else "no new cleaned drop fails its residual or entity check",
        )

    return learn_on_residual


def build_labels_folder_sensor(s: DatasetSettings, jobs: list) -> dg.SensorDefinition:
    """Watches the dataset's labels folder: a corrected label sample saved there, named after its drop as
    `<name>/label_sample` names it, starts a learning from that drop held to the corrections.

    A file is taken once it has stopped changing, once per version (core/watch.py's rules; `to_label/` is not
    watched). One that is not its drop's labels (no such drop, another header, an unknown row) is reported once,
    in the tick's log and as an observation on `<name>/label_sample`, naming the row and the column; nothing of it
    is stored. While a learning of the dataset runs, finished files wait for it to end.
    """
    name = s.name
    drops = drops_partitions(name)

    @dg.sensor(
        name=f"{name}_labels_folder", jobs=jobs, minimum_interval_seconds=s.sensor_interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Learns from a drop again, held to the corrected label sample saved in {s.labels_dir} under "
        "the drop's name (the file <name>/label_sample writes to its to_label/ folder).",
    )
    def labels_folder(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        plan = observe(WatchCursor.from_json(context.cursor), scan_folder(s.labels_dir), stable_ticks=s.stable_ticks)
        cursor = plan.cursor
        busy = learning_in_progress(context.instance, name) if plan.ready else None
        drop_files = [f.name for f in scan_folder(s.drops_dir, s.glob)] if plan.ready else []
        runs: list[dg.RunRequest] = []
        events: list[dg.AssetObservation] = []
        notes: list[str] = []
        for f in plan.ready:
            if busy or runs:  # one learning at a time: the file stays pending, taken on a later tick
                notes.append(f"{f.name} waits for {f'learning run {busy}' if busy else 'the learning requested now'} "
                             f"of {name!r} to end")
                continue
            path, key = s.labels_dir / f.name, None
            try:
                drop = s.drops_dir / drop_of_label(path, drop_files)
                key = drop_key(drop)
                labels = read_labels(path, drop)
            except SmolcleanError as exc:
                context.log.warning(f"labels not taken, nothing stored: {exc}")
                notes.append(str(exc))
                known = key is not None and context.instance.has_dynamic_partition(drops.name, key)
                events.append(_rejected_labels(name, path, str(exc), key if known else None))
                cursor = cursor.with_status(f, "rejected", str(exc))
                continue
            context.log.info(f"{labels.summary()}: learning from {drop.name} again, held to them")
            runs.append(learning_request(name, key, FileState.of(drop).fingerprint, labels=path))
            cursor = cursor.with_status(f, "handled")
        if plan.settling:
            notes.append(f"waiting for {len(plan.settling)} file(s) to stop changing: "
                         + ", ".join(f.name for f in plan.settling[:5]))
        new_keys = [r.partition_key for r in runs
                    if not context.instance.has_dynamic_partition(drops.name, r.partition_key)]
        return dg.SensorResult(
            run_requests=runs, cursor=cursor.to_json(), asset_events=events,
            dynamic_partitions_requests=[drops.build_add_request(new_keys)] if new_keys else None,
            skip_reason=None if runs else ("; ".join(notes) or f"no new corrected file in {s.labels_dir}"),
        )

    return labels_folder


def _rejected_labels(name: str, path: Path, reason: str, drop: str | None) -> dg.AssetObservation:
    """Why a corrected file was not taken, as an observation on `<name>/label_sample` (on the drop's partition
    when the file names a drop)."""
    return dg.AssetObservation(
        asset_key=DatasetKeys(name).key("label_sample"), partition=drop,
        description=f"{path.name} was not taken, nothing of it is stored: {reason}",
        metadata={"file": dg.MetadataValue.path(str(path)), "reason": dg.MetadataValue.text(reason)},
    )


def _residual_request(context: dg.SensorEvaluationContext, s: DatasetSettings, cleaning: Cleaning,
                      live: tuple[int | None, int | None]) -> dg.RunRequest | None:
    """What to do about one cleaning: nothing, clean the drop again with a newer module, or learn from it.

    `live` is the live module's (version, registry revision), as `live_version` gives it."""
    if not cleaning.failed or cleaning.fingerprint is None:
        return None
    latest = latest_cleaning(context.instance, s.name, cleaning.drop)
    if latest is not None and latest.storage_id != cleaning.storage_id:
        return None  # cleaned again since; that later cleaning is looked at on its own
    number, revision = live
    if revision is not None and cleaning.registry_revision is not None and cleaning.registry_revision != revision:
        context.log.info(f"{cleaning.drop}: cleaned by {cleaning.module}, cleaning it again with the live "
                         f"{module_label(number, revision)} before learning from it")
        return clean_request(s.name, cleaning.drop, cleaning.fingerprint, registry_revision=revision,
                             times_live=times_live(s))
    if already_learned(context.instance, cleaning.drop, cleaning.fingerprint):
        context.log.info(f"{cleaning.drop}: {_what_failed(cleaning)} failed, but this version was learned from already")
        return None
    context.log.info(f"{cleaning.drop}: {_what_failed(cleaning)} failed, learning from it")
    labels = s.labels_of(cleaning.drop)
    return learning_request(s.name, cleaning.drop, cleaning.fingerprint,
                            labels=labels if labels is not None and labels.is_file() else None)


def _what_failed(cleaning: Cleaning) -> str:
    failed = [name for name, passed in (("the residual check", cleaning.residual_passed),
                                        ("the entity check", cleaning.entity_passed)) if passed is False]
    return " and ".join(failed)


def _cleaned_already(instance: dg.DagsterInstance, name: str, key: str, f: FileState) -> bool:
    """Whether this very version of the file was cleaned before (e.g. by `smolclean learn`)."""
    latest = latest_cleaning(instance, name, key)
    return latest is not None and latest.fingerprint == f.fingerprint


def _unreadable(name: str, f: FileState, reason: str) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=cleaned_key(name),
        description=f"{f.name} was not cleaned: {reason}",
        metadata={"file": dg.MetadataValue.text(f.name), "reason": dg.MetadataValue.text(reason),
                  "size": dg.MetadataValue.int(f.size)},
    )


def _no_module_note(s: DatasetSettings, waiting: list[str], learning: str | None) -> str:
    files = ", ".join(waiting[:5])
    if learning:
        return f"{len(waiting)} file(s) wait for learning run {learning} to export a module: {files}"
    return (f"no cleaning module for {s.name!r} yet, so {len(waiting)} file(s) wait: {files}. Learn one: launch "
            f"{learn_job_name(s.name)} for one of them, or run `smolclean learn FILE --name {s.name}`")


def build_sensors(s: DatasetSettings, jobs: list, learning_jobs: list) -> list[dg.SensorDefinition]:
    """Every sensor of one dataset: `jobs` clean and learn from drops, `learning_jobs` are the learning flow's steps."""
    return [build_drop_folder_sensor(s, jobs), build_residual_sensor(s, jobs), build_labels_folder_sensor(s, jobs),
            build_learning_sensor(s, [*jobs, *learning_jobs])]
