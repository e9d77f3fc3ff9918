"""Build records: what an asset last wrote, and whether re-running would reproduce it."""

from __future__ import annotations

import os

from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import (
    AssetRecord,
    digest_of,
    read_record,
    record_path,
    stamp_outputs,
    write_record,
)
from brain_pipeline.utils.digest import value_digest


def _record(layout: StateLayout, sha: str = "s" * 64) -> AssetRecord:
    layout.build_dir.mkdir(parents=True, exist_ok=True)
    layout.store_file.write_bytes(b"[]")
    return AssetRecord(
        asset="knowledge_store",
        data_version=sha,
        code_version="store-1",
        inputs={"knowledge_chunks": "v1"},
        outputs=stamp_outputs(layout, {layout.store_file.name: sha}),
        facts={"chunks": 0},
        run_id="run-1",
    )


def test_a_record_reads_back_as_written_with_a_time(layout: StateLayout) -> None:
    record = _record(layout)
    write_record(layout, record)
    back = read_record(layout, "knowledge_store")
    assert back is not None and back.written_at
    assert back.inputs == record.inputs and back.outputs == record.outputs
    assert back.facts == {"chunks": 0} and back.run_id == "run-1"


def test_no_record_or_an_unreadable_one_reads_as_none(layout: StateLayout) -> None:
    assert read_record(layout, "knowledge_store") is None
    record_path(layout, "knowledge_store").parent.mkdir(parents=True)
    record_path(layout, "knowledge_store").write_bytes(b"{half")
    assert read_record(layout, "knowledge_store") is None


def test_current_only_for_the_same_code_inputs_and_untouched_outputs(
    layout: StateLayout,
) -> None:
    record = _record(layout)
    inputs = {"knowledge_chunks": "v1"}
    assert record.is_current_for(layout, "store-1", inputs)
    assert not record.is_current_for(layout, "store-2", inputs)
    assert not record.is_current_for(layout, "store-1", {"knowledge_chunks": "v2"})
    replacement = layout.build_dir / "new.json"
    replacement.write_bytes(b"[]")
    os.replace(replacement, layout.store_file)  # the same bytes, another file
    assert not record.is_current_for(layout, "store-1", inputs)


def test_digest_of_is_a_prefix_of_the_value_digest() -> None:
    value = {"b": [1, 2], "a": "x"}
    assert digest_of(value) == value_digest(value)[:16]
