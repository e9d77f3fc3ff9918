"""Chunk cache + assembly: byte-identical to a full rebuild, re-chunking only what changed."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from brain_pipeline.corpus import chunk_cache
from brain_pipeline.corpus.assembly import assemble_store
from brain_pipeline.corpus.chunk_cache import (
    FRAGMENT_SEPARATOR,
    ID_SEPARATOR,
    CorpusChangedError,
    cache_version,
    chunk_snapshot,
    chunking_code,
    fragments_of,
    gc_chunk_cache,
)
from brain_pipeline.corpus.discovery import CorpusFile, ManifestEntry, unreadable_entry, walk_corpus
from brain_pipeline.corpus.file_chunks import EMPTY_CORPUS_WARNING, ingest_corpus, ingest_file
from brain_pipeline.corpus.junk import REASON_LONG_PARAGRAPH, IngestLimits
from brain_pipeline.corpus.observation import CorpusSnapshot, observe_corpus, snapshot_digest
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.code_copy import key_after_edit
from brain_pipeline_tests.corpus import settled
from brain_pipeline_tests.corpus.corpora import (
    SAME,
    build_deep_corpus,
    build_edge_corpus,
    build_random_corpus,
)
from brain_pipeline_tests.corpus.rounds import now, rebuild
from brain_pipeline_tests.corpus.settled import Writer, put, settle

#: Files written with settled mtimes (see `settled`), overriding the corpus conftest's.
write = settled.write

def test_edge_corpus_is_byte_identical_and_reused(tmp_path: Path, layout: StateLayout) -> None:
    root = tmp_path / "edge"
    build_edge_corpus(root, tmp_path / "outside")
    settle(root)
    _, first, built = rebuild(root, layout)
    assert first.files_reused == 0 and first.files_chunked == first.files_seen
    assert built.written
    _, again, same = rebuild(root, layout)
    assert (again.files_chunked, again.files_reused) == (0, first.files_seen)
    assert not same.written and same.sha256 == built.sha256


@pytest.mark.parametrize("seed", [1, 2])
def test_random_corpus_through_edits_renames_deletions_and_moves(
    tmp_path: Path, layout: StateLayout, seed: int
) -> None:
    root = tmp_path / "random"
    build_random_corpus(root, seed, files=60)
    settle(root)
    rebuild(root, layout)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in {".md", ".txt"})
    put(files[0], files[0].read_text("utf-8") + "\n\nAn appended paragraph, long enough.")
    rebuild(root, layout)
    files[1].rename(files[1].with_name("renamed-" + files[1].name))
    rebuild(root, layout)
    files[2].unlink()
    rebuild(root, layout)
    moved = root / "area-a" / "moved-here.md"
    put(moved, files[3].read_bytes())
    files[3].unlink()
    _, report, _ = rebuild(root, layout)
    assert report.files_chunked == 1


def test_roadmap_outcomes_come_from_the_cache(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    good = {"title": "Engineer", "topics": [{"label": "VPC", "type": "topic"}, None]}
    write("maps/roadmaps/a.json", json.dumps(good))
    write("maps/roadmaps/b.json", "{broken")
    write("maps/formatted-c.json", json.dumps({"nodes": []}))
    write("maps/notes.md", f"{SAME}\n\n# T\n\nRole: Engineer - Topic: VPC")
    _, first, _ = rebuild(corpus, layout)
    _, again, _ = rebuild(corpus, layout)
    assert again.files_chunked == 0
    assert again.entries == first.entries
    assert sum(1 for e in again.entries if e.problem) == 2


def test_a_file_changed_after_observation_is_refused(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot = observe_corpus(corpus, layout, clock=now)
    write("a/one.md", "Edited between observation and chunking, long enough.")
    with pytest.raises(CorpusChangedError, match="a/one.md"):
        chunk_snapshot(snapshot, layout)
    (corpus / "a" / "one.md").unlink()
    with pytest.raises(CorpusChangedError, match="a/one.md.*cannot be read"):
        chunk_snapshot(snapshot, layout)


def test_nothing_chunked_is_committed_when_chunking_fails(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("b/two.md", "The second file, long enough to be a chunk.")
    snapshot = observe_corpus(corpus, layout, clock=now)
    write("b/two.md", "Edited between observation and chunking, long enough.")
    with pytest.raises(CorpusChangedError):
        chunk_snapshot(snapshot, layout)
    _, report, _ = rebuild(corpus, layout)
    assert report.files_chunked == 2


def test_empty_corpus_gives_an_empty_store(corpus: Path, layout: StateLayout) -> None:
    (corpus / "empty-area").mkdir()
    _, report, built = rebuild(corpus, layout)
    assert layout.store_file.read_bytes() == b"[]"
    assert report.problems == [(".", EMPTY_CORPUS_WARNING)]
    assert built.chunks_per_area == {"empty-area": 0}


def _unreadable(snapshot: CorpusSnapshot, source: str) -> CorpusSnapshot:
    """The snapshot an observation makes when `source` cannot be read (EACCES).

    Built by hand: the tests run as root, for whom permissions never refuse a read.
    """
    entries: list[ManifestEntry] = []
    for e in snapshot.entries:
        if e.source == source:
            found = CorpusFile(e.area, e.source, "", e.status, e.size or 0, e.mtime_ns or 0)
            e = unreadable_entry(found, PermissionError(errno.EACCES, "Permission denied"))
        entries.append(e)
    return dataclasses.replace(snapshot, entries=entries, digest=snapshot_digest(entries))


def test_an_unreadable_file_keeps_its_cached_chunks(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/two.md", "# Two\n\nThe second file, long enough to be a chunk.")
    full, _, _ = rebuild(corpus, layout)
    expected = layout.store_file.read_bytes()
    blocked = _unreadable(full, "a/two.md")
    report = chunk_snapshot(blocked, layout)
    assert report.kept_unreadable == ["a/two.md"]
    assert report.files_chunked == 0
    [(source, reason)] = report.problems
    assert source == "a/two.md" and "Permission denied" in reason and "kept" in reason
    built = assemble_store(blocked, layout, layout.store_file)
    assert layout.store_file.read_bytes() == expected
    assert built.chunks == 2
    # gc keeps what the unreadable file still contributes.
    assert gc_chunk_cache(layout, blocked) == 0
    assert chunk_snapshot(blocked, layout).kept_unreadable == ["a/two.md"]


def test_an_unreadable_file_never_cached_contributes_nothing(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/two.md", "The second file, long enough to be a chunk.")
    snapshot = _unreadable(observe_corpus(corpus, layout, clock=now), "a/two.md")
    report = chunk_snapshot(snapshot, layout)
    assert report.kept_unreadable == [] and report.occurrences == 1
    assert assemble_store(snapshot, layout, layout.store_file).chunks == 1


def test_gc_drops_what_the_live_snapshot_does_not_use(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    write("a/two.md", "The second file, long enough to be a chunk.")
    rebuild(corpus, layout)
    write("a/two.md", "The second file, edited, still long enough.")
    live, _, _ = rebuild(corpus, layout)
    assert gc_chunk_cache(layout, live) == 1
    assert gc_chunk_cache(layout, live) == 0
    _, report, _ = rebuild(corpus, layout)
    assert report.files_chunked == 0
    # Going back to the collected version chunks it again.
    write("a/two.md", "The second file, long enough to be a chunk.")
    _, report, _ = rebuild(corpus, layout)
    assert report.files_chunked == 1


def test_another_chunking_variant_chunks_everything_again(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot, _, _ = rebuild(corpus, layout)
    variant = IngestLimits(max_paragraph_chars=500).cache_variant
    assert chunk_snapshot(snapshot, layout, variant=variant).files_chunked == 1
    assert chunk_snapshot(snapshot, layout, variant=variant).files_chunked == 0


def test_a_variant_is_chunked_under_the_limits_it_names(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    """Without a chunker (the knowledge_store step's fallback on a cache miss) a row is
    made under the limits its key names, never the defaults."""
    write("a/long.md", "A paragraph far longer than the limit allows. " * 5)
    limits = IngestLimits(max_paragraph_chars=100)
    snapshot = observe_corpus(corpus, layout, clock=now, limits=limits)
    report = chunk_snapshot(snapshot, layout, variant=limits.cache_variant)
    assert report.entries == ingest_corpus(corpus, limits).manifest
    assert [e.reason for e in report.entries] == [REASON_LONG_PARAGRAPH]


def test_other_chunking_code_chunks_everything_again(
    corpus: Path, layout: StateLayout, write: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache key is the digest of the chunking code: rows of other code are never
    served (an upgrade's rows keyed by the old hand-bumped "3" simply miss once)."""
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot, _, _ = rebuild(corpus, layout)
    assert cache_version() == chunking_code() and cache_version("v") == f"{chunking_code()}:v"
    monkeypatch.setattr(chunk_cache, "chunking_code", lambda: "3")
    assert chunk_snapshot(snapshot, layout).files_chunked == 1
    assert chunk_snapshot(snapshot, layout).files_chunked == 0


@pytest.mark.parametrize(
    ("edited", "changes"),
    [("corpus/chunking.py", True), ("corpus/jscompat.py", True), ("corpus/chunk_cache.py", True),
     ("retrieval/bm25.py", False), ("state/ledger.py", False)],
)
def test_the_chunking_key_follows_the_code_that_chunks(
    edited: str, changes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit to the chunker's code changes the key (no constant to forget); an edit
    elsewhere leaves the cache alone."""
    real, before, after = key_after_edit(chunking_code, edited, tmp_path, monkeypatch)
    assert real == before
    assert (after != before) is changes


def test_a_copied_build_directory_keeps_working(
    tmp_path: Path, corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot, _, _ = rebuild(corpus, layout)
    copy = StateLayout.of(tmp_path / "copy")
    shutil.copytree(layout.build_dir, copy.build_dir)
    assert chunk_snapshot(snapshot, copy).files_chunked == 0
    built = assemble_store(snapshot, copy, copy.store_file)
    assert not built.written  # the bytes are there, only the record's path differs
    assert os.path.getsize(copy.store_file) == built.size


def test_cached_fragments_are_each_chunks_store_bytes(tmp_path: Path) -> None:
    """Fragment boundaries hold for nested headings, surrogates, controls and CRLF."""
    root = tmp_path / "edge"
    build_edge_corpus(root, tmp_path / "outside")
    by_file: dict[str, list[Chunk]] = {}
    for found in walk_corpus(root):
        if isinstance(found, CorpusFile) and (chunks := ingest_file(found).chunks):
            by_file[found.source] = chunks
    assert len(by_file) > 20
    for chunks in by_file.values():
        ids, ends, body = fragments_of(chunks)
        assert ids.split(ID_SEPARATOR) == [c.id for c in chunks]
        starts = [0] + [end + len(FRAGMENT_SEPARATOR) for end in ends[:-1]]
        pieces = [body[start:end] for start, end in zip(starts, ends, strict=True)]
        assert pieces == [serialize_store([c])[4:-2] for c in chunks]


@pytest.mark.parametrize("field", ["title", "level"])
def test_deep_roadmaps_through_the_cache_are_byte_identical(
    tmp_path: Path, layout: StateLayout, field: str
) -> None:
    """Headings nested 3,000 deep and files stopped where String() overflows, cached and
    reused, give the store and the problems a full ingest gives (`rebuild` checks)."""
    root = tmp_path / "deep"
    build_deep_corpus(root, field)
    settle(root)
    _, first, _ = rebuild(root, layout)
    assert first.files_chunked == first.files_seen
    _, again, _ = rebuild(root, layout)
    assert (again.files_chunked, again.files_reused) == (0, first.files_seen)
