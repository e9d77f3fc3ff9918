"""ingest_corpus: the one entry point shared by the CLI and the Dagster asset."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from brain_pipeline.corpus.chunking import REASON_INVALID_JSON, REASON_NO_TITLE_TOPICS
from brain_pipeline.corpus.discovery import REASON_IGNORED, REASON_RAW, CorpusNotFoundError
from brain_pipeline.corpus.file_chunks import EMPTY_CORPUS_WARNING, ingest_corpus
from brain_pipeline_tests.corpus.conftest import Writer

SHARED = "A paragraph shared by several files in several areas."


def test_duplicates_keep_the_first_occurrence_across_areas(corpus: Path, write: Writer) -> None:
    write("b-area/x.md", f"# In B\n\n{SHARED}")
    write("a-area/z.md", f"# In A\n\n{SHARED}\n\n{SHARED}")
    result = ingest_corpus(corpus)
    [chunk] = result.chunks
    assert (chunk.source, chunk.heading) == ("a-area/z.md", "In A")
    assert chunk.id == hashlib.sha256(SHARED.encode()).hexdigest()[:12]
    assert result.duplicates_collapsed == 2
    assert result.chunks_per_area == {"a-area": 1, "b-area": 0}


def test_store_bytes_are_the_json_of_the_chunks(corpus: Path, write: Writer) -> None:
    write("a/x.md", f"# T\n\n{SHARED}")
    rows = json.loads(ingest_corpus(corpus).store_bytes())
    assert rows == [
        {
            "id": hashlib.sha256(SHARED.encode()).hexdigest()[:12],
            "content": SHARED,
            "area": "a",
            "source": "a/x.md",
            "heading": "T",
        }
    ]


def test_report_counts(corpus: Path, write: Writer) -> None:
    write("a/x.md", SHARED)
    write("a/y.png", "binary")
    write("a/raw/z.md", SHARED)
    write("a/formatted-bad.json", "{oops")
    write("a/formatted-diagram.json", json.dumps({"nodes": []}))
    write("empty-area/notes.bin", "x")
    result = ingest_corpus(corpus)
    assert result.files_seen == 3
    assert result.skipped_by_reason == {
        REASON_INVALID_JSON: 1,
        REASON_NO_TITLE_TOPICS: 1,
        REASON_RAW: 1,
        REASON_IGNORED: 2,
    }
    assert [source for source, _ in result.problems] == ["a/formatted-bad.json"]
    assert result.problems[0][1].startswith(REASON_INVALID_JSON)
    assert result.chunks_per_area == {"a": 1, "empty-area": 0}
    assert result.areas == ["a", "empty-area"]
    assert (result.files_seen, len(result.chunks), result.duplicates_collapsed) == (3, 1, 0)
    assert len(result.problems) == 1
    statuses = {e.source: e.status for e in result.manifest}
    assert statuses["a/formatted-diagram.json"] == "skipped"
    assert statuses["a/x.md"] == "text"


def test_partly_read_roadmap_stays_a_roadmap_with_a_problem(corpus: Path, write: Writer) -> None:
    write("a/formatted-r.json", '{"title": "T", "topics": 5}')
    result = ingest_corpus(corpus)
    [entry] = result.manifest
    assert entry.status == "roadmap" and entry.problem
    assert [c.content for c in result.chunks] == ["Role: T - Description: "]


def test_empty_corpus_gives_an_empty_store_and_a_warning(corpus: Path) -> None:
    result = ingest_corpus(corpus)
    assert result.store_bytes() == b"[]"
    assert result.problems == [(".", EMPTY_CORPUS_WARNING)]


def test_missing_root_raises_with_the_path(tmp_path: Path) -> None:
    with pytest.raises(CorpusNotFoundError, match="nope"):
        ingest_corpus(tmp_path / "nope")
