"""The graph with the Gemini provider, against our Gemini REST peer and the real SDK."""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import numpy as np
import pytest

from brain_pipeline.corpus.store import parse_store
from brain_pipeline.retrieval.vectors import decode_embeddings, quantize
from brain_pipeline_tests.defs.conftest import Project
from brain_pipeline_tests.peers.fake_gemini import FakeGemini, fake_vector

API_KEY = "graph-test-key-7c1d2e"


@pytest.fixture
def gemini_project(tiny_project: Project, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    with FakeGemini(api_key=API_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        tiny_project.write_config(**{"embedding.provider": "auto", "embedding.dimension": 32})
        tiny_project.gemini = server  # type: ignore[attr-defined]
        yield tiny_project


def _metadata(project: Project, name: str) -> dict[str, object]:
    event = project.instance.get_latest_materialization_event(dg.AssetKey(name))
    assert event is not None and event.asset_materialization is not None
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def test_gemini_vectors_are_built_evaluated_and_published(gemini_project: Project) -> None:
    server: FakeGemini = gemini_project.gemini  # type: ignore[attr-defined]
    outcome = gemini_project.materialize()
    assert outcome.success, outcome.lines
    chunks = parse_store(gemini_project.store_file.read_bytes())
    built = (gemini_project.build / "embeddings.bin").read_bytes()
    store = decode_embeddings(built)
    assert store.model == "gemini-embedding-001" and store.dim == 32
    assert store.ids == [c.id for c in chunks]
    expected = quantize(np.stack([fake_vector(c.content, 32) for c in chunks]))
    assert np.array_equal(store.vectors, expected)
    # The agent's query model made these vectors, so they are published with the store.
    published = gemini_project.published() / "embeddings.bin"
    assert published.read_bytes() == built
    # Documents and evaluation queries both went through the SDK with the right task types.
    stats = server.stats()
    assert stats.task_types.get("RETRIEVAL_DOCUMENT") == len(chunks)
    assert stats.task_types.get("RETRIEVAL_QUERY", 0) >= 1
    assert API_KEY not in str(_metadata(gemini_project, "embeddings"))


def test_rerun_with_nothing_changed_sends_zero_texts(gemini_project: Project) -> None:
    server: FakeGemini = gemini_project.gemini  # type: ignore[attr-defined]
    assert gemini_project.materialize("*embeddings").success
    documents_before = server.stats().task_types.get("RETRIEVAL_DOCUMENT", 0)
    assert gemini_project.materialize("*embeddings").success
    assert server.stats().task_types.get("RETRIEVAL_DOCUMENT", 0) == documents_before
    meta = _metadata(gemini_project, "embeddings")
    assert meta["embedded"] == 0 and meta["reused"] == documents_before


def test_a_rejected_key_fails_the_embeddings_step_without_leaking_it(
    gemini_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong_key = "wrong-key-should-never-print-93af"
    monkeypatch.setenv("GEMINI_API_KEY", wrong_key)
    outcome = gemini_project.materialize()
    assert not outcome.success
    failure = next(line for line in outcome.lines if "FAILED   embeddings" in line)
    assert "key" in failure.lower()
    assert wrong_key not in "\n".join(outcome.lines)
    assert not (gemini_project.published() / "knowledge-store.json").exists()


def test_moving_from_the_pickle_layout_embeds_nothing_again(gemini_project: Project) -> None:
    """A build dir from before state/ existed (store + vectors, no records): nothing re-paid."""
    import shutil

    server: FakeGemini = gemini_project.gemini  # type: ignore[attr-defined]
    assert gemini_project.materialize().success
    paid = server.stats().task_types.get("RETRIEVAL_DOCUMENT", 0)
    assert paid > 0  # the first build did embed: "nothing re-paid" below means something
    shutil.rmtree(gemini_project.build / "state")  # what the first version left behind
    gemini_project.instance = dg.DagsterInstance.ephemeral()  # and a fresh instance
    outcome = gemini_project.materialize()
    assert outcome.success, outcome.lines
    assert server.stats().task_types.get("RETRIEVAL_DOCUMENT", 0) == paid
    meta = _metadata(gemini_project, "embeddings")
    assert meta["embedded"] == 0 and meta["reused"] == paid
