"""The vectorised BM25 index must rank exactly like the per-document reference."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from brain_pipeline.retrieval.bm25 import BM25Index, reference_search

VOCAB = [
    "apple", "apples", "banana", "cherry", "cherries", "data", "datum", "box", "boxes",
    "the", "of", "and", "x", "7", "42", "study", "studies", "Matrix", "matrices", "zeta",
]  # fmt: skip


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [doc_id for doc_id, _ in got] == [doc_id for doc_id, _ in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert math.isclose(g, w, rel_tol=1e-9), (g, w)


def random_text(rng: random.Random, max_words: int) -> str:
    return rng.choice([" ", ", ", "-"]).join(
        rng.choice(VOCAB) for _ in range(rng.randint(0, max_words))
    )


def test_matches_reference_on_random_corpora() -> None:
    rng = random.Random(2024)
    for _ in range(400):
        n_docs = rng.randint(0, 40)
        texts = [random_text(rng, 15) for _ in range(n_docs)]
        # Few distinct ids on purpose: duplicate ids and many exact score ties.
        ids = [f"d{rng.randint(0, 60):02d}" for _ in range(n_docs)]
        if rng.random() < 0.3:  # identical documents under different ids tie exactly
            texts = [texts[0] if texts else ""] * n_docs
        index = BM25Index.build(ids, texts)
        assert len(index) == n_docs
        for _ in range(6):
            query = random_text(rng, 6)
            limit = rng.randint(0, 15)
            assert_same_ranking(
                index.search(query, limit), reference_search(ids, texts, query, limit)
            )


def test_matches_reference_with_other_parameters() -> None:
    rng = random.Random(5)
    texts = [random_text(rng, 30) for _ in range(200)]
    ids = [f"{i:04d}" for i in rng.sample(range(10_000), 200)]
    for k1, b in [(0.9, 0.4), (2.0, 1.0), (1.2, 0.0)]:
        index = BM25Index.build(ids, texts, k1=k1, b=b)
        for query in ["apple cherry boxes", "the of and", "matrices data study 42"]:
            assert_same_ranking(
                index.search(query, 25), reference_search(ids, texts, query, 25, k1=k1, b=b)
            )


def test_scores_follow_the_formula() -> None:
    ids = ["d1", "d2", "d3"]
    texts = ["apple banana", "Apples apple cherry", ""]
    n, df, avgdl = 3, 2, 5 / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def weight(tf: int, dl: int) -> float:
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))

    hits = BM25Index.build(ids, texts).search("apple", 10)
    assert [doc_id for doc_id, _ in hits] == ["d2", "d1"]
    assert hits[0][1] == pytest.approx(weight(2, 3), rel=1e-12)
    assert hits[1][1] == pytest.approx(weight(1, 2), rel=1e-12)


def test_ties_are_broken_by_id_ascending_even_at_the_cut() -> None:
    ids = ["m", "c", "x", "a", "q", "b"]
    texts = ["alpha words here"] * 5 + ["words"]
    index = BM25Index.build(ids, texts)
    assert [doc_id for doc_id, _ in index.search("alpha", 3)] == ["a", "c", "m"]
    assert [doc_id for doc_id, _ in index.search("alpha words", 10)] == [
        "a", "c", "m", "q", "x", "b",
    ]  # fmt: skip


def test_query_terms_are_deduplicated() -> None:
    index = BM25Index.build(["1", "2"], ["apple pie", "apple apple tart"])
    assert index.search("apple apples APPLE", 5) == index.search("apple", 5)
    assert index.search_tokens(["apple", "apple"], 5) == index.search_tokens(["apple"], 5)


def test_queries_without_indexed_terms_find_nothing() -> None:
    index = BM25Index.build(["1", "2"], ["apple pie", ""])
    assert index.search("the of and", 5) == []
    assert index.search("", 5) == []
    assert index.search("unknownword", 5) == []
    assert index.search_tokens([], 5) == []


def test_only_positive_matches_are_returned() -> None:
    index = BM25Index.build(["1", "2", "3"], ["apple", "pear", "plum"])
    assert [doc_id for doc_id, _ in index.search("apple", 10)] == ["1"]


def test_non_positive_limit_returns_nothing() -> None:
    index = BM25Index.build(["1"], ["apple"])
    assert index.search("apple", 0) == []
    assert index.search("apple", -3) == []
    assert reference_search(["1"], ["apple"], "apple", 0) == []


def test_search_tokens_takes_already_tokenized_terms() -> None:
    index = BM25Index.build(["1", "2"], ["studies of cherries", "one study"])
    # "studies" is not a term (the index holds stems), so only "study" counts.
    assert index.search_tokens(["studies", "study"], 5) == index.search("study", 5)


def test_empty_index() -> None:
    index = BM25Index.build([], [])
    assert len(index) == 0
    assert index.search("apple", 10) == []
    assert reference_search([], [], "apple", 10) == []


def test_ids_and_texts_must_pair_up() -> None:
    with pytest.raises(ValueError, match="one text per id"):
        BM25Index.build(["1", "2"], ["only one"])


def test_masked_layers_score_like_one_index_over_the_live_documents() -> None:
    """An index of several sets of postings with masks equals a fresh index over the
    documents left live, bit for bit (collection statistics come from live ones)."""
    rng = random.Random(77)
    for _ in range(200):
        n = rng.randint(1, 45)
        ids = [f"{i:03d}" for i in rng.sample(range(1000), n)]
        texts = [random_text(rng, 15) for _ in range(n)]
        groups: list[list[int]] = [[] for _ in range(rng.randint(1, 3))]
        for i in range(n):
            groups[rng.randrange(len(groups))].append(i)
        parts, masks, live = [], [], []
        for group in groups:
            built = BM25Index.build([ids[i] for i in group], [texts[i] for i in group])
            parts.append(built.parts[0])
            mask = np.array([rng.random() < 0.7 for _ in group], dtype=bool)
            masks.append(None if mask.all() and rng.random() < 0.5 else mask)
            live += [i for i, keep in zip(group, mask.tolist(), strict=True) if keep]
        layered = BM25Index(parts, masks)
        fresh = BM25Index.build([ids[i] for i in live], [texts[i] for i in live])
        assert len(layered) == len(live)
        for _ in range(5):
            query = random_text(rng, 6)
            limit = rng.randint(1, 15)
            assert layered.search(query, limit) == fresh.search(query, limit)
