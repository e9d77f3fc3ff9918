"""`publishing.gate.decide`: publish or not, and why, from the evaluation's verdict."""

from __future__ import annotations

import pytest

from brain_pipeline.evaluation.verdict import EvaluationVerdict
from brain_pipeline.publishing.gate import REASON_CHARS, decide

PASS = EvaluationVerdict("PASS")
WARN = EvaluationVerdict("WARN", warnings=("regression: 'q' (a) became a miss",))
ERROR = EvaluationVerdict(
    "ERROR", failures=("bm25: nDCG@10 0.400 < minimum 0.450", "stale fixture: x")
)


def test_a_passing_verdict_is_published() -> None:
    d = decide(PASS, force=False, store_chunk_count=10)
    assert d.allowed and not d.forced
    assert d.reason == "the retrieval evaluation of this data passed"


def test_a_warning_is_published_and_named_in_the_reason() -> None:
    d = decide(WARN, force=False, store_chunk_count=10)
    assert d.allowed and not d.forced
    assert "'q' (a) became a miss" in d.reason


def test_a_failed_verdict_is_refused_naming_every_failure() -> None:
    d = decide(ERROR, force=False, store_chunk_count=10)
    assert not d.allowed and not d.forced
    assert "nDCG@10 0.400 < minimum 0.450" in d.reason and "stale fixture: x" in d.reason
    assert d.reason.endswith("(set force to override)")


def test_no_verdict_is_refused_as_never_evaluated() -> None:
    d = decide(None, force=False, store_chunk_count=10)
    assert not d.allowed
    assert "has not run on this data" in d.reason and "force" in d.reason


@pytest.mark.parametrize("verdict", [ERROR, None])
def test_force_overrides_a_refusal_and_says_so(verdict: EvaluationVerdict | None) -> None:
    d = decide(verdict, force=True, store_chunk_count=10)
    assert d.allowed and d.forced
    assert d.reason.startswith("FORCED PUBLISH: ")


def test_force_on_a_passing_verdict_is_not_a_forced_publication() -> None:
    assert not decide(PASS, force=True, store_chunk_count=10).forced


@pytest.mark.parametrize("verdict", [PASS, WARN, ERROR, None])
@pytest.mark.parametrize("force", [True, False])
def test_an_empty_store_is_never_published(verdict: EvaluationVerdict | None, force: bool) -> None:
    d = decide(verdict, force=force, store_chunk_count=0)
    assert not d.allowed and not d.forced
    assert "empty" in d.reason


def test_a_long_list_of_failures_is_shortened_but_keeps_the_override_hint() -> None:
    many = EvaluationVerdict("ERROR", failures=tuple(f"stale label {i:04d}" for i in range(500)))
    d = decide(many, force=False, store_chunk_count=10)
    assert len(d.reason) < REASON_CHARS + 100
    assert "stale label 0000" in d.reason and d.reason.endswith("(set force to override)")
