"""A learning run killed with SIGKILL loses nothing: whole files, a resume that skips finished chunks, the same module.

A few trials of benchmarks/crash_trials.py (which runs ten or more and prints a table): `smolclean learn`
runs in its own process group, the whole group is killed at a seeded random moment, and the run after
the kill must end with exactly the module of an uninterrupted run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import crash_trials as ct  # noqa: E402

@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    # One wave of 4 chunks: the smallest run with chunks finished before, during and after a kill.
    setup = ct.Setup(rows=40, regions=4, budget=4, code=ct.freeze_code(root / "code"))
    drop = ct.make_drop(root / "input", setup)
    return root, drop, setup, ct.baseline(root, drop, setup)


def test_the_uninterrupted_run_learns_something_to_compare(uninterrupted):
    base = uninterrupted[-1]
    assert base.chunks == 4 and len(base.functions) >= 3


@pytest.mark.parametrize("slice_", [0, 1, 2])
def test_a_run_killed_at_a_random_moment_resumes_to_the_same_module(uninterrupted, slice_):
    root, drop, setup, base = uninterrupted
    # One kill in each third of the run (seeded), so early, middle and late kills are all tried.
    moment = ct.kill_moments(3, base.seconds, seed=8, until=0.65)[slice_]
    t = ct.trial(root, drop, base, moment, setup)
    assert t.killed, f"the run finished before the kill at {moment} s"
    assert not t.damaged_after_kill, t.damaged_after_kill
    assert not t.orphan_workers, f"sandbox workers outlived the killed run: {t.orphan_workers}"
    assert t.resumed_ok, t.error
    assert not t.chunks_redone, f"finished chunks ran again: {t.chunks_redone}"
    assert t.same_functions and t.same_module, t.error
    assert t.same_cleaned


def test_a_workdir_whose_storage_was_cut_off_while_being_created_is_completed_when_opened(tmp_path):
    # A kill in the first second of `smolclean learn` can leave the instance's storage without some tables; the
    # next run must not stop with "run `dagster instance migrate`".
    import sqlite3

    from smolclean_dagster.learning.embedded import workdir_instance

    workdir_instance(tmp_path).add_dynamic_partitions("people_drops", ["may.csv"])
    index = tmp_path / "dagster_home" / "history" / "runs" / "index.db"
    with sqlite3.connect(index) as db:
        db.execute("DROP TABLE dynamic_partitions")
    instance = workdir_instance(tmp_path)
    instance.add_dynamic_partitions("people_drops", ["june.csv"])
    assert instance.has_dynamic_partition("people_drops", "june.csv")
