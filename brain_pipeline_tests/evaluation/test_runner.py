"""The evaluation runner on a small synthetic store: figures, fallbacks, thresholds."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain_pipeline.config import Thresholds
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.reports import report_markdown, report_text
from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
from brain_pipeline.evaluation.verdict import judge
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize
from brain_pipeline_tests.evaluation.helpers import WordHashEmbedder


def fixture_of(*queries: tuple[str, str, list[str]]) -> Fixture:
    return Fixture(tuple(LabelledQuery(q, a, tuple(r)) for q, a, r in queries), "test.json")


def check_thresholds(
    report: EvaluationReport, thresholds: Mapping[Any, Any] | None = None
) -> list[str]:
    """The verdict's failures for `report` (judged by `verdict.judge`, the one judge)."""
    return list(judge(report, thresholds).failures)


def run_evaluation(
    store: list[Chunk], fixture: Fixture | Path, thresholds: Mapping[Any, Any] | None = None
) -> tuple[EvaluationReport, list[str]]:
    report = evaluate(store, fixture)
    return report, check_thresholds(report, thresholds)


def embeddings_for(chunks: list[Chunk], embedder: WordHashEmbedder) -> EmbeddingStore:
    vectors = quantize(embedder.embed_documents([c.content for c in chunks]))
    return EmbeddingStore(embedder.name, embedder.dimension, [c.id for c in chunks], vectors)


@pytest.fixture
def fixture(store: list[Chunk]) -> Fixture:
    vpc, s3, iam, subnet, _, lists, _ = store
    return fixture_of(
        ("private network vpc", "aws", [vpc.id, subnet.id]),
        ("buckets versioning", "aws", [s3.id]),
        ("temporary credentials", "aws", [iam.id]),
        ("ordered mutable lists", "python", [lists.id]),
        ("kubernetes pods", "aws", [iam.id]),  # a query nothing answers
    )


def test_report_has_every_retriever_and_query(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture)
    assert [s.name for s in report.retrievers] == ["legacy", "bm25", "hybrid"]
    assert len(report.queries) == 3 * 5
    assert report.n_chunks == len(store)
    assert report.stale_ids == [] and report.unknown_areas == []
    for summary in report.retrievers:
        assert summary.n_queries == 5
        assert summary.misses == 1  # "kubernetes pods"
    miss = [q for q in report.queries if q.query == "kubernetes pods"]
    assert all(q.first_relevant_rank is None and q.rr == 0 for q in miss)


def test_single_relevant_at_rank_one_scores_one(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture, retrievers=("bm25",))
    row = next(q for q in report.queries if q.query == "buckets versioning")
    assert row.top_ids[0] == store[1].id
    assert (row.first_relevant_rank, row.recall, row.rr, row.ndcg) == (1, 1.0, 1.0, 1.0)


def test_two_relevant_found_at_ranks_one_and_two(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture, retrievers=("legacy",))
    row = next(q for q in report.queries if q.query == "private network vpc")
    # legacy: the VPC passage matches 3 terms ("private", "network", "vpc"), the subnet one 1.
    assert row.top_ids[:2] == [store[0].id, store[3].id]
    assert row.ndcg == pytest.approx(1.0)
    summary = report.summary("legacy")
    assert summary is not None
    assert summary.recall_at_10 == pytest.approx(4 / 5)
    assert summary.mrr == pytest.approx(4 / 5)


def test_aggregates_are_means_of_the_rows(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture)
    for summary in report.retrievers:
        rows = [q for q in report.queries if q.retriever == summary.name]
        assert summary.ndcg_at_10 == pytest.approx(sum(r.ndcg for r in rows) / len(rows))
        assert summary.mrr == pytest.approx(sum(r.rr for r in rows) / len(rows))
        assert summary.recall_at_10 == pytest.approx(sum(r.recall for r in rows) / len(rows))


def test_hybrid_without_vectors_says_it_is_bm25(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture)
    hybrid, bm25 = report.summary("hybrid"), report.summary("bm25")
    assert hybrid is not None and bm25 is not None
    assert hybrid.fell_back_entirely
    assert hybrid.fallback is not None and "no query embedder" in hybrid.fallback
    assert (hybrid.ndcg_at_10, hybrid.mrr) == (bm25.ndcg_at_10, bm25.mrr)
    markdown = report_markdown(report)
    assert "| hybrid (= bm25) |" in markdown
    assert "its figures are BM25's" in markdown
    assert "(= bm25)" in report_text(report)


