"""Fixture loading: the agent's format, clear errors, staleness and unknown areas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.evaluation.fixture import (
    FixtureError,
    LabelledQuery,
    load_fixture,
    parse_fixture,
    unknown_areas,
)


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_the_agent_format_loads_with_extra_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "$comment": ["labels are chunk ids", "regenerate when content changes"],
            "queries": [
                {"query": "what is a vpc", "area": "aws", "relevant": ["aaaaaaaaaaaa"]},
                {"query": "lists", "area": "py", "relevant": ["b1", "b2"], "note": "two"},
            ],
        },
    )
    fixture = load_fixture(path)
    assert fixture.queries == (
        LabelledQuery("what is a vpc", "aws", ("aaaaaaaaaaaa",)),
        LabelledQuery("lists", "py", ("b1", "b2")),
    )
    assert fixture.source == str(path)
    assert fixture.areas == ["aws", "py"]


GOOD = {"query": "q", "area": "aws", "relevant": ["x"]}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ([GOOD], "top level must be an object"),
        ({"$comment": "x"}, "missing 'queries'"),
        ({"queries": []}, "'queries' must be a non-empty list"),
        ({"queries": [GOOD, "text"]}, "queries[1]: must be an object"),
        ({"queries": [GOOD, {"area": "aws", "relevant": ["x"]}]}, "queries[1]: missing 'query'"),
        ({"queries": [GOOD, {**GOOD, "area": " "}]}, "queries[1]: 'area' must be a non-empty"),
        ({"queries": [GOOD, {**GOOD, "query": 3}]}, "queries[1]: 'query' must be a non-empty"),
        ({"queries": [{"query": "q", "area": "a"}]}, "queries[0]: missing 'relevant'"),
        ({"queries": [{**GOOD, "relevant": []}]}, "queries[0]: 'relevant' must be a non-empty"),
        ({"queries": [{**GOOD, "relevant": "x"}]}, "queries[0]: 'relevant' must be a non-empty"),
        ({"queries": [{**GOOD, "relevant": ["x", 4]}]}, "queries[0]: relevant[1] must be"),
        ({"queries": [{**GOOD, "relevant": ["x", "y", "x"]}]}, "lists x more than once"),
    ],
)
def test_invalid_fixtures_say_where_and_what(tmp_path: Path, document: Any, expected: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(FixtureError) as caught:
        load_fixture(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert expected in message


def test_invalid_json_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match="not valid JSON"):
        parse_fixture("{nope", source="mine.json")
    with pytest.raises(FixtureError, match="fixture file not found"):
        load_fixture(tmp_path / "absent.json")


def test_unknown_areas() -> None:
    fixture = parse_fixture(
        json.dumps(
            {
                "queries": [
                    {"query": "a", "area": "zeta", "relevant": ["i"]},
                    {"query": "b", "area": "aws", "relevant": ["j"]},
                    {"query": "c", "area": "alpha", "relevant": ["k"]},
                ]
            }
        )
    )
    assert unknown_areas(fixture, {"aws"}) == ["alpha", "zeta"]
