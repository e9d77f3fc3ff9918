"""The ledger's and the blob store's two backends, each a real engine: SQLite in the test's
folder and a real PostgreSQL server; a local folder and moto's S3 server over HTTP."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from brain_pipeline.state.blobs import BlobStore, blob_store
from brain_pipeline.state.ledger import sqlite_url
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer

_databases = itertools.count()
BUCKET = "brain-state"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL cluster for the session (fails, never skips, when missing)."""
    with PostgresServer.running() as server:
        yield server


def postgres_url(server: PostgresServer, database: str) -> str:
    return f"postgresql://{server.superuser}@{server.host}:{server.port}/{database}"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger's URL on each backend."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "state" / "ledger.sqlite")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return postgres_url(server, server.create_database(f"ledger_{next(_databases)}"))


@pytest.fixture(params=["local", "s3"])
def blobs_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty blob store's URL on each backend (S3: a new bucket on moto)."""
    if request.param == "local":
        return str(tmp_path / "blobs")
    server: MotoS3Server = request.getfixturevalue("s3")
    boto3.client("s3", endpoint_url=server.endpoint_url).create_bucket(Bucket=BUCKET)
    return f"s3://{BUCKET}/team/state"


@pytest.fixture
def blobs(blobs_url: str) -> BlobStore:
    return blob_store(blobs_url)
