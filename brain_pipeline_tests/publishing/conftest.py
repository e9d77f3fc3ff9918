"""Fixtures for publishing: sample stores and vectors, and a real moto S3 server."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server

AGENT_MODEL = "gemini-embedding-001"
TEST_REGION = "us-east-1"
TEST_ACCESS_KEY = "TESTPUBLISHKEY000001"
# Distinctive so a test can prove it never surfaces in a message.
TEST_SECRET = "sEcReT-never-print-me-0123456789abcdefgh"


@dataclass(frozen=True)
class SampleBuild:
    """A store and its vectors as the pipeline would hand them to publishing."""

    chunks: list[Chunk]
    store_bytes: bytes
    embeddings_bytes: bytes


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


# -- S3 -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoS3Server]:
    with MotoS3Server.start() as server:
        yield server


@pytest.fixture
def s3(moto_server: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3Server]:
    """A clean moto server reachable by a plain boto3 client through the environment."""
    moto_server.disable_auth()
    moto_server.reset()
    moto_server.requests_settled()
    moto_server.clear_requests()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    try:
        yield moto_server
    finally:
        moto_server.disable_auth()
        moto_server.reset()


@pytest.fixture
def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
