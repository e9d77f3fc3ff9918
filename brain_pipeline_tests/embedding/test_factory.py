"""embedding.factory: which embedder a provider name and a configuration give.

Pins `embedder_for` (each provider, the key Gemini needs, the configuration's model,
dimension and batch size, `auto` resolved by the key), and `choose_query_embedder`
(vectors of another model, no key or no provider mean lexical with a note, never a
crash; a matching provider embeds queries). Gemini is
the real google-genai SDK talking to the fake server on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.embedding.factory import choose_query_embedder, embedder_for
from brain_pipeline.embedding.gemini import GeminiEmbedder
from brain_pipeline.embedding.local import LocalEmbedder
from brain_pipeline.embedding.protocol import EmbeddingRejected
from brain_pipeline.retrieval.vectors import EmbeddingStore
from brain_pipeline_tests.embedding.helpers import API_KEY
from brain_pipeline_tests.peers.fake_gemini import FakeGemini


def config(tmp_path: Path, provider: str, **embedding: Any) -> BrainConfig:
    path = tmp_path / "corpus_config.yaml"
    settings = {
        "build_dir": str(tmp_path / "build"),
        "embedding": {**embedding, "provider": provider},
    }
    path.write_text(json.dumps(settings))  # JSON is YAML
    return load_config(path, env={})


def no_vectors(model: str, dimension: int) -> EmbeddingStore:
    return EmbeddingStore(model, dimension, [], np.zeros((0, dimension), np.int8))


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


# -- embedder_for ----------------------------------------------------------------------------


def test_embedder_for_uses_the_configured_model_dimension_and_batch(
    gemini_server: FakeGemini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    cfg = config(tmp_path, "gemini", model="gemini-embedding-001", dimension=48, batch_size=20)
    embedder = embedder_for(cfg)
    assert isinstance(embedder, GeminiEmbedder)
    assert (embedder.name, embedder.dimension, embedder.max_batch) == (
        "gemini-embedding-001", 48, 20)
    assert embedder.embed_documents(["a", "b"]).shape == (2, 48)  # the key reached the server


def test_the_configured_request_quota_reaches_the_pacer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """embedding.requests_per_minute is the pacer's second bucket (its limiting, under a
    fake clock: embedding/test_pacing.py), below what the text quota alone would allow."""
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    cfg = config(tmp_path, "gemini", texts_per_minute=3000, requests_per_minute=12)
    embedder = embedder_for(cfg)
    assert isinstance(embedder, GeminiEmbedder)
    rate = embedder.pacer.requests_rate_per_minute
    assert rate is not None and 0.9 * 12 <= rate <= 12


def test_gemini_requires_a_key_and_local_ignores_the_gemini_settings(
    tmp_path: Path, no_key: None
) -> None:
    with pytest.raises(EmbeddingRejected):
        embedder_for(config(tmp_path, "gemini"))
    local = embedder_for(config(tmp_path, "local", model="gemini-embedding-001", dimension=256))
    assert isinstance(local, LocalEmbedder)
    assert (local.name, local.dimension) == ("all-MiniLM-L6-v2-int8", 384)
    assert embedder_for(config(tmp_path, "none")) is None


def test_auto_means_gemini_with_a_key_and_no_vectors_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_key: None
) -> None:
    assert embedder_for(config(tmp_path, "auto")) is None
    monkeypatch.setenv("GOOGLE_API_KEY", API_KEY)
    assert isinstance(embedder_for(config(tmp_path, "auto")), GeminiEmbedder)


# -- choose_query_embedder -------------------------------------------------------------------


def test_no_embedder_without_vectors_or_provider(tmp_path: Path) -> None:
    vectors = no_vectors("all-MiniLM-L6-v2-int8", 384)
    assert "no readable embeddings.bin" in str(
        choose_query_embedder(config(tmp_path, "local"), None).note
    )
    none = choose_query_embedder(config(tmp_path, "none"), vectors)
    assert none.embed is None and "'none'" in str(none.note)


def test_model_mismatch_means_lexical_without_loading_anything(tmp_path: Path) -> None:
    vectors = no_vectors("gemini-embedding-001", 256)
    choice = choose_query_embedder(config(tmp_path, "local"), vectors)
    assert choice.embed is None
    assert "gemini-embedding-001" in str(choice.note) and "all-MiniLM-L6-v2-int8" in str(
        choice.note
    )


def test_gemini_without_a_key_is_a_note_not_a_crash(tmp_path: Path, no_key: None) -> None:
    vectors = no_vectors("gemini-embedding-001", 256)
    choice = choose_query_embedder(config(tmp_path, "gemini"), vectors)
    # the preflight's own line, the one check of it
    assert choice.embed is None and "GEMINI_API_KEY" in str(choice.note)
    assert "is not set" in str(choice.note)


def test_matching_gemini_vectors_embed_queries_through_the_service(
    gemini_server: FakeGemini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    cfg = config(tmp_path, "gemini", dimension=64)
    choice = choose_query_embedder(cfg, no_vectors("gemini-embedding-001", 64))
    assert choice.note is None and choice.model == "gemini-embedding-001"
    assert choice.embed is not None
    vector = np.asarray(choice.embed("what is a vpc"))
    assert vector.shape == (64,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-3)


def test_matching_local_model_embeds_queries(tmp_path: Path) -> None:
    vectors = no_vectors("all-MiniLM-L6-v2-int8", 384)
    choice = choose_query_embedder(config(tmp_path, "local"), vectors)
    assert choice.note is None and choice.model == "all-MiniLM-L6-v2-int8"
    assert choice.embed is not None
    vector = np.asarray(choice.embed("what is a vpc"))
    assert vector.shape == (384,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-3)
