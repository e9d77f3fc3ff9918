"""Queries that follow their chunks to another area: when a move is proposed, when
`--write` applies it on its own, and when a person must decide."""

from __future__ import annotations

from brain_pipeline.evaluation.area_moves import (
    FOLLOW_MOVES_FLAG,
    AreaMove,
    areas_by_id,
    propose_area_moves,
)
from brain_pipeline.evaluation.fixture import Fixture, LabelledQuery
from brain_pipeline_tests.evaluation.helpers import make_chunk


def _fixture(*queries: tuple[str, str, list[str]]) -> Fixture:
    return Fixture(tuple(LabelledQuery(q, a, tuple(r)) for q, a, r in queries))


def test_areas_by_id_lists_every_area_an_id_is_live_in() -> None:
    one = make_chunk("Same text in two areas.", area="exams")
    two = make_chunk("Same text in two areas.", area="english")
    other = make_chunk("Only here.", area="exams")
    assert areas_by_id([one, two, other]) == {one.id: {"exams", "english"}, other.id: {"exams"}}
    assert areas_by_id([]) == {}


def test_a_renamed_area_moves_its_query_on_write() -> None:
    fixture = _fixture(("tenses", "english-exams", ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]))
    areas = {"aaaaaaaaaaaa": {"exams"}, "bbbbbbbbbbbb": {"exams"}, "cccccccccccc": {"python"}}
    (move,) = propose_area_moves(fixture, areas)
    assert move == AreaMove(
        "tenses",
        "english-exams",
        "exams",
        ("aaaaaaaaaaaa", "bbbbbbbbbbbb"),
        True,
        "area english-exams no longer exists and its labels are live in area exams "
        "(renamed?): the query moves there",
    )


def test_a_file_moved_out_of_a_live_area_is_offered_not_applied() -> None:
    fixture = _fixture(("tenses", "english", ["aaaaaaaaaaaa"]))
    areas = {"aaaaaaaaaaaa": {"exams"}, "bbbbbbbbbbbb": {"english"}}  # english still exists
    (offered,) = propose_area_moves(fixture, areas)
    assert not offered.applies and offered.new_area == "exams"
    assert offered.reason.endswith(f"(files moved?): {FOLLOW_MOVES_FLAG} moves the query there")
    (followed,) = propose_area_moves(fixture, areas, follow_moves=True)
    assert followed.applies and followed.reason.endswith(": the query moves there")


def test_a_query_already_asked_in_the_new_area_is_a_conflict() -> None:
    fixture = _fixture(
        ("tenses", "english-exams", ["aaaaaaaaaaaa"]),
        ("tenses", "exams", ["bbbbbbbbbbbb"]),
    )
    areas = {"aaaaaaaaaaaa": {"exams"}, "bbbbbbbbbbbb": {"exams"}}
    (move,) = propose_area_moves(fixture, areas, follow_moves=True)
    assert move.conflict and not move.applies and move.old_area == "english-exams"
    assert "fixture label --remove" in move.reason


def test_only_the_labels_live_elsewhere_travel_with_the_query() -> None:
    fixture = _fixture(("tenses", "gone", ["aaaaaaaaaaaa", "deaddeaddead", "bbbbbbbbbbbb"]))
    areas = {"aaaaaaaaaaaa": {"exams", "english"}, "bbbbbbbbbbbb": {"exams"}}
    (move,) = propose_area_moves(fixture, areas)
    assert move.new_area == "exams" and move.ids == ("aaaaaaaaaaaa", "bbbbbbbbbbbb")


def test_no_move_when_a_label_still_answers_or_the_labels_disagree() -> None:
    areas = {
        "aaaaaaaaaaaa": {"exams"},
        "bbbbbbbbbbbb": {"english", "exams"},
        "cccccccccccc": {"python"},
    }
    fixture = _fixture(
        ("still answered", "english", ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]),
        ("split apart", "gone", ["aaaaaaaaaaaa", "cccccccccccc"]),
        ("nothing live", "gone", ["deaddeaddead"]),
        ("two homes", "gone", ["bbbbbbbbbbbb"]),
    )
    assert propose_area_moves(fixture, areas, follow_moves=True) == []
    assert propose_area_moves(fixture, {}) == []
