"""`publishing.gate.decide`: publish or not, and why, from every blocking check's verdict."""

from __future__ import annotations

import pytest

from brain_pipeline.evaluation.verdict import EvaluationVerdict
from brain_pipeline.publishing.gate import (
    FORCE_OFF,
    REASON_CHARS,
    CheckOutcome,
    decide,
    force_refusal,
)

PASS = EvaluationVerdict("PASS")
WARN = EvaluationVerdict("WARN", warnings=("regression: 'q' (a) became a miss",))
ERROR = EvaluationVerdict(
    "ERROR", failures=("bm25: nDCG@10 0.400 < minimum 0.450", "stale fixture: x")
)


def test_a_passing_verdict_is_published() -> None:
    d = decide(PASS, force=False, store_chunk_count=10)
    assert d.allowed and not d.forced
    assert d.reason == "every blocking check passed on this data (retrieval_eval)"


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
    assert d.reason == (
        "refusing to publish: retrieval_eval has not run on this data (run `brain-pipeline "
        "materialize`, whose run checks the build before it publishes) (set force to override)"
    )


@pytest.mark.parametrize("verdict", [ERROR, None])
def test_force_overrides_a_refusal_and_says_so(verdict: EvaluationVerdict | None) -> None:
    d = decide(verdict, force=True, store_chunk_count=10, reason="the demo at nine")
    assert d.allowed and d.forced
    assert d.reason.startswith("FORCED PUBLISH: ")
    assert d.reason.endswith("(reason: the demo at nine)")
    assert d.forced_record() == {"reason": "the demo at nine", "overrode": d.overrode}
    assert "retrieval_eval" in d.overrode


@pytest.mark.parametrize("reason", ["", "   "])
def test_force_without_a_reason_is_refused(reason: str) -> None:
    d = decide(ERROR, force=True, store_chunk_count=10, reason=reason)
    assert not d.allowed and not d.forced
    assert "force needs a reason" in d.reason and "nDCG@10 0.400" in d.reason
    assert force_refusal(True, reason, allow_force=True, how="--reason") == (
        "force needs a reason, recorded with the publication: --reason"
    )


def test_force_where_the_deployment_turned_it_off_is_refused_even_with_a_reason() -> None:
    d = decide(ERROR, force=True, store_chunk_count=10, reason="why", allow_force=False)
    assert not d.allowed and not d.forced
    assert "publish.allow_force: false" in d.reason
    assert force_refusal(True, "why", allow_force=False) == FORCE_OFF
    assert force_refusal(False, None, allow_force=False) is None


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


FITS = "fits_agent_string_limit"


def test_every_blocking_check_must_have_passed_on_this_data() -> None:
    passed = CheckOutcome(FITS, "PASS", "12 units")
    d = decide(PASS, force=False, store_chunk_count=10, checks=[passed])
    assert d.allowed and d.reason == (
        "every blocking check passed on this data (retrieval_eval, fits_agent_string_limit)"
    )


def test_a_failed_blocking_check_refuses_in_one_line_naming_it() -> None:
    failed = CheckOutcome(FITS, "ERROR", "knowledge-store.json is 900 units: too long")
    d = decide(PASS, force=False, store_chunk_count=10, checks=[failed])
    assert not d.allowed and "\n" not in d.reason
    assert d.reason == (
        "refusing to publish: fits_agent_string_limit failed on this data: "
        "knowledge-store.json is 900 units: too long (set force to override)"
    )


def test_a_blocking_check_that_never_judged_this_data_refuses_saying_what_to_run() -> None:
    d = decide(PASS, force=False, store_chunk_count=10, checks=[CheckOutcome(FITS, None)])
    assert not d.allowed
    assert d.reason.startswith(
        "refusing to publish: fits_agent_string_limit has not run on this data (run "
        "`brain-pipeline materialize`"
    )


def test_a_warn_of_a_blocking_check_is_published_with_its_warning() -> None:
    warned = CheckOutcome(FITS, "WARN", "85 % of the limit")
    d = decide(WARN, force=False, store_chunk_count=10, checks=[warned])
    assert d.allowed and "85 % of the limit" in d.reason and "became a miss" in d.reason


def test_force_overrides_a_failed_blocking_check_and_names_it() -> None:
    failed = CheckOutcome(FITS, "ERROR", "too long")
    d = decide(PASS, force=True, store_chunk_count=10, checks=[failed], reason="r")
    assert d.allowed and d.forced
    assert d.reason.startswith("FORCED PUBLISH: fits_agent_string_limit failed on this data")


def test_force_does_not_override_a_check_that_is_not_overridable() -> None:
    failed = CheckOutcome(FITS, "ERROR", "too long", overridable=False)
    for force in (True, False):
        d = decide(None, force=force, store_chunk_count=10, checks=[failed])
        assert not d.allowed and not d.forced
        assert d.reason == (
            "refusing to publish: fits_agent_string_limit failed on this data: too long "
            "(force does not override it)"
        )
    never_ran = CheckOutcome(FITS, None, overridable=False)
    assert decide(PASS, force=True, store_chunk_count=10, checks=[never_ran], reason="r").forced
