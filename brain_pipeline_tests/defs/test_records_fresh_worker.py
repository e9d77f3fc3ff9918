"""A step whose upstream's file is not on this disk (a fresh worker: an empty build
directory and its own Dagster instance, sharing only the ledger and the blobs) fetches it
by the digest in the upstream's ledger row, and makes the bytes one machine would."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain_pipeline_tests.defs.conftest import (
    Project,
    make_project,
    tiny_fixture,
    write_tiny_corpus,
)
from brain_pipeline_tests.peers.fake_gemini import FakeGemini

KEY = "fresh-worker-key"


def _worker(root: Path, corpus: Path, ids: dict[str, str], **state: str) -> Project:
    root.mkdir(parents=True)
    project = make_project(root, corpus, tiny_fixture(ids))
    project.write_config(
        **{"embedding.provider": "auto", "embedding.dimension": 32},
        **{f"state.{k}": v for k, v in state.items()},
    )
    return project


def test_a_fresh_worker_fetches_the_upstream_store_and_builds_the_same_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    ids = write_tiny_corpus(corpus)
    shared = {
        "ledger": f"sqlite:///{tmp_path / 'shared' / 'ledger.sqlite'}",
        "blobs": str(tmp_path / "shared" / "blobs"),
    }
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
