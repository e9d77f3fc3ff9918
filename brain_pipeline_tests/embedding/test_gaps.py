"""The remembered gaps round-trip losslessly through the ledger, forgetting keeps
truncation notes, and a build directory's gaps file from before the ledger is read once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from brain_pipeline.embedding.builder import local_memory
from brain_pipeline.embedding.gaps import Gap, forget_refusals, gaps_version, read_gaps, write_gaps
from brain_pipeline.state.memory import Memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    opened = local_memory(tmp_path / "embeddings.bin")
    yield opened
    opened.ledger.close()


def test_gaps_round_trip_any_string_and_forget_keeps_notes(memory: Memory) -> None:
    refused = Gap("aaaaaaaaaaaa", "refused", "400 INVALID_ARGUMENT", "m", 8, "truncate",
                  "maps/x.json", "Lone \ud800 title é 😀")
    note = Gap("bbbbbbbbbbbb", "truncated", "2048 kept of about 5000", "m", 8, "truncate",
               "a/b.md", "", 5000)
    assert gaps_version(memory) == ""
    write_gaps(memory, [refused, note])
    memory.blobs.get_bytes(gaps_version(memory)).decode("ascii")  # ASCII in the blob
    assert read_gaps(memory) == {refused.chunk_id: refused, note.chunk_id: note}
    before = gaps_version(memory)
    assert forget_refusals(memory) == 1
    assert gaps_version(memory) != before  # the embedding step builds again
    assert read_gaps(memory) == {note.chunk_id: note}


def test_an_unreadable_old_file_remembers_nothing(memory: Memory) -> None:
    path = memory.layout.embedding_gaps
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff not json")
    assert read_gaps(memory) == {}
    assert not path.exists()


def test_a_schema_1_length_decision_stays_marked_through_forgetting(memory: Memory) -> None:
    """Schema 1 decided length by an estimate: its notes describe vectors that exist but
    apply to no build, and forgetting refusals must not launder them into current ones."""
    path = memory.layout.embedding_gaps
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"chunk_id": "cccccccccccc", "kind": "truncated", "reason": "2048 estimated tokens "
           "kept of about 2568", "model": "m", "dimension": 8, "policy": "truncate",
           "source": "lexicon/a.md", "heading": "", "estimated_tokens": 2568}
    refused = dict(row, chunk_id="dddddddddddd", kind="refused", reason="400")
    path.write_text(json.dumps({"schema": 1, "gaps": [row, refused]}), encoding="ascii")
    note = read_gaps(memory)["cccccccccccc"]
    assert not path.exists()  # read into the ledger once
    assert note.by_estimate and note.tokens is None and note.has_vector
    assert not note.applies_to("m", 8, "truncate")
    assert read_gaps(memory)["dddddddddddd"].applies_to("m", 8, "truncate")
    assert forget_refusals(memory) == 1
    assert read_gaps(memory) == {"cccccccccccc": note}


def test_a_schema_2_file_reads_by_the_gap_fields_and_a_row_that_does_not_fit_is_skipped(
    memory: Memory,
) -> None:
    """No schema number is written or bumped: a file of the release before the ledger
    (`"schema": 2`) reads as it is, and a row of fields `Gap` does not have is skipped
    (its text is sent again), the others kept."""
    kept = Gap("eeeeeeeeeeee", "refused", "400", "m", 8, "truncate", "a/b.md")
    path = memory.layout.embedding_gaps
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(kept), {"chunk_id": "ffffffffffff", "kind": "refused", "tomorrow": 1}]
    path.write_text(json.dumps({"schema": 2, "gaps": rows}), encoding="ascii")
    assert read_gaps(memory) == {kept.chunk_id: kept}
    assert b"schema" not in memory.blobs.get_bytes(gaps_version(memory))
