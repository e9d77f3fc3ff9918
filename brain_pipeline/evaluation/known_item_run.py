"""One known-item evaluation of a store: ask the baseline's items, sample the next ones.

`run_known_items` is what `evaluation.service` calls for every evaluation (a reused
labelled report included: the known-item baseline changes at each publication). It

1. answers the baseline's known items on this store with the agent's retriever (hybrid
   when the store's vectors can be searched and `retrieval.mode` is hybrid, else BM25)
   and judges them (`known_item_gate.judge_known_items`);
2. samples this store's own known items (`known_items.sample_area`) with their ranks and
   keeps them as the candidate the publication of this store makes the next baseline.

Both share one memo of answers, and answers are cached per area under a key of the
area's ids (and vectors): an area the build did not change is never searched again.
No Dagster.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation import known_item_state as state
from brain_pipeline.evaluation.known_item_gate import (
    KnownItemBaseline,
    KnownItemSettings,
    KnownItemVerdict,
    RankMemo,
    judge_known_items,
    no_baseline,
    with_ranks,
)
from brain_pipeline.evaluation.known_items import KnownItem, sample_area
from brain_pipeline.retrieval.hybrid import QueryEmbedder, Retriever
from brain_pipeline.retrieval.vectors import EmbeddingStore
from brain_pipeline.retrieval.view_source import ViewSource
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.digest import sha256_hex, value_digest


@dataclass(frozen=True)
class KnownItemRun:
    """The verdict on this store, and what was done to reach it."""

    verdict: KnownItemVerdict
    candidate: str | None
    """The key this store's own known items were saved under (None: not saved)."""
    sampled: int
    searched: int
    """Queries actually run (the rest came from the per-area cache)."""
    embedded: int = 0
    """Queries sent to the query embedder (the rest had a cached vector)."""
    baseline_candidate: str | None = None
    baseline_digest: str | None = None
    """The known-item baseline the verdict was judged against (`KnownItemBaseline`'s
    `candidate` and `digest`; None: there was none): part of the rule it was made under."""


def _mode(embeddings: EmbeddingStore | None, embedder: QueryEmbedder | None, mode: str) -> str:
    return "hybrid" if mode == "hybrid" and embeddings is not None and embedder else "lexical"


@functools.cache
def _answering_code() -> str:
    """The digest of the code that answers an area's known-item queries (this module and
    what it imports: the search, BM25, the fusion): part of the per-area cache key, so an
    edit searches again rather than serving answers of other code."""
    return code_digest(__name__)[:16]


def _area_key(
    source: ViewSource, area: str, mode: str, embeddings: EmbeddingStore | None,
    row_of: Callable[[], dict[str, int]], model: str | None,
) -> str:
    parts: dict[str, Any] = {
        "ids": source.view.area_digest(area),
        "mode": mode,
        "code": _answering_code(),
    }
    if mode == "hybrid" and embeddings is not None:
        rows = row_of()
        picked = [rows[i] for i in source.area_ids(area) if i in rows]
        parts["vectors"] = sha256_hex(embeddings.vectors[picked].tobytes())
        parts["model"] = model
    return value_digest(parts)


