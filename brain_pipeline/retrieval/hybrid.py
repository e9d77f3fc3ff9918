"""Per-area retrieval as the agent does it: BM25, dense int8 cosine, and their RRF fusion.

Every way the dense side can fail (no embedder, no embeddings, wrong model or dimension,
the embedder raising, a non-finite vector) falls back to BM25 and says why, because the
agent keeps answering lexically rather than erroring.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize

RRF_K = 60
POOL_FACTOR = 3
MODES = ("lexical", "hybrid", "dense")

QueryEmbedder = Callable[[str], Any]
"""Turns one query into a float vector (array-like); may raise, which means fall back."""

# What JavaScript's String.prototype.trim strips: WhiteSpace and LineTerminator.
_JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def query_cache_key(query: str) -> str:
    """The agent's cache key: `query.trim().toLowerCase()` with JavaScript's whitespace."""
    return query.strip(_JS_WHITESPACE).lower()


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = RRF_K
) -> list[tuple[str, float]]:
    """Sum of 1/(k + rank) over the rankings (rank = position + 1); ties by id ascending."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for position, item in enumerate(ranking):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + position + 1)
    return sorted(fused.items(), key=lambda pair: (-pair[1], pair[0]))


@dataclass
class Hit:
    chunk: Chunk
    score: float


@dataclass
class SearchResult:
    hits: list[Hit]
    mode: str
    """The mode actually used: "lexical", "hybrid" or "dense"."""
    fallback: str | None = None
    """Why a hybrid/dense request was answered lexically; None when it was not."""


class ChunkSource(ABC):
    """Where a Retriever (and the evaluation) gets an area's chunks and BM25 index.

    `ListSource` holds chunks in memory; `retrieval.view_source.ViewSource` reads them from
    the memory-mapped store and loads cached indexes, decoding only what is asked for.
    """

    @abstractmethod
    def areas(self) -> list[str]:
        """Areas present, sorted."""

    @abstractmethod
    def area_ids(self, area: str) -> list[str]:
        """The area's chunk ids in store order (empty for an unknown area)."""

    @abstractmethod
    def area_chunks(self, area: str) -> Sequence[Chunk]:
        """The area's chunks in store order."""

    @abstractmethod
    def chunk(self, area: str, chunk_id: str) -> Chunk:
        """The area's first chunk with this id."""

    @abstractmethod
    def bm25(self, area: str) -> BM25Index:
        """The area's BM25 index over `area_ids(area)`, in that order."""

    @abstractmethod
    def count(self) -> int:
        """Number of chunks in the store."""

    @abstractmethod
    def with_ids(self, ids: set[str]) -> list[Chunk]:
        """The chunks whose id is in `ids`, in store order (every occurrence)."""

    def area_id_array(self, area: str) -> npt.NDArray[np.bytes_]:
        """`area_ids` as a numpy bytes array (what per-chunk caches are keyed by)."""
        ids = [i.encode("utf-8") for i in self.area_ids(area)]
        return np.array(ids) if ids else np.zeros(0, dtype="S12")

    def area_chunks_at(
        self, area: str, positions: Sequence[int] | npt.NDArray[np.intp]
    ) -> list[Chunk]:
        """The area's chunks at these positions (of `area_ids`), in that order.

        A source that decodes on demand overrides it to decode only those chunks.
        """
        chunks = self.area_chunks(area)
        return [chunks[i] for i in np.asarray(positions, dtype=np.int64).tolist()]

    def cache_dir(self) -> Path | None:
        """Where data derived per chunk may be cached across processes (None: nowhere)."""
        return None


