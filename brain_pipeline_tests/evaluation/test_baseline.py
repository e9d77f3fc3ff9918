"""evaluation.baseline: what the next build is compared with, on plain values.

Pins that a recorded baseline reads back whole (its report, how and when it became the
baseline, on an injected clock), the publications list newest first with the verdict's
severity, that every way of having no baseline (none recorded, a damaged blob, an
unreadable report, a known-item baseline of another shape) is one line saying why, never
a crash, that the known items of the recorded evaluation become the known-item baseline
(or clear it), and the comparison with the regression baseline: found, missing, or
sharing nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.baseline import (
    NO_KNOWN_ITEMS,
    clear_known_items,
    compare_with_baseline,
    load_baseline,
    load_known_items,
    publications,
    record_baseline,
    save_candidate,
    summary_of,
)
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.known_items import KnownItem
from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
from brain_pipeline_tests.evaluation.helpers import make_chunk, memory_at

ANSWER = make_chunk("Security groups are stateful: return traffic is allowed automatically.")
CHUNKS = [ANSWER, *(make_chunk(f"Filler paragraph {i} about routing tables.") for i in range(5))]
FIXTURE = Fixture((LabelledQuery("stateful security groups", "aws", (ANSWER.id,)),), "t.json")


@pytest.fixture(scope="module")
def report() -> EvaluationReport:
    return evaluate(CHUNKS, FIXTURE)


def record_of(report: EvaluationReport, key: str = "k", **extra: Any) -> dict[str, Any]:
    return {
        "key": key * 64,
        "when": "2026-01-01T00:00:00+00:00",
        "report": report.to_dict(),
        "figures": {"bm25.ndcg_at_10": 0.5},
        "inputs": {"store_sha256": "s" * 64, "fixture_sha256": "f" * 64},
        **extra,
    }


def at(text: str) -> Any:
    return lambda: datetime.fromisoformat(text).astimezone(UTC)


def test_a_recorded_baseline_reads_back_whole(tmp_path: Path, report: EvaluationReport) -> None:
    layout = memory_at(tmp_path)
    record = record_of(report)
    record_baseline(
        layout, record, {}, kind="accepted", note="known drop", now=at("2026-03-04T05:06:07+00:00")
    )
    found = load_baseline(layout)
    assert found.reason is None and found.baseline is not None
    baseline = found.baseline
    assert (baseline.kind, baseline.note, baseline.when) == (
        "accepted", "known drop", "2026-03-04T05:06:07+00:00")
    assert baseline.key == "k" * 64 and baseline.evaluated_at == "2026-01-01T00:00:00+00:00"
    assert baseline.report.to_dict() == report.to_dict()
    assert baseline.describe() == (
        "baseline: the evaluation accepted 2026-03-04T05:06:07+00:00 (known drop), "
        "key kkkkkkkkkkkk"
    )


def test_publications_are_listed_newest_first_with_their_severity(
    tmp_path: Path, report: EvaluationReport
) -> None:
    layout = memory_at(tmp_path)
    first = record_of(report, "a", verdict={"severity": "PASS"}, run_id="r1")
    second = record_of(report, "b", verdict={"severity": "ERROR"}, run_id="r2")
    record_baseline(layout, first, {}, kind="published", now=at("2026-01-01T03:00:00+00:00"))
    record_baseline(
        layout, second, {"bm25.ndcg_at_10": (0.25, 0.75)}, kind="accepted", note="why",
        now=at("2026-01-02T03:00:00+00:00"),
    )  # fmt: skip
    rows, reason = publications(layout)
    assert reason is None
    assert [(r["evaluation_key"], r["kind"], r["passed"], r["severity"]) for r in rows] == [
        ("b" * 64, "accepted", False, "ERROR"),
        ("a" * 64, "published", True, "PASS"),
    ]
    assert rows[0]["intervals"] == {"bm25.ndcg_at_10": [0.25, 0.75]}
    assert rows[0]["note"] == "why" and rows[0]["when"] == "2026-01-02T03:00:00+00:00"
    assert rows[0]["store_sha256"] == "s" * 64 and rows[0]["run_id"] == "r2"
    assert load_baseline(layout).baseline.key == "b" * 64  # type: ignore[union-attr]


def test_a_record_from_before_verdicts_says_passed_itself(report: EvaluationReport) -> None:
    old = summary_of(record_of(report, passed=False), {}, kind="published", note=None, when="t")
    assert (old["passed"], old["severity"]) == (False, None)
    warned = summary_of(
        record_of(report, verdict={"severity": "WARN"}), {}, kind="published", note=None, when="t"
    )
    assert (warned["passed"], warned["severity"]) == (True, "WARN")


def test_no_baseline_yet_is_said_so(tmp_path: Path) -> None:
    layout = memory_at(tmp_path)
    found = load_baseline(layout)
    assert found.baseline is None
    assert str(found.reason).startswith("no baseline: nothing has been published")
    assert publications(layout) == ([], "no publications recorded yet")


def test_a_damaged_baseline_blob_is_no_baseline_and_named(
    tmp_path: Path, report: EvaluationReport
) -> None:
    memory = memory_at(tmp_path)
    record_baseline(memory, record_of(report), {}, kind="published")
    digest = memory.ledger.pointer(judgements.REGRESSION)
    blob = next(memory.layout.blobs_dir.rglob(digest))
    blob.write_bytes(b'{"kind": "publi')
    found = load_baseline(memory)
    assert found.baseline is None
    assert str(found.reason).startswith("no baseline: its blob is unreadable")
    record_baseline(memory, record_of(report, "n"), {}, kind="published")
    assert load_baseline(memory).baseline is not None  # the next publication starts afresh


def test_an_unreadable_report_is_no_baseline(tmp_path: Path, report: EvaluationReport) -> None:
    memory = memory_at(tmp_path)
    unreadable = {**record_of(report), "report": {"nothing": 1}}
    record_baseline(memory, unreadable, {}, kind="published")
    found = load_baseline(memory)
    assert found.baseline is None
    assert str(found.reason).startswith("no baseline: an unreadable report")


# ---- the known-item baseline ---------------------------------------------------------

ITEM = KnownItem("aws", "0123456789ab", "vpc peering", "aws/vpc.md", "VPC", "text", 1,
                 ("0123456789ab",))


def _published(memory: Any, candidate: str, **how: Any) -> dict[str, Any]:
    """Record an evaluation whose known items were kept under `candidate`."""
    record = {"key": "c" * 64, "known_items_candidate": candidate}
    return record_baseline(memory, record, {}, **{"kind": "published", **how})


def test_a_candidate_becomes_the_known_item_baseline_it_reads_back_as(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    key = "c" * 64  # the evaluation whose known items they are
    save_candidate(memory, key, [ITEM], {"aws": 7}, [])
    summary = _published(memory, key, kind="accepted", note="why",
                         now=lambda: datetime(2026, 1, 2))
    assert summary["known_items"] == (
        "known items: 1 known items recorded as the baseline (accepted)"
    )
    baseline = load_known_items(memory)
    assert not isinstance(baseline, str)
    assert baseline.items == (ITEM,) and dict(baseline.area_chunks) == {"aws": 7}
    assert baseline.describe == "known items of the store accepted 2026-01-02T00:00:00 (why)"
    assert baseline.candidate == key


def test_a_cleared_known_item_baseline_is_none_and_the_next_one_counts(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    key = "c" * 64  # the evaluation whose known items they are
    save_candidate(memory, key, [ITEM], {"aws": 7}, [])
    _published(memory, key)
    assert "cleared" in clear_known_items(memory, "no known items")
    assert load_known_items(memory) == NO_KNOWN_ITEMS
    _published(memory, key)
    assert not isinstance(load_known_items(memory), str)


def test_a_record_without_known_items_clears_the_known_item_baseline(
    tmp_path: Path, report: EvaluationReport
) -> None:
    """A rollback to a publication from before the known-item check: asking the next
    build about another store's passages would blame it for the difference."""
    memory = memory_at(tmp_path)
    key = "c" * 64  # the evaluation whose known items they are
    save_candidate(memory, key, [ITEM], {"aws": 7}, [])
    _published(memory, key)
    summary = record_baseline(memory, record_of(report), {}, kind="published")
    assert "predates the known-item check" in summary["known_items"]
    assert load_known_items(memory) == NO_KNOWN_ITEMS


