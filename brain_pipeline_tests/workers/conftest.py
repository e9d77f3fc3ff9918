"""The shared peers of the fresh-worker scenarios (harness.py): one real PostgreSQL
server for the session, moto's S3 server reset per test, a fake Gemini server per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer
from brain_pipeline_tests.workers.harness import API_KEY, Cluster

_clusters = itertools.count()


@pytest.fixture(scope="session")
def workers_postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL cluster for the session (fails, never skips, when missing)."""
    with PostgresServer.running() as server:
        yield server


@pytest.fixture
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini(api_key=API_KEY) as server:
        yield server


@pytest.fixture
def cluster(
    tmp_path: Path, workers_postgres: PostgresServer, s3: MotoS3Server, gemini: FakeGemini
) -> Cluster:
    """Fresh databases, buckets, corpus and configuration; workers are made on demand."""
    return Cluster.create(
        tmp_path / "cluster", workers_postgres, s3, gemini, name=f"c{next(_clusters)}"
    )
