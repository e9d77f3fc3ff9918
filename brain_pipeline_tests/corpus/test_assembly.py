"""The store assembled from the chunk cache: first occurrence of an id wins in discovery
order, the bytes are the full ingest's, and an unchanged store is not rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.corpus.assembly import PREVIEW_ROWS, assemble_store
from brain_pipeline.corpus.chunk_cache import ChunkCacheMissError
from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.observation import observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus import settled
from brain_pipeline_tests.corpus.rounds import now, rebuild
from brain_pipeline_tests.corpus.settled import Writer

#: Files written with settled mtimes (see `settled`), overriding the corpus conftest's.
write = settled.write

SHARED = "A paragraph shared by several files, long enough to be kept."


def test_duplicates_that_appear_and_vanish(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("b/late.md", f"# Late\n\n{SHARED}\n\nOnly in the late file, long enough.")
    write("c/later.md", f"{SHARED}\n\n{SHARED}")
    write("c/self.md", "Repeated in its own file only.\n\nRepeated in its own file only.")
    _, _, built = rebuild(corpus, layout)
    assert built.chunks_per_area == {"b": 2, "c": 1}
    assert built.duplicates_collapsed == 3
    # The shared paragraph now appears earlier in discovery order: a's copy wins.
    write("a/early.md", f"# Early\n\n{SHARED}")
    _, report, built = rebuild(corpus, layout)
    assert report.files_chunked == 1
    assert built.chunks_per_area == {"a": 1, "b": 1, "c": 1}
    assert built.duplicates_collapsed == 4
    # It vanishes from a: b's copy wins again without re-chunking b.
    write("a/early.md", "# Early\n\nNothing shared here any more, long enough.")
    _, report, built = rebuild(corpus, layout)
    assert report.files_chunked == 1
    assert built.chunks_per_area == {"a": 1, "b": 2, "c": 1}
    # An area emptied keeps its zero.
    (corpus / "c" / "later.md").unlink()
    (corpus / "c" / "self.md").unlink()
    _, _, built = rebuild(corpus, layout)
    assert built.chunks_per_area == {"a": 1, "b": 2, "c": 0}


def test_assembly_needs_the_chunks(corpus: Path, layout: StateLayout, write: Writer) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot = observe_corpus(corpus, layout, clock=now)
    with pytest.raises(ChunkCacheMissError, match="a/one.md"):
        assemble_store(snapshot, layout, layout.store_file)


def test_unchanged_bytes_keep_the_file(corpus: Path, layout: StateLayout, write: Writer) -> None:
    write("a/one.md", "Ünïcödé text 𝔘 with an astral letter, long enough.")
    snapshot, _, first = rebuild(corpus, layout)
    inode = layout.store_file.stat().st_ino
    built = assemble_store(snapshot, layout, layout.store_file)
    assert not built.written and built.sha256 == first.sha256
    units = len(layout.store_file.read_text("utf-8").encode("utf-16-le")) // 2
    assert built.utf16_units == first.utf16_units == units
    assert layout.store_file.stat().st_ino == inode
    # A store changed behind our back is rewritten, though the plan is the same.
    layout.store_file.write_bytes(b"[]")
    built = assemble_store(snapshot, layout, layout.store_file)
    assert built.written
    assert layout.store_file.read_bytes() == ingest_corpus(corpus).store_bytes()
    assert built.preview[0]["source"] == "a/one.md"


def test_another_target_is_written_though_the_chunks_are_the_same(
    tmp_path: Path, corpus: Path, layout: StateLayout, write: Writer
) -> None:
    write("a/one.md", "The first file, long enough to be a chunk.")
    snapshot, _, first = rebuild(corpus, layout)
    other = tmp_path / "elsewhere" / "knowledge-store.json"
    other.parent.mkdir()
    built = assemble_store(snapshot, layout, other)
    assert built.written and built.sha256 == first.sha256
    assert other.read_bytes() == layout.store_file.read_bytes()


def test_the_preview_is_the_first_chunks_of_the_store(
    corpus: Path, layout: StateLayout, write: Writer
) -> None:
    paragraphs = [f"Paragraph number {n} of the long file, long enough." for n in range(10)]
    write("a/0-dups.md", f"{SHARED}\n\n{SHARED}\n\nOnly here, long enough to be a chunk.")
    write("a/1-long.md", "\n\n".join(paragraphs))
    write("b/late.md", f"{SHARED}\n\nThe last file's own paragraph, long enough.")
    _, _, built = rebuild(corpus, layout)
    stored = json.loads(layout.store_file.read_bytes())
    assert len(stored) > PREVIEW_ROWS
    assert built.preview == stored[:PREVIEW_ROWS]
    assert [row["content"] for row in built.preview[:3]] == [
        SHARED, "Only here, long enough to be a chunk.", paragraphs[0],
    ]  # fmt: skip
