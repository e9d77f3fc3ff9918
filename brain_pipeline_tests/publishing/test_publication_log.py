"""publishing.publication_log: what is live, what a rollback restores, holds, generations;
kept in the ledger (SQLite and PostgreSQL), an old history file read in once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.publishing.publication_log import HistoryError, append_events, read_history
from brain_pipeline.state.blobs import LocalBlobs
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger
from brain_pipeline.state.memory import Memory
from brain_pipeline_tests.state.conftest import ledger_url, postgres_server  # noqa: F401


@pytest.fixture
def memory(tmp_path: Path, ledger_url: str) -> Memory:  # noqa: F811
    layout = StateLayout.of(tmp_path / "build")
    return Memory(Ledger(ledger_url), LocalBlobs(tmp_path / "blobs"), layout)


def pub(pub_id: int, store: str, restores: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "kind": "rollback" if restores else "published",
        "id": pub_id,
        "when": f"2026-01-0{pub_id}T03:00:00+00:00",
        "run_id": f"run{pub_id}",
        "trigger": "schedule reingest_schedule",
        "corpus_digest": f"c{pub_id}",
        "store_sha256": store * 64,
        "store_size": 10,
        "embeddings_sha256": None,
        "embeddings_size": None,
        "manifest_sha256": f"m{pub_id}",
        "evaluation": {"passed": True, "figures": {"bm25.ndcg_at_10": 0.5}, "key": f"k{pub_id}"},
        "baseline": f"k{pub_id}",
    }
    if restores:
        event["restores"] = restores
    return event


def test_previous_goes_further_back_after_a_rollback(memory: Memory) -> None:
    history = append_events(memory, [pub(1, "a"), pub(2, "b"), pub(3, "c")])
    assert history.live().id == 3 and history.previous().id == 2  # type: ignore[union-attr]
    history = append_events(memory, [pub(4, "b", restores=2)])
    assert history.live().origin == 2 and history.previous().id == 1  # type: ignore[union-attr]
    assert read_history(memory) == history  # what is on disk is what was returned


def test_a_hold_holds_the_same_inputs_until_released(memory: Memory) -> None:
    hold = {
        "kind": "hold",
        "publication": 3,
        "store_sha256": "c" * 64,
        "corpus_digest": "c3",
        "fixture_sha256": "f",
        "when": "now",
    }
    history = append_events(memory, [pub(1, "a"), pub(3, "c"), hold])
    active = history.hold()
    assert active is not None
    assert active.holds("c" * 64, "other", "other")  # the same bytes
    assert active.holds("d" * 64, "c3", "f")  # the same inputs
    assert not active.holds("d" * 64, "c4", "f")  # the corpus changed
    assert not active.holds("d" * 64, "c3", "g")  # the fixture changed
    history = append_events(memory, [{"kind": "release", "when": "later", "reason": "x"}])
    assert history.hold() is None


def test_generations_count_distinct_stores_newest_first(memory: Memory) -> None:
    events = [pub(1, "a"), pub(2, "b"), pub(3, "c"), pub(4, "b", restores=2), pub(5, "d")]
    history = append_events(memory, events)
    assert [p.id for p in history.generations(3)] == [5, 2, 3]


def test_an_unreadable_old_history_is_refused_not_replaced(memory: Memory) -> None:
    layout = memory.layout
    layout.state_dir.mkdir(parents=True)
    layout.publications_record.write_text("{not json")
    with pytest.raises(HistoryError, match="publications.json is unreadable"):
        read_history(memory)
    with pytest.raises(HistoryError):
        append_events(memory, [pub(1, "a")])
    assert layout.publications_record.read_text() == "{not json"


def test_an_old_history_is_read_in_once_and_shared(memory: Memory, tmp_path: Path) -> None:
    old = memory.layout.publications_record
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"format": 1, "events": [pub(1, "a"), pub(2, "b")]}))
    assert [p.id for p in read_history(memory).publications()] == [1, 2]
    old.unlink()  # read in: the ledger holds it now, and a second worker sees it
    other = Memory(Ledger(memory.ledger.url), memory.blobs, StateLayout.of(tmp_path / "w2"))
    history = append_events(other, [pub(3, "c")])
    assert [p.id for p in history.publications()] == [1, 2, 3]
    assert read_history(memory) == history


def test_two_workers_cannot_both_record_the_same_publication(
    memory: Memory, tmp_path: Path
) -> None:
    other = Memory(Ledger(memory.ledger.url), memory.blobs, StateLayout.of(tmp_path / "w2"))
    append_events(memory, [pub(1, "a")])
    with pytest.raises(HistoryError, match="another worker"):
        append_events(other, [pub(1, "b")])  # decided on a history read before #1
    assert [p.store_sha256[0] for p in read_history(other).publications()] == ["a"]


def test_a_release_ends_only_the_hold_it_names(memory: Memory) -> None:
    def hold(pub_id: int) -> dict[str, Any]:
        return {"kind": "hold", "publication": pub_id, "store_sha256": "c" * 64,
                "corpus_digest": "c", "fixture_sha256": "f", "when": "now"}  # fmt: skip

    append_events(memory, [pub(1, "a"), pub(2, "b"), hold(2)])
    # Another worker's rollback held #3 after this worker read the hold on #2.
    history = append_events(memory, [pub(3, "c", restores=1), hold(3)])
    history = append_events(memory, [{"kind": "release", "publication": 2, "when": "x"}])
    assert history.hold() is not None and history.hold().publication == 3  # type: ignore[union-attr]
    history = append_events(memory, [{"kind": "release", "publication": 3, "when": "y"}])
    assert history.hold() is None
