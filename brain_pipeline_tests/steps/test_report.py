"""The plain value shapes a step reports: defaults that are safe to share and to compare."""

from __future__ import annotations

import dataclasses

import pytest

from brain_pipeline.steps.report import CheckVerdict, Markdown, RunLink, StepResult, Table


def test_each_table_gets_its_own_rows() -> None:
    first, second = Table([("n", "int")]), Table([("n", "int")])
    first.rows.append([1])
    assert second.rows == []


def test_each_verdict_gets_its_own_metadata_errors_and_warnings() -> None:
    first = CheckVerdict(True, "WARN", "fine")
    second = CheckVerdict(True, "WARN", "fine")
    first.metadata["n"] = 1
    first.errors.append("e")
    first.warnings.append("w")
    assert (second.metadata, second.errors, second.warnings) == ({}, [], [])


def test_a_verdict_can_be_amended_before_it_is_returned() -> None:
    """Checks build a verdict, then add what they found: it is not frozen."""
    verdict = CheckVerdict(True, "ERROR", "ok")
    verdict.passed = False
    verdict.warnings.append("two files need a look")
    assert verdict == CheckVerdict(False, "ERROR", "ok", warnings=["two files need a look"])


@pytest.mark.parametrize(
    "value",
    [Table([("n", "int")]), Markdown("**x**"), RunLink("abc"), StepResult("v1", {})],
)
def test_reported_values_are_frozen(value: object) -> None:
    field = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


def test_values_compare_by_content() -> None:
    assert Markdown("a") == Markdown("a") != Markdown("b")
    assert RunLink("r1") != RunLink("r2")
    assert StepResult("v1", {"n": 1}) == StepResult("v1", {"n": 1}) != StepResult("v2", {"n": 1})
