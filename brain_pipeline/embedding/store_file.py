"""embeddings.bin on disk: the one reader every caller shares.

A missing file means "no vectors"; a file that is not a PATBEMB1 store is ignored with
a warning (never misread), so a build rebuilds it and a search falls back to BM25.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from brain_pipeline.retrieval.vectors import EmbeddingStore, NotAnEmbeddingStore, decode_embeddings


def read_embeddings(path: Path, warn: Callable[[str], None] | None = None) -> EmbeddingStore | None:
    """Decode `path`, or None when it is absent or unreadable as a store (then `warn`)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode_embeddings(data)
    except NotAnEmbeddingStore as exc:
        if warn is not None:
            warn(f"ignored {Path(path).name}: {exc}")
        return None
