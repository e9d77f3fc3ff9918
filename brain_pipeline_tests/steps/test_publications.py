"""steps.publications on a real run: history, kept blobs and stamps agree."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.config import BrainConfig, memory_of
from brain_pipeline.publishing.publication_log import read_history
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import read_record
from brain_pipeline_tests.defs.conftest import make_project, tiny_fixture, write_tiny_corpus


def test_archiving_keeps_the_live_stamps_valid_and_the_history_complete(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    project = make_project(tmp_path, corpus, tiny_fixture(write_tiny_corpus(corpus)))
    assert project.materialize().success
    layout = StateLayout.of(project.build)
    memory = memory_of(BrainConfig.model_validate({"build_dir": str(project.build)}))
    # Keeping the live file as a blob leaves its stamps valid: the next run can still
    # prove the live files unchanged by their stat alone.
    record = read_record(layout, "published_local")
    assert record is not None and record.outputs_intact(layout)
    (pub,) = read_history(memory).publications()
    assert (pub.id, pub.kind, pub.trigger) == (1, "published", "launched by hand (CLI or UI)")
    live = project.published() / "knowledge-store.json"
    assert memory.blobs.get_bytes(pub.store_sha256) == live.read_bytes()
    assert pub.evaluation["passed"] is True and pub.evaluation["severity"] == "PASS"
    assert pub.baseline == pub.evaluation["key"]
    assert project.materialize().success  # nothing changed: no second publication
    assert len(read_history(memory).publications()) == 1
