"""Choose and build the embedding provider a configuration names.

`make_embedder` builds a provider from plain settings; `embedder_for` reads them from a
configuration (the embeddings step, `bench`); `choose_query_embedder` decides whether
queries can be embedded for a given set of vectors, and says why not when they cannot
(the evaluation, `search`, `fixture`). Provider modules are imported lazily so that
choosing one never loads the other's dependencies (the Gemini SDK or onnxruntime).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.embedding.protocol import (
    PROVIDERS,
    Embedder,
    EmbeddingError,
    EmbeddingRejected,
)

if TYPE_CHECKING:
    from brain_pipeline.retrieval.vectors import EmbeddingStore


def make_embedder(
    provider: str,
    *,
    model: str | None = None,
    dimension: int | None = None,
    api_key: str | None = None,
    texts_per_minute: float = 3000,
    requests_per_minute: float | None = None,
    max_attempts: int = 6,
    batch_size: int = 100,
    base_url: str | None = None,
) -> Embedder | None:
    """Build the provider named by `provider` ("gemini" | "local" | "none").

    "auto" must be resolved by the caller (config.effective_provider()). For "gemini",
    `model`/`dimension` default to gemini-embedding-001 at 256 and `api_key` is required;
    `base_url` defaults to the SDK's own resolution (GOOGLE_GEMINI_BASE_URL, then
    Google's). "local" is the bundled model (all-MiniLM-L6-v2-int8, the only one);
    `model` and `dimension` are Gemini settings and are ignored (its dimension is 384).
    """
    if provider == "none":
        return None
    if provider == "gemini":
        from brain_pipeline.embedding.gemini import DEFAULT_DIMENSION, DEFAULT_MODEL, GeminiEmbedder

        if not api_key:
            raise EmbeddingRejected("the Gemini provider needs an API key (GEMINI_API_KEY)")
        return GeminiEmbedder(
            api_key=api_key,
            model=model or DEFAULT_MODEL,
            dimension=dimension or DEFAULT_DIMENSION,
            texts_per_minute=texts_per_minute,
            requests_per_minute=requests_per_minute,
            max_attempts=max_attempts,
            batch_size=batch_size,
            base_url=base_url,
        )
    if provider == "local":
        from brain_pipeline.embedding.local import LocalEmbedder

        return LocalEmbedder()
    raise ValueError(f"unknown embedding provider {provider!r}; expected one of {PROVIDERS}")


def embedder_for(
    cfg: BrainConfig, *, api_key: str | None = None, base_url: str | None = None
) -> Embedder | None:
    """The embedder the configuration selects (`auto` resolved), or None for `none`.

    `api_key`/`base_url` are the Gemini client's settings when a caller holds them (the
    Dagster resource); otherwise the key comes from the environment and the endpoint from
    the SDK's own resolution (GOOGLE_GEMINI_BASE_URL).
    """
    emb = cfg.embedding
    return make_embedder(
        cfg.effective_provider(),
        model=emb.model,
        dimension=emb.dimension,
        api_key=api_key or cfg.gemini_api_key(),
        base_url=base_url,
        texts_per_minute=emb.texts_per_minute,
        requests_per_minute=emb.requests_per_minute,
        max_attempts=emb.max_attempts,
        batch_size=emb.batch_size,
    )


@dataclass(frozen=True)
class QueryEmbedding:
    """How queries get vectors: `embed` and its model, or None and `note` saying why not."""

    embed: Callable[[str], Any] | None
    model: str | None
    note: str | None = None


def choose_query_embedder(cfg: BrainConfig, embeddings: EmbeddingStore | None) -> QueryEmbedding:
    """The configured provider's query embedder, if it made `embeddings`; else why not.

    Nothing is loaded or contacted when the answer is "lexical".
    """
    if embeddings is None:
        from brain_pipeline.retrieval.vectors import EMBEDDINGS_FILENAME  # numpy: not at import

        return QueryEmbedding(None, None, f"no readable {EMBEDDINGS_FILENAME} in the store")
    provider = cfg.effective_provider()
    if provider == "none":
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    expected = cfg.effective_model()
    if embeddings.model != expected:
        return QueryEmbedding(
            None,
            None,
            f"the store's vectors were made by {embeddings.model!r}, but the configured "
            f"{provider} provider embeds queries with {expected!r}",
        )
    if provider == "gemini" and not cfg.gemini_api_key():
        return QueryEmbedding(None, None, "no Gemini API key (set GEMINI_API_KEY)")
    try:
        embedder = embedder_for(cfg)
    except (EmbeddingError, ValueError) as exc:
        return QueryEmbedding(None, None, f"cannot embed queries with {provider}: {exc}")
    if embedder is None:
        return QueryEmbedding(None, None, "the embedding provider is 'none'")
    return QueryEmbedding(embedder.embed_query, embedder.name)
