"""Run the labelled fixture through legacy / BM25 / hybrid retrieval and judge the result.

`evaluate` produces an `EvaluationReport` (aggregates, per-query rows, stale labels,
fallbacks); `check_thresholds` turns it into a list of human-readable failures; and
`run_evaluation` does both, which is what the blocking `retrieval_eval` asset check and
`brain-pipeline eval` call. Everything here is pure: no Dagster, no configuration.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture import Fixture, load_fixture, unknown_areas
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
    """The evaluation's outcome: what `to_markdown` shows and the thresholds judge."""

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
        for s in self.retrievers:
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

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_text(self) -> str:
        """A plain-text version of the comparison for the terminal (`brain-pipeline eval`)."""
        n = len({(q.query, q.area) for q in self.queries})
        labels = [f"{s.name} (= bm25)" if s.fell_back_entirely else s.name for s in self.retrievers]
        width = max([len("retriever"), *map(len, labels)])
        lines = [
            f"{n} queries from {self.fixture_source}, {self.n_chunks} chunks",
            f"{'retriever':<{width}}  recall@10     MRR  nDCG@10  misses",
        ]
        for label, s in zip(labels, self.retrievers, strict=True):
            lines.append(
                f"{label:<{width}}  {s.recall_at_10:9.3f}  {s.mrr:6.3f}  {s.ndcg_at_10:7.3f}  "
                f"{s.misses:>3}/{s.n_queries}"
            )
        lines.extend(f"note: {note}" for note in self._fallback_notes() + self.notes)
        if self.stale_ids:
            lines.append(f"stale ids ({len(self.stale_ids)}): {', '.join(self.stale_ids)}")
        if self.unknown_areas:
            lines.append(f"unknown areas: {', '.join(self.unknown_areas)}")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The comparison table, fallbacks, staleness and a per-query rank table."""
        n = len({(q.query, q.area) for q in self.queries})
        lines = [
            f"Retrieval evaluation: {n} queries from `{self.fixture_source}` "
            f"over {self.n_chunks} chunks.",
            "",
            "| retriever | recall@10 | MRR | nDCG@10 | misses |",
            "|---|---:|---:|---:|---:|",
        ]
        for s in self.retrievers:
            label = f"{s.name} (= bm25)" if s.fell_back_entirely else s.name
            lines.append(
                f"| {label} | {s.recall_at_10:.3f} | {s.mrr:.3f} | {s.ndcg_at_10:.3f} "
                f"| {s.misses}/{s.n_queries} |"
            )
        lines.append("")
        lines.extend(f"- {note}" for note in self._fallback_notes() + self.notes)
        if self.stale_ids:
            lines.append(
                f"- **Stale fixture**: {len(self.stale_ids)} labelled chunk id(s) are not in "
                f"the store: {', '.join(self.stale_ids)}"
            )
        if self.unknown_areas:
            lines.append(f"- **Unknown area(s)** in the fixture: {', '.join(self.unknown_areas)}")
        lines.extend(["", *self._rank_table()])
        return "\n".join(lines).rstrip() + "\n"

    def _fallback_notes(self) -> list[str]:
        notes = []
        for s in self.retrievers:
            if s.fallback_queries:
                notes.append(
                    f"{s.name} answered {s.fallback_queries}/{s.n_queries} queries with BM25 "
                    f"({s.fallback})" + ("; its figures are BM25's" if s.fell_back_entirely else "")
                )
        return notes

    def query_rows(self) -> list[dict[str, Any]]:
        """One row per labelled query: area, first relevant rank per retriever, staleness."""
        names = [s.name for s in self.retrievers]
        stale_queries = {(query, area) for _, query, area in self.stale_labels}
        ranks: dict[tuple[str, str], dict[str, int | None]] = {}
        for q in self.queries:
            ranks.setdefault((q.query, q.area), {})[q.retriever] = q.first_relevant_rank
        return [
            {
                "query": query,
                "area": area,
                **{name: by_name.get(name) for name in names},
                "stale_label": (query, area) in stale_queries,
            }
            for (query, area), by_name in ranks.items()
        ]

    def _rank_table(self) -> list[str]:
        """Rank of the first relevant hit per query and retriever ("—" for a miss)."""
        names = [s.name for s in self.retrievers]
        ranks: dict[tuple[str, str], dict[str, int | None]] = {}
        for q in self.queries:
            ranks.setdefault((q.query, q.area), {})[q.retriever] = q.first_relevant_rank
        lines = [
            "| query | area | " + " | ".join(names) + " |",
            "|---|---|" + "---:|" * len(names),
        ]
        for (query, area), by_name in ranks.items():
            cells = [_rank_cell(by_name.get(name)) for name in names]
            row = [_md_escape(query), _md_escape(area), *cells]
            lines.append("| " + " | ".join(row) + " |")
        return lines


def _rank_cell(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


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
    fixture: Fixture,
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
    may be a `ChunkSource` (the memory-mapped store with cached indexes).
    `progress` hears about every query (see `EvaluationProgress`).
    """
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
    from brain_pipeline.evaluation.stale import find_stale

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


