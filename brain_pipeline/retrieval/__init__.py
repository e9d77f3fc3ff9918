"""Pure retrieval: the agent's tokenizer, BM25, int8 vectors and hybrid fusion (no I/O)."""

from typing import TYPE_CHECKING

from brain_pipeline.utils.lazy import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: importing one module of the package costs only that module.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BM25Index": "brain_pipeline.retrieval.bm25",
        "Hit": "brain_pipeline.retrieval.hybrid",
        "QueryEmbedder": "brain_pipeline.retrieval.hybrid",
        "Retriever": "brain_pipeline.retrieval.hybrid",
        "SearchResult": "brain_pipeline.retrieval.hybrid",
        "reciprocal_rank_fusion": "brain_pipeline.retrieval.hybrid",
        "STOPWORDS": "brain_pipeline.retrieval.text",
        "stem": "brain_pipeline.retrieval.text",
        "tokenize": "brain_pipeline.retrieval.text",
    },
)
