"""Embedding core: providers (Gemini, local ONNX), quota pacing and retry, and the
incremental, resumable builder of embeddings.bin. Never imports Dagster; the Gemini SDK
and onnxruntime load only when their provider is made."""

from brain_pipeline.embedding.builder import (
    EmbeddingBuildInterrupted,
    EmbeddingReport,
    build_embeddings,
    prune_embeddings,
)
from brain_pipeline.embedding.factory import make_embedder
from brain_pipeline.embedding.protocol import (
    Embedder,
    EmbeddingError,
    EmbeddingRejected,
    EmbeddingUnavailable,
    LocalModelUnavailable,
)

__all__ = [
    "Embedder",
    "EmbeddingBuildInterrupted",
    "EmbeddingError",
    "EmbeddingRejected",
    "EmbeddingReport",
    "EmbeddingUnavailable",
    "LocalModelUnavailable",
    "build_embeddings",
    "make_embedder",
    "prune_embeddings",
]
