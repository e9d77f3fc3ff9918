"""The chunk history: what it records, what it returns, and that it reads only new texts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.corpus.store import NO_HEADING, Chunk, serialize_store
from brain_pipeline.state import history
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.evaluation.helpers import make_chunk

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    return StateLayout.of(tmp_path / "build")


def _store() -> list[Chunk]:
    return [
        make_chunk("Security groups are stateful firewalls.", source="aws/sg.md", heading="SG"),
        make_chunk("NACLs are stateless and evaluated in order.", source="aws/sg.md"),
        make_chunk("Rule 30 is chaotic.", area="ca", source="ca/r30.md", heading=30),
    ]


def test_an_unknown_id_and_an_empty_history(layout: StateLayout) -> None:
    assert history.is_empty(layout)
    assert history.lookup(layout, "0123456789ab") is None
    history.record_store(layout, _store(), T0)
    assert not history.is_empty(layout)
    assert history.lookup(layout, "0123456789ab") is None


def test_text_provenance_and_times_are_kept(layout: StateLayout) -> None:
    first = _store()
    outcome = history.record_store(layout, first, T0)
    assert (outcome.chunks, outcome.new) == (3, 3)
    # Next build: the NACL paragraph was edited (new id), the SG file moved.
    edited = make_chunk("NACLs are stateless; rules are evaluated in order.", source="aws/sg.md")
    moved = Chunk(first[0].id, first[0].content, "aws", "aws/net/sg.md", "SG")
    outcome = history.record_store(layout, [moved, edited, first[2]], T0 + timedelta(days=1))
    assert (outcome.chunks, outcome.new) == (3, 1)

    gone = history.lookup(layout, first[1].id)
    assert gone is not None
    assert gone.text == first[1].content
    assert (gone.area, gone.source, gone.heading) == ("aws", "aws/sg.md", NO_HEADING)
    assert (gone.first_seen, gone.last_seen) == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z")
    assert not gone.live_in_latest

    kept = history.lookup(layout, first[0].id)
    assert kept is not None and kept.live_in_latest
    assert kept.source == "aws/net/sg.md"  # provenance of the last time it was live
    assert (kept.first_seen, kept.last_seen) == ("2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z")
    numeric = history.lookup(layout, first[2].id)
    assert numeric is not None and numeric.heading == 30 and numeric.heading_text == "30"


@dataclass
class _Lazy:
    """A chunk whose content may not be read: proves record_store reads only new texts."""

    id: str
    area: str
    source: str
    heading: Any
    text: str
    allowed: bool

    @property
    def content(self) -> str:
        if not self.allowed:
            raise AssertionError(f"content of the known id {self.id} was read")
        return self.text


def test_only_new_texts_are_read(layout: StateLayout) -> None:
    store = _store()
    history.record_store(layout, store, T0)
    fresh = make_chunk("Elastic IPs are static public addresses.", source="aws/ip.md")
    lazy = [_Lazy(c.id, c.area, c.source, c.heading, c.content, False) for c in store]
    lazy.append(_Lazy(fresh.id, fresh.area, fresh.source, fresh.heading, fresh.content, True))
    outcome = history.record_store(layout, lazy, T0 + timedelta(hours=1))
    assert outcome.new == 1
    entry = history.lookup(layout, fresh.id)
    assert entry is not None and entry.text == fresh.content


def test_recording_the_same_store_twice_adds_nothing(layout: StateLayout) -> None:
    history.record_store(layout, _store(), T0)
    size = history.stats(layout)
    outcome = history.record_store(layout, _store(), T0 + timedelta(hours=1))
    assert outcome.new == 0
    assert history.stats(layout)["ids"] == size["ids"] == 3
    assert history.stats(layout)["stores"] == 2


def test_seed_from_a_published_store(layout: StateLayout, tmp_path: Path) -> None:
    published = tmp_path / "agent" / "src" / "storage" / "knowledge-store.json"
    published.parent.mkdir(parents=True)
    published.write_bytes(serialize_store(_store()))
    assert history.seed_from_store(layout, tmp_path / "missing.json") is None
    outcome = history.seed_from_store(layout, published, when=T0)
    assert outcome is not None and outcome.new == 3
    entry = history.lookup(layout, _store()[1].id)
    assert entry is not None and entry.first_seen == "2026-03-01T12:00:00Z"


def test_naive_times_and_foreign_files_are_refused(layout: StateLayout) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        history.record_store(layout, _store(), datetime(2026, 3, 1))
    target = history.history_file(layout)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"not a database at all" * 100)
    with pytest.raises(history.HistoryError, match="unreadable chunk history"):
        history.lookup(layout, _store()[0].id)


def test_recording_through_a_store_view_decodes_only_new_chunks(
    layout: StateLayout, tmp_path: Path
) -> None:
    from brain_pipeline.state.store_view import open_store_view

    first = _store()
    store = tmp_path / "store-1.json"
    store.write_bytes(serialize_store(first))
    outcome = history.record_store_view(layout, open_store_view(store), T0)
    assert (outcome.chunks, outcome.new) == (3, 3)
    for chunk in first:  # exactly what record_store keeps for a new id
        entry = history.lookup(layout, chunk.id)
        assert entry is not None and entry.text == chunk.content
        assert (entry.area, entry.source, entry.heading) == (
            chunk.area,
            chunk.source,
            chunk.heading,
        )
    edited = make_chunk("NACLs are stateless; rules are evaluated in order.", source="aws/sg.md")
    second = tmp_path / "store-2.json"
    second.write_bytes(serialize_store([first[0], edited, first[2]]))
    later = T0 + timedelta(days=1)
    outcome = history.record_store_view(layout, open_store_view(second), later)
    assert (outcome.chunks, outcome.new) == (3, 1)
    kept = history.lookup(layout, first[0].id)
    gone = history.lookup(layout, first[1].id)
    assert kept is not None and kept.live_in_latest and kept.last_seen == "2026-03-02T12:00:00Z"
    assert gone is not None and not gone.live_in_latest and gone.text == first[1].content
