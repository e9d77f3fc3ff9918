"""Random stores of a few areas, and the check every cached BM25 index must pass.

Shared by the BM25 cache and view source tests: an index assembled from
cached parts must rank exactly like `BM25Index.build` over the same chunks.
"""

from __future__ import annotations

import os
import random

from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.retrieval.reference_bm25 import reference_search

WORDS = [
    "apple", "apples", "banana", "cherry", "cherries", "data", "datum", "box", "boxes", "the",
    "of", "and", "x", "7", "42", "study", "studies", "Matrix", "matrices", "zeta", "indices",
    "vertex", "criteria", "hypotheses", "running", "runner",
]  # fmt: skip


def random_text(rng: random.Random, n: int) -> str:
    return rng.choice([" ", ", ", "-", "\n"]).join(rng.choice(WORDS) for _ in range(n))


def random_chunks(
    rng: random.Random, n: int, areas: tuple[str, ...] = ("a", "b", "c")
) -> list[Chunk]:
    """`n` distinct chunks of random words, sorted by area (as a store is)."""
    out: dict[str, Chunk] = {}
    while len(out) < n:
        content = f"{random_text(rng, rng.randint(0, 25))} {len(out)}"
        area = rng.choice(areas)
        cid = chunk_id(content)
        out.setdefault(cid, Chunk(cid, content, area, f"{area}/f{len(out) % 7}.md"))
    return sorted(out.values(), key=lambda c: c.area)


def write_store(layout: StateLayout, chunks: list[Chunk]) -> None:
    """Replace the store file atomically, as a build does."""
    tmp = layout.build_dir / ".next.json"
    tmp.write_bytes(serialize_store(chunks))
    os.replace(tmp, layout.store_file)


QUERIES = ["apple cherry boxes", "the of and", "matrices data study 42", "zeta", "indices 7",
           "running runner studies", "nothing-here", "box box apple"]  # fmt: skip


def assert_ranks_like_a_fresh_build(got: BM25Index, chunks: list[Chunk]) -> None:
    """Bit-identical results to a fresh build, and the reference ranking."""
    fresh = BM25Index.build([c.id for c in chunks], [c.content for c in chunks])
    assert len(got) == len(fresh)
    for query in QUERIES:
        for limit in (1, 5, 50):
            assert got.search(query, limit) == fresh.search(query, limit)  # bit-identical
    texts = [c.content for c in chunks]
    ids = [c.id for c in chunks]
    want = reference_search(ids, texts, QUERIES[0], 10)
    assert [i for i, _ in got.search(QUERIES[0], 10)] == [i for i, _ in want]
