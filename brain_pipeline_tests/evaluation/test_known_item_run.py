"""The known-item check inside the evaluation service: baselines, caches, bad state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.corpus.store import Chunk, chunk_id, serialize_store
from brain_pipeline.corpus.store_reader import open_store_view
from brain_pipeline.evaluation import eval_record, judgements
from brain_pipeline.evaluation.baseline import NO_KNOWN_ITEMS
from brain_pipeline.evaluation.known_item_gate import KnownItemSettings
from brain_pipeline.evaluation.known_item_run import (
    KnownItemRun,
    _query_code,
    _VectorMemo,
    directory,
    load_queries,
    run_known_items,
    write_cache,
)
from brain_pipeline.evaluation.service import (
    EvaluationOutcome,
    accept_evaluation,
    evaluate_store_dir,
    record_as_baseline,
)
from brain_pipeline.publishing.gate import decide
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize
from brain_pipeline.retrieval.view_source import ViewSource
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.views import clear_views
from brain_pipeline_tests.evaluation.helpers import WordHashEmbedder, memory_at
from brain_pipeline_tests.evaluation.known_item_corpus import corpus, passage


class Build:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "build"
        self.dir.mkdir(parents=True)
        self.layout = StateLayout.of(self.dir)
        self.memory = memory_at(self.dir)
        fixture = tmp_path / "fixture.json"
        fixture.write_text(json.dumps({"queries": []}))
        config = tmp_path / "corpus_config.yaml"
        config.write_text(
            f"build_dir: {self.dir}\nembedding:\n  provider: none\n"
            f"evaluation:\n  fixture: {fixture}\n  thresholds:\n    bm25:\n"
            "      min_ndcg_at_10: 0.9\n  known_items:\n    sample_per_area: 12\n"
        )
        self.cfg: BrainConfig = load_config(config, env={})

    def store(self, chunks: list[Chunk]) -> None:
        tmp = self.dir / ".store.tmp"
        tmp.write_bytes(serialize_store(chunks))
        os.replace(tmp, self.dir / "knowledge-store.json")
        clear_views()

    def evaluate(self) -> EvaluationOutcome:
        return evaluate_store_dir(self.cfg, self.dir)

    def publish(self, outcome: EvaluationOutcome) -> dict[str, object]:
        record = eval_record.lookup(self.memory, str(outcome.record_key))
        assert record is not None
        return record_as_baseline(self.cfg, record, kind="published")


def _has_baseline(build: Build) -> bool:
    return build.memory.ledger.pointer(judgements.KNOWN_ITEMS) not in (None, judgements.CLEARED)


@pytest.fixture
def build(tmp_path: Path) -> Build:
    return Build(tmp_path)


def test_no_labels_and_no_baseline_pass_and_say_both(build: Build) -> None:
    build.store(corpus())
    outcome = build.evaluate()
    assert outcome.verdict.severity == "PASS"
    assert outcome.verdict.line() == (
        f"PASSED: no labelled queries in {build.cfg.evaluation.fixture}: the labelled "
        "thresholds are skipped; the known-item check is the gate; known items: "
        + NO_KNOWN_ITEMS
    )
    assert decide(outcome.verdict, force=False, store_chunk_count=96).allowed


def test_a_publication_records_the_baseline_and_damage_then_blocks(build: Build) -> None:
    chunks = corpus()
    build.store(chunks)
    summary = build.publish(build.evaluate())
    assert summary["known_items"] == (
        "known items: 24 known items recorded as the baseline (published)"
    )
    assert _has_baseline(build)
    build.store([c for c in chunks if c.area != "beta"])
    outcome = build.evaluate()
    assert outcome.verdict.severity == "ERROR"
    assert outcome.verdict.failures[0].startswith(
        "known items: area beta disappeared: its 48 chunk(s) are gone"
    )
    assert not decide(outcome.verdict, force=False, store_chunk_count=48).allowed
    accepted = accept_evaluation(build.cfg, str(outcome.record_key), "beta retired")
    assert accepted is not None and accepted.severity == "PASS"
    assert decide(accepted, force=False, store_chunk_count=48).allowed
    again = build.evaluate()  # asked against the accepted store's known items now
    assert again.verdict.severity == "PASS"
    assert "accepted" in str(again.verdict.known_items and again.verdict.known_items.status)


def test_gc_keeps_the_known_items_of_the_evaluation_about_to_be_published(
    build: Build,
) -> None:
    """The known items an evaluation kept are named by its evaluation key, which is what
    `gc` keeps them by (the newest evaluation's, and the kept publications')."""
    from brain_pipeline.steps.publications import collect_blobs

    build.store(corpus())
    outcome = build.evaluate()
    collect_blobs(build.memory, 2)
    summary = build.publish(outcome)
    assert summary["known_items"] == (
        "known items: 24 known items recorded as the baseline (published)"
    )


def test_a_one_edit_build_searches_only_the_edited_area(build: Build) -> None:
    chunks = corpus()
    build.store(chunks)
    first = build.evaluate()
    assert first.known_item_run is not None and first.known_item_run.searched == 24
    build.publish(first)
    unchanged = build.evaluate()
    assert unchanged.known_item_run is not None and unchanged.known_item_run.searched == 0
    text = passage("alpha", 777)
    build.store([*chunks, Chunk(chunk_id(text), text, "alpha", "alpha/new.md")])
    edited = build.evaluate()
    assert edited.known_item_run is not None
    assert 0 < edited.known_item_run.searched <= 13  # alpha's 12 (+ the new chunk's own)
    assert edited.verdict.severity == "PASS"


def test_publishing_an_evaluation_from_before_the_check_clears_the_baseline(
    build: Build,
) -> None:
    build.store(corpus())
    outcome = build.evaluate()
    build.publish(outcome)
    assert _has_baseline(build)
    record = dict(eval_record.lookup(build.memory, str(outcome.record_key)) or {})
    record.pop("known_items_candidate")  # as a rollback to an old publication finds it
    summary = record_as_baseline(build.cfg, record, kind="published")
    assert summary["known_items"] == (
        "known items: this evaluation predates the known-item check; the known-item "
        "baseline is cleared (the check passes until the next publication records one)"
    )
    assert not _has_baseline(build)
    assert build.evaluate().verdict.severity == "PASS"


def test_a_damaged_baseline_blob_is_no_baseline_and_the_check_passes(build: Build) -> None:
    build.store(corpus())
    build.publish(build.evaluate())
    digest = str(build.memory.ledger.pointer(judgements.KNOWN_ITEMS))
    next(build.memory.layout.blobs_dir.rglob(digest)).write_bytes(b"{not json")
    outcome = build.evaluate()
    assert outcome.verdict.severity == "PASS"
    known = outcome.verdict.known_items
    assert known is not None and known.status.startswith(
        "no known-item baseline: its blob is unreadable"
    )


def test_the_query_cache_keeps_a_chunks_query_across_builds(build: Build) -> None:
    chunks = corpus()
    build.store(chunks)
    build.evaluate()
    cache = json.loads((directory(build.layout) / "queries.json").read_text())["queries"]
    text = passage("beta", 4242)
    build.store([*chunks, Chunk(chunk_id(text), text, "beta", "beta/new.md")])
    build.evaluate()
    after = json.loads((directory(build.layout) / "queries.json").read_text())["queries"]
    assert {i: after[i] for i in cache} == cache


def _hybrid_run(build: Build, chunks: list[Chunk], embedder: WordHashEmbedder,
                vectors: np.ndarray | None = None) -> KnownItemRun:
    build.store(chunks)
    layout = build.layout
    view = open_store_view(build.dir / "knowledge-store.json", layout)
    matrix = vectors if vectors is not None else quantize(
        embedder.embed_documents([c.content for c in chunks])
    )
    store = EmbeddingStore(embedder.name, embedder.dimension, [c.id for c in chunks], matrix)
    return run_known_items(
        ViewSource(view, layout), layout, sample_per_area=12, settings=KnownItemSettings(),
        embeddings=store, query_embedder=embedder.embed_query, query_model=embedder.name,
        candidate="k" * 64, memory=build.memory,
    )


def test_hybrid_embeds_each_query_once_and_an_area_whose_vectors_changed_is_asked_again(
    build: Build,
) -> None:
    embedder = WordHashEmbedder()
    chunks = corpus()
    first = _hybrid_run(build, chunks, embedder)
    assert (first.searched, first.embedded, embedder.queries_embedded) == (24, 24, 24)
    again = _hybrid_run(build, chunks, embedder)
    assert (again.searched, again.embedded) == (0, 0)
    # Same ids, other vectors for beta: beta is searched again, with the cached vectors.
    matrix = quantize(embedder.embed_documents([c.content for c in chunks]))
    matrix[[i for i, c in enumerate(chunks) if c.area == "beta"]] //= 2
    moved = _hybrid_run(build, chunks, embedder, matrix)
    assert (moved.searched, moved.embedded) == (12, 0)
    assert embedder.queries_embedded == 24


def test_an_unwritable_state_directory_costs_the_memory_not_the_evaluation(
    build: Build,
) -> None:
    build.store(corpus())
    blocker = directory(build.layout)
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the known-item folder goes")
    outcome = build.evaluate()
    run = outcome.known_item_run
    assert run is not None and run.candidate is None
    assert outcome.verdict.severity == "PASS"
    assert any(n.startswith("known items not saved (") for n in run.verdict.notes)


def test_a_fresh_worker_reuses_the_query_vectors_another_worker_paid_for(
    tmp_path: Path,
) -> None:
    """Two build directories sharing one ledger and blob folder: the second (its own
    state folder empty) embeds none of the known-item queries the first embedded."""
    from brain_pipeline.state.blobs import LocalBlobs
    from brain_pipeline.state.ledger import Ledger, sqlite_url
    from brain_pipeline.state.memory import Memory

    ledger = Ledger(sqlite_url(tmp_path / "shared" / "ledger.sqlite"))
    blobs = LocalBlobs(tmp_path / "shared" / "blobs")
    embedder, chunks = WordHashEmbedder(), corpus()
    for name in ("a", "b"):
        worker = Build(tmp_path / name)
        worker.memory = judgements.ready(Memory(ledger, blobs, worker.layout))
        run = _hybrid_run(worker, chunks, embedder)
        assert run.embedded == (24 if name == "a" else 0)
    assert embedder.queries_embedded == 24


def test_a_damaged_query_cache_is_a_cache_miss(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    write_cache(layout, "queries.json", {"version": _query_code(), "queries": {"a": "x y"}})
    assert load_queries(layout) == {"a": "x y"}
    write_cache(layout, "queries.json", {"version": "other code", "queries": {"a": "x y"}})
    assert load_queries(layout) == {}  # made by other query code: not these queries
    (directory(layout) / "queries.json").write_bytes(b"\x00\x01 not json")
    assert load_queries(layout) == {}


def test_query_vectors_are_shared_per_model_for_the_queries_still_asked(
    tmp_path: Path,
) -> None:
    memory = memory_at(tmp_path)
    embedder = WordHashEmbedder()
    first = _VectorMemo(embedder.embed_query, "m1", memory)
    first("a b"), first("old")
    first.save({"a b"})
    again = _VectorMemo(embedder.embed_query, "m1", memory)
    again("a b")
    assert again.embedded == 0  # kept, so not embedded again
    again("old")
    assert again.embedded == 1  # no longer asked when it was saved: not kept
    other = _VectorMemo(embedder.embed_query, "m2", memory)
    other("a b")
    assert other.embedded == 1  # another model's vectors are not these
