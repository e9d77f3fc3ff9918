"""BM25 by its plain definition, one document at a time: the yardstick for the index.

The agent's contract (store-compatibility.md): k1 = 1.2, b = 0.75, IDF
ln(1 + (N - df + 0.5) / (df + 0.5)), query terms de-duplicated (the first occurrence
fixes the order they are added in), only positive scores, ties broken by id ascending.
Nothing here is shared with `brain_pipeline.retrieval.bm25` except the tokenizer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from brain_pipeline.retrieval.text import tokenize

K1 = 1.2
B = 0.75


class ReferenceBM25:
    """Documents tokenised once; each query scores every document in a Python loop."""

    def __init__(
        self, ids: Sequence[str], texts: Sequence[str], *, k1: float = K1, b: float = B
    ) -> None:
        self.ids = list(ids)
        self.docs = [Counter(tokenize(text)) for text in texts]
        self.lengths = [sum(doc.values()) for doc in self.docs]
        self.n_docs = len(self.docs)
        self.avgdl = sum(self.lengths) / self.n_docs if self.n_docs else 0.0
        self.df: Counter[str] = Counter()
        for doc in self.docs:
            self.df.update(doc.keys())
        self.k1, self.b = k1, b

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        if limit <= 0:
            return []
        k1, b, avgdl = self.k1, self.b, self.avgdl
        terms = list(dict.fromkeys(tokenize(query)))
        scored: list[tuple[str, float]] = []
        for doc_id, doc, dl in zip(self.ids, self.docs, self.lengths, strict=True):
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf == 0:
                    continue
                idf = math.log(1 + (self.n_docs - self.df[term] + 0.5) / (self.df[term] + 0.5))
                score += idf * (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * dl / avgdl))
            if score > 0:
                scored.append((doc_id, score))
        scored.sort(key=lambda hit: (-hit[1], hit[0]))
        return scored[:limit]


def reference_search(
    ids: Sequence[str],
    texts: Sequence[str],
    query: str,
    limit: int,
    *,
    k1: float = K1,
    b: float = B,
) -> list[tuple[str, float]]:
    """One query against `texts` (tokenised afresh)."""
    return ReferenceBM25(ids, texts, k1=k1, b=b).search(query, limit)
