"""The embeddings step on fresh workers: each its own build directory and Dagster instance,
sharing only a real PostgreSQL ledger and a moto S3 bucket (`BRAIN_STATE_LEDGER`,
`BRAIN_STATE_BLOBS`), against the Gemini peer that counts the texts paid."""

from __future__ import annotations

import itertools
from pathlib import Path

import boto3
import pytest

from brain_pipeline_tests.defs.conftest import (
    Project,
    edit_corpus,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)
from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url

__all__ = ["postgres_server"]  # the session's PostgreSQL fixture, used here too

API_KEY = "workers-test-key-4e2a"
_databases = itertools.count()


def _worker(tmp_path: Path, name: str, corpus: Path, fixture: dict[str, object]) -> Project:
    folder = tmp_path / name
    folder.mkdir()
    project = make_project(folder, corpus, fixture)
    project.write_config(**{"embedding.provider": "auto", "embedding.dimension": 32})
    return project


def _paid(server: FakeGemini) -> int:
    return server.stats().task_types.get("RETRIEVAL_DOCUMENT", 0)


def test_a_fresh_worker_pays_only_for_the_edit_and_builds_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_server: PostgresServer,
    s3: MotoS3Server,
) -> None:
    database = postgres_server.create_database(f"workers_{next(_databases)}")
    boto3.client("s3", endpoint_url=s3.endpoint_url).create_bucket(Bucket="shared")
    monkeypatch.setenv("BRAIN_STATE_LEDGER", postgres_url(postgres_server, database))
    monkeypatch.setenv("BRAIN_STATE_BLOBS", "s3://shared/brain")
    corpus = tmp_path / "corpus"
    fixture = tiny_fixture(write_tiny_corpus(corpus))
    with FakeGemini(api_key=API_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        worker_a = _worker(tmp_path, "a", corpus, fixture)
        assert worker_a.materialize("*embeddings").success
        first = _paid(server)
        assert first > 0

        fresh = _worker(tmp_path, "fresh", corpus, fixture)  # nothing changed
        assert fresh.materialize("*embeddings").success
        assert _paid(server) == first

        edit_corpus(worker_a)  # one new paragraph
        worker_b = _worker(tmp_path, "b", corpus, fixture)
        assert worker_b.materialize("*embeddings").success
        assert _paid(server) == first + 1  # only the new chunk

        assert worker_a.materialize("*embeddings").success  # one machine, after the edit
        assert _paid(server) == first + 1
        assert (worker_b.build / "embeddings.bin").read_bytes() == (
            worker_a.build / "embeddings.bin").read_bytes()
