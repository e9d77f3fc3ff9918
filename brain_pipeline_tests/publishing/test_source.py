"""An artifact named by path with a known sha256: streamed, verified, refused when rewritten."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.publishing.source import (
    BLOCK_SIZE,
    ArtifactSource,
    SourceChanged,
    read_vectors_header,
)
from brain_pipeline.retrieval.vectors import NotAnEmbeddingStore, encode_embeddings

DATA = bytes(range(256)) * (BLOCK_SIZE // 256 + 3)  # more than one block


def _source(tmp_path: Path, data: bytes = DATA) -> ArtifactSource:
    path = tmp_path / "artifact.bin"
    path.write_bytes(data)
    return ArtifactSource.of_file(path)


def test_the_blocks_are_the_file_and_its_digests_are_the_plain_ones(tmp_path: Path) -> None:
    source = _source(tmp_path)
    assert source.sha256 == hashlib.sha256(DATA).hexdigest() and source.size == len(DATA)
    assert b"".join(source.blocks()) == DATA
    assert source.md5_hex() == hashlib.md5(DATA).hexdigest()
    assert base64.b64decode(source.b64_sha256) == hashlib.sha256(DATA).digest()


def test_a_file_rewritten_with_the_same_size_fails_at_the_end_of_the_stream(
    tmp_path: Path,
) -> None:
    source = _source(tmp_path)
    source.path.write_bytes(DATA[::-1])
    with pytest.raises(SourceChanged, match="not the file it was published as"):
        b"".join(source.blocks())


def test_a_file_of_another_size_is_refused_before_reading(tmp_path: Path) -> None:
    source = _source(tmp_path)
    source.path.write_bytes(DATA + b"more")
    with pytest.raises(SourceChanged, match="rewritten meanwhile"):
        source.md5_hex()
    other = tmp_path / "other.bin"
    other.write_bytes(DATA)
    with pytest.raises(SourceChanged):
        source.same_bytes_as(other)


def test_same_bytes_as_compares_every_block(tmp_path: Path) -> None:
    source = _source(tmp_path)
    twin = tmp_path / "twin.bin"
    twin.write_bytes(DATA)
    assert source.same_bytes_as(twin)
    twin.write_bytes(DATA[:-1] + b"\x00")  # the last block differs in its last byte
    assert not source.same_bytes_as(twin)


def test_the_vectors_header_is_read_without_the_vectors(tmp_path: Path) -> None:
    vectors = np.ones((2, 4), dtype=np.int8)
    source = _source(tmp_path, encode_embeddings("model-x", ["aaaaaaaaaaaa", "b"], vectors))
    header = read_vectors_header(source)
    assert (header.model, header.dim, header.ids, header.count) == (
        "model-x",
        4,
        ["aaaaaaaaaaaa", "b"],
        2,
    )
    with pytest.raises(NotAnEmbeddingStore):
        read_vectors_header(_source(tmp_path, b"not vectors"))
