"""BM25 over the agent's tokens: an exact, vectorised index.

Postings are column-compressed by term (like a CSC matrix without scipy): for term t,
`docs[indptr[t]:indptr[t+1]]` are the documents containing it and `tf[...]` its count
in each. Postings keep counts rather than weights, which is what lets an area's postings
outlive an edit of the area (see `BM25Index`). Weights,
idf(t) * tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl)) with the collection statistics of the
live documents, are made per index version, which fixes those statistics: all at once
by `BM25Index.build`, else term by term on a term's first query (and then kept). A query
is one gather of its terms' weighed postings, one `np.bincount`, and a top-k that sorts
only the rows tied with or above the k-th best score.

Exactness: each weight is computed with the same IEEE operations, in the same order, as
the per-document definition (the reference implementation in the tests: the length part
`k1*(1-b+b*dl/avgdl)` is evaluated once per document, with the same operations), and idf
uses `math.log` (numpy's SIMD log may differ in the last bit). Accumulating postings in
query-term order with `np.bincount` adds the same numbers in the same order as the
per-document loop, so scores are bit-identical and ties stay ties; ties are then broken
by id ascending, exactly as the reference sorts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain, count
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.retrieval.text import raw_words, term_of, tokenize

K1 = 1.2
B = 0.75
_BLOCK = 1 << 20
"""Postings per step when assembling (bounds the temporaries of ~11M postings)."""
_WEIGH_ALL_UP_TO = 1 << 21
"""`build` weighs every posting of an index up to this size (16 MB of weights; SciFact
has 0.47M postings). Bigger ones weigh a term on its first query: an area of a quarter
of a million chunks (~8-11M postings) would hold 64-90 MB more, mostly never asked."""
_WEIGHED_POSTINGS = 1 << 22
"""Weighed postings an index keeps for the terms it was asked (~50 MB); then it forgets."""

_Weighed = tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.float64]]
"""A term's live documents (numbered across the sets of postings) and their weights."""
_MISSING: Any = object()


def _idf(n_docs: int, df: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)), always positive."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


