"""Cleaning drops and the versions that do it, in Dagster: the `cleaned_data` asset and its checks, the per-drop
jobs, which version is live, and the `module_version` asset with its approve and rollback jobs."""
