"""Collection of the build directory's caches: only what a record still names stays."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.corpus.chunk_cache import chunk_snapshot
from brain_pipeline.corpus.gc import collect, live_snapshot_digests, tree_bytes
from brain_pipeline.corpus.observation import load_snapshot, observe_corpus
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.records import AssetRecord, write_record

TEXT = "A paragraph long enough to be kept as one chunk of the store."


def _chunked(corpus: Path, layout: StateLayout) -> str:
    """Observe and chunk the corpus, recording it as the knowledge_chunks step does."""
    snapshot = observe_corpus(corpus, layout)
    chunk_snapshot(snapshot, layout)
    write_record(
        layout, AssetRecord("knowledge_chunks", "v", "c", {"corpus": snapshot.digest})
    )
    return snapshot.digest


def test_tree_bytes_counts_every_file_below(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one").write_bytes(b"123")
    (tmp_path / "a" / "b" / "two").write_bytes(b"45")
    assert tree_bytes(tmp_path) == 5
    assert tree_bytes(tmp_path / "missing") == 0


def test_the_live_snapshots_are_the_ones_records_name(layout: StateLayout) -> None:
    assert live_snapshot_digests(layout, ["extra", None]) == {"extra"}
    write_record(layout, AssetRecord("knowledge_chunks", "v", "c", {"corpus": "d1"}))
    write_record(
        layout, AssetRecord("knowledge_store", "s", "c", {}, facts={"corpus_digest": "d2"})
    )
    assert live_snapshot_digests(layout) == {"d1", "d2"}


def test_collect_keeps_the_live_and_published_snapshots_only(
    tmp_path: Path, layout: StateLayout
) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "a").mkdir(parents=True)
    (corpus / "a" / "one.md").write_text(f"First. {TEXT}", encoding="utf-8")
    first = _chunked(corpus, layout)
    (corpus / "a" / "one.md").write_text(f"Second. {TEXT}", encoding="utf-8")
    second = _chunked(corpus, layout)
    (corpus / "a" / "one.md").write_text(f"Third. {TEXT}", encoding="utf-8")
    third = _chunked(corpus, layout)

    report = collect(layout, published_digest=first)

    assert report.snapshots == [second]
    assert load_snapshot(layout, first).digest == first
    assert load_snapshot(layout, third).digest == third
    assert report.chunk_rows >= 1 and report.bytes_after < report.bytes_before
    assert report.bytes_after == tree_bytes(layout.state_dir)
    assert collect(layout, published_digest=first).snapshots == []


def test_collect_removes_the_assembly_record_older_versions_left(
    tmp_path: Path, layout: StateLayout
) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "a").mkdir(parents=True)
    (corpus / "a" / "one.md").write_text(TEXT, encoding="utf-8")
    _chunked(corpus, layout)
    left = layout.chunks_dir / "assembled.json"  # as the build-by-main-5d65fac fixture has it
    left.write_text('{"plan": "x", "sha256": "y"}', encoding="utf-8")
    collect(layout)
    assert not left.exists() and (layout.chunks_dir / "cache.sqlite").is_file()
