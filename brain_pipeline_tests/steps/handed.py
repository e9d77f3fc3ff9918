"""What Dagster's hand-off (`defs.hand_off`) passes a step, for tests that call the steps
as functions: the same core calls the IO manager makes, so the steps are tested with
exactly what a run gives them."""

from __future__ import annotations

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.state.records import AssetRecord
from brain_pipeline.steps.contract import Build, load_build, upstream_record


def chunks_of(cfg: BrainConfig) -> AssetRecord:
    """knowledge_chunks' record, as the hand-off gives it to knowledge_store."""
    return upstream_record(memory_of(cfg), "knowledge_chunks", "knowledge_store")


def store_of(cfg: BrainConfig) -> AssetRecord:
    """knowledge_store's record, as the hand-off gives it to embeddings."""
    return upstream_record(memory_of(cfg), "knowledge_store", "embeddings")


def build_of(cfg: BrainConfig) -> Build:
    """The build, as the hand-off gives it to the check and the publish steps."""
    return load_build(memory_of(cfg))
