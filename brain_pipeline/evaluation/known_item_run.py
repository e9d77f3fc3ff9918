"""One known-item evaluation of a store: ask the baseline's items, sample the next ones.

`run_known_items` is what `evaluation.service` calls for every evaluation (a reused
labelled report included: the known-item baseline changes at each publication). It

1. answers the baseline's known items on this store with the agent's retriever (hybrid
   when the store's vectors can be searched and `retrieval.mode` is hybrid, else BM25)
   and judges them (`known_item_gate.judge_known_items`);
2. samples this store's own known items (`known_items.sample_area`) with their ranks and
   keeps them as the candidate the publication of this store makes the next baseline.

Both share one memo of answers. What outlives one evaluation: the candidate, in the
ledger (`baseline.save_candidate`), and three caches:

- `state/known-items/queries.json`: chunk id -> its learner query (or null: nothing
  distinctive), for the ids of the current store, so an unchanged chunk keeps its query
  across builds and is never read or tokenised again (the digest of the query code keys it);
- `state/known-items/answers.json`: per area, the agent's top 10 for each known-item query,
  under a key of the area's ids (and its vectors, in hybrid mode): an area a build did not
  touch is not searched again, which is what keeps a one-edit run cheap;
- the query vectors, per query model, in the blob the pointer `judgements.QUERY_VECTORS +
  model` names, moved when a run embedded new queries: no worker pays for a query any
  worker embedded before.

The two local files are cheap for a fresh worker to rebuild (it tokenises and searches
again); every write is atomic, and a file that cannot be read is set aside once and counts
as absent. No Dagster.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.baseline import load_known_items, save_candidate
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
from brain_pipeline.state.blobs import BlobError
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.memory import Memory
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
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
    rows: dict[str, int], model: str | None,
) -> str:
    parts: dict[str, Any] = {
        "ids": source.view.area_digest(area),
        "mode": mode,
        "code": _answering_code(),
    }
    if mode == "hybrid" and embeddings is not None:
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
    candidate: str | None = None,
    memory: Memory | None = None,
) -> KnownItemRun:
    """Judge this store on the baseline's known items and sample its own (module doc).

    Without a `layout` (a store outside the build directory) or a `memory` (the ledger
    keeping the baseline and the candidates) nothing is cached or saved and there is no
    baseline to ask: the check says so and passes. `candidate`: the key of the evaluation
    this run is part of, which this store's known items are kept under (None: not kept).
    """
    mode = _mode(embeddings, query_embedder, retrieval_mode)
    vectors = _VectorMemo(query_embedder, query_model, memory if layout is not None else None)
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
    rows = embeddings.index_of() if mode == "hybrid" and embeddings is not None else {}
    areas = source.areas()
    keys = {a: _area_key(source, a, mode, embeddings, rows, query_model) for a in areas}
    cached = read_cache(layout, _ANSWERS) if layout is not None else {}
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
        baseline = load_known_items(memory)
        if isinstance(baseline, str):
            verdict = no_baseline(baseline)
        else:
            used = baseline
            verdict = judge_known_items(baseline, source, memo, settings)

    queries = load_queries(layout) if layout is not None else {}
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
    saved: str | None = None
    if layout is not None and memory is not None:
        try:  # the caches, then this store's candidate
            live = {i for area in areas for i in source.area_ids(area)}
            kept = {i: q for i, q in queries.items() if i in live}  # the size of the store
            write_cache(layout, _QUERIES, {"version": _query_code(), "queries": kept})
            write_cache(layout, _ANSWERS, {
                area: {"key": keys[area],
                       "answers": {q: top for (q, a), top in memo.answers.items() if a == area}}
                for area in areas
                if area not in fell_back  # answered lexically this time: not remembered as hybrid
            })  # fmt: skip
            if candidate is not None:
                save_candidate(memory, candidate, items, counts, notes)
                saved = candidate
            vectors.save({item.query for item in items} | {o.query for o in verdict.items})
        except OSError as exc:  # a read-only build directory: judged, not remembered
            saved = None
            notes.append(
                f"known items not saved ({exc.strerror or exc}): a publication of this "
                "store leaves no known-item baseline"
            )
    return KnownItemRun(
        replace(verdict, notes=verdict.notes + tuple(notes)),
        saved,
        len(items),
        memo.asked,
        vectors.embedded,
        baseline_candidate=used.candidate if used is not None else None,
        baseline_digest=used.digest if used is not None else None,
    )


class _VectorMemo:
    """The query embedder behind the shared cache of known-item query vectors (module
    doc): a paid embedding service never embeds an unchanged query twice."""

    def __init__(self, embed: QueryEmbedder | None, model: str | None, memory: Memory | None
                 ) -> None:
        self._embed = embed
        self._memory = memory
        self._pointer = judgements.QUERY_VECTORS + (model or "")
        self._model = model or ""
        self._vectors: dict[str, list[float]] | None = None
        self.embedded = 0

    def _known(self) -> dict[str, list[float]]:
        if self._vectors is None:
            data: Any = None
            if self._memory is not None and self._model:
                with contextlib.suppress(BlobError, ValueError):
                    data = judgements.pointed(self._memory, self._pointer)
            ok = isinstance(data, dict) and data.get("model") == self._model
            vectors = data.get("vectors") if ok else None
            self._vectors = dict(vectors) if isinstance(vectors, dict) else {}
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
        """Share the vectors of the queries still asked (the baseline's and the
        candidate's), when this run embedded new ones."""
        if self._memory is not None and self._model and self.embedded and self._vectors:
            vectors = {q: v for q, v in self._vectors.items() if q in keep}
            data = {"model": self._model, "vectors": vectors}
            judgements.point(self._memory, self._pointer, data)


_QUERIES = "queries.json"
_ANSWERS = "answers.json"


def directory(layout: StateLayout) -> Path:
    """The folder of the known-item check's local caches."""
    return layout.state_dir / "known-items"


def read_cache(layout: StateLayout, name: str) -> dict[str, Any]:
    """The cache file's JSON, or {} when it is absent or cannot be read (a cache miss
    costs a search, never the evaluation)."""
    path = directory(layout) / name

    def load() -> Any:
        try:
            return json.loads(path.read_bytes())
        except OSError:
            return None

    data = healed(path, load, what=f"known-item cache {name}")
    return data if isinstance(data, dict) else {}


def write_cache(layout: StateLayout, name: str, data: Mapping[str, Any]) -> None:
    directory(layout).mkdir(parents=True, exist_ok=True)
    payload = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    atomic_write_bytes(directory(layout) / name, payload.encode("utf-8"))


def _query_code() -> str:
    return code_digest("brain_pipeline.evaluation.known_items")


def load_queries(layout: StateLayout) -> dict[str, str | None]:
    data = read_cache(layout, _QUERIES)
    queries = data.get("queries") if data.get("version") == _query_code() else None
    return dict(queries) if isinstance(queries, dict) else {}