def test_a_known_item_baseline_of_another_format_says_so_and_passes(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    judgements.point(memory, judgements.KNOWN_ITEMS, {"format": 99})
    assert load_known_items(memory) == (
        "no known-item baseline: it is of another format: the check passes; "
        "the next publication records one"
    )
    assert load_known_items(memory_at(tmp_path / "new")) == NO_KNOWN_ITEMS


# ---- the comparison with the regression baseline -------------------------------------

DECOYS = [
    make_chunk(f"Security groups, stateful security groups, security groups again #{i}.")
    for i in range(10)
]


def _baseline(memory: Any, report: EvaluationReport) -> None:
    record = {"key": "k" * 64, "when": "2026-01-01T00:00:00+00:00", "report": report.to_dict()}
    record_baseline(memory, record, {}, kind="published")


def test_without_a_baseline_nothing_is_compared_and_the_status_says_why(tmp_path: Path) -> None:
    found = compare_with_baseline(evaluate(CHUNKS, FIXTURE), memory_at(tmp_path))
    assert found.comparison is None and found.baseline is None
    assert found.status.startswith("no baseline: nothing has been published")


def test_the_agent_retriever_is_compared_with_the_published_evaluation(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    _baseline(memory, evaluate(CHUNKS, FIXTURE))
    found = compare_with_baseline(evaluate([*CHUNKS, *DECOYS], FIXTURE), memory)
    assert found.retriever == "hybrid" and found.comparison is not None
    assert [c.query for c in found.comparison.new_misses("hybrid")] == ["stateful security groups"]
    assert "1 queries compared" in found.status and "published" in found.status


def test_a_baseline_sharing_no_query_is_no_baseline(tmp_path: Path) -> None:
    memory = memory_at(tmp_path)
    other = Fixture((LabelledQuery("routing tables", "aws", (CHUNKS[1].id,)),), "o.json")
    _baseline(memory, evaluate(CHUNKS, other))
    found = compare_with_baseline(evaluate(CHUNKS, FIXTURE), memory)
    assert found.comparison is None and found.baseline is not None
    assert "shares no query" in found.status
