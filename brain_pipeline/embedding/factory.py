"""Choose and build the embedding provider a configuration names.

Provider modules are imported lazily so that choosing one never loads the other's
dependencies (the Gemini SDK or onnxruntime).
"""

from __future__ import annotations

from brain_pipeline.embedding.protocol import PROVIDERS, Embedder, EmbeddingRejected


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
    local_model: str | None = None,
    base_url: str | None = None,
) -> Embedder | None:
    """Build the provider named by `provider` ("gemini" | "local" | "none").

    "auto" must be resolved by the caller (config.effective_provider()). For "gemini",
    `model`/`dimension` default to gemini-embedding-001 at 256 and `api_key` is required;
    `base_url` defaults to the SDK's own resolution (GOOGLE_GEMINI_BASE_URL, then
    Google's). For "local", `local_model` names the bundled model (only
    all-MiniLM-L6-v2-int8 exists); `model` and `dimension` are Gemini settings and are
    ignored (the local model's dimension is fixed at 384).
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
        from brain_pipeline.embedding.local import LOCAL_MODEL_NAME, LocalEmbedder

        name = local_model or LOCAL_MODEL_NAME
        if name != LOCAL_MODEL_NAME:
            raise ValueError(f"unknown local model {name!r}; the bundled one is {LOCAL_MODEL_NAME}")
        return LocalEmbedder()
    raise ValueError(f"unknown embedding provider {provider!r}; expected one of {PROVIDERS}")
