"""Shared helpers of the embedding tests (also used by the child process of the kill test)."""

from __future__ import annotations

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.gemini import GeminiEmbedder
from brain_pipeline.embedding.pacing import RetryPolicy

API_KEY = "test-key-5f3b9c1e7a"


def gemini(**overrides: object) -> GeminiEmbedder:
    """An embedder with test-friendly retry timings (the real defaults wait seconds)."""
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


def build_with_gemini(out_path: str, files: dict[str, int], batch_size: int) -> None:
    """What the kill test's child process runs: a full build, nothing else."""
    from pathlib import Path

    from brain_pipeline.embedding.builder import build_embeddings

    build_embeddings(corpus(files), Path(out_path), gemini(batch_size=batch_size))
