"""The ingest steps called with plain values: observe, chunk, assemble (no Dagster)."""

from __future__ import annotations

import hashlib

import pytest

from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.state.records import read_record
from brain_pipeline.steps.contract import StepFailure
from brain_pipeline.steps.ingest import (
    assemble_knowledge_store,
    chunk_corpus,
    chunks_code_version,
    fixture_version,
    observe,
    snapshot_facts,
)
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import chunks_of


def _build(project: Project, log: StepLog, run_id: str = "run-1") -> dict[str, object]:
    snapshot = observe(project.cfg)
    chunk_corpus(project.cfg, snapshot, run_id=run_id, log=log)
    return assemble_knowledge_store(
        project.cfg, chunks_of(project.cfg), run_id=run_id, log=log
    ).metadata


def test_the_steps_build_the_store_the_one_shot_ingest_builds(
    project: Project, log: StepLog
) -> None:
    shown = _build(project, log)
    expected = ingest_corpus(project.corpus).store_bytes()
    assert project.layout.store_file.read_bytes() == expected
    assert shown["status"] == "written"
    assert shown["chunks"] == 2 and shown["chunks.aws"] == 1 and shown["chunks.python"] == 1
    assert shown["store_sha256"] == hashlib.sha256(expected).hexdigest()
    record = read_record(project.layout, "knowledge_store")
    assert record is not None and record.data_version == shown["store_sha256"]
    assert log.warnings == []


def test_a_second_assembly_of_the_same_chunks_is_unchanged(project: Project, log: StepLog) -> None:
    first = _build(project, log)
    mtime = project.layout.store_file.stat().st_mtime_ns
    again = _build(project, log, run_id="run-2")
    assert again["status"] == "unchanged"
    assert again["store_sha256"] == first["store_sha256"]
    assert project.layout.store_file.stat().st_mtime_ns == mtime


def test_an_edit_reaches_the_store(project: Project, log: StepLog) -> None:
    first = _build(project, log)
    project.write("aws/subnet.md", "Subnets split a VPC into ranges of addresses, one per zone.")
    again = _build(project, log, run_id="run-2")
    assert again["status"] == "written" and again["chunks"] == 3
    assert again["corpus_digest"] != first["corpus_digest"]


def test_assembling_before_chunking_names_the_step_to_run(project: Project, log: StepLog) -> None:
    with pytest.raises(StepFailure, match=r"knowledge_chunks.*materialise it first"):
        assemble_knowledge_store(project.cfg, chunks_of(project.cfg), run_id="r", log=log)
    assert not project.layout.store_file.exists()


def test_problem_files_are_logged_and_counted(project: Project, log: StepLog) -> None:
    project.write("aws/picture.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    snapshot = observe(project.cfg)
    shown = chunk_corpus(project.cfg, snapshot, run_id="r", log=log).metadata
    assert shown["problem_files"] == 1
    assert len(log.warnings) == 1 and log.warnings[0].startswith("aws/picture.md: ")
    facts = snapshot_facts(snapshot, str(project.cfg.build_dir))
    assert facts["text_files"] == 2 and facts["skipped"] == 1


def test_the_chunks_version_follows_the_junk_limits(project: Project) -> None:
    tighter = project.cfg.model_copy(
        update={"corpus": project.cfg.corpus.model_copy(update={"max_file_bytes": 10})}
    )
    assert chunks_code_version(tighter) != chunks_code_version(project.cfg)
    assert chunks_code_version(project.cfg) == chunks_code_version(project.cfg.model_copy())


def test_the_fixture_version_is_its_sha256_or_missing(project: Project) -> None:
    assert fixture_version(project.cfg) == "missing"
    data = b'{"queries": []}'
    project.cfg.evaluation.fixture.write_bytes(data)
    assert fixture_version(project.cfg) == hashlib.sha256(data).hexdigest()
