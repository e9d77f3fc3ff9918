"""`fixture repair --write`: only the stale ids and moved areas change in the file, the
previous bytes are kept as `.bak`, one `$comment` line says what was done, and a
proposal that no longer fits the file changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.evaluation.area_moves import AreaMove
from brain_pipeline.evaluation.fixture_edit import FixtureEditError
from brain_pipeline.evaluation.repair import APPLY, NO_MATCH, RepairProposal, RepairRow
from brain_pipeline.evaluation.repair_write import repair_comment, write_repair

OLD, NEW, KEPT, GONE = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"
WHEN = "2026-03-02T00:00:00Z"

# A hand-laid-out fixture: compact lists, a custom field, odd spacing. --write must keep it.
FIXTURE = f"""{{
  "$comment": ["labelled by hand"],
  "queries": [
    {{"query": "undo a delete", "area": "aws",   "relevant": ["{OLD}", "{KEPT}"], "note": "x"}},
    {{"query": "tenses", "area": "english-exams", "relevant": ["{KEPT}"]}},
    {{"query": "also old", "area": "aws", "relevant": [ "{OLD}" ]}}
  ]
}}
"""


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    path = tmp_path / "retrieval-eval.json"
    path.write_text(FIXTURE)
    return path


def _row(old: str, new: str | None, verdict: str = APPLY) -> RepairRow:
    return RepairRow("undo a delete", "aws", old, new, 0.97 if new else None, verdict, "edit")


def _move(applies: bool = True) -> AreaMove:
    return AreaMove("tenses", "english-exams", "exams", (KEPT,), applies, "renamed")


def test_remaps_and_moves_change_only_their_strings(fixture: Path) -> None:
    proposal = RepairProposal(str(fixture), [_row(OLD, NEW), _row(GONE, None, NO_MATCH)])
    proposal.moves.append(_move())
    written = write_repair(fixture, proposal, WHEN)
    assert written.remaps == {OLD: NEW} and written.replaced == {OLD: 2}
    assert written.moves == {("tenses", "english-exams"): "exams"}
    text = fixture.read_text()
    comment = (
        f"{WHEN}: brain-pipeline fixture repair remapped 1 stale id(s): {OLD} -> {NEW}; "
        "moved 1 query(ies) to the area of their labels: 'tenses' english-exams -> exams"
    )
    assert written.comment == comment
    expected = (
        FIXTURE.replace(OLD, NEW)
        .replace('"english-exams"', '"exams"')
        .replace('["labelled by hand"]', f'["labelled by hand", {json.dumps(comment)}]')
    )
    assert text == expected  # layout, spacing and the note are untouched
    assert written.backup == str(fixture) + ".bak"
    assert Path(written.backup).read_text() == FIXTURE


def test_nothing_to_apply_writes_nothing(fixture: Path) -> None:
    proposal = RepairProposal(str(fixture), [_row(GONE, None, NO_MATCH)], moves=[_move(False)])
    written = write_repair(fixture, proposal, WHEN)
    assert (written.remaps, written.backup, written.comment) == ({}, None, None)
    assert fixture.read_text() == FIXTURE
    assert sorted(p.name for p in fixture.parent.iterdir()) == [fixture.name]


def test_an_id_no_longer_in_the_file_refuses_the_whole_repair(fixture: Path) -> None:
    proposal = RepairProposal(str(fixture), [_row(OLD, NEW), _row(GONE, NEW)])
    with pytest.raises(FixtureEditError, match=f"{fixture.name}: id\\(s\\) {GONE} not found"):
        write_repair(fixture, proposal, WHEN)
    assert fixture.read_text() == FIXTURE
    assert sorted(p.name for p in fixture.parent.iterdir()) == [fixture.name]


def test_a_query_to_move_no_longer_in_the_file_refuses_the_whole_repair(fixture: Path) -> None:
    gone = AreaMove("renamed meanwhile", "aws", "exams", (OLD,), True, "renamed")
    proposal = RepairProposal(str(fixture), [_row(OLD, NEW)], moves=[gone])
    with pytest.raises(FixtureEditError, match="a query to move was not found"):
        write_repair(fixture, proposal, WHEN)
    assert fixture.read_text() == FIXTURE
    assert not fixture.with_name(fixture.name + ".bak").exists()


def test_the_comment_names_only_what_was_done() -> None:
    assert repair_comment({OLD: NEW, KEPT: GONE}, WHEN) == (
        f"{WHEN}: brain-pipeline fixture repair remapped 2 stale id(s): "
        f"{OLD} -> {NEW}, {KEPT} -> {GONE}"
    )
    assert repair_comment({}, WHEN, {("q", "a"): "b"}) == (
        f"{WHEN}: brain-pipeline fixture repair moved 1 query(ies) to the area of their "
        "labels: 'q' a -> b"
    )


def test_a_move_alone_is_written(fixture: Path) -> None:
    written = write_repair(fixture, RepairProposal(str(fixture), [], moves=[_move()]), WHEN)
    assert written.remaps == {} and written.comment is not None
    queries = json.loads(fixture.read_text())["queries"]
    assert [q["area"] for q in queries] == ["aws", "exams", "aws"]
