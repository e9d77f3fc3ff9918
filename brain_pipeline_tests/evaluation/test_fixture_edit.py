"""Textual edits of the fixture keep every byte they do not mean to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brain_pipeline.evaluation.fixture import FixtureError
from brain_pipeline.evaluation.fixture_edit import (
    FixtureEditError,
    add_comment,
    add_query,
    parse_positions,
    replace_ids,
    write_fixture_text,
)
from brain_pipeline_tests.evaluation.repair_scenarios import SAMPLE_FIXTURE

HAND_WRITTEN = """{
    "$comment": [
        "first line"
    ],
    "queries": [
        {"query": "what is a VPC", "area": "aws",
         "relevant": ["aaaaaaaaaaaa"],   "note": "one line, odd spacing"},
        {"query": "s3", "area": "aws", "relevant": ["bbbbbbbbbbbb", "cccccccccccc"]}
    ]
}
"""


def _only_insertions(before: str, after: str) -> str:
    """The one stretch `after` inserts into `before`; asserts nothing of `before` changed."""
    prefix = 0
    while prefix < len(before) and before[prefix] == after[prefix]:
        prefix += 1
    added = len(after) - len(before)
    assert added >= 0 and after[prefix + added :] == before[prefix:], "not a pure insertion"
    return after[prefix : prefix + added]


def test_positions_match_the_text() -> None:
    root = parse_positions(HAND_WRITTEN)
    queries = root.member("queries")
    assert queries is not None and len(queries.items) == 2
    first = queries.items[0].member("relevant")
    assert first is not None
    assert HAND_WRITTEN[first.start : first.end] == '["aaaaaaaaaaaa"]'
    with pytest.raises(FixtureEditError):
        parse_positions(HAND_WRITTEN + "}")


def test_comment_line_is_appended_in_the_array_style() -> None:
    edited = add_comment(HAND_WRITTEN, "remapped x -> y")
    assert _only_insertions(HAND_WRITTEN, edited) == ',\n        "remapped x -> y"'
    assert json.loads(edited)["$comment"] == ["first line", "remapped x -> y"]


def test_comment_array_is_created_minimally_or_extended_from_a_string() -> None:
    compact = '{"queries": [{"query": "q", "area": "a", "relevant": ["aaaaaaaaaaaa"]}]}'
    edited = add_comment(compact, "note")
    assert edited == '{"$comment": ["note"], ' + compact[1:]
    multi = '{\n  "queries": []\n}'
    assert add_comment(multi, "n") == '{\n  "$comment": ["n"],\n  "queries": []\n}'
    single = '{"$comment": "old", "queries": []}'
    assert json.loads(add_comment(single, "new"))["$comment"] == ["old", "new"]


def test_ids_are_replaced_in_relevant_lists_only() -> None:
    text = HAND_WRITTEN.replace('"one line, odd spacing"', '"was \\"aaaaaaaaaaaa\\" before"')
    assert json.loads(text)["queries"][0]["note"] == 'was "aaaaaaaaaaaa" before'
    edited, counts = replace_ids(text, {"aaaaaaaaaaaa": "dddddddddddd", "ffffffffffff": "x"})
    assert counts == {"aaaaaaaaaaaa": 1, "ffffffffffff": 0}
    assert edited == text.replace('["aaaaaaaaaaaa"]', '["dddddddddddd"]')
    assert 'was \\"aaaaaaaaaaaa\\" before' in edited


def test_labels_extend_an_existing_query_in_its_style() -> None:
    edited, message = add_query(HAND_WRITTEN, "s3", "aws", ["cccccccccccc", "eeeeeeeeeeee"])
    assert message == "extended the existing query with 1 id(s)"
    assert _only_insertions(HAND_WRITTEN, edited) == ', "eeeeeeeeeeee"'
    same, message = add_query(HAND_WRITTEN, "s3", "aws", ["bbbbbbbbbbbb"])
    assert same == HAND_WRITTEN and message.startswith("already labelled")


def test_a_new_query_follows_the_layout_of_the_real_fixture() -> None:
    text = SAMPLE_FIXTURE.read_text(encoding="utf-8")
    edited, message = add_query(text, "what is a NAT gateway", "aws-tutor", ["0123456789ab"])
    assert message == "appended a new query"
    added = _only_insertions(text, edited)
    assert added == (
        ",\n    {\n"
        '      "query": "what is a NAT gateway",\n'
        '      "area": "aws-tutor",\n'
        '      "relevant": [\n'
        '        "0123456789ab"\n'
        "      ]\n"
        "    }"
    )
    assert json.loads(edited)["queries"][-1]["relevant"] == ["0123456789ab"]


def test_writing_validates_keeps_a_backup_and_refuses_a_concurrent_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "eval.json"
    path.write_text(HAND_WRITTEN)
    original = path.read_bytes()
    broken = HAND_WRITTEN.replace('"relevant": ["aaaaaaaaaaaa"]', '"relevant": []')
    with pytest.raises(FixtureError):
        write_fixture_text(path, original, broken)
    assert path.read_bytes() == original and not (tmp_path / "eval.json.bak").exists()
    path.write_text(HAND_WRITTEN + "\n")  # someone else saved meanwhile
    with pytest.raises(FixtureEditError, match="changed while"):
        write_fixture_text(path, original, add_comment(HAND_WRITTEN, "x"))
    path.write_bytes(original)
    fixture, backup = write_fixture_text(path, original, add_comment(HAND_WRITTEN, "x"))
    assert backup.read_bytes() == original
    assert len(fixture.queries) == 2 and "x" in path.read_text()
