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
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from brain_pipeline.retrieval.text import raw_words, term_of, tokenize

K1 = 1.2
B = 0.75
RETRIEVAL_VERSION = 1
"""Bump whenever tokenising or index layout changes: cached indexes are keyed by it."""
_WEIGHT_BLOCK = 1 << 20


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
    """An immutable BM25 index over one set of documents (one area), built once.

    It can be saved to a directory of `.npy` files and loaded memory-mapped
    (`save`/`load`), so a query in a new process reads only its terms' postings.
    """

    def __init__(
        self,
        ids: list[str] | npt.NDArray[np.bytes_],
        vocabulary: dict[str, int] | list[str],
        indptr: npt.NDArray[np.int64],
        docs: npt.NDArray[np.int32],
        weights: npt.NDArray[np.float64],
        id_rank: npt.NDArray[np.int64],
    ) -> None:
        # Ids and the term -> span dict are materialised lazily: a loaded index answers
        # one query after decoding only its hits' ids and looking up only its own terms.
        self._ids: list[str] | None = ids if isinstance(ids, list) else None
        self._id_array = None if isinstance(ids, list) else ids
        self._terms: list[str] | None = vocabulary if isinstance(vocabulary, list) else None
        self._vocabulary = vocabulary if isinstance(vocabulary, dict) else None
        self._indptr = indptr
        self._spans: dict[str, tuple[int, int]] | None = None
        self._term_pos: dict[str, int] = {}
        self._docs = docs
        self._weights = weights
        self._id_rank = id_rank

    @property
    def ids(self) -> list[str]:
        """Document ids in index order (the order they were given to `build`)."""
        if self._ids is None:
            assert self._id_array is not None
            self._ids = np.char.decode(self._id_array, "utf-8").tolist()
        return self._ids

    @property
    def vocabulary(self) -> dict[str, int]:
        """term -> term number (the postings of term t are indptr[t]:indptr[t+1])."""
        if self._vocabulary is None:
            assert self._terms is not None
            self._vocabulary = dict(zip(self._terms, range(len(self._terms)), strict=True))
        return self._vocabulary

    def _id_of(self, row: int) -> str:
        if self._ids is not None:
            return self._ids[row]
        assert self._id_array is not None
        return bytes(self._id_array[row]).decode("utf-8")

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
        # One (term, doc) key per kept token; unique keys sorted term-major are the postings.
        keys = term_ids.astype(np.int64) * max(n_docs, 1) + token_docs
        pair_keys, tf = np.unique(keys, return_counts=True)
        post_terms = pair_keys // max(n_docs, 1)
        post_docs = pair_keys - post_terms * max(n_docs, 1)
        return cls.from_postings(list(ids), vocabulary, post_terms, post_docs, tf, k1=k1, b=b)

    @classmethod
    def from_postings(
        cls,
        ids: list[str] | npt.NDArray[np.bytes_],
        vocabulary: dict[str, int] | list[str],
        post_terms: npt.NDArray[np.integer[Any]],
        post_docs: npt.NDArray[np.integer[Any]],
        tf: npt.NDArray[np.integer[Any]],
        *,
        k1: float = K1,
        b: float = B,
    ) -> BM25Index:
        """The index from postings sorted by (term, document), one per distinct pair.

        This is how a cached area index is assembled from per-chunk token counts without
        tokenising (state/bm25_cache.py): lengths and weights are exactly those `build`
        computes from the texts, with the arithmetic `reference_search` does, so
        rankings and scores are identical. Inputs may be int32, which at a quarter of a
        million documents (~11M postings) saves ~45 MB per array.
        """
        n_docs = len(ids)
        n_terms = len(vocabulary)
        # Document length = kept tokens = the sum of its term frequencies (exact in float64).
        totals = np.zeros(n_docs, dtype=np.float64)
        df = np.zeros(n_terms, dtype=np.int64)
        for start in range(0, len(post_docs), _WEIGHT_BLOCK):
            block = slice(start, start + _WEIGHT_BLOCK)
            totals += np.bincount(post_docs[block], weights=tf[block], minlength=n_docs)
            df += np.bincount(post_terms[block], minlength=n_terms)
        lengths = totals.astype(np.int64)
        del totals
        avgdl = float(lengths.sum()) / n_docs if n_docs else 0.0
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])

        idf = np.array([_idf(n_docs, int(d)) for d in df.tolist()], dtype=np.float64)
        weights = np.empty(len(post_docs), dtype=np.float64)
        # Block by block: the formula's temporaries for every posting at once would be
        # half a dozen float64 arrays of the postings' length (~0.5 GB at 11M postings).
        for start in range(0, len(post_docs), _WEIGHT_BLOCK):
            block = slice(start, start + _WEIGHT_BLOCK)
            tf_f = tf[block].astype(np.float64)
            dl = lengths[post_docs[block]].astype(np.float64)
            # Same operation order as reference_search, element by element.
            weights[block] = (
                idf[post_terms[block]] * (tf_f * (k1 + 1)) / (tf_f + k1 * (1 - b + b * dl / avgdl))
            )

        if isinstance(ids, list):
            order = sorted(range(n_docs), key=ids.__getitem__)
        else:
            order = np.argsort(ids, kind="stable").tolist()
        id_rank = np.empty(n_docs, dtype=np.int64)
        id_rank[order] = np.arange(n_docs)
        docs = post_docs.astype(np.int32, copy=False)
        return cls(ids, vocabulary, indptr, docs, weights, id_rank)

    # -- persistence ----------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the index as `.npy` files (plus terms.txt) into a new `directory`.

        The files are written into a temporary sibling that is renamed into place, so a
        reader sees a complete index or none; when another process got there first its
        (identical) index is kept.
        """
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
        try:
            ids = self._id_array if self._id_array is not None else _id_bytes(self.ids)
            terms = self._terms if self._terms is not None else _terms_in_order(self.vocabulary)
            for name, array in (
                ("ids", ids),
                ("indptr", self._indptr),
                ("docs", self._docs),
                ("weights", self._weights),
                ("id_rank", self._id_rank),
            ):
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
            (tmp / "terms.txt").write_bytes("\n".join(terms).encode("ascii"))
            try:
                os.replace(tmp, directory)
            except OSError:
                if not (directory / "terms.txt").is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = True) -> BM25Index:
        """Read an index written by `save` (memory-mapped: postings are paged in on use)."""
        directory = Path(directory)
        mode: Literal["r"] | None = "r" if mmap else None

        def array(name: str) -> Any:
            return np.load(directory / f"{name}.npy", mmap_mode=mode, allow_pickle=False)

        raw_terms = (directory / "terms.txt").read_bytes()
        terms = raw_terms.decode("ascii").split("\n") if raw_terms else []
        indptr = np.asarray(array("indptr"))
        if len(indptr) != len(terms) + 1:
            raise ValueError(f"damaged BM25 index at {directory}: terms and postings disagree")
        return cls(array("ids"), terms, indptr, array("docs"), array("weights"), array("id_rank"))

    def __len__(self) -> int:
        return len(self._id_rank)

    def search(self, query: str, limit: int = 10) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for a raw query string."""
        return self.search_tokens(tokenize(query), limit)

    def search_tokens(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Top `limit` (id, score) for already-tokenised terms (duplicates are ignored)."""
        return [(self._id_of(row), score) for row, score in self.search_rows(terms, limit)]

    def search_rows(self, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
        """Top `limit` (document position, score) for already-tokenised terms."""
        scores = self._scores(terms)
        if scores is None or limit <= 0:
            return []
        rows = _top_rows(scores, self._id_rank, limit)
        top_scores = scores[rows].tolist()
        return list(zip(rows.tolist(), top_scores, strict=True))

    def _span(self, term: str) -> tuple[int, int] | None:
        """Where term's postings are, or None when it is not indexed."""
        if self._spans is None:
            terms = self._terms
            if self._vocabulary is None and terms is not None and len(self._term_pos) < 16:
                # A freshly loaded index serving a query or two: a C-level list scan per
                # term is cheaper than a dict of every term; after a few, build the dict.
                t = self._term_pos.get(term)
                if t is None:
                    try:
                        t = terms.index(term)
                    except ValueError:
                        t = -1
                    self._term_pos[term] = t
                if t < 0:
                    return None
                return int(self._indptr[t]), int(self._indptr[t + 1])
            bounds = self._indptr.tolist()
            self._spans = {t: (bounds[i], bounds[i + 1]) for t, i in self.vocabulary.items()}
        return self._spans.get(term)

    def _scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64] | None:
        """Dense score vector over all documents, or None when no term is indexed."""
        found = (self._span(term) for term in _unique_in_order(terms))
        slices = [span for span in found if span is not None]
        if not slices:
            return None
        if len(slices) == 1:
            start, stop = slices[0]
            docs, weights = self._docs[start:stop], self._weights[start:stop]
        else:
            docs = np.concatenate([self._docs[s:e] for s, e in slices])
            weights = np.concatenate([self._weights[s:e] for s, e in slices])
        summed = np.bincount(docs, weights=weights, minlength=len(self))
        return summed.astype(np.float64, copy=False)


def _id_bytes(ids: Sequence[str]) -> npt.NDArray[np.bytes_]:
    """Ids as a numpy bytes array (chunk ids are 12 ASCII characters: `S12`)."""
    encoded = [i.encode("utf-8") for i in ids]
    width = max((len(e) for e in encoded), default=1)
    return np.array(encoded, dtype=f"S{max(width, 1)}")


def _terms_in_order(vocabulary: dict[str, int]) -> list[str]:
    terms = [""] * len(vocabulary)
    for term, t in vocabulary.items():
        terms[t] = term
    return terms


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
