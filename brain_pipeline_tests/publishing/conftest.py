"""Fixtures for publishing: sample stores and vectors, and a real moto S3 server."""

from __future__ import annotations

import atexit
import shutil
import socket
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.publishing.manifest import build_manifest
from brain_pipeline.publishing.s3 import S3PublishReport, publish_s3
from brain_pipeline.publishing.source import ArtifactSource
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline_tests.peers.moto_s3 import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET

__all__ = ["TEST_ACCESS_KEY", "TEST_REGION", "TEST_SECRET"]

AGENT_MODEL = "gemini-embedding-001"


_SOURCES: list[Path] = []


def source_of(data: bytes) -> ArtifactSource:
    """`data` as publishing takes it: a file, named by its digest (so equal bytes share
    one), in a folder of this test process removed when it exits."""
    if not _SOURCES:
        _SOURCES.append(Path(tempfile.mkdtemp(prefix="brain-publish-sources-")))
        atexit.register(shutil.rmtree, _SOURCES[0], True)
    digest = sha256_hex(data)
    path = _SOURCES[0] / digest
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)
    return ArtifactSource(path, digest, len(data))


@dataclass(frozen=True)
class SampleBuild:
    """A store and its vectors: the bytes (to compare with) and, as the pipeline hands
    them to publishing, the files (`store`, `embeddings`)."""

    chunks: list[Chunk]
    store_bytes: bytes
    embeddings_bytes: bytes

    @cached_property
    def store(self) -> ArtifactSource:
        return source_of(self.store_bytes)

    @cached_property
    def embeddings(self) -> ArtifactSource:
        return source_of(self.embeddings_bytes)


def make_chunks(areas: dict[str, int], salt: str = "") -> list[Chunk]:
    """`areas` maps area name -> how many chunks; contents differ per salt."""
    chunks: list[Chunk] = []
    for area, count in areas.items():
        for i in range(count):
            content = f"{salt}Paragraph {i} about {area}: long enough to be kept as a chunk."
            chunks.append(Chunk(chunk_id(content), content, area, f"{area}/notes.md", "Intro"))
    return chunks


def make_embeddings(model: str, ids: Sequence[str], dim: int = 8, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return encode_embeddings(model, list(ids), quantize(rng.normal(size=(len(ids), dim))))


def make_build(
    areas: dict[str, int] | None = None, model: str = AGENT_MODEL, salt: str = ""
) -> SampleBuild:
    chunks = make_chunks(areas or {"aws-tutor": 3, "python-tutor": 2}, salt)
    return SampleBuild(
        chunks=chunks,
        store_bytes=serialize_store(chunks),
        embeddings_bytes=make_embeddings(model, [c.id for c in chunks]),
    )


@pytest.fixture
def build() -> SampleBuild:
    return make_build()


@pytest.fixture
def publish_root(tmp_path: Path) -> Path:
    root = tmp_path / "agent"
    root.mkdir()
    return root


@pytest.fixture
def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def publish_build(
    build: SampleBuild, *, bucket: str, prefix: str, **overrides: Any
) -> S3PublishReport:
    """`publish_s3` of a sample build with its own manifest, vectors included, in the test
    region; `overrides` replace any option (a protection, a deadline, another client)."""
    options: dict[str, Any] = {
        "bucket": bucket,
        "prefix": prefix,
        "region": TEST_REGION,
        "include_embeddings": True,
        "manifest": build_manifest(build.store, build.embeddings, build.chunks),
    }
    options.update(overrides)
    return publish_s3(build.store, build.embeddings, **options)
