"""`evaluate(progress=...)` hears every query of every retriever, in order."""

from __future__ import annotations

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.runner import evaluate


def test_progress_hears_every_query_of_every_retriever(store: list[Chunk]) -> None:
    vpc, s3, _, subnet, _, lists, _ = store
    queries = [
        ("private network vpc", "aws", (vpc.id, subnet.id)),
        ("buckets versioning", "aws", (s3.id,)),
        ("ordered mutable lists", "python", (lists.id,)),
        ("kubernetes pods", "nowhere", (s3.id,)),  # an unknown area is counted too
    ]
    fixture = Fixture(tuple(LabelledQuery(q, a, r) for q, a, r in queries), "test.json")
    heard: list[tuple[str, int, int]] = []
    evaluate(store, fixture, progress=lambda *call: heard.append(call))
    for name in ("legacy", "bm25", "hybrid"):
        assert [(d, t) for n, d, t in heard if n == name] == [(i, 4) for i in range(5)]
    assert [n for n, d, _ in heard if d == 0] == ["legacy", "bm25", "hybrid"]
