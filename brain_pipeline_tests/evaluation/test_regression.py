"""The comparison with the build directory's baseline: found, missing, or sharing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brain_pipeline.evaluation.baseline import record_baseline
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.regression import compare_with_baseline
from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
from brain_pipeline_tests.evaluation.helpers import make_chunk, memory_at

ANSWER = make_chunk("Security groups are stateful: return traffic is allowed automatically.")
BASE = [ANSWER, *(make_chunk(f"Filler paragraph {i} about routing tables.") for i in range(5))]
DECOYS = [
    make_chunk(f"Security groups, stateful security groups, security groups again #{i}.")
    for i in range(10)
]
FIXTURE = Fixture((LabelledQuery("stateful security groups", "aws", (ANSWER.id,)),), "t.json")


def _baseline(layout: Any, report: EvaluationReport) -> None:
    record = {"key": "k" * 64, "when": "2026-01-01T00:00:00+00:00", "report": report.to_dict()}
    record_baseline(layout, record, {}, kind="published")


def test_without_a_baseline_nothing_is_compared_and_the_status_says_why(tmp_path: Path) -> None:
    found = compare_with_baseline(evaluate(BASE, FIXTURE), memory_at(tmp_path))
    assert found.comparison is None and found.baseline is None
    assert found.status.startswith("no baseline: nothing has been published")


def test_the_agent_retriever_is_compared_with_the_published_evaluation(tmp_path: Path) -> None:
    layout = memory_at(tmp_path)
    _baseline(layout, evaluate(BASE, FIXTURE))
    found = compare_with_baseline(evaluate([*BASE, *DECOYS], FIXTURE), layout)
    assert found.retriever == "hybrid" and found.comparison is not None
    assert [c.query for c in found.comparison.new_misses("hybrid")] == ["stateful security groups"]
    assert "1 queries compared" in found.status and "published" in found.status


def test_a_baseline_sharing_no_query_is_no_baseline(tmp_path: Path) -> None:
    layout = memory_at(tmp_path)
    other = Fixture((LabelledQuery("routing tables", "aws", (BASE[1].id,)),), "o.json")
    _baseline(layout, evaluate(BASE, other))
    found = compare_with_baseline(evaluate(BASE, FIXTURE), layout)
    assert found.comparison is None and found.baseline is not None
    assert "shares no query" in found.status
