"""Shared helpers of the embedding tests (also used by the child process of the kill test)."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.embedding.gaps import Gap, read_gaps
from brain_pipeline.embedding.gemini import GeminiEmbedder
from brain_pipeline.embedding.pacing import RetryPolicy
from brain_pipeline.state.blobs import blob_store
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.memory import Memory

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


def worker_memory(build_dir: Path, ledger_url: str, blobs_url: str) -> Memory:
    """A worker's memory: its own build directory, the shared ledger and blob store."""
    return Memory(Ledger(ledger_url), blob_store(blobs_url), StateLayout.of(build_dir))


def build_with_gemini(out_path: str, files: dict[str, int], batch_size: int,
                      ledger_url: str | None = None, blobs_url: str | None = None) -> None:
    """What the kill test's child process runs: a full build, nothing else (its packs in
    the build directory's own ledger, or in the shared one the URLs name)."""
    from brain_pipeline.embedding.builder import build_embeddings

    out = Path(out_path)
    memory = worker_memory(out.parent, ledger_url, blobs_url) if ledger_url and blobs_url \
        else None
    build_embeddings(corpus(files), out, gemini(batch_size=batch_size), memory=memory)


def remembered_gaps(build_dir: Path) -> dict[str, Gap]:
    """The gaps the default ledger of `build_dir` remembers."""
    from brain_pipeline.embedding.builder import local_memory

    memory = local_memory(build_dir / "embeddings.bin")
    try:
        return read_gaps(memory)
    finally:
        memory.ledger.close()
