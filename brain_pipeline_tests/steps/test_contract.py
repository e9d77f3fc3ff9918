"""Reading an upstream's record, and noticing when it moved while a step worked."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import AssetRecord, write_record
from brain_pipeline.steps.contract import StepFailure, recheck_input, upstream_record


def _record(layout: StateLayout, version: str) -> None:
    write_record(layout, AssetRecord("knowledge_store", version, "store-1", {}))


def test_a_missing_upstream_names_itself_the_build_dir_and_what_to_run(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path / "build")
    with pytest.raises(StepFailure) as failure:
        upstream_record(layout, "knowledge_store", "embeddings")
    message = str(failure.value)
    assert "embeddings needs knowledge_store" in message
    assert str(layout.build_dir) in message and "--select 'knowledge_store+'" in message


def test_the_upstream_record_is_read_back(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path / "build")
    _record(layout, "v1")
    assert upstream_record(layout, "knowledge_store", "embeddings").data_version == "v1"


def test_an_input_that_moved_meanwhile_fails_the_step(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path / "build")
    _record(layout, "v1")
    recheck_input(layout, "knowledge_store", "v1")  # still the one read: no failure
    _record(layout, "v2")  # another writer
    with pytest.raises(StepFailure, match="changed .* while this step was reading it"):
        recheck_input(layout, "knowledge_store", "v1")


def test_a_failure_carries_what_the_step_still_shows() -> None:
    failure = StepFailure("stopped", {"saved": 3})
    assert str(failure) == "stopped" and failure.metadata == {"saved": 3}
    assert StepFailure("plain").metadata == {}
