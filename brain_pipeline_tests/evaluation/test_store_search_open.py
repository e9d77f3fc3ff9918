"""Opening store directories for search (choosing the query embedder: embedding/test_factory.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.evaluation.store_search import (
    StoreNotFoundError,
    open_store,
)
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize


def write_store(directory: Path, chunks: list[Chunk], vectors: bytes | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "knowledge-store.json").write_bytes(serialize_store(chunks))
    if vectors is not None:
        (directory / "embeddings.bin").write_bytes(vectors)
    return directory


def vectors_bytes(chunks: list[Chunk], model: str, dim: int = 16) -> bytes:
    matrix = quantize(np.random.default_rng(1).normal(size=(len(chunks), dim)))
    return encode_embeddings(model, [c.id for c in chunks], matrix)


def test_open_store_reads_chunks_and_vectors(tmp_path: Path, store: list[Chunk]) -> None:
    directory = write_store(tmp_path / "s", store, vectors_bytes(store, "m"))
    opened = open_store(directory)
    assert opened.view.all_chunks() == store
    assert opened.embeddings is not None and opened.embeddings.model == "m"
    assert opened.warnings == []
    # A path to knowledge-store.json finds its neighbouring embeddings.bin too.
    assert open_store(directory / "knowledge-store.json").embeddings is not None


def test_bad_magic_is_ignored_with_a_warning(tmp_path: Path, store: list[Chunk]) -> None:
    directory = write_store(tmp_path / "s", store, b"NOTMAGIC" + bytes(64))
    opened = open_store(directory)
    assert opened.embeddings is None
    assert len(opened.warnings) == 1 and "bad magic" in opened.warnings[0]


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="knowledge-store.json"):
        open_store(tmp_path)
