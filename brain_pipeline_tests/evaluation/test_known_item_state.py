"""The known-item state files: what survives a build, and what a damaged file costs."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation import known_item_state as state
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.evaluation.helpers import memory_at

ITEM = KnownItem("aws", "0123456789ab", "vpc peering", "aws/vpc.md", "VPC", "text", 1,
                 ("0123456789ab",))


def test_a_candidate_becomes_the_baseline_it_reads_back_as(tmp_path: Path) -> None:
    layout = memory_at(tmp_path)
    key = state.candidate_key("store", None)
    state.save_candidate(layout, key, [ITEM], {"aws": 7}, [])
    line = state.record_baseline(layout, key, kind="accepted", note="why",
                                 now=lambda: datetime(2026, 1, 2))
    assert line == "known items: 1 known items recorded as the baseline (accepted)"
    baseline = state.load_baseline(layout)
    assert not isinstance(baseline, str)
    assert baseline.items == (ITEM,) and dict(baseline.area_chunks) == {"aws": 7}
    assert baseline.describe == "known items of the store accepted 2026-01-02T00:00:00 (why)"


def test_a_cleared_baseline_is_no_baseline_and_the_next_one_counts(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    key = state.candidate_key("store", None)
    state.save_candidate(memory, key, [ITEM], {"aws": 7}, [])
    state.record_baseline(memory, key, kind="published")
    assert "cleared" in state.clear_baseline(memory, "no known items")
    assert state.load_baseline(memory) == state.NO_BASELINE
    state.record_baseline(memory, key, kind="published")
    assert not isinstance(state.load_baseline(memory), str)


def test_a_damaged_query_cache_is_a_cache_miss(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    state.save_queries(layout, {"a": "x y", "b": None, "gone": "z w"}, {"a", "b"})
    assert state.load_queries(layout) == {"a": "x y", "b": None}
    (state.directory(layout) / "queries.json").write_bytes(b"\x00\x01 not json")
    assert state.load_queries(layout) == {}


def test_a_baseline_of_another_format_says_so_and_passes(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    judgements.move(memory, judgements.KNOWN_ITEMS, judgements.put_json(memory, {"format": 99}))
    assert state.load_baseline(memory) == (
        "no known-item baseline: it is of another format: the check passes; "
        "the next publication records one"
    )
    assert state.load_baseline(memory_at(tmp_path / "new")) == state.NO_BASELINE


def test_a_baseline_an_older_release_wrote_still_counts(tmp_path: Path) -> None:
    """No format number is kept: the fields are the shape, so a baseline written with
    the `"format": 1` of the release before is read as it is (history kept on upgrade)."""
    memory = memory_at(tmp_path)
    key = state.candidate_key("store", None)
    state.save_candidate(memory, key, [ITEM], {"aws": 7}, [])
    state.record_baseline(memory, key, kind="published")
    data = judgements.pointed(memory, judgements.KNOWN_ITEMS)
    assert data is not None and "format" not in data
    older = judgements.put_json(memory, {**data, "format": 1})
    judgements.move(memory, judgements.KNOWN_ITEMS, older)
    baseline = state.load_baseline(memory)
    assert not isinstance(baseline, str) and baseline.items == (ITEM,)


def test_query_vectors_are_kept_per_model_for_the_queries_still_asked(tmp_path: Path) -> None:
    layout = StateLayout.of(tmp_path)
    state.save_query_vectors(layout, "m1", {"a b": [0.5, 1.0], "old": [1.0, 0.0]}, {"a b"})
    assert state.load_query_vectors(layout, "m1") == {"a b": [0.5, 1.0]}
    assert state.load_query_vectors(layout, "m2") == {}
