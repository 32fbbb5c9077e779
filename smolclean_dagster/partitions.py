"""Partitions: one dynamic set of drops and one of chunks per dataset."""

from __future__ import annotations

import dagster as dg


def drops_partitions(dataset: str) -> dg.DynamicPartitionsDefinition:
    """Drop partitions of a dataset: one key per input file (its sanitised file name)."""
    return dg.DynamicPartitionsDefinition(name=f"{dataset}_drops")


def chunks_partitions(dataset: str) -> dg.DynamicPartitionsDefinition:
    """Chunk partitions of a dataset: registered by the chunks asset for the chunks it selects."""
    return dg.DynamicPartitionsDefinition(name=f"{dataset}_chunks")
