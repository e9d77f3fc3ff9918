"""Stale labels (an id not live in its query's area) and what the old id was."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from brain_pipeline.corpus.chunk_history import remember_store
from brain_pipeline.corpus.store import serialize_store
from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery
from brain_pipeline.evaluation.stale import StaleLabel, find_stale, old_chunks_for
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.evaluation.helpers import make_chunk

VPC = make_chunk("Amazon VPC gives you a private network in the cloud.", "aws", "aws/vpc.md")
LIST = make_chunk("Python lists keep their items in insertion order.", "python", "py/l.md")
GONE = make_chunk("An old paragraph that an edit replaced long ago.", "aws", "aws/old.md")


def test_labels_not_live_in_their_area_are_stale_in_fixture_order() -> None:
    fixture = Fixture(
        (
            LabelledQuery("what is a vpc", "aws", (VPC.id, GONE.id)),
            LabelledQuery("lists", "aws", (LIST.id,)),  # live, but in another area
            LabelledQuery("python lists", "python", (LIST.id,)),
        )
    )
    assert find_stale(fixture, [VPC, LIST]) == [
        StaleLabel("what is a vpc", "aws", GONE.id, ()),
        StaleLabel("lists", "aws", LIST.id, ("python",)),
    ]


def test_old_ids_come_from_the_history_else_from_older_stores(
    tmp_path: Path, layout: StateLayout
) -> None:
    older = tmp_path / "older-store.json"
    older.write_bytes(serialize_store([GONE]))
    store = tmp_path / "store.json"
    store.write_bytes(serialize_store([VPC]))
    remember_store(layout, store, datetime(2026, 1, 1, tzinfo=UTC))

    found = old_chunks_for(layout, [VPC.id, GONE.id, "000000000000"], [older])

    assert set(found) == {VPC.id, GONE.id}
    assert (found[VPC.id].text, found[VPC.id].source) == (VPC.content, "aws/vpc.md")
    assert found[VPC.id].last_seen is not None  # the history knows when it was live
    assert (found[GONE.id].text, found[GONE.id].area) == (GONE.content, "aws")
    assert found[GONE.id].last_seen is None  # an older store says nothing about when
