"""The cached legacy baseline ranks exactly like `LegacyRetriever`, cold, warm and after edits."""

from __future__ import annotations

import os
from pathlib import Path

from brain_pipeline.corpus.ingest import ingest_corpus
from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.corpus.store_reader import clear_views, open_store_view
from brain_pipeline.evaluation.legacy import LegacyRetriever, legacy_terms
from brain_pipeline.evaluation.legacy_cache import LegacyMatches
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.corpora import build_random_corpus

QUERIES = [
    "network roadmap role", "the the data", "heading text paragraph", "zzz",
    "Role: topic level", "of an ÉTÉ 😀 paragraph", "a b", "roadmap roadmap roadmap",
]  # fmt: skip


def _write(layout: StateLayout, chunks: list[Chunk]) -> None:
    tmp = layout.build_dir / ".store.tmp"
    tmp.write_bytes(serialize_store(chunks))
    os.replace(tmp, layout.store_file)


def _assert_same(matches: LegacyMatches, chunks: list[Chunk]) -> None:
    plain = LegacyRetriever(chunks)
    for area in sorted({c.area for c in chunks}):
        for query in QUERIES:
            for limit in (1, 10, 1000):
                want = [c.id for c, _ in plain.search(query, area, limit)]
                assert matches.search(query, area, limit) == want, (area, query, limit)


def test_cached_legacy_matches_the_baseline(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, 21, files=80)
    chunks = ingest_corpus(root).chunks
    build = tmp_path / "build"
    build.mkdir()
    layout = StateLayout.of(build)
    _write(layout, chunks)
    terms = [t for q in QUERIES for t in legacy_terms(q)]

    clear_views()
    cold = LegacyMatches(open_store_view(layout.store_file, layout), layout, terms)
    _assert_same(cold, chunks)
    assert cold.tested == len(chunks)

    clear_views()
    warm = LegacyMatches(open_store_view(layout.store_file, layout), layout, terms)
    _assert_same(warm, chunks)
    assert warm.tested == 0

    edited = list(chunks)
    content = "A new roadmap paragraph about the network role and data."
    edited[3] = Chunk(chunk_id(content), content, edited[3].area, edited[3].source)
    _write(layout, edited)
    clear_views()
    after = LegacyMatches(open_store_view(layout.store_file, layout), layout, terms)
    _assert_same(after, edited)
    assert after.tested == 1

    other = LegacyMatches(open_store_view(layout.store_file), None, terms)  # no cache dir
    _assert_same(other, edited)
