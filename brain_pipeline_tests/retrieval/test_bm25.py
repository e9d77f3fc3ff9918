"""The vectorised BM25 index must rank exactly like the per-document reference."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from brain_pipeline.retrieval import bm25 as bm25_module
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline_tests.retrieval.reference_bm25 import ReferenceBM25, reference_search

VOCAB = [
    "apple", "apples", "banana", "cherry", "cherries", "data", "datum", "box", "boxes",
    "the", "of", "and", "x", "7", "42", "study", "studies", "Matrix", "matrices", "zeta",
]  # fmt: skip


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """Same ids in the same order with bit-identical scores."""
    assert [doc_id for doc_id, _ in got] == [doc_id for doc_id, _ in want]
    assert [score.hex() for _, score in got] == [score.hex() for _, score in want]


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
        reference = ReferenceBM25([ids[i] for i in live], [texts[i] for i in live])
        assert len(layered) == len(live)
        for _ in range(5):
            query = random_text(rng, 6)
            limit = rng.randint(1, 15)
            assert layered.search(query, limit) == fresh.search(query, limit)
            assert_same_ranking(layered.search(query, limit), reference.search(query, limit))


def zipf_corpus(rng: random.Random, n_docs: int, vocabulary: int) -> list[str]:
    """Documents of 0-120 words drawn with Zipf-like frequencies: long postings for the
    frequent words, many rare ones, and (with the short documents) exact score ties."""
    words = [f"w{k}" for k in range(vocabulary)] + ["the", "of", "data", "studies"]
    weights = [1 / (k + 1) ** 1.1 for k in range(len(words))]
    return [
        " ".join(rng.choices(words, weights, k=rng.choice([0, 1, 2, 5, 20, 60, 120])))
        for _ in range(n_docs)
    ]


@pytest.mark.parametrize("depth", [10, 100])
def test_top_k_is_bit_identical_to_the_reference_on_a_zipf_corpus(depth: int) -> None:
    rng = random.Random(depth)
    texts = zipf_corpus(rng, 1500, 3000)
    ids = [f"doc{rng.randrange(10**6):06d}" for _ in texts]  # some ids repeat
    index = BM25Index.build(ids, texts)
    reference = ReferenceBM25(ids, texts)
    vocabulary = sorted({w for t in texts for w in t.split()})
    for _ in range(40):
        query = " ".join(rng.choices(vocabulary, k=rng.randint(1, 12)))
        assert_same_ranking(index.search(query, depth), reference.search(query, depth))


def test_layered_masked_top_k_is_bit_identical_to_the_reference_on_a_zipf_corpus() -> None:
    """An edit's index (the old postings masked, new ones added) at depths 10 and 100,
    asked every query twice (the second time from the weights it kept)."""
    rng = random.Random(3)
    texts = zipf_corpus(rng, 1200, 2000)
    ids = [f"c{k:05d}" for k in range(len(texts))]
    base = BM25Index.build(ids[:1000], texts[:1000]).parts[0]
    added = BM25Index.build(ids[1000:], texts[1000:]).parts[0]
    mask = np.array([rng.random() < 0.9 for _ in range(1000)], dtype=bool)
    layered = BM25Index([base, added], [mask, None])
    live = [k for k in range(1000) if mask[k]] + list(range(1000, len(texts)))
    reference = ReferenceBM25([ids[k] for k in live], [texts[k] for k in live])
    vocabulary = sorted({w for t in texts for w in t.split()})
    queries = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 10))) for _ in range(30)]
    for _ in range(2):
        for query in queries:
            for depth in (10, 100):
                assert_same_ranking(layered.search(query, depth), reference.search(query, depth))


def test_an_index_of_loaded_postings_weighs_like_a_built_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Postings wrapped without `build` are weighed term by term on first use; with a
    tiny budget the kept weights are forgotten and made again: same answers throughout."""
    rng = random.Random(11)
    texts = zipf_corpus(rng, 400, 600)
    ids = [f"{k:04d}" for k in range(len(texts))]
    built = BM25Index.build(ids, texts)
    queries = [" ".join(rng.choices(texts[k].split() or ["w1"], k=4)) for k in range(40)]
    for budget in (1 << 22, 50):
        monkeypatch.setattr(bm25_module, "_WEIGHED_POSTINGS", budget)
        wrapped = BM25Index(built.parts)
        for query in queries * 2:
            assert wrapped.search(query, 20) == built.search(query, 20)


def test_ids_decode_the_same_before_and_after_the_index_keeps_them_decoded() -> None:
    """Hits are decoded one by one at first, from a list of every id later; UTF-8 ids."""
    ids = ["é-1", "b", "ü-2", "a", "日本"]
    texts = ["apple pie", "apple", "apple tart crumble", "pear", "apple apple"]
    index = BM25Index.build(ids, texts)
    first = index.search("apple", 10)
    for _ in range(10):
        assert index.search("apple", 10) == first
    assert [doc for doc, _ in first][0] == "日本"
    assert sorted(doc for doc, _ in first) == sorted(["é-1", "b", "ü-2", "日本"])


def test_ties_across_the_cut_and_within_it_follow_the_ids() -> None:
    """Many exact ties: the k-th best score is shared by rows inside and outside the top
    k, and ties inside it are ordered by id (equal ids keep their document order)."""
    rng = random.Random(8)
    texts = [rng.choice(["alpha beta", "alpha", "beta gamma", "alpha beta"]) for _ in range(300)]
    ids = [f"{rng.randrange(120):03d}" for _ in texts]
    index = BM25Index.build(ids, texts)
    reference = ReferenceBM25(ids, texts)
    for query in ("alpha", "beta", "alpha beta", "gamma alpha"):
        for depth in (1, 7, 10, 100, 299, 400):
            assert_same_ranking(index.search(query, depth), reference.search(query, depth))


@pytest.mark.parametrize(("weigh_all_up_to", "block"), [(1 << 21, 7), (10, 1 << 20)])
def test_built_indexes_weigh_in_blocks_or_term_by_term_alike(
    monkeypatch: pytest.MonkeyPatch, weigh_all_up_to: int, block: int
) -> None:
    """All weights made at build in small blocks, or (a big index) none until a term is
    asked: bit-identical to the reference either way."""
    monkeypatch.setattr(bm25_module, "_WEIGH_ALL_UP_TO", weigh_all_up_to)
    monkeypatch.setattr(bm25_module, "_BLOCK", block)
    rng = random.Random(weigh_all_up_to)
    texts = zipf_corpus(rng, 300, 500)
    ids = [f"{k:04d}" for k in range(len(texts))]
    index = BM25Index.build(ids, texts)
    assert (index._weights is None) == (weigh_all_up_to == 10)
    reference = ReferenceBM25(ids, texts)
    for k in range(30):
        query = " ".join(rng.choices(texts[k].split() or ["w1"], k=5))
        assert_same_ranking(index.search(query, 50), reference.search(query, 50))
