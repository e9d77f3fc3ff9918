"""Choose and build the embedding provider a configuration names.

`embedder_for` builds the provider a configuration names (the embeddings step, `bench`);
`choose_query_embedder` decides whether queries can be embedded for a given set of
vectors, and says why not when they cannot (the evaluation, `search`, `fixture`), with
the preflight's own line when the provider cannot run here. Provider modules are
imported lazily so that choosing one never loads the other's dependencies (the Gemini
SDK or onnxruntime).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brain_pipeline.config import GEMINI_KEY_VARIABLES, BrainConfig

if TYPE_CHECKING:
    from brain_pipeline.embedding.protocol import Embedder
    from brain_pipeline.retrieval.vectors import EmbeddingStore


def provider_problem(cfg: BrainConfig) -> str | None:
    """Why the configured provider cannot run here, in one line saying what to do, or
    None: Gemini needs a key, the local model its extra. The one check of it: the
    preflight refuses a run with this line, and a search or evaluation that would embed
    queries says it and answers lexically. Imports nothing heavy (the preflight runs
    before anything else)."""
    provider = cfg.effective_provider()
    if provider == "gemini" and not cfg.gemini_api_key():
        keys = " or ".join(GEMINI_KEY_VARIABLES)
        return (
            f"embedding.provider is gemini but {keys} is not set; export GEMINI_API_KEY=... "
            "or set embedding.provider: auto (lexical without a key)"
        )
    if provider == "local":
        from brain_pipeline.embedding.local import NEEDS_EXTRA, missing_parts

        missing = missing_parts()
        if missing:
            return f"{NEEDS_EXTRA} ({', '.join(missing)} not installed)"
    return None


def embedder_for(
    cfg: BrainConfig, *, api_key: str | None = None, base_url: str | None = None
) -> Embedder | None:
    """The embedder the configuration selects (`auto` resolved), or None for `none`.

    `api_key`/`base_url` are the Gemini client's settings when a caller holds them (the
    Dagster resource); otherwise the key comes from the environment and the endpoint from
    the SDK's own resolution (GOOGLE_GEMINI_BASE_URL); without a key, EmbeddingRejected.
    "local" is the bundled model (all-MiniLM-L6-v2-int8, the only one, at 384): the
    model and dimension settings are Gemini's.
    """
    provider = cfg.effective_provider()
    if provider == "none":
        return None
    if provider == "local":
        from brain_pipeline.embedding.local import LocalEmbedder

        return LocalEmbedder()
    from brain_pipeline.embedding.gemini import GeminiEmbedder

    emb = cfg.embedding
    return GeminiEmbedder(
        api_key=api_key or cfg.gemini_api_key() or "",
        model=emb.model,
        dimension=emb.dimension,
        texts_per_minute=emb.texts_per_minute,
        requests_per_minute=emb.requests_per_minute,
        max_attempts=emb.max_attempts,
        batch_size=emb.batch_size,
        base_url=base_url,
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
    from brain_pipeline.embedding.protocol import EmbeddingError

    problem = provider_problem(cfg)  # no key, or the local model not installed
    if problem is not None:
        return QueryEmbedding(None, None, problem)
    try:
        embedder = embedder_for(cfg)
    except (EmbeddingError, ValueError) as exc:
        return QueryEmbedding(None, None, f"cannot embed queries with {provider}: {exc}")
    assert embedder is not None  # the provider is not "none"
    return QueryEmbedding(embedder.embed_query, embedder.name)
