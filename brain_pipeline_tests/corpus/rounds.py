"""One incremental ingest round (observe, chunk, assemble), checked against a full ingest.

Shared by the chunk cache and assembly tests: whatever the cache reuses, the store must
be byte-identical to `ingest_corpus`'s and the reports must agree with it.
"""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.corpus.assembly import AssemblyReport, assemble_store
from brain_pipeline.corpus.chunk_cache import ChunkingReport, chunk_snapshot
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.observation import CorpusSnapshot, observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.settled import NOW_NS


def now() -> int:
    return NOW_NS


def rebuild(
    corpus: Path, layout: StateLayout
) -> tuple[CorpusSnapshot, ChunkingReport, AssemblyReport]:
    """One incremental round, checked against the full non-incremental ingest."""
    snapshot = observe_corpus(corpus, layout, clock=now)
    report = chunk_snapshot(snapshot, layout)
    built = assemble_store(snapshot, layout, layout.store_file)
    full = ingest_corpus(corpus)
    assert layout.store_file.read_bytes() == full.store_bytes()
    assert report.entries == full.manifest
    assert report.problems == full.problems
    assert report.skipped_by_reason == full.skipped_by_reason
    assert report.files_seen == full.files_seen
    assert report.occurrences == len(full.chunks) + full.duplicates_collapsed
    assert (built.chunks, built.duplicates_collapsed) == (
        len(full.chunks),
        full.duplicates_collapsed,
    )
    assert built.chunks_per_area == full.chunks_per_area
    store_text = full.store_bytes().decode("utf-8")  # what the agent's V8 reads as one string
    assert built.utf16_units == len(store_text.encode("utf-16-le")) // 2
    return snapshot, report, built
