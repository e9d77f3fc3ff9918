"""Vectors across workers: each worker has its own empty build directory and shares only a
real PostgreSQL ledger and a moto S3 bucket; the fake Gemini server counts what is paid."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.embedding.builder import EmbeddingReport, build_embeddings
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.embedding.helpers import corpus, gemini, worker_memory
from brain_pipeline_tests.peers.fake_gemini import FakeGemini
from brain_pipeline_tests.peers.moto_s3 import MotoS3Server
from brain_pipeline_tests.peers.postgres import PostgresServer
from brain_pipeline_tests.state.conftest import postgres_server, postgres_url

__all__ = ["postgres_server"]  # the session's PostgreSQL fixture, used here too

FILES = {"a.md": 12, "b.md": 9, "c.md": 7}
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "build-by-main-5d65fac.tar.gz"
_databases = itertools.count()


@pytest.fixture
def shared(postgres_server: PostgresServer, s3: MotoS3Server) -> tuple[str, str]:
    """(ledger URL, blobs URL): a fresh PostgreSQL database and a fresh bucket."""
    server = postgres_server
    database = server.create_database(f"embed_{os.getpid()}_{next(_databases)}")
    boto3.client("s3", endpoint_url=s3.endpoint_url).create_bucket(Bucket="vectors")
    return postgres_url(server, database), "s3://vectors/team"


def _build(
    worker: Path, chunks: list[Chunk], shared: tuple[str, str], **kwargs: object
) -> EmbeddingReport:
    worker.mkdir(parents=True, exist_ok=True)
    memory = worker_memory(worker, *shared)
    try:
        return build_embeddings(chunks, worker / "embeddings.bin", gemini(**kwargs),
                                memory=memory)
    finally:
        memory.ledger.close()


def test_after_an_edit_a_fresh_worker_embeds_only_the_new_chunks(
    gemini_server: FakeGemini, shared: tuple[str, str], tmp_path: Path
) -> None:
    _build(tmp_path / "a", corpus(FILES), shared)
    assert gemini_server.stats().texts == 28
    edited = corpus(FILES, edits={"a.md": {0, 5}, "c.md": {6}})

    report = _build(tmp_path / "b", edited, shared)  # an empty build directory
    assert gemini_server.stats().texts == 28 + 3  # only the new chunks were paid for
    assert (report.embedded, report.reused) == (3, 25)

    one_machine = tmp_path / "one" / "embeddings.bin"
    one_machine.parent.mkdir()
    build_embeddings(edited, one_machine, gemini())  # its own ledger, from scratch
    assert (tmp_path / "b" / "embeddings.bin").read_bytes() == one_machine.read_bytes()


def test_nothing_changed_a_fresh_worker_embeds_nothing(
    gemini_server: FakeGemini, shared: tuple[str, str], tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    _build(tmp_path / "a", chunks, shared)
    paid = gemini_server.stats().texts
    report = _build(tmp_path / "b", chunks, shared)
    assert gemini_server.stats().texts == paid
    assert report.embedded == 0
    assert (tmp_path / "b" / "embeddings.bin").read_bytes() == (
        tmp_path / "a" / "embeddings.bin").read_bytes()


def test_a_worker_killed_mid_build_is_resumed_by_another(
    gemini_server: FakeGemini, shared: tuple[str, str], tmp_path: Path
) -> None:
    n, batch = 400, 20
    worker_a = tmp_path / "a"
    worker_a.mkdir()
    # The server answers six requests and holds the seventh: the kill lands while that
    # batch is in flight (no race against a sleep).
    gemini_server.configure(hold_after_requests=6)
    child = subprocess.Popen(
        [sys.executable, "-m", "brain_pipeline_tests.embedding.build_child",
         str(worker_a / "embeddings.bin"), str(n), str(batch), *shared],
        env=dict(os.environ), cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert gemini_server.holding.wait(60), "the child never reached the held request"
        assert child.poll() is None, "the child finished or died before it was killed"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    assert not (worker_a / "embeddings.bin").exists()

    gemini_server.configure(hold_after_requests=None)
    chunks = corpus({"big.md": n})
    report = _build(tmp_path / "b", chunks, shared, batch_size=batch)
    assert report.resumed == 6 * batch
    assert report.embedded == n - 6 * batch
    assert gemini_server.stats().texts <= n + batch  # at most the batch in flight again

    one_machine = tmp_path / "one" / "embeddings.bin"
    one_machine.parent.mkdir()
    build_embeddings(chunks, one_machine, gemini(batch_size=batch))
    assert (tmp_path / "b" / "embeddings.bin").read_bytes() == one_machine.read_bytes()


@pytest.fixture
def old_build(tmp_path: Path) -> Iterator[Path]:
    """The build directory main made before the ledger (10 texts of dimension 256)."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path / "old", filter="data")
    yield tmp_path / "old" / "build"


def test_upgrade_the_first_run_embeds_nothing_and_shares_the_old_vectors(
    gemini_server: FakeGemini, shared: tuple[str, str], old_build: Path, tmp_path: Path
) -> None:
    old_bytes = (old_build / "embeddings.bin").read_bytes()
    layout = StateLayout.of(old_build)
    chunks = open_store_view(layout.store_file, layout).all_chunks()

    report = _build(old_build, chunks, shared, dimension=256)
    assert gemini_server.stats().texts == 0
    assert (report.embedded, report.reused) == (0, len(chunks))
    assert (old_build / "embeddings.bin").read_bytes() == old_bytes

    # Read into the shared ledger once: a fresh worker pays nothing either.
    _build(tmp_path / "fresh", chunks, shared, dimension=256)
    assert gemini_server.stats().texts == 0
    assert (tmp_path / "fresh" / "embeddings.bin").read_bytes() == old_bytes


def test_a_text_refused_on_one_worker_is_not_sent_again_by_another(
    gemini_server: FakeGemini, shared: tuple[str, str], tmp_path: Path
) -> None:
    chunks = corpus(FILES)
    gemini_server.configure(refuse_substrings=[chunks[4].content])
    report = _build(tmp_path / "a", chunks, shared)
    assert (report.embedded, report.refused) == (27, 1)
    sent = len(gemini_server.stats().sent_texts)

    report = _build(tmp_path / "b", chunks, shared)  # an empty build directory
    assert (report.embedded, report.refused) == (0, 1)
    assert len(gemini_server.stats().sent_texts) == sent  # the refusal is remembered
