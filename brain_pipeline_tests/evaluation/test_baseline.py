"""evaluation.baseline: the evaluation the next build is compared with, on plain values.

Pins that a recorded baseline reads back whole (its report, how and when it became the
baseline, on an injected clock), the publications list newest first with the verdict's
severity, and that every way of having no baseline (none recorded, a damaged blob, an
unreadable report) is one line saying why, never a crash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.evaluation import judgements
from brain_pipeline.evaluation.baseline import (
    load_baseline,
    publications,
    record_baseline,
    summary_of,
)
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
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
