"""Ranking metrics, computed for many queries at once.

Every metric works on a *gain matrix*: one row per query, one column per rank, holding
the relevance grade of the document retrieved at that rank (0 for unjudged or
irrelevant). Building that matrix is the only per-query Python loop; the metrics
themselves are a handful of numpy reductions over it.

The fixture metrics (as the agent defines them) use binary gains: recall@10 = found /
|relevant|, reciprocal rank of the first relevant hit (0 when none), and nDCG@10 with
gain 1/log2(i+2) against an ideal ranking of min(10, |relevant|) relevant hits. The BEIR
figures use the judged grade as a linear gain (trec_eval's nDCG), Recall@k and MRR@10.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def discounts(depth: int) -> FloatArray:
    """1/log2(i+2) for ranks i = 0..depth-1."""
    return 1.0 / np.log2(np.arange(depth, dtype=np.float64) + 2.0)


def gain_matrix(
    rankings: Sequence[Sequence[str]],
    judgments: Sequence[Mapping[str, float]],
    depth: int,
) -> FloatArray:
    """Grades of the retrieved ids, rank by rank, padded with zeros to `depth` columns.

    An id retrieved twice earns its grade only the first time, so a retriever cannot
    inflate recall by repeating a relevant document.
    """
    if len(rankings) != len(judgments):
        raise ValueError(f"{len(rankings)} rankings but {len(judgments)} judgment sets")
    gains = np.zeros((len(rankings), depth), dtype=np.float64)
    for row, (ranking, judged) in enumerate(zip(rankings, judgments, strict=True)):
        seen: set[str] = set()
        for col, doc_id in enumerate(ranking[:depth]):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            grade = judged.get(doc_id, 0.0)
            if grade > 0:
                gains[row, col] = grade
    return gains


def ideal_matrix(judgments: Sequence[Mapping[str, float]], depth: int) -> FloatArray:
    """Each query's positive grades sorted high to low, padded with zeros to `depth`."""
    ideal = np.zeros((len(judgments), depth), dtype=np.float64)
    for row, judged in enumerate(judgments):
        grades = sorted((g for g in judged.values() if g > 0), reverse=True)[:depth]
        ideal[row, : len(grades)] = grades
    return ideal


def relevant_counts(judgments: Sequence[Mapping[str, float]]) -> IntArray:
    """How many documents each query has with a positive grade."""
    return np.array([sum(1 for g in j.values() if g > 0) for j in judgments], dtype=np.int64)


def recall_at(gains: FloatArray, n_relevant: IntArray, k: int) -> FloatArray:
    """Relevant documents found in the top k, over all relevant documents (0 if none exist)."""
    found = np.count_nonzero(gains[:, :k] > 0, axis=1).astype(np.float64)
    out = np.zeros(len(gains), dtype=np.float64)
    np.divide(found, n_relevant, out=out, where=n_relevant > 0)
    return out


def first_relevant_rank(gains: FloatArray, k: int) -> IntArray:
    """1-based rank of the first relevant hit within the top k; 0 when there is none."""
    hits = gains[:, :k] > 0
    first = np.argmax(hits, axis=1) + 1
    return np.where(hits.any(axis=1), first, 0).astype(np.int64)


def reciprocal_rank_at(gains: FloatArray, k: int) -> FloatArray:
    """1 / rank of the first relevant hit within the top k; 0 when there is none."""
    rank = first_relevant_rank(gains, k).astype(np.float64)
    out = np.zeros(len(gains), dtype=np.float64)
    np.divide(1.0, rank, out=out, where=rank > 0)
    return out


def ndcg_at(gains: FloatArray, ideal: FloatArray, k: int) -> FloatArray:
    """DCG of the top k over the DCG of the ideal top k (linear gain); 0 with no relevant."""
    disc = discounts(k)
    dcg = gains[:, :k] @ disc[: gains[:, :k].shape[1]]
    idcg = ideal[:, :k] @ disc[: ideal[:, :k].shape[1]]
    out = np.zeros(len(gains), dtype=np.float64)
    np.divide(dcg, idcg, out=out, where=idcg > 0)
    return out


@dataclass(frozen=True)
class PerQuery:
    """The fixture metrics for each query, aligned with the input order."""

    first_rank: IntArray
    recall: FloatArray
    reciprocal_rank: FloatArray
    ndcg: FloatArray

    @property
    def misses(self) -> int:
        """Queries with reciprocal rank 0: nothing relevant in the top 10."""
        return int(np.count_nonzero(self.reciprocal_rank == 0))


def fixture_metrics(
    rankings: Sequence[Sequence[str]], relevant: Sequence[Sequence[str]], k: int = 10
) -> PerQuery:
    """recall@k, reciprocal rank and binary nDCG@k for each query, as the agent computes them."""
    judgments = [dict.fromkeys(ids, 1.0) for ids in relevant]
    gains = gain_matrix(rankings, judgments, k)
    ideal = ideal_matrix(judgments, k)
    return PerQuery(
        first_rank=first_relevant_rank(gains, k),
        recall=recall_at(gains, relevant_counts(judgments), k),
        reciprocal_rank=reciprocal_rank_at(gains, k),
        ndcg=ndcg_at(gains, ideal, k),
    )


@dataclass(frozen=True)
class BeirScores:
    """Mean figures over the queries of a BEIR split."""

    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    n_queries: int


def beir_scores(
    rankings: Sequence[Sequence[str]], judgments: Sequence[Mapping[str, float]]
) -> BeirScores:
    """Graded nDCG@10 (linear gain), Recall@10, Recall@100 and MRR@10, averaged."""
    depth = 100
    gains = gain_matrix(rankings, judgments, depth)
    ideal = ideal_matrix(judgments, depth)
    n_relevant = relevant_counts(judgments)

    def mean(values: FloatArray) -> float:
        return float(values.mean()) if len(values) else 0.0

    return BeirScores(
        ndcg_at_10=mean(ndcg_at(gains, ideal, 10)),
        recall_at_10=mean(recall_at(gains, n_relevant, 10)),
        recall_at_100=mean(recall_at(gains, n_relevant, 100)),
        mrr_at_10=mean(reciprocal_rank_at(gains, 10)),
        n_queries=len(rankings),
    )
