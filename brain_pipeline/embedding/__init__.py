"""Embedding core: providers (Gemini, local ONNX), quota pacing and retry, and the
incremental, resumable builder of embeddings.bin. Never imports Dagster; the Gemini SDK
and onnxruntime load only when their provider is made."""

from typing import TYPE_CHECKING

from brain_pipeline.utils.lazy import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: importing one module of the package costs only that module.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "EmbeddingBuildInterrupted": "brain_pipeline.embedding.builder",
        "EmbeddingReport": "brain_pipeline.embedding.builder",
        "build_embeddings": "brain_pipeline.embedding.builder",
        "prune_embeddings": "brain_pipeline.embedding.builder",
        "make_embedder": "brain_pipeline.embedding.factory",
        "Embedder": "brain_pipeline.embedding.protocol",
        "EmbeddingError": "brain_pipeline.embedding.protocol",
        "EmbeddingRejected": "brain_pipeline.embedding.protocol",
        "EmbeddingUnavailable": "brain_pipeline.embedding.protocol",
        "LocalModelUnavailable": "brain_pipeline.embedding.protocol",
    },
)
