"""The blocking check's step called with plain values (no Dagster): the check shows the
evaluation's verdict as it was stored, PASS / WARN / ERROR, and judges nothing itself."""

from __future__ import annotations

import pytest

from brain_pipeline.evaluation.service import record_as_baseline
from brain_pipeline.steps.evaluate import evaluate_for_check
from brain_pipeline.steps.report import Markdown, Table
from brain_pipeline_tests.steps.built import (
    ANSWERED,
    build,
    bury_the_answer,
    configure,
    record_of_build,
    stored_verdict_of_build,
    write_fixture,
)
from brain_pipeline_tests.steps.conftest import Project, StepLog
from brain_pipeline_tests.steps.handed import build_of

REUSED = " (unchanged inputs: result reused)"


def _threshold_verdicts(table: object) -> list[str]:
    assert isinstance(table, Table)
    return [row[-1] for row in table.rows]


def test_a_passing_verdict_passes_the_check(project: Project, log: StepLog) -> None:
    project = configure(
        project, evaluation={"thresholds": {"bm25": {"min_ndcg_at_10": 0.5, "max_misses": 0}}}
    )
    build(project, log)
    write_fixture(project)

    check = evaluate_for_check(project.cfg, build_of(project.cfg), "run-1")

    stored = stored_verdict_of_build(project)
    assert stored.severity == "PASS"
    assert check.passed and check.description == "passed"
    assert check.errors == [] and check.warnings == []
    assert check.metadata["severity"] == "PASS" and check.metadata["verdict"] == "passed"
    assert check.metadata["headline"] == stored.headline()
    assert _threshold_verdicts(check.metadata["thresholds"]) == ["pass", "pass"]
    summary = check.metadata["Summary"]
    assert isinstance(summary, Markdown) and summary.text.startswith("**PASSED**")


def test_an_error_verdict_fails_the_check_and_names_every_failure(
    project: Project, log: StepLog
) -> None:
    project = configure(project, evaluation={"thresholds": {"bm25": {"max_misses": 0}}})
    build(project, log)
    write_fixture(project, miss=True)

    check = evaluate_for_check(project.cfg, build_of(project.cfg), "run-1")

    stored = stored_verdict_of_build(project)
    assert stored.severity == "ERROR" and stored.failures == ("bm25: 1 misses > maximum 0",)
    assert not check.passed and check.severity == "ERROR"
    assert check.description == "; ".join(stored.failures)
    assert check.errors == list(stored.failures) and check.warnings == []
    assert check.metadata["severity"] == "ERROR" and check.metadata["verdict"] == "failed"
    assert check.metadata["failures"] == "bm25: 1 misses > maximum 0"
    assert _threshold_verdicts(check.metadata["thresholds"]) == ["FAIL"]
    summary = check.metadata["Summary"]
    assert isinstance(summary, Markdown) and summary.text.startswith("**FAILED**")


@pytest.mark.parametrize(("on_regression", "severity"), [("warn", "WARN"), ("block", "ERROR")])
def test_a_new_miss_is_shown_with_the_verdict_s_severity_whatever_the_thresholds_say(
    project: Project, log: StepLog, on_regression: str, severity: str
) -> None:
    """Every configured bound passes (one miss is allowed), yet the check is not passed:
    its severity is the verdict's (WARN or ERROR per on_regression), not re-derived from
    the threshold rows."""
    project = configure(
        project,
        evaluation={"on_regression": on_regression, "thresholds": {"bm25": {"max_misses": 1}}},
    )
    build(project, log)
    write_fixture(project)
    assert evaluate_for_check(project.cfg, build_of(project.cfg), "run-1").passed
    first = record_of_build(project)
    assert first is not None
    record_as_baseline(project.cfg, first, kind="published")
    bury_the_answer(project)
    build(project, log)

    check = evaluate_for_check(project.cfg, build_of(project.cfg), "run-2")

    stored = stored_verdict_of_build(project)
    assert stored.severity == severity and len(stored.regressions) == 1
    assert _threshold_verdicts(check.metadata["thresholds"]) == ["pass"]
    assert not check.passed and check.severity == severity
    assert f"{ANSWERED!r} (aws) became a miss" in check.description
    assert check.metadata["severity"] == severity and check.metadata["regressions"] == 1
    if severity == "WARN":
        assert check.description == "; ".join(stored.warnings)
        assert check.warnings == list(stored.warnings) and check.errors == []
        assert check.metadata["verdict"] == "passed"  # nothing failed: published with a WARN
    else:
        assert check.description == "; ".join(stored.failures)
        assert check.errors == list(stored.failures) and check.warnings == []
        assert check.metadata["verdict"] == "failed"


def test_unchanged_inputs_show_the_recorded_result_and_say_it_was_reused(
    project: Project, log: StepLog
) -> None:
    project = configure(project, evaluation={"thresholds": {"bm25": {"max_misses": 0}}})
    build(project, log)
    write_fixture(project, miss=True)
    first = evaluate_for_check(project.cfg, build_of(project.cfg), "run-1")

    again = evaluate_for_check(project.cfg, build_of(project.cfg), "run-2")

    assert not first.metadata["reused"] and REUSED not in first.description
    assert again.metadata["reused"] is True
    assert again.description == first.description + REUSED
    assert again.severity == first.severity and again.errors == first.errors
    assert again.metadata["evaluated_at"] == first.metadata["evaluated_at"]
    assert again.metadata["evaluation_key"] == first.metadata["evaluation_key"]
    record = record_of_build(project)
    assert record is not None and record["run_id"] == "run-1"


def test_known_item_figures_leave_out_areas_with_nothing_to_ask() -> None:
    from brain_pipeline.evaluation.known_item_gate import AreaOutcome, KnownItemVerdict
    from brain_pipeline.steps.evaluate import known_item_figures

    def area(name: str, items: int, found: int) -> AreaOutcome:
        return AreaOutcome(name, name, items, found, found, 0, 0, 10, 10)

    dull = KnownItemVerdict("baseline of run x", (area("dull", 0, 0),))
    assert known_item_figures(dull) == {}  # a 0 would plot as a fall to nothing
    mixed = KnownItemVerdict("baseline of run x", (area("dull", 0, 0), area("rich", 4, 3)))
    assert known_item_figures(mixed) == {
        "known_items.found_at_10": 0.75,
        "known_items.rich.found_at_10": 0.75,
    }