class BM25Postings:
    """Term-major term frequencies of one set of documents, and their lengths.

    The raw counts, not BM25 weights: weights depend on the collection's size, average
    length and document frequencies, which change whenever any document of the area
    does. Counts do not, so a set of postings built once can serve later versions of
    its area with some of its documents masked out (see `BM25Index`).
    """

    def __init__(
        self,
        ids: npt.NDArray[np.bytes_],
        terms: list[str],
        indptr: npt.NDArray[np.int64],
        docs: npt.NDArray[np.int32],
        tf: npt.NDArray[np.int32],
        lengths: npt.NDArray[np.int64],
    ) -> None:
        self.ids = ids
        self.terms = terms
        self.indptr = indptr
        self.docs = docs
        self.tf = tf
        self.lengths = lengths
        self._spans: dict[str, tuple[int, int]] | None = None
        self._term_pos: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def from_postings(
        cls,
        ids: npt.NDArray[np.bytes_],
        terms: list[str],
        post_terms: npt.NDArray[np.integer[Any]],
        post_docs: npt.NDArray[np.integer[Any]],
        tf: npt.NDArray[np.integer[Any]],
    ) -> BM25Postings:
        """Postings sorted by (term, document), one per distinct pair; inputs may be int32
        (at a quarter of a million documents, ~11M postings: ~45 MB per int32 array)."""
        n_docs, n_terms = len(ids), len(terms)
        totals = np.zeros(n_docs, dtype=np.float64)
        df = np.zeros(n_terms, dtype=np.int64)
        for start in range(0, len(post_docs), _BLOCK):
            block = slice(start, start + _BLOCK)
            # Document length = kept tokens = the sum of its term frequencies (exact).
            totals += np.bincount(post_docs[block], weights=tf[block], minlength=n_docs)
            df += np.bincount(post_terms[block], minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return cls(
            ids,
            terms,
            indptr,
            post_docs.astype(np.int32, copy=False),
            tf.astype(np.int32, copy=False),
            totals.astype(np.int64),
        )

    def span(self, term: str) -> tuple[int, int] | None:
        """Where term's postings are, or None when it is not indexed."""
        if self._spans is None:
            if len(self._term_pos) < 16:
                # A freshly loaded index serving a query or two: a C-level list scan per
                # term is cheaper than a dict of every term; after a few, build the dict.
                t = self._term_pos.get(term)
                if t is None:
                    try:
                        t = self.terms.index(term)
                    except ValueError:
                        t = -1
                    self._term_pos[term] = t
                if t < 0:
                    return None
                return int(self.indptr[t]), int(self.indptr[t + 1])
            return self.span_table().get(term)
        return self._spans.get(term)

    def span_table(self) -> dict[str, tuple[int, int]]:
        """Term -> where its postings are, for every term (made once)."""
        if self._spans is None:
            bounds = self.indptr.tolist()
            self._spans = {term: (bounds[t], bounds[t + 1]) for t, term in enumerate(self.terms)}
        return self._spans


class BM25Index:
    """BM25 over one set of documents (one area), held as one or more sets of postings.

    Each set may have a mask of the documents that are still in the collection: an area
    edited in one file is its previous postings with the edited chunks masked out plus
    small postings of the new chunks, not a rebuilt index. Collection statistics (the
    number of documents, their total length, each query term's document frequency) are
    taken over the live documents at query time, so scores equal those of an index built
    from scratch over the same documents.
    """

    def __init__(
        self,
        parts: Sequence[BM25Postings],
        live: Sequence[npt.NDArray[np.bool_] | None] | None = None,
        *,
        k1: float = K1,
        b: float = B,
    ) -> None:
        self.parts = list(parts)
        self.live = list(live) if live is not None else [None] * len(self.parts)
        if len(self.live) != len(self.parts):
            raise ValueError("need one live mask (or None) per set of postings")
        self.k1, self.b = k1, b
        sizes = [len(p) for p in self.parts]
        self._offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        n_docs = 0
        total = 0
        for part, mask in zip(self.parts, self.live, strict=True):
            lengths = np.asarray(part.lengths)
            n_docs += len(part) if mask is None else int(np.count_nonzero(mask))
            total += int(lengths.sum() if mask is None else lengths[mask].sum())
        self._n_docs = n_docs
        self._total_length = total
        self._size = int(self._offsets[-1])
        """Documents numbered across the sets, masked-out ones included."""
        self._ids: npt.NDArray[np.bytes_] | None = None
        self._id_list: npt.NDArray[np.object_] | None = None
        """Every id as a str (an object array: gathering hits from it is one call)."""
        self._id_rank: npt.NDArray[np.int64] | None = None
        self._decoded = 0
        self._norm: npt.NDArray[np.float64] | None = None
        self._weights: npt.NDArray[np.float64] | None = None
        """Every posting's weight, when `_weigh_all` made them (aligned with the docs)."""
        self._weighed_terms: dict[str, _Weighed | None] = {}
        self._weighed_count = 0

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
        term_ids, token_docs, vocabulary = term_ids_of(texts)
        # One (term, doc) key per kept token; unique keys sorted term-major are the postings.
        keys = term_ids.astype(np.int64) * max(n_docs, 1) + token_docs
        pair_keys, tf = np.unique(keys, return_counts=True)
        post_terms = pair_keys // max(n_docs, 1)
        post_docs = pair_keys - post_terms * max(n_docs, 1)
        postings = BM25Postings.from_postings(
            _id_bytes(ids), terms_in_order(vocabulary), post_terms, post_docs, tf
        )
        index = cls([postings], k1=k1, b=b)
        index._weigh_all()
        return index

    # -- queries ------------------------------------------------------------------------

    def __len__(self) -> int:
        """Documents in the collection (masked-out ones are not)."""
        return self._n_docs

    def document_frequency(self, term: str) -> int:
        """How many live documents contain `term` (an index term, as `tokenize` makes).

        What the known-item queries (evaluation/known_items.py) call distinctive: a term
        few of the area's passages share."""
        return len(self._postings_of(term)[0])

    def search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for a raw query string."""
        return self.search_tokens(tokenize(query), limit)

    def search_tokens(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for already-tokenised terms (duplicates are ignored).

        Ties are broken by id ascending, as the agent (and the reference in the tests) sort.
        """
        if limit <= 0:
            return []
        scores = self._scores(terms)
        if scores is None:
            return []
        rows = self._top(scores, limit)
        return list(zip(self._id_strings(rows), scores[rows].tolist(), strict=True))

    def _top(self, scores: npt.NDArray[np.float64], limit: int) -> npt.NDArray[np.intp]:
        """Rows of the `limit` best positive scores, best first, ties by id ascending."""
        positive = np.flatnonzero(scores > 0)
        values = scores[positive]
        n = len(positive)
        if n > 16 * limit:
            # The limit-th best of every step-th row is at most the limit-th best of all
            # rows, so rows below it cannot make the top: drop them before partitioning.
            # step ~ sqrt(n / limit) balances the sample's partition and the survivors'.
            step = int(math.sqrt(n / limit))
            sample = values[::step]
            floor = np.partition(sample, len(sample) - limit)[len(sample) - limit]
            keep = values >= floor
            positive, values = positive[keep], values[keep]
            n = len(positive)
        if n > limit:
            # Every row tied with the limit-th best score stays a candidate, so the id
            # tie-break is exact; only the candidates are sorted.
            cut = np.partition(values, n - limit)[n - limit]
            keep = values >= cut
            positive, values = positive[keep], values[keep]
        # Rows ascend, so a stable sort by score alone is the answer unless two scores
        # tie; then ids decide (a stable sort keeps equal ids in row order, as the
        # reference's stable sort keeps equal ids in document order).
        order = np.argsort(-values, kind="stable")
        ranked = values[order]
        if len(ranked) > 1 and bool((ranked[1:] == ranked[:-1]).any()):
            by_id = self._id_rank[positive] if self._id_rank is not None else None
            order = np.lexsort((self._all_ids()[positive] if by_id is None else by_id, -values))
        return positive[order[:limit]]

    def _id_strings(self, rows: npt.NDArray[np.intp]) -> list[str]:
        """The ids of `rows` as strings.

        Hits are decoded one by one until this index has decoded as many hits as it
        has documents; from then on a list of every id, made once, is cheaper (and a
        rank of every id serves the tie-breaks of `_top`).
        """
        if self._id_list is not None:
            decoded: list[str] = self._id_list[rows].tolist()
            return decoded
        self._decoded += len(rows)
        ids = self._all_ids()
        if self._decoded > len(ids):
            self._id_list = np.array([key.decode("utf-8") for key in ids.tolist()], dtype=object)
            # Likewise ranks of the ids for tie-breaks (equal ids keep document order,
            # as a stable sort of the ids does): integers compare faster than bytes.
            rank = np.empty(len(ids), dtype=np.int64)
            rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
            self._id_rank = rank
        return [key.decode("utf-8") for key in ids[rows].tolist()]

    def _all_ids(self) -> npt.NDArray[np.bytes_]:
        if self._ids is None:
            parts = [np.asarray(p.ids) for p in self.parts]
            self._ids = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return self._ids

    def _norms(self) -> npt.NDArray[np.float64]:
        """k1 * (1 - b + b * dl / avgdl) per document (numbered across the sets).

        The length part of every weight's denominator, made once per index version with
        the same IEEE operations, in the same order, as the per-posting formula: the
        same bits for each document.
        """
        if self._norm is None:
            parts = [np.asarray(p.lengths) for p in self.parts]
            joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
            lengths = joined.astype(np.float64)
            k1, b = self.k1, self.b
            avgdl = float(self._total_length) / self._n_docs
            self._norm = k1 * (1 - b + b * lengths / avgdl)
        return self._norm

    def _weigh_all(self) -> None:
        """Weigh every posting now (an index of one unmasked set of postings).

        What `build` does for up to `_WEIGH_ALL_UP_TO` postings: the weights are then a
        slice per query term, as the index of a peer that stores weights would have
        them. A bigger index weighs term by term instead. Block by block, so the
        temporaries stay small.
        """
        if len(self.parts) != 1 or self.live[0] is not None or self._total_length == 0:
            return  # (no postings at all when every document is empty)
        part = self.parts[0]
        if len(part.docs) > _WEIGH_ALL_UP_TO:
            return
        df = np.diff(np.asarray(part.indptr)).astype(np.int64, copy=False)
        idf = np.array([_idf(self._n_docs, d) for d in df.tolist()], dtype=np.float64)
        term_of = np.repeat(np.arange(len(df), dtype=np.int32), df)
        k1 = self.k1
        norms = self._norms()
        weights = np.empty(len(part.docs), dtype=np.float64)
        for start in range(0, len(weights), _BLOCK):
            block = slice(start, start + _BLOCK)
            tf = np.asarray(part.tf[block]).astype(np.float64)
            dl_part = norms[np.asarray(part.docs[block])]
            weights[block] = idf[term_of[block]] * (tf * (k1 + 1)) / (tf + dl_part)
        self._weights = weights
        part.span_table()

    def _postings_of(
        self, term: str
    ) -> tuple[npt.NDArray[np.integer[Any]], npt.NDArray[np.int32]]:
        """The live documents (numbered across the sets) containing term, and its tfs."""
        docs: list[npt.NDArray[np.integer[Any]]] = []
        tfs: list[npt.NDArray[np.int32]] = []
        for part, mask, offset in zip(self.parts, self.live, self._offsets.tolist(), strict=False):
            span = part.span(term)
            if span is None or span[0] == span[1]:
                continue
            found = np.asarray(part.docs[span[0] : span[1]])
            tf = np.asarray(part.tf[span[0] : span[1]])
            if mask is not None:
                keep = mask[found]
                found, tf = found[keep], tf[keep]
            docs.append(found + np.int64(offset) if offset else found)
            tfs.append(tf)
        if len(docs) == 1:
            return docs[0], tfs[0]
        if not docs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return np.concatenate(docs), np.concatenate(tfs)

    def _weighed(self, term: str) -> _Weighed | None:
        """Term's live documents and their weights, or None when no live one has it.

        Weighed once per index version (its collection statistics are fixed) and kept,
        up to `_WEIGHED_POSTINGS` postings in all.
        """
        cached = self._weighed_terms.get(term, _MISSING)
        if cached is not _MISSING:
            return cached
        found, tf = self._postings_of(term)
        entry: _Weighed | None = None
        if len(found):
            idf = _idf(self._n_docs, len(found))
            tf_f = tf.astype(np.float64)
            k1 = self.k1
            entry = (found, idf * (tf_f * (k1 + 1)) / (tf_f + self._norms()[found]))
            self._weighed_count += len(found)
            if self._weighed_count > _WEIGHED_POSTINGS:
                self._weighed_terms.clear()
                self._weighed_count = len(found)
        self._weighed_terms[term] = entry
        return entry

    def _scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64] | None:
        """Dense score vector over all documents, or None when no term is indexed.

        Exactness: each weight is computed with the same IEEE operations, in the same
        order, as the per-document definition (the length part per document, see
        `_norms`), and
        idf uses `math.log` (numpy's SIMD log may differ in the last bit). Accumulating
        postings in query-term order with `np.bincount` adds the same numbers in the
        same order as the per-document loop, so scores are bit-identical and ties stay
        ties.
        """
        if self._n_docs == 0:
            return None
        every: npt.NDArray[np.integer[Any]]
        if self._weights is not None:  # every posting weighed: a slice per term
            table = self.parts[0].span_table()
            spans = [span for t in dict.fromkeys(terms) if (span := table.get(t)) is not None]
            if not spans:
                return None
            docs, all_weights = self.parts[0].docs, self._weights
            if len(spans) == 1:
                ((start, stop),) = spans
                every, weights = docs[start:stop], all_weights[start:stop]
            else:
                every = np.concatenate([docs[start:stop] for start, stop in spans])
                weights = np.concatenate([all_weights[start:stop] for start, stop in spans])
        else:
            weighed = [w for t in dict.fromkeys(terms) if (w := self._weighed(t)) is not None]
            if not weighed:
                return None
            if len(weighed) == 1:
                every, weights = weighed[0]
            else:
                every = np.concatenate([docs for docs, _ in weighed])
                weights = np.concatenate([w for _, w in weighed])
        # One gather-and-sum over all query terms' postings.
        summed = np.bincount(every, weights=weights, minlength=self._size)
        return summed.astype(np.float64, copy=False)