class ListSource(ChunkSource):
    """Chunks held in memory; BM25 indexes built lazily, once per area, thread-safely."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self._chunks = chunks
        self._by_area: dict[str, list[Chunk]] = {}
        # Keyed by (area, id): ids hash content, so an undeduplicated store could hold the
        # same id in two areas.
        self._chunk_of: dict[tuple[str, str], Chunk] = {}
        for chunk in chunks:
            self._by_area.setdefault(chunk.area, []).append(chunk)
            self._chunk_of.setdefault((chunk.area, chunk.id), chunk)
        self._bm25: dict[str, BM25Index] = {}
        self._lock = threading.Lock()

    def areas(self) -> list[str]:
        return sorted(self._by_area)

    def area_ids(self, area: str) -> list[str]:
        return [c.id for c in self._by_area.get(area, [])]

    def area_chunks(self, area: str) -> Sequence[Chunk]:
        return self._by_area.get(area, [])

    def chunk(self, area: str, chunk_id: str) -> Chunk:
        return self._chunk_of[area, chunk_id]

    def bm25(self, area: str) -> BM25Index:
        index = self._bm25.get(area)
        if index is None:
            with self._lock:
                index = self._bm25.get(area)
                if index is None:
                    chunks = self._by_area.get(area, [])
                    index = BM25Index.build([c.id for c in chunks], [c.content for c in chunks])
                    self._bm25[area] = index
        return index

    def count(self) -> int:
        return len(self._chunks)

    def with_ids(self, ids: set[str]) -> list[Chunk]:
        return [c for c in self._chunks if c.id in ids]


def as_source(chunks: Sequence[Chunk] | ChunkSource) -> ChunkSource:
    """A ChunkSource for either form callers hold."""
    return chunks if isinstance(chunks, ChunkSource) else ListSource(chunks)


# Largest dimension for which every int8 dot product (|sum| <= dim * 127**2) and every
# partial sum of it is an integer below 2**24, hence exact in float32 in any order.
_FLOAT32_EXACT_DIM = 2**24 // 127**2


class _VectorPool:
    """One area's chunks that have a vector, prepared once for repeated cosine queries.

    Converting the whole int8 matrix and recomputing every row norm on each query costs
    about 12 ms for 5,000 x 768; here the conversion and the norms are paid once per area.
    Dot products of int8 vectors are integers, computed exactly (float32
    while that is exact, float64 beyond), so the cosines are the exact int8 cosines the
    agent computes in doubles, up to the final division.
    """

    def __init__(self, ids: list[str], matrix: npt.NDArray[np.int8]) -> None:
        self.ids = ids
        self.id_rank = _rank_by_id(ids)
        dim = matrix.shape[1] if matrix.ndim == 2 else 0
        self._dtype = np.float32 if dim <= _FLOAT32_EXACT_DIM else np.float64
        self._rows = matrix.astype(self._dtype)
        wide = matrix.astype(np.int64)
        self._norms = np.sqrt(np.einsum("ij,ij->i", wide, wide).astype(np.float64))

    def cosines(self, query: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        """Cosine of the int8 query with every row; 0 where either vector is zero."""
        dots = (self._rows @ query.astype(self._dtype)).astype(np.float64)
        wide = query.astype(np.int64)
        norms = self._norms * float(np.sqrt(float(wide @ wide)))
        out = np.zeros(len(dots), dtype=np.float64)
        np.divide(dots, norms, out=out, where=norms > 0)
        return out


class _DenseUnavailable(Exception):
    """The dense side cannot answer; the message is the fallback reason."""


class Retriever:
    """Searches one area at a time. Indexes are built lazily, once per area, thread-safely.

    Chunks are searched only within their own area; vectors are matched to chunks by id
    and chunks without one are simply absent from the vector pool. `chunks` is a list of
    chunks or a `ChunkSource` (e.g. the memory-mapped store with cached BM25 indexes).
    """

    def __init__(
        self,
        chunks: Sequence[Chunk] | ChunkSource,
        embeddings: EmbeddingStore | None = None,
        query_embedder: QueryEmbedder | None = None,
        *,
        query_model: str | None = None,
    ) -> None:
        self._source = as_source(chunks)
        self._embeddings = embeddings
        self._embedder = query_embedder
        self._query_model = query_model
        self._vectors: dict[str, _VectorPool] = {}
        self._query_vectors: dict[str, npt.NDArray[np.int8]] = {}
        self._row_of: dict[str, int] | None = None
        self._lock = threading.Lock()

    def areas(self) -> list[str]:
        """Areas present in the chunks, sorted."""
        return self._source.areas()

    def search(self, query: str, area: str, limit: int = 10, mode: str = "hybrid") -> SearchResult:
        """Top `limit` chunks of `area` for `query`; an unknown area has no hits."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if mode == "lexical":
            return SearchResult(self._hits(area, self._bm25(query, area, limit)), "lexical")
        try:
            query_vector = self._query_vector(query)
        except _DenseUnavailable as reason:
            lexical_hits = self._hits(area, self._bm25(query, area, limit))
            return SearchResult(lexical_hits, "lexical", str(reason))
        if mode == "dense":
            dense_hits = self._hits(area, self._dense_ranked(query_vector, area, limit))
            return SearchResult(dense_hits, "dense")
        depth = POOL_FACTOR * limit
        lexical = [chunk_id for chunk_id, _ in self._bm25(query, area, depth)]
        dense = [chunk_id for chunk_id, _ in self._dense_ranked(query_vector, area, depth)]
        fused = reciprocal_rank_fusion([lexical, dense], RRF_K)[: max(limit, 0)]
        return SearchResult(self._hits(area, fused), "hybrid")

    def _bm25(self, query: str, area: str, limit: int) -> list[tuple[str, float]]:
        return self._source.bm25(area).search(query, limit)

    def _hits(self, area: str, ranked: Sequence[tuple[str, float]]) -> list[Hit]:
        """The chunks of a ranking of `area`'s ids, with their scores (the one place
        where chunks are decoded: only the hits returned)."""
        chunk = self._source.chunk
        return [Hit(chunk(area, chunk_id), score) for chunk_id, score in ranked]

    def _vector_pool(self, area: str) -> _VectorPool:
        pool = self._vectors.get(area)
        if pool is None:
            store = self._embeddings
            assert store is not None  # _query_vector checked it
            with self._lock:
                pool = self._vectors.get(area)
                if pool is None:
                    if self._row_of is None:
                        self._row_of = store.index_of()
                    row_of = self._row_of
                    ids = [i for i in self._source.area_ids(area) if i in row_of]
                    store_rows = np.array([row_of[i] for i in ids], dtype=np.intp)
                    matrix = store.vectors[store_rows].reshape(len(ids), store.dim)
                    pool = _VectorPool(ids, matrix)
                    self._vectors[area] = pool
        return pool

    def _query_vector(self, query: str) -> npt.NDArray[np.int8]:
        """The quantised query vector, cached per Retriever by the agent's key."""
        store = self._embeddings
        if self._embedder is None:
            raise _DenseUnavailable("no query embedder")
        if store is None:
            raise _DenseUnavailable("no embeddings")
        if self._query_model is not None and self._query_model != store.model:
            raise _DenseUnavailable(
                f"model mismatch: query model {self._query_model!r}, "
                f"embeddings made by {store.model!r}"
            )
        key = query_cache_key(query)
        cached = self._query_vectors.get(key)
        if cached is not None:
            return cached
        try:
            raw = np.asarray(self._embedder(query), dtype=np.float64)
        except Exception as exc:  # any embedder failure means "answer lexically"
            raise _DenseUnavailable(f"query embedding failed: {type(exc).__name__}") from exc
        if raw.ndim == 2 and raw.shape[0] == 1:
            raw = raw[0]
        if raw.ndim != 1 or raw.shape[0] != store.dim:
            raise _DenseUnavailable(
                f"dimension mismatch: query vector {raw.shape}, embeddings dim {store.dim}"
            )
        if not np.all(np.isfinite(raw)):
            raise _DenseUnavailable("query vector is not finite")
        vector = quantize(raw)[0]
        self._query_vectors[key] = vector
        return vector

    def _dense_ranked(
        self, query_vector: npt.NDArray[np.int8], area: str, limit: int
    ) -> list[tuple[str, float]]:
        """(id, cosine) of the `limit` nearest chunks: no chunk is decoded (hybrid fusion
        needs only the ids of its pool)."""
        pool = self._vector_pool(area)
        if limit <= 0 or not pool.ids:
            return []
        scores = pool.cosines(query_vector)
        candidates = np.arange(len(scores))
        if len(scores) > limit:
            cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            candidates = np.flatnonzero(scores >= cut)
        order = candidates[np.lexsort((pool.id_rank[candidates], -scores[candidates]))]
        return [(pool.ids[i], float(scores[i])) for i in order[:limit].tolist()]


def _rank_by_id(ids: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each chunk's position in id order (stable), so ties sort by id with integers."""
    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank
