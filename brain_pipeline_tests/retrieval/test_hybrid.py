"""Reciprocal-rank fusion and the per-area Retriever with its fallbacks."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.retrieval.hybrid import Retriever, reciprocal_rank_fusion
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize
from brain_pipeline_tests.retrieval.conftest import DIM, MODEL, toy_embed
from brain_pipeline_tests.retrieval.reference_bm25 import reference_search

QUERIES = ["dictionary keys values", "rows from tables", "lists", "the of and", "zzz unknown"]



def cosine_scores(
    matrix: npt.NDArray[np.int8], query: npt.NDArray[np.int8]
) -> npt.NDArray[np.float64]:
    """The reference: cosine of one int8 query against every int8 row in float64 (exact
    for every int8 dot product and squared norm at these sizes); 0 for zero rows."""
    rows = matrix.astype(np.float64)
    q = np.asarray(query).astype(np.float64).reshape(-1)
    dots = rows @ q
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows)) * float(np.sqrt(q @ q))
    out = np.zeros(len(rows), dtype=np.float64)
    np.divide(dots, norms, out=out, where=norms > 0)
    return out


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=60)
    assert [item for item, _ in fused] == ["b", "a", "c"]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1][1] == pytest.approx(1 / 61)
    assert fused[2][1] == pytest.approx(1 / 62)


def test_rrf_ties_by_id_and_custom_k() -> None:
    assert reciprocal_rank_fusion([["x"], ["w"]]) == [("w", 1 / 61), ("x", 1 / 61)]
    assert reciprocal_rank_fusion([["a"]], k=0) == [("a", 1.0)]
    assert reciprocal_rank_fusion([]) == []


def test_areas_are_listed_sorted(chunks: list[Chunk]) -> None:
    assert Retriever(list(reversed(chunks))).areas() == ["python", "sql"]


def lexical_expected(chunks: list[Chunk], query: str, area: str, limit: int) -> list[str]:
    own = [c for c in chunks if c.area == area]
    hits = reference_search([c.id for c in own], [c.content for c in own], query, limit)
    return [doc_id for doc_id, _ in hits]


def dense_expected(
    chunks: list[Chunk], store: EmbeddingStore, query: str, area: str, limit: int
) -> list[str]:
    """Cosine of the quantised query against each int8 row, computed one row at a time."""
    q = quantize(toy_embed(query))[0].astype(np.float64)
    rows = dict(zip(store.ids, store.vectors.astype(np.float64), strict=True))
    scored = []
    for chunk in chunks:
        if chunk.area != area or chunk.id not in rows:
            continue
        v = rows[chunk.id]
        norm = float(np.linalg.norm(v) * np.linalg.norm(q))
        scored.append((chunk.id, float(v @ q) / norm if norm else 0.0))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return [doc_id for doc_id, _ in scored[:limit]]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("area", ["python", "sql"])
def test_lexical_mode_is_bm25_within_the_area(chunks: list[Chunk], query: str, area: str) -> None:
    result = Retriever(chunks).search(query, area, limit=3, mode="lexical")
    assert (result.mode, result.fallback) == ("lexical", None)
    assert [h.chunk.id for h in result.hits] == lexical_expected(chunks, query, area, 3)
    assert all(h.chunk.area == area for h in result.hits)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("limit", [1, 2, 5])
def test_dense_mode_ranks_by_int8_cosine(
    chunks: list[Chunk], embeddings: EmbeddingStore, query: str, limit: int
) -> None:
    retriever = Retriever(chunks, embeddings, toy_embed)
    result = retriever.search(query, "python", limit=limit, mode="dense")
    assert (result.mode, result.fallback) == ("dense", None)
    expected = dense_expected(chunks, embeddings, query, "python", limit)
    assert [h.chunk.id for h in result.hits] == expected


def test_chunks_without_vectors_are_absent_from_the_vector_pool(
    chunks: list[Chunk], embeddings: EmbeddingStore
) -> None:
    retriever = Retriever(chunks, embeddings, toy_embed)
    hits = retriever.search("anything at all", "python", limit=50, mode="dense").hits
    assert {h.chunk.id for h in hits} == {
        c.id for c in chunks if c.area == "python" and c.id in set(embeddings.ids)
    }
    assert len(hits) == len([c for c in chunks if c.area == "python"]) - 1


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("limit", [1, 2, 4])
def test_hybrid_fuses_pools_three_times_the_limit_deep(
    chunks: list[Chunk], embeddings: EmbeddingStore, query: str, limit: int
) -> None:
    result = Retriever(chunks, embeddings, toy_embed).search(query, "python", limit=limit)
    assert (result.mode, result.fallback) == ("hybrid", None)
    lexical = lexical_expected(chunks, query, "python", 3 * limit)
    dense = dense_expected(chunks, embeddings, query, "python", 3 * limit)
    scores: dict[str, float] = {}
    for ranking in (lexical, dense):
        for position, doc_id in enumerate(ranking):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1 / (60 + position + 1)
    expected = sorted(scores, key=lambda doc_id: (-scores[doc_id], doc_id))[:limit]
    assert [h.chunk.id for h in result.hits] == expected
    assert [h.score for h in result.hits] == pytest.approx([scores[i] for i in expected])


def test_dense_ties_are_broken_by_id() -> None:
    twins = [Chunk(f"id{n}", "same text", "a", "s") for n in (3, 1, 2)]
    vectors = quantize(np.ones((3, DIM)))
    store = EmbeddingStore(MODEL, DIM, [c.id for c in twins], vectors)
    hits = Retriever(twins, store, lambda q: np.ones(DIM)).search("x", "a", 3, "dense").hits
    assert [h.chunk.id for h in hits] == ["id1", "id2", "id3"]


def failing_embedder(query: str) -> npt.NDArray[np.float64]:
    raise ConnectionError("service unavailable")


@pytest.mark.parametrize("mode", ["hybrid", "dense"])
@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("no embedder", "no query embedder"),
        ("no embeddings", "no embeddings"),
        ("model mismatch", "model mismatch"),
        ("embedder raises", "query embedding failed: ConnectionError"),
        ("wrong dimension", "dimension mismatch"),
        ("not finite", "not finite"),
    ],
)
def test_every_failure_falls_back_to_bm25_with_a_reason(
    chunks: list[Chunk], embeddings: EmbeddingStore, mode: str, case: str, reason: str
) -> None:
    retriever = {
        "no embedder": lambda: Retriever(chunks, embeddings),
        "no embeddings": lambda: Retriever(chunks, None, toy_embed),
        "model mismatch": lambda: Retriever(chunks, embeddings, toy_embed, query_model="other"),
        "embedder raises": lambda: Retriever(chunks, embeddings, failing_embedder),
        "wrong dimension": lambda: Retriever(chunks, embeddings, lambda q: np.ones(DIM + 1)),
        "not finite": lambda: Retriever(chunks, embeddings, lambda q: np.full(DIM, np.nan)),
    }[case]()
    result = retriever.search("dictionary keys", "python", limit=3, mode=mode)
    assert result.mode == "lexical"
    assert result.fallback is not None and reason in result.fallback
    expected = lexical_expected(chunks, "dictionary keys", "python", 3)
    assert [h.chunk.id for h in result.hits] == expected


def test_matching_query_model_is_accepted(chunks: list[Chunk], embeddings: EmbeddingStore) -> None:
    result = Retriever(chunks, embeddings, toy_embed, query_model=MODEL).search("lists", "python")
    assert (result.mode, result.fallback) == ("hybrid", None)


def test_query_vectors_are_cached_by_trimmed_lower_cased_query(
    chunks: list[Chunk], embeddings: EmbeddingStore
) -> None:
    seen: list[str] = []

    def counting(query: str) -> npt.NDArray[np.float64]:
        seen.append(query)
        return toy_embed(query)

    retriever = Retriever(chunks, embeddings, counting)
    first = retriever.search(" Dictionary Keys\u00a0", "python")
    again = retriever.search("dictionary keys", "sql")
    retriever.search("dictionary  keys", "python")
    assert seen == [" Dictionary Keys\u00a0", "dictionary  keys"]
    assert first.mode == again.mode == "hybrid"


def test_failures_are_not_cached(chunks: list[Chunk], embeddings: EmbeddingStore) -> None:
    calls = 0

    def flaky(query: str) -> npt.NDArray[np.float64]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError("first call times out")
        return toy_embed(query)

    retriever = Retriever(chunks, embeddings, flaky)
    assert retriever.search("lists", "python").mode == "lexical"
    assert retriever.search("lists", "python").mode == "hybrid"


def test_unknown_area_has_no_hits(chunks: list[Chunk], embeddings: EmbeddingStore) -> None:
    retriever = Retriever(chunks, embeddings, toy_embed)
    for mode in ("lexical", "hybrid", "dense"):
        assert retriever.search("lists", "nowhere", mode=mode).hits == []


def test_unknown_mode_is_rejected(chunks: list[Chunk]) -> None:
    with pytest.raises(ValueError, match="mode"):
        Retriever(chunks).search("lists", "python", mode="legacy")


def test_repeated_searches_give_the_same_answer(
    chunks: list[Chunk], embeddings: EmbeddingStore
) -> None:
    retriever = Retriever(chunks, embeddings, toy_embed)
    first = retriever.search("rows tables", "sql", limit=2)
    assert retriever.search("rows tables", "sql", limit=2) == first


@pytest.mark.parametrize("dim", [8, 1040, 1041, 3072])
def test_area_cosines_agree_with_the_codec_cosine(dim: int) -> None:
    """The per-area precomputed cosine equals the plain float64 cosine (float32 exact or not)."""
    rng = np.random.default_rng(dim)
    matrix = rng.integers(-127, 128, size=(40, dim)).astype(np.int8)
    matrix[3] = 0  # a zero row scores 0
    matrix[5] = 127  # the largest possible dot products
    chunks = [Chunk(f"c{i:02d}", "text", "a", "s") for i in range(len(matrix))]
    store = EmbeddingStore(MODEL, dim, [c.id for c in chunks], matrix)
    query = np.full(dim, 127.0)
    retriever = Retriever(chunks, store, lambda q: query)
    hits = retriever.search("anything", "a", limit=len(chunks), mode="dense").hits
    expected = cosine_scores(matrix, quantize(query)[0])
    by_id = {h.chunk.id: h.score for h in hits}
    assert len(by_id) == len(chunks)
    for row, chunk in enumerate(chunks):
        assert by_id[chunk.id] == pytest.approx(expected[row], abs=1e-6)
    assert by_id["c03"] == 0.0
    assert by_id["c05"] == pytest.approx(1.0, abs=1e-12)


def test_same_content_in_two_areas_stays_in_its_area() -> None:
    shared = [Chunk("same", "shared words", area, f"{area}/x.md") for area in ("a", "b")]
    retriever = Retriever(shared)
    for area in ("a", "b"):
        hits = retriever.search("shared", area, mode="lexical").hits
        assert [h.chunk.source for h in hits] == [f"{area}/x.md"]


