"""The legacy baseline over the store view ranks as the contract says, cold, warm, after edits.

The reference here is the contract's wording (store-compatibility.md, "the legacy
baseline"), written out directly; the cache must never change an answer, only how many
chunks are tested.
"""

from __future__ import annotations

import os
from pathlib import Path

from brain_pipeline.corpus.file_chunks import ingest_corpus
from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.evaluation.legacy import LegacyBaseline, legacy_terms
from brain_pipeline.retrieval.view_source import ViewSource
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.corpora import build_random_corpus
from brain_pipeline_tests.corpus.views import clear_views

QUERIES = [
    "network roadmap role", "the the data", "heading text paragraph", "zzz",
    "Role: topic level", "of an ÉTÉ 😀 paragraph", "a b", "roadmap roadmap roadmap",
]  # fmt: skip


def _contract(chunks: list[Chunk], query: str, area: str, limit: int) -> list[str]:
    """Score = query terms (duplicates kept) found as substrings of the lower-cased
    content; positive only; stable sort by score (ties in store order); first `limit`."""
    terms = legacy_terms(query)
    scored = [
        (c.id, sum(term in c.content.lower() for term in terms))
        for c in chunks
        if c.area == area
    ]
    ranked = sorted((hit for hit in scored if hit[1] > 0), key=lambda hit: -hit[1])
    return [i for i, _ in ranked[:limit]]


def _write(layout: StateLayout, chunks: list[Chunk]) -> None:
    tmp = layout.build_dir / ".store.tmp"
    tmp.write_bytes(serialize_store(chunks))
    os.replace(tmp, layout.store_file)


def _baseline(
    layout: StateLayout, terms: list[str], cached: bool = True, worth_a_table: int | None = None
) -> LegacyBaseline:
    clear_views()  # as a new process would
    view = open_store_view(layout.store_file, layout if cached else None)
    baseline = LegacyBaseline.cached(ViewSource(view, layout if cached else None), terms)
    if worth_a_table is not None and baseline.cache is not None:
        baseline.cache.worth_a_table = worth_a_table
    return baseline


def _assert_contract(baseline: LegacyBaseline, chunks: list[Chunk]) -> None:
    for area in sorted({c.area for c in chunks}):
        for query in QUERIES:
            for limit in (1, 10, 1000):
                want = _contract(chunks, query, area, limit)
                assert baseline.search_ids(query, area, limit) == want, (area, query, limit)


def test_cached_legacy_follows_the_contract(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, 21, files=80)
    chunks = ingest_corpus(root).chunks
    build = tmp_path / "build"
    build.mkdir()
    layout = StateLayout.of(build)
    _write(layout, chunks)
    terms = [t for q in QUERIES for t in legacy_terms(q)]
    assert any(_contract(chunks, q, chunks[0].area, 10) for q in QUERIES)  # not vacuous

    cold = _baseline(layout, terms)
    _assert_contract(cold, chunks)
    assert cold.tested == len(chunks)

    warm = _baseline(layout, terms)
    _assert_contract(warm, chunks)
    assert warm.tested == 0

    edited = list(chunks)
    content = "A new roadmap paragraph about the network role and data."
    edited[3] = Chunk(chunk_id(content), content, edited[3].area, edited[3].source)
    _write(layout, edited)
    after = _baseline(layout, terms)
    _assert_contract(after, edited)
    assert after.tested == 1

    # A chunk that moves to another area is found by id in its old area's table when
    # every table is worth reading; by default one chunk is cheaper to test again.
    moved = list(edited)
    other_area = next(c.area for c in edited if c.area != edited[5].area)
    moved[5] = Chunk(moved[5].id, moved[5].content, other_area, moved[5].source)
    _write(layout, moved)
    again = _baseline(layout, terms, worth_a_table=1)
    _assert_contract(again, moved)
    assert again.tested == 0
    moved[6] = Chunk(moved[6].id, moved[6].content, other_area, moved[6].source)
    _write(layout, moved)
    default = _baseline(layout, terms)
    _assert_contract(default, moved)
    assert default.tested == 1

    uncached = _baseline(layout, terms, cached=False)  # no cache directory at all
    _assert_contract(uncached, moved)
    assert uncached.tested == len(moved)


def test_a_damaged_cache_table_is_recomputed(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    build_random_corpus(root, 5, files=20)
    chunks = ingest_corpus(root).chunks
    build = tmp_path / "build"
    build.mkdir()
    layout = StateLayout.of(build)
    _write(layout, chunks)
    terms = [t for q in QUERIES for t in legacy_terms(q)]
    _assert_contract(_baseline(layout, terms), chunks)
    tables = sorted(layout.bm25_dir.glob("legacy-*/*.npz"))
    assert tables
    for table in tables:
        table.write_bytes(b"not a zip file")
    damaged = _baseline(layout, terms)
    _assert_contract(damaged, chunks)
    assert damaged.tested == len(chunks)
