"""BM25 over the agent's tokens: an exact, vectorised index and the plain reference.

The index is column-compressed by term (like a CSC matrix without scipy): for term t,
`docs[indptr[t]:indptr[t+1]]` are the documents containing it and `weights[...]` their
precomputed BM25 contributions idf(t) * tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl)). A query
therefore touches only the postings of its own terms.

Exactness: each weight is computed with the same IEEE operations, in the same order, as
`reference_search`, and idf uses `math.log` (numpy's SIMD log may differ in the last
bit). Accumulating postings in query-term order with `np.bincount` adds the same numbers
in the same order as the per-document loop, so scores are bit-identical and ties stay
ties; ties are then broken by id ascending, exactly as the reference sorts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import chain

import numpy as np
import numpy.typing as npt

from brain_pipeline.retrieval.text import raw_words, term_of, tokenize

K1 = 1.2
B = 0.75


def _idf(n_docs: int, df: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)), always positive."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def _unique_in_order(terms: Sequence[str]) -> list[str]:
    """The agent de-duplicates query terms; first occurrence fixes the summation order."""
    return list(dict.fromkeys(terms))


def reference_search(
    ids: Sequence[str],
    texts: Sequence[str],
    query: str,
    limit: int,
    *,
    k1: float = K1,
    b: float = B,
) -> list[tuple[str, float]]:
    """BM25 by its plain definition, one document at a time: the yardstick for the index."""
    if limit <= 0:
        return []
    docs = [Counter(tokenize(text)) for text in texts]
    lengths = [sum(doc.values()) for doc in docs]
    n_docs = len(docs)
    avgdl = sum(lengths) / n_docs if n_docs else 0.0
    df: Counter[str] = Counter()
    for doc in docs:
        df.update(doc.keys())
    terms = _unique_in_order(tokenize(query))
    scored: list[tuple[str, float]] = []
    for doc_id, doc, dl in zip(ids, docs, lengths, strict=True):
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf == 0:
                continue
            idf = _idf(n_docs, df[term])
            score += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / avgdl))
        if score > 0:
            scored.append((doc_id, score))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored[:limit]


class BM25Index:
    """An immutable BM25 index over one set of documents (one area), built once."""

    def __init__(
        self,
        ids: list[str],
        vocabulary: dict[str, int],
        indptr: npt.NDArray[np.int64],
        docs: npt.NDArray[np.int32],
        weights: npt.NDArray[np.float64],
        id_rank: npt.NDArray[np.int64],
    ) -> None:
        self.ids = ids
        self.vocabulary = vocabulary
        bounds = indptr.tolist()
        # term -> (start, stop) of its postings: one dict lookup per query term.
        self._spans = {term: (bounds[t], bounds[t + 1]) for term, t in vocabulary.items()}
        self._docs = docs
        self._weights = weights
        self._id_rank = id_rank

    @classmethod
    def build(
        cls,
        ids: Sequence[str],
        texts: Sequence[str],
        *,
        k1: float = K1,
        b: float = B,
    ) -> BM25Index:
        """Tokenise every text once and lay the postings out term by term."""
        if len(ids) != len(texts):
            raise ValueError(f"need one text per id: {len(ids)} ids, {len(texts)} texts")
        n_docs = len(ids)
        term_ids, token_docs, vocabulary = _term_ids_of(texts)
        lengths = np.bincount(token_docs, minlength=n_docs)
        avgdl = float(lengths.sum()) / n_docs if n_docs else 0.0

        # One (term, doc) key per kept token; unique keys sorted term-major are the postings.
        keys = term_ids.astype(np.int64) * max(n_docs, 1) + token_docs
        pair_keys, tf = np.unique(keys, return_counts=True)
        post_terms = pair_keys // max(n_docs, 1)
        post_docs = (pair_keys - post_terms * max(n_docs, 1)).astype(np.int32)
        df = np.bincount(post_terms, minlength=len(vocabulary))
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])

        idf = np.array([_idf(n_docs, int(d)) for d in df.tolist()], dtype=np.float64)
        tf_f = tf.astype(np.float64)
        dl = lengths[post_docs].astype(np.float64)
        # Same operation order as reference_search, element by element.
        weights = idf[post_terms] * (tf_f * (k1 + 1)) / (tf_f + k1 * (1 - b + b * dl / avgdl))

        id_list = list(ids)
        id_rank = np.empty(n_docs, dtype=np.int64)
        id_rank[sorted(range(n_docs), key=id_list.__getitem__)] = np.arange(n_docs)
        return cls(id_list, vocabulary, indptr, post_docs, weights, id_rank)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for a raw query string."""
        return self.search_tokens(tokenize(query), limit)

    def search_tokens(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for already-tokenised terms (duplicates are ignored)."""
        scores = self._scores(terms)
        if scores is None or limit <= 0:
            return []
        rows = _top_rows(scores, self._id_rank, limit)
        ids = self.ids
        top_scores = scores[rows].tolist()
        return [(ids[row], top_scores[i]) for i, row in enumerate(rows.tolist())]

    def _scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64] | None:
        """Dense score vector over all documents, or None when no term is indexed."""
        spans = self._spans
        slices = [spans[term] for term in _unique_in_order(terms) if term in spans]
        if not slices:
            return None
        if len(slices) == 1:
            start, stop = slices[0]
            docs, weights = self._docs[start:stop], self._weights[start:stop]
        else:
            docs = np.concatenate([self._docs[s:e] for s, e in slices])
            weights = np.concatenate([self._weights[s:e] for s, e in slices])
        summed = np.bincount(docs, weights=weights, minlength=len(self.ids))
        return summed.astype(np.float64, copy=False)


def _term_ids_of(
    texts: Sequence[str],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], dict[str, int]]:
    """Every kept token as (term id, document index), plus the term vocabulary.

    Per-token Python work is limited to one C-level dict lookup via `map`: filtering and
    stemming run once per distinct raw word, not once per token.
    """
    words_per_doc = [raw_words(text) for text in texts]
    counts = np.fromiter(map(len, words_per_doc), dtype=np.int64, count=len(texts))
    flat = list(chain.from_iterable(words_per_doc))
    distinct: dict[bytes, int] = {}
    vocabulary: dict[str, int] = {}
    for word in dict.fromkeys(flat):
        term = term_of(word)
        # -1 marks a dropped word (too short or a stopword); those tokens are removed below.
        distinct[word] = vocabulary.setdefault(term, len(vocabulary)) if term else -1
    word_term = np.fromiter(map(distinct.__getitem__, flat), dtype=np.int64, count=len(flat))
    token_docs = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
    kept = word_term >= 0
    return word_term[kept], token_docs[kept], vocabulary


def _top_rows(
    scores: npt.NDArray[np.float64], id_rank: npt.NDArray[np.int64], limit: int
) -> npt.NDArray[np.intp]:
    """Rows of the `limit` best positive scores, by score desc then id asc.

    argpartition finds the limit-th best score; every row tied with it is kept as a
    candidate so the id tie-break is exact, then only the candidates are sorted.
    """
    positive = np.flatnonzero(scores > 0)
    if len(positive) > limit:
        cut = np.partition(scores[positive], len(positive) - limit)[len(positive) - limit]
        positive = positive[scores[positive] >= cut]
    order = np.lexsort((id_rank[positive], -scores[positive]))
    return positive[order[:limit]]
