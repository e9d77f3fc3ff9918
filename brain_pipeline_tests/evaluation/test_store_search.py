"""Search helpers: provenance lines and batch query files."""

from __future__ import annotations

import pytest

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.store_search import (
    BatchFormatError,
    BatchQuery,
    hits_as_json,
    parse_batch,
    provenance,
    render_passages,
    run_batch,
)
from brain_pipeline.retrieval.hybrid import Hit, Retriever
from brain_pipeline_tests.evaluation.helpers import make_chunk


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Routing", "--- passage 2 — aws/vpc.md § Routing ---"),
        (3.0, "--- passage 2 — aws/vpc.md § 3 ---"),
        (2.5, "--- passage 2 — aws/vpc.md § 2.5 ---"),
        (1e-7, "--- passage 2 — aws/vpc.md § 1e-7 ---"),  # JavaScript's String(), not repr
        ("", "--- passage 2 — aws/vpc.md ---"),
        (0, "--- passage 2 — aws/vpc.md ---"),
    ],
)
def test_provenance_line(heading: object, expected: str) -> None:
    assert provenance(make_chunk("x", source="aws/vpc.md", heading=heading), 2) == expected


def test_provenance_without_heading() -> None:
    assert provenance(make_chunk("x", source="a.md"), 1) == "--- passage 1 — a.md ---"


def test_render_passages_numbers_from_one() -> None:
    hits = [Hit(make_chunk("first", source="a.md"), 2.0), Hit(make_chunk("second"), 1.0)]
    assert render_passages(hits) == (
        "--- passage 1 — a.md ---\nfirst\n\n--- passage 2 — notes.md ---\nsecond"
    )
    rows = hits_as_json(hits)
    assert rows[0] == {"id": hits[0].chunk.id, "score": 2.0, "source": "a.md", "content": "first"}


def test_parse_batch_defaults_and_errors() -> None:
    lines = ['{"qid": 7, "query": "vpc", "area": "aws"}', "", '{"query": "lists"}']
    assert parse_batch(lines, "q.jsonl", "python") == [
        BatchQuery("7", "vpc", "aws"),
        BatchQuery("3", "lists", "python"),
    ]
    with pytest.raises(BatchFormatError, match=r"q.jsonl:1: 'area'"):
        parse_batch(['{"query": "x"}'], "q.jsonl", None)
    with pytest.raises(BatchFormatError, match=r"q.jsonl:2: not valid JSON"):
        parse_batch(['{"query": "x", "area": "a"}', "{"], "q.jsonl", None)
    with pytest.raises(BatchFormatError, match=r"q.jsonl:1: 'query' must be a string"):
        parse_batch(['{"area": "a"}'], "q.jsonl", None)


def test_run_batch_answers_each_query(store: list[Chunk]) -> None:
    answers = list(
        run_batch(
            Retriever(store),
            [BatchQuery("a", "buckets versioning", "aws"), BatchQuery("b", "zzz", "aws")],
            "lexical",
            3,
        )
    )
    first, _ = answers[0]
    assert first["qid"] == "a" and first["ids"][0] == store[1].id
    assert len(first["ids"]) == len(first["scores"]) <= 3
    assert answers[1] == ({"qid": "b", "ids": [], "scores": []}, None)


def test_provenance_of_a_title_nested_2000_deep() -> None:
    """A roadmap title nested past json.dumps's recursion limit reaches the store now;
    its provenance line is its JSON, not a RecursionError."""
    heading: object = "deep"
    for _ in range(2000):
        heading = [heading]
    line = provenance(make_chunk("x", source="r.json", heading=heading), 1)
    assert line == "--- passage 1 — r.json § " + "[" * 2000 + '"deep"' + "]" * 2000 + " ---"
