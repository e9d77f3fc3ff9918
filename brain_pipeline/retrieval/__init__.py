"""Pure retrieval: the agent's tokenizer, BM25, int8 vectors and hybrid fusion (no I/O)."""

from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.hybrid import (
    Hit,
    QueryEmbedder,
    Retriever,
    SearchResult,
    reciprocal_rank_fusion,
)
from brain_pipeline.retrieval.text import STOPWORDS, stem, tokenize

__all__ = [
    "STOPWORDS",
    "BM25Index",
    "Hit",
    "QueryEmbedder",
    "Retriever",
    "SearchResult",
    "reciprocal_rank_fusion",
    "stem",
    "tokenize",
]
