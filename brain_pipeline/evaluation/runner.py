"""Run the labelled fixture through legacy / BM25 / hybrid retrieval.

`evaluate` produces an `EvaluationReport`: aggregates, per-query rows, stale labels,
fallbacks. It judges nothing: `verdict.judge` decides what the report means
(thresholds, staleness, regressions) and `reports` shows it to people. Everything here is
pure: no Dagster, no configuration.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture.model import Fixture, load_fixture, unknown_areas
from brain_pipeline.evaluation.legacy import LegacyBaseline, legacy_terms
from brain_pipeline.evaluation.metrics import fixture_metrics
from brain_pipeline.retrieval.hybrid import ChunkSource, QueryEmbedder, Retriever, as_source
from brain_pipeline.retrieval.vectors import EmbeddingStore

K = 10
RETRIEVERS: tuple[str, ...] = ("legacy", "bm25", "hybrid")
"""The default comparison: where the agent started, lexical, and what it runs now."""
KNOWN_RETRIEVERS: tuple[str, ...] = ("legacy", "bm25", "hybrid", "dense")
_RETRIEVER_MODE = {"bm25": "lexical", "hybrid": "hybrid", "dense": "dense"}


@dataclass(frozen=True)
class QueryResult:
    """How one retriever did on one labelled query."""

    query: str
    area: str
    retriever: str
    first_relevant_rank: int | None
    """1-based rank of the first relevant hit in the top 10; None when nothing relevant."""
    recall: float
    rr: float
    ndcg: float
    top_ids: list[str]
    mode: str
    """The mode that actually answered: "legacy", "lexical", "hybrid" or "dense"."""
    fallback: str | None = None
    relevant_ranks: dict[str, int | None] = field(default_factory=dict)
    """Each labelled id -> its 1-based rank in the top 10, None when it is not there: what
    a comparison with an earlier evaluation needs to say which answer was lost."""
    miss: bool = False
    """Nothing relevant in the top 10 (reciprocal rank 0)."""


@dataclass(frozen=True)
class RetrieverSummary:
    """Mean figures of one retriever over all fixture queries."""

    name: str
    recall_at_10: float
    mrr: float
    ndcg_at_10: float
    misses: int
    n_queries: int
    fallback_queries: int = 0
    """Queries a hybrid/dense retriever answered with BM25 instead."""
    fallback: str | None = None
    """Why it fell back, with counts; None when it never did."""

    @property
    def fell_back_entirely(self) -> bool:
        return self.n_queries > 0 and self.fallback_queries == self.n_queries


EvaluationProgress = Callable[[str, int, int], None]
"""(retriever, queries done, queries in the fixture): called before the first query of
each retriever (done 0) and after every query, so a caller can report on its own clock."""


@dataclass
class EvaluationReport:
    """What the retrievers did on the fixture (`reports` shows it, `verdict.judge` judges it)."""

    retrievers: list[RetrieverSummary]
    queries: list[QueryResult]
    stale_ids: list[str]
    unknown_areas: list[str]
    n_chunks: int
    fixture_source: str
    notes: list[str] = field(default_factory=list)
    stale_labels: list[tuple[str, str, str]] = field(default_factory=list)
    """(id, query, area) for every label whose id is not live in its area, fixture order."""
    stale_sources: dict[str, str] = field(default_factory=dict)
    """id -> the file its text was last seen in (from the chunk history), when known."""

    def summary(self, name: str) -> RetrieverSummary | None:
        """The aggregates of retriever `name`, or None when it was not evaluated."""
        return next((s for s in self.retrievers if s.name == name), None)

    def flat_metrics(self) -> dict[str, float]:
        """{"bm25.ndcg_at_10": ..., ...} plus counts, for Dagster metadata and logs."""
        flat: dict[str, float] = {}
        # No labelled query: there is no figure (a 0.0 would read as a collapse).
        for s in (r for r in self.retrievers if r.n_queries):
            flat[f"{s.name}.recall_at_10"] = s.recall_at_10
            flat[f"{s.name}.mrr"] = s.mrr
            flat[f"{s.name}.ndcg_at_10"] = s.ndcg_at_10
            flat[f"{s.name}.misses"] = float(s.misses)
            if s.name in ("hybrid", "dense"):
                flat[f"{s.name}.fallback_queries"] = float(s.fallback_queries)
        flat["queries"] = float(len({(q.query, q.area) for q in self.queries}))
        flat["stale_ids"] = float(len(self.stale_ids))
        flat["unknown_areas"] = float(len(self.unknown_areas))
        flat["chunks"] = float(self.n_chunks)
        return flat

    def to_dict(self) -> dict[str, Any]:
        return {
            "fixture": self.fixture_source,
            "chunks": self.n_chunks,
            "retrievers": [asdict(s) for s in self.retrievers],
            "stale_ids": list(self.stale_ids),
            "unknown_areas": list(self.unknown_areas),
            "notes": list(self.notes),
            "queries": [asdict(q) for q in self.queries],
            "stale_labels": [list(label) for label in self.stale_labels],
            "stale_sources": dict(self.stale_sources),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationReport:
        """The inverse of `to_dict` (a stored outcome is shown exactly as when it ran)."""
        return cls(
            retrievers=[RetrieverSummary(**s) for s in data["retrievers"]],
            queries=[QueryResult(**q) for q in data["queries"]],
            stale_ids=list(data["stale_ids"]),
            unknown_areas=list(data["unknown_areas"]),
            n_chunks=int(data["chunks"]),
            fixture_source=str(data["fixture"]),
            notes=list(data.get("notes", [])),
            stale_labels=[(str(a), str(b), str(c)) for a, b, c in data.get("stale_labels", [])],
            stale_sources={str(k): str(v) for k, v in data.get("stale_sources", {}).items()},
        )


Ranker = Callable[[str, str], tuple[list[str], str, str | None]]
"""(query, area) -> (top ids, mode that answered, fallback reason)."""


def _rankers(
    source: ChunkSource,
    fixture: Fixture,
    names: Sequence[str],
    embeddings: EmbeddingStore | None,
    query_embedder: QueryEmbedder | None,
    query_model: str | None,
) -> dict[str, Ranker]:
    rankers: dict[str, Ranker] = {}
    if "legacy" in names:
        # One implementation for every source; a store on disk names a cache directory,
        # so only chunks new since an earlier evaluation are tested.
        terms = [t for q in fixture.queries for t in legacy_terms(q.query)]
        legacy = LegacyBaseline.cached(source, terms)

        def rank_legacy(query: str, area: str) -> tuple[list[str], str, str | None]:
            return legacy.search_ids(query, area, K), "legacy", None

        rankers["legacy"] = rank_legacy
    if any(name in _RETRIEVER_MODE for name in names):
        retriever = Retriever(source, embeddings, query_embedder, query_model=query_model)
        for name in names:
            if name in _RETRIEVER_MODE:
                rankers[name] = _retriever_ranker(retriever, _RETRIEVER_MODE[name])
    return rankers


def _retriever_ranker(retriever: Retriever, mode: str) -> Ranker:
    def rank(query: str, area: str) -> tuple[list[str], str, str | None]:
        result = retriever.search(query, area, limit=K, mode=mode)
        return [hit.chunk.id for hit in result.hits], result.mode, result.fallback

    return rank


def _relevant_ranks(top_ids: Sequence[str], relevant: Sequence[str]) -> dict[str, int | None]:
    """Each relevant id's first 1-based rank within the top K (None when absent)."""
    position: dict[str, int] = {}
    for index, chunk_id in enumerate(top_ids[:K]):
        position.setdefault(chunk_id, index + 1)
    return {chunk_id: position.get(chunk_id) for chunk_id in relevant}


