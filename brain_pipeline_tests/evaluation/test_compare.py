"""The comparison with a baseline, on real evaluations of a store before and after an edit."""

from __future__ import annotations

from collections.abc import Sequence

from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.compare import (
    BECAME_HIT,
    BECAME_MISS,
    MOVED_DOWN,
    ChunkOrigin,
    compare,
)
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
from brain_pipeline_tests.evaluation.helpers import make_chunk

ANSWER = make_chunk("Security groups are stateful: return traffic is allowed automatically.")
OTHER = make_chunk("Buckets keep objects; versioning keeps every old copy of an object.")
BASE = [
    ANSWER,
    OTHER,
    *(make_chunk(f"Filler paragraph {i} about routing tables and subnets.") for i in range(5)),
]


def decoys(n: int) -> list[Chunk]:
    """Paragraphs that out-score ANSWER for the security-group query (the planted edit)."""
    return [
        make_chunk(f"Security groups, stateful security groups, security groups again #{i}.")
        for i in range(n)
    ]


def fixture(*extra: LabelledQuery) -> Fixture:
    return Fixture(
        (
            LabelledQuery("stateful security groups", "aws", (ANSWER.id,)),
            LabelledQuery("bucket versioning", "aws", (OTHER.id,)),
            *extra,
        ),
        "t.json",
    )


def run(chunks: Sequence[Chunk], fx: Fixture | None = None) -> EvaluationReport:
    return evaluate(list(chunks), fx or fixture(), retrievers=("legacy", "bm25"))


def test_an_unchanged_store_shows_no_change_and_zero_differences() -> None:
    comparison = compare(run(BASE).queries, run(BASE).queries)
    assert comparison.changes == ()
    assert comparison.shared == 2 and comparison.only_now == comparison.only_baseline == 0
    assert all(d.value == d.low == d.high == 0 for d in comparison.differences.values())


def test_a_planted_regression_is_found_and_names_what_displaced_the_answer() -> None:
    planted = decoys(10)
    before, after = run(BASE), run([*BASE, *planted])
    asked: list[list[str]] = []

    def origins(ids: Sequence[str]) -> dict[str, ChunkOrigin]:
        asked.append(list(ids))
        return {c.id: ChunkOrigin(c.id, "aws/sg.md", "Rules", "2025-01-02T00:00:00Z", True)
                for c in planted}

    comparison = compare(after.queries, before.queries, origins)
    misses = comparison.new_misses("bm25")
    assert [(c.query, c.rank_before, c.rank_after) for c in misses] == [
        ("stateful security groups", 1, None)
    ]
    change = misses[0]
    assert change.lost == (ANSWER.id,)
    assert {o.chunk_id for o in change.entered} == {c.id for c in planted}
    assert all(o.new_since_baseline for o in change.entered)
    assert "displaced by" in change.describe() and "aws/sg.md § Rules" in change.describe()
    assert len(asked) == 1  # one history lookup for every entered id at once
    assert comparison.differences["bm25.ndcg_at_10"].value < 0
    assert comparison.differences["bm25.misses"].value == 1.0
    # The other query did not move, and the reverse comparison finds a recovery.
    assert all(c.query == "stateful security groups" for c in comparison.changes)
    back = compare(before.queries, after.queries)
    assert {c.kind for c in back.changes if c.retriever == "bm25"} == {BECAME_HIT}


def test_a_first_hit_moving_down_more_than_a_few_ranks_is_reported() -> None:
    comparison = compare(run([*BASE, *decoys(5)]).queries, run(BASE).queries)
    moved = [c for c in comparison.changes if c.retriever == "bm25"]
    assert [(c.kind, c.rank_before, c.rank_after) for c in moved] == [(MOVED_DOWN, 1, 6)]
    assert comparison.new_misses("bm25") == []


def test_a_small_move_is_not_a_change() -> None:
    comparison = compare(run([*BASE, *decoys(2)]).queries, run(BASE).queries)
    assert [c for c in comparison.changes if c.retriever == "bm25"] == []


def test_a_changed_fixture_is_compared_only_on_the_queries_both_hold() -> None:
    before = run(BASE)
    relabelled = Fixture(
        (
            LabelledQuery("stateful security groups", "aws", (ANSWER.id, OTHER.id)),
            LabelledQuery("bucket versioning", "aws", (OTHER.id,)),
            LabelledQuery("routing tables", "aws", (BASE[2].id,)),
        ),
        "t.json",
    )
    after = run([*BASE, *decoys(10)], relabelled)
    comparison = compare(after.queries, before.queries)
    # The relabelled query is a different question: its miss is not a regression.
    assert comparison.shared == 1
    assert (comparison.only_now, comparison.only_baseline) == (2, 1)
    assert comparison.changes == ()


def test_the_kind_of_a_new_miss_is_became_a_miss_for_every_retriever() -> None:
    comparison = compare(run([*BASE, *decoys(12)]).queries, run(BASE).queries)
    kinds = {(c.retriever, c.kind) for c in comparison.changes}
    assert ("bm25", BECAME_MISS) in kinds
