"""The one judgement: thresholds with margins, staleness, regressions, severity, headline."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from brain_pipeline.config import Thresholds
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.evaluation.compare import Comparison, compare
from brain_pipeline.evaluation.fixture.model import Fixture, LabelledQuery
from brain_pipeline.evaluation.runner import EvaluationReport, evaluate
from brain_pipeline.evaluation.verdict import HEADLINE_CHARS, EvaluationVerdict, judge
from brain_pipeline_tests.evaluation.helpers import make_chunk

ANSWER = make_chunk("Security groups are stateful: return traffic is allowed automatically.")
OTHER = make_chunk("Buckets keep objects; versioning keeps every old copy of an object.")
BASE = [
    ANSWER,
    OTHER,
    *(make_chunk(f"Filler paragraph {i} about routing tables and subnets.") for i in range(5)),
]
DECOYS = [
    make_chunk(f"Security groups, stateful security groups, security groups again #{i}.")
    for i in range(10)
]
FIXTURE = Fixture(
    (
        LabelledQuery("stateful security groups", "aws", (ANSWER.id,)),
        LabelledQuery("bucket versioning", "aws", (OTHER.id,)),
    ),
    "t.json",
)


def run(chunks: Sequence[Chunk], fixture: Fixture = FIXTURE) -> EvaluationReport:
    return evaluate(list(chunks), fixture, retrievers=("legacy", "bm25"))


def regressed() -> tuple[EvaluationReport, Comparison]:
    """An evaluation after the planted edit, and its comparison with the one before."""
    after = run([*BASE, *DECOYS])
    return after, compare(after.queries, run(BASE).queries)


def test_a_clean_report_passes_with_every_bound_and_its_margin() -> None:
    report = run(BASE)
    bm25 = report.summary("bm25")
    assert bm25 is not None
    verdict = judge(report, {"bm25": Thresholds(min_ndcg_at_10=0.5, max_misses=1)})
    assert verdict.severity == "PASS" and verdict.passed
    assert verdict.failures == () and verdict.warnings == ()
    rows = {row.metric: row for row in verdict.thresholds}
    assert rows["ndcg_at_10"].margin == pytest.approx(bm25.ndcg_at_10 - 0.5)
    assert rows["misses"].margin == 1 - bm25.misses
    assert verdict.headline().startswith("retrieval evaluation passed: bm25 nDCG@10")
    assert verdict.line().startswith("PASSED: bm25 nDCG@10")


def test_a_missed_bound_is_an_error_with_a_negative_margin() -> None:
    verdict = judge(run(BASE), {"bm25": {"min_recall_at_10": 1.01}})
    assert verdict.severity == "ERROR" and not verdict.passed
    (row,) = verdict.thresholds
    assert row.margin < 0 and not row.passed
    assert verdict.failures == ("bm25: recall@10 1.000 < minimum 1.010",)
    assert verdict.headline() == f"retrieval evaluation FAILED: {verdict.failures[0]}"


def test_stale_labels_fail_and_name_their_query_and_last_file() -> None:
    fixture = Fixture((LabelledQuery("bucket versioning", "aws", ("0123456789ab",)),), "t.json")
    report = run(BASE, fixture)
    report.stale_sources = {"0123456789ab": "aws/s3.md"}
    verdict = judge(report)
    assert verdict.severity == "ERROR"
    (label,) = verdict.stale_labels
    assert (label.id, label.query) == ("0123456789ab", "bucket versioning")
    assert label.source == "aws/s3.md"
    assert "was in aws/s3.md" in verdict.failures[0] and "fixture repair" in verdict.failures[0]


@pytest.mark.parametrize(("mode", "severity"), [("block", "ERROR"), ("warn", "WARN")])
def test_a_new_miss_blocks_or_warns_as_configured(mode: str, severity: str) -> None:
    report, comparison = regressed()
    verdict = judge(
        report, comparison=comparison, agent_retriever="bm25", baseline="b", on_regression=mode
    )
    assert verdict.severity == severity
    (regression,) = verdict.regressions
    assert regression.query == "stateful security groups"
    assert regression.blocking == (mode == "block")
    assert "became a miss" in regression.message
    listed = verdict.failures if mode == "block" else verdict.warnings
    assert listed == (regression.message,)
    assert "became a miss" in verdict.headline()


def test_without_an_agent_retriever_nothing_is_gated_and_that_is_a_warning() -> None:
    report, comparison = regressed()
    verdict = judge(report, comparison=comparison, agent_retriever=None)
    assert verdict.severity == "WARN" and verdict.regressions == ()
    assert "nothing gated" in verdict.warnings[0]


def test_accepting_clears_only_the_regressions() -> None:
    report, comparison = regressed()
    verdict = judge(
        report,
        {"bm25": {"min_recall_at_10": 1.01}},
        comparison=comparison,
        agent_retriever="bm25",
    )
    assert len(verdict.failures) == 2 and len(verdict.own_failures) == 1
    accepted = verdict.accepting("planted on purpose")
    assert accepted.failures == verdict.own_failures and accepted.severity == "ERROR"
    assert accepted.accepted == "planted on purpose"
    assert [r.blocking for r in accepted.regressions] == [False]
    alone = judge(report, comparison=comparison, agent_retriever="bm25").accepting("ok")
    assert alone.severity == "PASS"


def test_the_verdict_survives_the_record_unchanged() -> None:
    report, comparison = regressed()
    verdict = judge(
        report,
        {"bm25": Thresholds(min_ndcg_at_10=0.1), "hybrid": Thresholds(max_misses=0)},
        comparison=comparison,
        agent_retriever="bm25",
        baseline="baseline: the evaluation published ...",
        evaluation_key="k" * 64,
    )
    stored = json.loads(json.dumps(verdict.to_dict()))
    assert EvaluationVerdict.from_dict(stored) == verdict
    assert "format" not in stored  # nothing to bump: the fields are the shape
    assert EvaluationVerdict.from_dict({**stored, "format": 1}) == verdict  # an older record
    with pytest.raises(KeyError):
        EvaluationVerdict.from_dict({k: v for k, v in stored.items() if k != "failures"})
    with pytest.raises(TypeError):
        rows = [{**row, "tomorrow": 1} for row in stored["thresholds"]]
        EvaluationVerdict.from_dict({**stored, "thresholds": rows})
    with pytest.raises(ValueError, match="severity"):
        EvaluationVerdict.from_dict({**stored, "severity": "FINE"})


def test_a_headline_is_one_short_line_however_many_failures() -> None:
    verdict = EvaluationVerdict("ERROR", failures=tuple(f"failure {i}\n" * 40 for i in range(7)))
    headline = verdict.headline()
    assert len(headline) <= HEADLINE_CHARS
    assert headline.startswith("retrieval evaluation FAILED: failure 0")
    assert "(+6 more)" in EvaluationVerdict("ERROR", failures=("a", *"bcdefg")).headline()
    assert "\n" not in EvaluationVerdict("ERROR", failures=("one\ntwo",)).headline()