def _threshold_value(thresholds: Any, key: str) -> Any:
    """Read a bound from a pydantic/dataclass object or a plain mapping."""
    if isinstance(thresholds, Mapping):
        return thresholds.get(key)
    return getattr(thresholds, key, None)


def check_thresholds(report: EvaluationReport, thresholds: Mapping[Any, Any] | None) -> list[str]:
    """Every reason the evaluation fails, as sentences; an empty list means it passes.

    Fails on an empty store, stale labels, fixture areas absent from the store, and any
    configured bound (min_ndcg_at_10, min_recall_at_10, max_misses per retriever) missed.
    A bound for a retriever that was not evaluated fails too: an ignored bound is a lie.
    """
    failures: list[str] = []
    if report.n_chunks == 0:
        failures.append("the knowledge store is empty: nothing can be retrieved")
    if report.stale_ids:
        def where(chunk: str) -> str:
            source = report.stale_sources.get(chunk)
            return f", was in {source}" if source else ""

        named = "; ".join(
            f"{chunk} (query {query!r}, area {area}{where(chunk)})"
            for chunk, query, area in report.stale_labels
        ) or ", ".join(report.stale_ids)
        failures.append(
            f"stale fixture: {len(report.stale_ids)} labelled chunk id(s) no longer in the "
            f"store: {named}; relabel {report.fixture_source} "
            "(`brain-pipeline fixture repair` proposes the new ids)"
        )
    if report.unknown_areas:
        failures.append(
            f"fixture asks about area(s) not in the store: {', '.join(report.unknown_areas)}"
        )
    for name, bounds in (thresholds or {}).items():
        summary = report.summary(name)
        if summary is None:
            failures.append(f"{name}: thresholds are configured but {name} was not evaluated")
            continue
        min_ndcg = _threshold_value(bounds, "min_ndcg_at_10")
        if min_ndcg is not None and summary.ndcg_at_10 < min_ndcg:
            failures.append(f"{name}: nDCG@10 {summary.ndcg_at_10:.3f} < minimum {min_ndcg:.3f}")
        min_recall = _threshold_value(bounds, "min_recall_at_10")
        if min_recall is not None and summary.recall_at_10 < min_recall:
            failures.append(
                f"{name}: recall@10 {summary.recall_at_10:.3f} < minimum {min_recall:.3f}"
            )
        max_misses = _threshold_value(bounds, "max_misses")
        if max_misses is not None and summary.misses > max_misses:
            failures.append(f"{name}: {summary.misses} misses > maximum {max_misses}")
    return failures


@dataclass(frozen=True)
class ThresholdRow:
    """One configured bound, the measured figure, and how far it is from failing."""

    retriever: str
    metric: str
    value: float
    bound: float
    kind: str  # "min" or "max"
    margin: float
    """value - bound for a floor, bound - value for a ceiling: negative means it failed."""

    @property
    def passed(self) -> bool:
        return self.margin >= 0


def threshold_rows(
    report: EvaluationReport, thresholds: Mapping[Any, Any] | None
) -> list[ThresholdRow]:
    """Every configured bound next to its figure, for tables, plots and margins."""
    rows: list[ThresholdRow] = []
    for name, bounds in (thresholds or {}).items():
        summary = report.summary(str(name))
        if summary is None:
            continue
        for metric, key, kind in (
            ("ndcg_at_10", "min_ndcg_at_10", "min"),
            ("recall_at_10", "min_recall_at_10", "min"),
            ("misses", "max_misses", "max"),
        ):
            bound = _threshold_value(bounds, key)
            if bound is None:
                continue
            value = float(getattr(summary, metric))
            margin = value - float(bound) if kind == "min" else float(bound) - value
            rows.append(ThresholdRow(str(name), metric, value, float(bound), kind, margin))
    return rows


def run_evaluation(
    chunks: Sequence[Chunk] | ChunkSource,
    fixture: Fixture | Path | str,
    thresholds: Mapping[Any, Any] | None = None,
    *,
    embeddings: EmbeddingStore | None = None,
    query_embedder: QueryEmbedder | None = None,
    query_model: str | None = None,
    retrievers: Sequence[str] = RETRIEVERS,
    progress: EvaluationProgress | None = None,
) -> tuple[EvaluationReport, list[str]]:
    """Evaluate and judge in one call: `(report, failures)`; passing means `not failures`.

    `fixture` may be a path (loaded and validated here; FixtureError when unusable).
    """
    loaded = fixture if isinstance(fixture, Fixture) else load_fixture(fixture)
    report = evaluate(
        chunks,
        loaded,
        embeddings=embeddings,
        query_embedder=query_embedder,
        query_model=query_model,
        retrievers=retrievers,
        progress=progress,
    )
    return report, check_thresholds(report, thresholds)