def test_hybrid_with_vectors_fuses(
    store: list[Chunk], fixture: Fixture, embedder: WordHashEmbedder
) -> None:
    report = evaluate(
        store,
        fixture,
        embeddings=embeddings_for(store, embedder),
        query_embedder=embedder.embed_query,
        query_model=embedder.name,
    )
    hybrid = report.summary("hybrid")
    assert hybrid is not None
    assert hybrid.fallback_queries == 0 and hybrid.fallback is None
    assert {q.mode for q in report.queries if q.retriever == "hybrid"} == {"hybrid"}
    assert "(= bm25)" not in report_markdown(report)
    assert embedder.queries_embedded == 5


def test_model_mismatch_falls_back_with_the_reason(
    store: list[Chunk], fixture: Fixture, embedder: WordHashEmbedder
) -> None:
    report = evaluate(
        store,
        fixture,
        embeddings=embeddings_for(store, embedder),
        query_embedder=embedder.embed_query,
        query_model="another-model",
        retrievers=("hybrid",),
    )
    hybrid = report.summary("hybrid")
    assert hybrid is not None and hybrid.fallback is not None
    assert "model mismatch" in hybrid.fallback


def test_stale_labels_fail(store: list[Chunk]) -> None:
    fixture = fixture_of(("vpc", "aws", [store[0].id, "0123456789ab"]))
    report, failures = run_evaluation(store, fixture)
    assert report.stale_ids == ["0123456789ab"]
    assert len(failures) == 1 and "0123456789ab" in failures[0] and "stale" in failures[0]
    assert "Stale fixture" in report_markdown(report)


def test_unknown_area_and_empty_store_fail(store: list[Chunk]) -> None:
    fixture = fixture_of(("vpc", "nowhere", [store[0].id]))
    report, failures = run_evaluation(store, fixture)
    assert report.unknown_areas == ["nowhere"]
    assert any("nowhere" in f for f in failures)
    empty_report, empty_failures = run_evaluation([], fixture)
    assert any("empty" in f for f in empty_failures)
    assert empty_report.n_chunks == 0


def test_thresholds_pass_and_fail_at_the_bounds(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture)
    bm25 = report.summary("bm25")
    assert bm25 is not None
    exact = {"bm25": Thresholds(min_ndcg_at_10=math.floor(bm25.ndcg_at_10 * 1000) / 1000)}
    assert check_thresholds(report, exact) == []
    assert check_thresholds(report, {"bm25": {"max_misses": 1}}) == []
    failures = check_thresholds(
        report,
        {
            "bm25": Thresholds(min_ndcg_at_10=1.0, min_recall_at_10=1.0),
            "legacy": Thresholds(max_misses=0),
        },
    )
    assert len(failures) == 3
    assert failures[0].startswith("bm25: nDCG@10")
    assert failures[1].startswith("bm25: recall@10")
    assert failures[2] == "legacy: 1 misses > maximum 0"


def test_a_bound_for_an_unevaluated_retriever_fails(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture, retrievers=("legacy",))
    assert check_thresholds(report, {"hybrid": Thresholds(max_misses=3)}) == [
        "hybrid: thresholds are configured but hybrid was not evaluated"
    ]


def test_flat_metrics_and_json(store: list[Chunk], fixture: Fixture) -> None:
    report = evaluate(store, fixture)
    flat = report.flat_metrics()
    for name in ("legacy", "bm25", "hybrid"):
        for metric in ("recall_at_10", "mrr", "ndcg_at_10", "misses"):
            assert isinstance(flat[f"{name}.{metric}"], float)
    assert flat["hybrid.fallback_queries"] == 5.0
    assert flat["queries"] == 5.0 and flat["stale_ids"] == 0.0
    assert np.isclose(flat["bm25.ndcg_at_10"], report.retrievers[1].ndcg_at_10)
    decoded = json.loads(json.dumps(report.to_dict()))
    assert decoded["retrievers"][0]["name"] == "legacy"
    assert len(decoded["queries"]) == 15


def test_markdown_rank_table_marks_misses(store: list[Chunk], fixture: Fixture) -> None:
    lines = report_markdown(evaluate(store, fixture)).splitlines()
    row = next(line for line in lines if line.startswith("| kubernetes pods |"))
    assert row == "| kubernetes pods | aws | — | — | — |"


def test_evaluate_loads_a_fixture_path(tmp_path: Path, store: list[Chunk]) -> None:
    path = tmp_path / "fixture.json"
    path.write_text(
        json.dumps({"queries": [{"query": "vpc", "area": "aws", "relevant": [store[0].id]}]})
    )
    report, failures = run_evaluation(store, path, {"bm25": Thresholds(min_recall_at_10=1.0)})
    assert failures == []
    assert report.fixture_source == str(path)


def test_unknown_retriever_is_refused(store: list[Chunk], fixture: Fixture) -> None:
    with pytest.raises(ValueError, match="unknown retriever"):
        evaluate(store, fixture, retrievers=("grep",))
