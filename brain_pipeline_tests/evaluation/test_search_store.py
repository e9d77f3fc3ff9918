"""Opening store directories and choosing the query embedder for search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus.store import Chunk, serialize_store
from brain_pipeline.embedding.factory import choose_query_embedder
from brain_pipeline.evaluation.search import (
    StoreNotFoundError,
    open_store,
)
from brain_pipeline.retrieval.vectors import EmbeddingStore, encode_embeddings, quantize


def write_store(directory: Path, chunks: list[Chunk], vectors: bytes | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "knowledge-store.json").write_bytes(serialize_store(chunks))
    if vectors is not None:
        (directory / "embeddings.bin").write_bytes(vectors)
    return directory


def vectors_bytes(chunks: list[Chunk], model: str, dim: int = 16) -> bytes:
    matrix = quantize(np.random.default_rng(1).normal(size=(len(chunks), dim)))
    return encode_embeddings(model, [c.id for c in chunks], matrix)


def config(tmp_path: Path, provider: str, **extra: str) -> BrainConfig:
    lines = [f"build_dir: {tmp_path / 'build'}", f"embedding:\n  provider: {provider}"]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    path = tmp_path / "corpus_config.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_config(path, env={})


def test_open_store_reads_chunks_and_vectors(tmp_path: Path, store: list[Chunk]) -> None:
    directory = write_store(tmp_path / "s", store, vectors_bytes(store, "m"))
    opened = open_store(directory)
    assert opened.chunks == store
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


def test_no_embedder_without_vectors_or_provider(tmp_path: Path) -> None:
    vectors = EmbeddingStore("all-MiniLM-L6-v2-int8", 384, [], np.zeros((0, 384), np.int8))
    assert "no readable embeddings.bin" in str(
        choose_query_embedder(config(tmp_path, "local"), None).note
    )
    none = choose_query_embedder(config(tmp_path, "none"), vectors)
    assert none.embed is None and "'none'" in str(none.note)


def test_model_mismatch_means_lexical_without_loading_anything(tmp_path: Path) -> None:
    vectors = EmbeddingStore("gemini-embedding-001", 256, [], np.zeros((0, 256), np.int8))
    choice = choose_query_embedder(config(tmp_path, "local"), vectors)
    assert choice.embed is None
    assert "gemini-embedding-001" in str(choice.note) and "all-MiniLM-L6-v2-int8" in str(
        choice.note
    )


def test_gemini_without_a_key_is_a_note_not_a_crash(tmp_path: Path) -> None:
    vectors = EmbeddingStore("gemini-embedding-001", 256, [], np.zeros((0, 256), np.int8))
    choice = choose_query_embedder(config(tmp_path, "gemini"), vectors)
    assert choice.embed is None and "no Gemini API key" in str(choice.note)


def test_matching_local_model_embeds_queries(tmp_path: Path) -> None:
    vectors = EmbeddingStore("all-MiniLM-L6-v2-int8", 384, [], np.zeros((0, 384), np.int8))
    choice = choose_query_embedder(config(tmp_path, "local"), vectors)
    assert choice.note is None and choice.model == "all-MiniLM-L6-v2-int8"
    assert choice.embed is not None
    vector = np.asarray(choice.embed("what is a vpc"))
    assert vector.shape == (384,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-3)