def _summarise(name: str, rows: Sequence[QueryResult]) -> RetrieverSummary:
    n = len(rows)
    reasons = Counter(r.fallback for r in rows if r.fallback is not None)
    fallback = (
        "; ".join(f"{reason}: {count}/{n}" for reason, count in reasons.most_common())
        if reasons
        else None
    )
    return RetrieverSummary(
        name=name,
        recall_at_10=sum(r.recall for r in rows) / n if n else 0.0,
        mrr=sum(r.rr for r in rows) / n if n else 0.0,
        ndcg_at_10=sum(r.ndcg for r in rows) / n if n else 0.0,
        misses=sum(1 for r in rows if r.rr == 0),
        n_queries=n,
        fallback_queries=sum(reasons.values()),
        fallback=fallback,
    )


def evaluate(
    chunks: Sequence[Chunk] | ChunkSource,
    fixture: Fixture | Path | str,
    *,
    embeddings: EmbeddingStore | None = None,
    query_embedder: QueryEmbedder | None = None,
    query_model: str | None = None,
    retrievers: Sequence[str] = RETRIEVERS,
    progress: EvaluationProgress | None = None,
) -> EvaluationReport:
    """Score every fixture query with each retriever (top 10, within the query's area).

    Hybrid needs `embeddings` and `query_embedder`; without them (or on any failure) the
    retriever answers with BM25 and the report says so instead of pretending. `chunks`
    may be a `ChunkSource` (the memory-mapped store with cached indexes), `fixture` a
    path (loaded and validated here; FixtureError when unusable).
    `progress` hears about every query (see `EvaluationProgress`).
    """
    if not isinstance(fixture, Fixture):
        fixture = load_fixture(fixture)
    unknown = [name for name in retrievers if name not in KNOWN_RETRIEVERS]
    if unknown:
        raise ValueError(
            f"unknown retriever(s) {', '.join(unknown)}; choose from {', '.join(KNOWN_RETRIEVERS)}"
        )
    source = as_source(chunks)
    present = source.areas()
    missing_areas = unknown_areas(fixture, present)
    rankers = _rankers(source, fixture, retrievers, embeddings, query_embedder, query_model)
    relevant = [list(q.relevant) for q in fixture.queries]
    rows: list[QueryResult] = []
    summaries: list[RetrieverSummary] = []
    total = len(fixture.queries)
    for name in retrievers:
        if progress:
            progress(name, 0, total)
        answers: list[tuple[list[str], str, str | None]] = []
        for q in fixture.queries:
            answers.append(
                rankers[name](q.query, q.area) if q.area not in missing_areas
                else ([], "none", None)
            )
            if progress:
                progress(name, len(answers), total)
        scores = fixture_metrics([ids for ids, _, _ in answers], relevant, K)
        own_rows = [
            QueryResult(
                query=q.query,
                area=q.area,
                retriever=name,
                first_relevant_rank=int(rank) or None,
                recall=float(recall),
                rr=float(rr),
                ndcg=float(ndcg),
                top_ids=ids,
                mode=mode,
                fallback=fallback,
                relevant_ranks=_relevant_ranks(ids, q.relevant),
                miss=rr == 0,
            )
            for q, (ids, mode, fallback), rank, recall, rr, ndcg in zip(
                fixture.queries,
                answers,
                scores.first_rank.tolist(),
                scores.recall.tolist(),
                scores.reciprocal_rank.tolist(),
                scores.ndcg.tolist(),
                strict=True,
            )
        ]
        rows.extend(own_rows)
        summaries.append(_summarise(name, own_rows))
    # A label is stale when its id is not live in its query's area (a moved file counts).
    from brain_pipeline.evaluation.fixture.stale import find_stale

    labelled = {label for q in fixture.queries for label in q.relevant}
    stale_labels = find_stale(fixture, source.with_ids(labelled))
    return EvaluationReport(
        retrievers=summaries,
        queries=rows,
        stale_ids=list(dict.fromkeys(label.id for label in stale_labels)),
        unknown_areas=missing_areas,
        n_chunks=source.count(),
        fixture_source=fixture.source,
        stale_labels=[(label.id, label.query, label.area) for label in stale_labels],
    )
