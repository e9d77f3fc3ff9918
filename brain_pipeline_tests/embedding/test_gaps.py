"""The remembered gaps round-trip losslessly, and forgetting keeps truncation notes."""

from __future__ import annotations

from pathlib import Path

from brain_pipeline.embedding.gaps import Gap, forget_refusals, read_gaps, write_gaps


def test_gaps_round_trip_any_string_and_forget_keeps_notes(tmp_path: Path) -> None:
    path = tmp_path / "gaps.json"
    refused = Gap("aaaaaaaaaaaa", "refused", "400 INVALID_ARGUMENT", "m", 8, "truncate",
                  "maps/x.json", "Lone \ud800 title é 😀")
    note = Gap("bbbbbbbbbbbb", "truncated", "2048 kept of about 5000", "m", 8, "truncate",
               "a/b.md", "", 5000)
    write_gaps(path, [refused, note])
    path.read_bytes().decode("ascii")  # ASCII on disk
    assert read_gaps(path) == {refused.chunk_id: refused, note.chunk_id: note}
    assert forget_refusals(path) == 1
    assert read_gaps(path) == {note.chunk_id: note}


def test_an_unreadable_memory_remembers_nothing(tmp_path: Path) -> None:
    path = tmp_path / "gaps.json"
    path.write_bytes(b"\xff not json")
    assert read_gaps(path) == {}
    assert read_gaps(tmp_path / "absent.json") == {}


def test_a_schema_1_length_decision_stays_marked_through_forgetting(tmp_path: Path) -> None:
    """Schema 1 decided length by an estimate: its notes describe vectors that exist but
    apply to no build, and forgetting refusals must not launder them into current ones."""
    import json

    path = tmp_path / "gaps.json"
    row = {"chunk_id": "cccccccccccc", "kind": "truncated", "reason": "2048 estimated tokens "
           "kept of about 2568", "model": "m", "dimension": 8, "policy": "truncate",
           "source": "lexicon/a.md", "heading": "", "estimated_tokens": 2568}
    refused = dict(row, chunk_id="dddddddddddd", kind="refused", reason="400")
    path.write_text(json.dumps({"schema": 1, "gaps": [row, refused]}), encoding="ascii")
    note = read_gaps(path)["cccccccccccc"]
    assert note.by_estimate and note.tokens is None and note.has_vector
    assert not note.applies_to("m", 8, "truncate")
    assert read_gaps(path)["dddddddddddd"].applies_to("m", 8, "truncate")
    assert forget_refusals(path) == 1
    assert read_gaps(path) == {"cccccccccccc": note}