def _id_bytes(ids: Sequence[str]) -> npt.NDArray[np.bytes_]:
    """Ids as a numpy bytes array (chunk ids are 12 ASCII characters: `S12`)."""
    encoded = [i.encode("utf-8") for i in ids]
    width = max((len(e) for e in encoded), default=1)
    return np.array(encoded, dtype=f"S{max(width, 1)}")


def terms_in_order(vocabulary: dict[str, int]) -> list[str]:
    terms = [""] * len(vocabulary)
    for term, t in vocabulary.items():
        terms[t] = term
    return terms


def term_ids_of(
    texts: Sequence[str],
) -> tuple[npt.NDArray[np.signedinteger[Any]], npt.NDArray[np.int64], dict[str, int]]:
    """Every kept token as (term id, document index), plus the term vocabulary.

    Per-token Python work is limited to one C-level dict call via `map`: filtering and
    stemming run once per distinct raw word, not once per token.
    """
    words_per_doc = [raw_words(text) for text in texts]
    counts = np.fromiter(map(len, words_per_doc), dtype=np.int64, count=len(texts))
    flat = list(chain.from_iterable(words_per_doc))
    # One hashing pass over the tokens: each token gets the position of its word's first
    # occurrence (setdefault keeps the first one), and the dict lists the distinct words
    # in first-occurrence order.
    first: dict[bytes, int] = {}
    small = np.int32 if len(flat) < 2**31 else np.int64
    first_of = np.fromiter(map(first.setdefault, flat, count()), dtype=small, count=len(flat))
    vocabulary: dict[str, int] = {}
    distinct = np.empty(len(flat), dtype=small)  # read only at first occurrences
    for word, position in first.items():
        term = term_of(word)
        # -1 marks a dropped word (too short or a stopword); those tokens are removed below.
        distinct[position] = vocabulary.setdefault(term, len(vocabulary)) if term else -1
    word_term = distinct[first_of]  # int32 below 2**31 tokens: callers widen it as needed
    del first_of, distinct
    token_docs = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
    kept = word_term >= 0
    return word_term[kept], token_docs[kept], vocabulary
