"""A step whose upstream's file is not on this disk (a fresh worker: an empty build
directory and its own Dagster instance, sharing only the ledger and the blobs) fetches it
by the digest in the upstream's ledger row, and makes the bytes one machine would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from brain_pipeline_tests.defs.conftest import (
    Project,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)
from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.peers.postgres import PostgresServer

KEY = "fresh-worker-key"


def _worker(root: Path, corpus: Path, ids: dict[str, str], **state: str) -> Project:
    root.mkdir(parents=True)
    project = make_project(root, corpus, tiny_fixture(ids))
    project.write_config(
        **{"embedding.provider": "auto", "embedding.dimension": 32},
        **{f"state.{k}": v for k, v in state.items()},
    )
    return project


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer.running() as server:
        yield server


@pytest.fixture(params=["sqlite+folder", "postgresql+s3"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The ledger and blobs both workers share: a SQLite file and a folder outside either
    build directory, or a real PostgreSQL database and a bucket on moto's S3 server."""
    if request.param == "sqlite+folder":
        return {
            "ledger": f"sqlite:///{tmp_path / 'shared' / 'ledger.sqlite'}",
            "blobs": str(tmp_path / "shared" / "blobs"),
        }
    server: PostgresServer = request.getfixturevalue("postgres")
    moto = request.getfixturevalue("s3")
    boto3.client("s3", endpoint_url=moto.endpoint_url).create_bucket(Bucket="brain-state")
    database = server.create_database(f"fresh_{tmp_path.name[-12:].replace('-', '_')}")
    return {
        "ledger": f"postgresql://{server.superuser}@{server.host}:{server.port}/{database}",
        "blobs": "s3://brain-state/team/state",
    }


def test_a_fresh_worker_fetches_the_upstream_store_and_builds_the_same_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: dict[str, str]
) -> None:
    corpus = tmp_path / "corpus"
    ids = write_tiny_corpus(corpus)
    with FakeGemini(api_key=KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        one_machine = _worker(tmp_path / "one", corpus, ids)
        assert one_machine.materialize("key:knowledge_chunks or key:knowledge_store").success
        assert one_machine.materialize("key:embeddings").success

        a = _worker(tmp_path / "a", corpus, ids, **shared)
        assert a.materialize("key:knowledge_chunks or key:knowledge_store").success
        b = _worker(tmp_path / "b", corpus, ids, **shared)
        assert not b.build.exists() or not b.store_file.exists()
        outcome = b.materialize("key:embeddings")  # its upstream's file is only A's
        assert outcome.success, outcome.lines
    assert b.store_file.read_bytes() == one_machine.store_file.read_bytes()
    assert (b.build / "embeddings.bin").read_bytes() == (
        one_machine.build / "embeddings.bin"
    ).read_bytes()
