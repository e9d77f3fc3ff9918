"""Ranking metrics against numbers derived by hand from their definitions."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from brain_pipeline.evaluation.metrics import (
    beir_scores,
    fixture_metrics,
    gain_matrix,
    ideal_matrix,
    ndcg_at,
    recall_at,
    reciprocal_rank_at,
    relevant_counts,
)


def log2_discount(position: int) -> float:
    """Gain of a relevant hit at 0-based position i: 1 / log2(i + 2)."""
    return 1.0 / math.log2(position + 2)


def test_ndcg_of_a_known_ranking() -> None:
    # Relevant a, b, c; retrieved x, a, y, b: hits at positions 1 and 3.
    per = fixture_metrics([["x", "a", "y", "b"]], [["a", "b", "c"]])
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert per.ndcg[0] == pytest.approx(dcg / ideal)
    assert per.recall[0] == pytest.approx(2 / 3)
    assert per.reciprocal_rank[0] == pytest.approx(1 / 2)
    assert per.first_rank[0] == 2


def test_ideal_is_capped_at_ten_relevant() -> None:
    relevant = [f"r{i}" for i in range(12)]
    per = fixture_metrics([relevant[:10]], [relevant])
    assert per.ndcg[0] == pytest.approx(1.0)
    assert per.recall[0] == pytest.approx(10 / 12)


def test_only_the_top_ten_count() -> None:
    ranking = [f"x{i}" for i in range(10)] + ["a"]
    per = fixture_metrics([ranking], [["a"]])
    assert per.recall[0] == 0.0
    assert per.reciprocal_rank[0] == 0.0
    assert per.ndcg[0] == 0.0
    assert per.first_rank[0] == 0
    assert per.misses == 1


def test_reciprocal_rank_uses_the_first_relevant_hit() -> None:
    per = fixture_metrics([["x", "y", "b", "a"], ["a"], []], [["a", "b"], ["a"], ["a"]])
    assert per.reciprocal_rank.tolist() == pytest.approx([1 / 3, 1.0, 0.0])
    assert per.first_rank.tolist() == [3, 1, 0]
    assert per.misses == 1


def test_a_repeated_hit_counts_once() -> None:
    per = fixture_metrics([["a", "a", "b"]], [["a", "b"]])
    assert per.recall[0] == pytest.approx(1.0)
    dcg = 1 / math.log2(2) + 1 / math.log2(4)  # second "a" earns nothing
    ideal = 1 / math.log2(2) + 1 / math.log2(3)
    assert per.ndcg[0] == pytest.approx(dcg / ideal)


def test_graded_ndcg_uses_linear_gain() -> None:
    judged = [{"a": 2.0, "b": 1.0}]
    gains = gain_matrix([["b", "a"]], judged, 10)
    ideal = ideal_matrix(judged, 10)
    dcg = 1.0 / math.log2(2) + 2.0 / math.log2(3)
    best = 2.0 / math.log2(2) + 1.0 / math.log2(3)
    assert ndcg_at(gains, ideal, 10)[0] == pytest.approx(dcg / best)


def test_beir_scores_recall_at_100_and_mrr_at_10() -> None:
    ranking = [f"x{i}" for i in range(100)]
    ranking[49] = "a"  # rank 50
    ranking[10] = "b"  # rank 11: outside MRR@10 and Recall@10
    judged = [{"a": 1.0, "b": 1.0, "c": 1.0, "zero": 0.0}]
    scores = beir_scores([ranking], judged)
    assert scores.recall_at_100 == pytest.approx(2 / 3)  # grade 0 is not relevant
    assert scores.recall_at_10 == 0.0
    assert scores.mrr_at_10 == 0.0
    assert scores.ndcg_at_10 == 0.0
    assert scores.n_queries == 1


def _naive(ranking: list[str], relevant: set[str], k: int) -> tuple[float, float, float]:
    """recall, RR and binary nDCG one query at a time, straight from the definitions."""
    top = ranking[:k]  # the random rankings below have no repeats
    found = [i for i, doc in enumerate(top) if doc in relevant]
    recall = len(found) / len(relevant)
    rr = 1 / (found[0] + 1) if found else 0.0
    dcg = sum(log2_discount(i) for i in found)
    idcg = sum(log2_discount(i) for i in range(min(k, len(relevant))))
    return recall, rr, dcg / idcg


def test_vectorised_metrics_match_the_per_query_definition() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(40)]
    rankings, relevant = [], []
    for _ in range(200):
        rankings.append(rng.sample(docs, rng.randint(0, 15)))
        relevant.append(rng.sample(docs, rng.randint(1, 12)))
    per = fixture_metrics(rankings, relevant, 10)
    for row, (ranking, rel) in enumerate(zip(rankings, relevant, strict=True)):
        recall, rr, ndcg = _naive(ranking, set(rel), 10)
        assert per.recall[row] == pytest.approx(recall)
        assert per.reciprocal_rank[row] == pytest.approx(rr)
        assert per.ndcg[row] == pytest.approx(ndcg)


def test_queries_without_relevant_documents_score_zero() -> None:
    judged = [{"a": 0.0}]
    gains = gain_matrix([["a"]], judged, 10)
    assert recall_at(gains, relevant_counts(judged), 10)[0] == 0.0
    assert reciprocal_rank_at(gains, 10)[0] == 0.0
    assert ndcg_at(gains, ideal_matrix(judged, 10), 10)[0] == 0.0
    assert np.all(gains == 0)