def run_known_items(
    source: ViewSource,
    layout: StateLayout | None,
    *,
    sample_per_area: int,
    settings: KnownItemSettings,
    embeddings: EmbeddingStore | None = None,
    query_embedder: QueryEmbedder | None = None,
    query_model: str | None = None,
    retrieval_mode: str = "hybrid",
    store_sha256: str | None = None,
    embeddings_sha256: str | None = None,
    memory: Memory | None = None,
) -> KnownItemRun:
    """Judge this store on the baseline's known items and sample its own (module doc).

    Without a `layout` (a store outside the build directory) or a `memory` (the ledger
    keeping the baseline and the candidates) nothing is cached or saved and there is no
    baseline to ask: the check says so and passes.
    """
    mode = _mode(embeddings, query_embedder, retrieval_mode)
    vectors = _VectorMemo(query_embedder, layout, query_model, memory)
    retriever = Retriever(
        source, embeddings, vectors if query_embedder is not None else None,
        query_model=query_model,
    )
    fell_back: set[str] = set()

    def rank(query: str, area: str) -> list[str]:
        result = retriever.search(query, area, limit=10, mode=mode)
        if result.fallback is not None:
            fell_back.add(area)  # answered lexically this time: not remembered as hybrid
        return [hit.chunk.id for hit in result.hits]

    memo = RankMemo(rank)
    row_cache: dict[str, dict[str, int]] = {}

    def row_of() -> dict[str, int]:
        if "rows" not in row_cache and embeddings is not None:
            row_cache["rows"] = embeddings.index_of()
        return row_cache.get("rows", {})

    areas = source.areas()
    keys = {a: _area_key(source, a, mode, embeddings, row_of, query_model) for a in areas}
    cached = state.load_answers(layout) if layout is not None else {}
    for area, key in keys.items():
        entry = cached.get(area)
        if isinstance(entry, dict) and entry.get("key") == key:
            for query, top in dict(entry.get("answers", {})).items():
                memo.answers[(query, area)] = [str(i) for i in top]

    used: KnownItemBaseline | None = None
    if layout is None or memory is None:
        verdict = no_baseline(
            "no known-item baseline for a store outside the build directory: the check passes"
        )
    else:
        baseline = state.load_baseline(memory)
        if isinstance(baseline, str):
            verdict = no_baseline(baseline)
        else:
            used = baseline
            verdict = judge_known_items(baseline, source, memo, settings)

    queries = state.load_queries(layout) if layout is not None else {}
    items: list[KnownItem] = []
    notes: list[str] = []
    for area in areas:
        ids = source.area_ids(area)
        position = {chunk_id: i for i, chunk_id in reversed(list(enumerate(ids)))}

        def read(wanted: Sequence[str], area: str = area, position: dict[str, int] = position
                 ) -> list[Chunk]:
            return source.area_chunks_at(area, [position[i] for i in wanted])

        index = source.bm25(area)
        sample = sample_area(area, ids, read, index.document_frequency, queries,
                             sample_per_area)
        items.extend(with_ranks(sample.items, memo))
        if sample.note:
            notes.append(sample.note)
    counts = {area: len(source.area_ids(area)) for area in areas}
    candidate: str | None = None
    if layout is not None and memory is not None:
        try:
            candidate = _save(
                memory, layout, source, areas, keys, memo, fell_back, queries, items, counts, notes,
                store_sha256, embeddings_sha256,
            )
            vectors.save({item.query for item in items} | {o.query for o in verdict.items})
        except OSError as exc:  # a read-only build directory: judged, not remembered
            candidate = None
            notes.append(
                f"known items not saved ({exc.strerror or exc}): a publication of this "
                "store leaves no known-item baseline"
            )
    if notes:
        verdict = KnownItemVerdict(
            status=verdict.status,
            areas=verdict.areas,
            items=verdict.items,
            failures=verdict.failures,
            warnings=verdict.warnings,
            notes=verdict.notes + tuple(notes),
        )
    return KnownItemRun(
        verdict,
        candidate,
        len(items),
        memo.asked,
        vectors.embedded,
        baseline_candidate=used.candidate if used is not None else None,
        baseline_digest=used.digest if used is not None else None,
    )


def _save(
    memory: Memory,
    layout: StateLayout,
    source: ViewSource,
    areas: Sequence[str],
    keys: dict[str, str],
    memo: RankMemo,
    fell_back: set[str],
    queries: dict[str, str | None],
    items: Sequence[KnownItem],
    counts: dict[str, int],
    notes: Sequence[str],
    store_sha256: str | None,
    embeddings_sha256: str | None,
) -> str:
    """Keep the caches and this store's candidate; returns the candidate's key."""
    live = {i for area in areas for i in source.area_ids(area)}
    state.save_queries(layout, queries, live)
    answers = {
        area: {
            "key": keys[area],
            "answers": {q: top for (q, a), top in memo.answers.items() if a == area},
        }
        for area in areas
        if area not in fell_back  # answered lexically this time: not remembered as hybrid
    }
    state.save_answers(layout, answers)
    candidate = state.candidate_key(store_sha256, embeddings_sha256)
    state.save_candidate(memory, candidate, items, counts, notes)
    return candidate


class _VectorMemo:
    """The query embedder behind a cache of known-item query vectors kept in the state
    directory: a paid embedding service never embeds an unchanged query twice."""

    def __init__(
        self,
        embed: QueryEmbedder | None,
        layout: StateLayout | None,
        model: str | None,
        memory: Memory | None = None,
    ) -> None:
        self._embed = embed
        self._layout = layout
        self._memory = memory
        self._model = model or ""
        self._vectors: dict[str, list[float]] | None = None
        self.embedded = 0

    def __bool__(self) -> bool:
        return self._embed is not None

    def _known(self) -> dict[str, list[float]]:
        if self._vectors is None:
            loaded = (
                state.load_query_vectors(self._layout, self._model, self._memory)
                if self._layout is not None and self._model
                else {}
            )
            self._vectors = loaded
        return self._vectors

    def __call__(self, query: str) -> Any:
        known = self._known()
        vector = known.get(query)
        if vector is None:
            assert self._embed is not None
            raw = np.asarray(self._embed(query), dtype=np.float64).reshape(-1)
            vector = known[query] = [float(x) for x in raw]
            self.embedded += 1
        return vector

    def save(self, keep: set[str]) -> None:
        if self._layout is not None and self._model and self._vectors is not None:
            share = self._memory if self.embedded else None
            state.save_query_vectors(self._layout, self._model, self._vectors, keep, share)
