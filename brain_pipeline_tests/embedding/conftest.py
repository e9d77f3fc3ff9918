"""Fixtures: our fake Gemini server on loopback, reached by the real google-genai SDK
through GOOGLE_GEMINI_BASE_URL, and small synthetic corpora of chunks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.gemini import GeminiEmbedder
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

API_KEY = "test-key-5f3b9c1e7a"

SDK_MODE_VARIABLES = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_GENAI_USE_ENTERPRISE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GENAI_API_VERSION",
)


@pytest.fixture
def gemini_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """A fresh server per test; the SDK finds it only through the environment."""
    for name in SDK_MODE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeGemini(api_key=API_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        yield server


def gemini(**overrides: object) -> GeminiEmbedder:
    """An embedder with test-friendly retry timings (the real defaults wait seconds)."""
    from brain_pipeline.embedding.pacing import RetryPolicy

    settings: dict[str, object] = {
        "api_key": API_KEY,
        "dimension": 16,
        "texts_per_minute": 1_000_000,
        "retry_policy": RetryPolicy(max_attempts=4, base_delay=0.02, max_delay=0.1,
                                    quota_headroom=0.05),
    }
    settings.update(overrides)
    return GeminiEmbedder(**settings)  # type: ignore[arg-type]


def paragraph(file: str, n: int, version: int = 0) -> str:
    return (f"Paragraph {n} of {file} (revision {version}) explains how the pipeline "
            f"keeps vectors in step with the store.")


def corpus(files: dict[str, int], edits: dict[str, set[int]] | None = None) -> list[Chunk]:
    """Chunks for files with the given paragraph counts; `edits` bumps some paragraphs."""
    chunks = []
    for file, count in files.items():
        for n in range(count):
            version = 1 if edits and n in edits.get(file, set()) else 0
            text = paragraph(file, n, version)
            chunks.append(Chunk(id=chunk_id(text), content=text, area="area",
                                source=f"area/{file}"))
    return chunks
