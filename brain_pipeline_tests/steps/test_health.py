"""The WARN checks' verdicts from the build records, called with plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from brain_pipeline.steps.health import (
    corpus_problems,
    embedding_coverage,
    fits_agent_string_limit,
    no_empty_area,
    published_store_is_current,
    vectors_reach_agent,
)
from brain_pipeline.steps.ingest import assemble_knowledge_store, chunk_corpus, observe
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import chunks_of

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _ingest(project: Project) -> None:
    log = StepLog()
    chunk_corpus(project.cfg, observe(project.cfg), run_id="r", log=log)
    assemble_knowledge_store(project.cfg, chunks_of(project.cfg), run_id="r", log=log)


def test_before_any_run_each_check_says_which_record_is_missing(project: Project) -> None:
    for check, asset in (
        (corpus_problems, "knowledge_chunks"),
        (no_empty_area, "knowledge_store"),
        (fits_agent_string_limit, "knowledge_store"),
        (embedding_coverage, "embeddings"),
    ):
        verdict = check(project.cfg)
        assert not verdict.passed and verdict.severity == "WARN", check.__name__
        assert verdict.description == f"{asset} has no record in the build directory yet"


def test_a_clean_corpus_passes(project: Project) -> None:
    _ingest(project)
    assert corpus_problems(project.cfg).passed
    assert no_empty_area(project.cfg).passed
    limit = fits_agent_string_limit(project.cfg)
    assert limit.passed and 0 < limit.metadata["utf16_units"] < limit.metadata["limit"]


def test_problem_files_and_an_empty_area_are_named(project: Project) -> None:
    project.write("aws/picture.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    project.write("empty/notes.pdf", b"%PDF-1.4")
    _ingest(project)
    problems = corpus_problems(project.cfg)
    assert not problems.passed and problems.description == "1 file(s) need a look"
    assert [row[0] for row in problems.metadata["files"].rows] == ["aws/picture.md"]
    empty = no_empty_area(project.cfg)
    assert not empty.passed and "empty (holds" in empty.description


def test_nothing_published_is_a_warning(project: Project) -> None:
    verdict = vectors_reach_agent(project.cfg)
    assert not verdict.passed and verdict.description == "nothing is published"
    stale = published_store_is_current(project.cfg, "abc", NOW, timedelta(hours=30))
    assert not stale.passed and stale.severity == "WARN"
    assert stale.metadata["allowed_hours"] == 30.0
    assert [row[1] for row in stale.metadata["digests"].rows] == ["—", "abc"]
