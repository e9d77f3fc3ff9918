"""`triggered_by` in words, from a run's tags and the automation conditions that fired."""

from __future__ import annotations

from brain_pipeline.steps.report import StepResult
from brain_pipeline.steps.trigger import (
    BY_HAND,
    SCHEDULE_NAME_TAG,
    TRIGGER_TAG,
    TRIGGERED_BY,
    describe_trigger,
    with_trigger,
)


def test_a_run_without_instigator_tags_was_launched_by_a_person() -> None:
    assert describe_trigger({"brain_pipeline/build_dir": "/b"}, []) == BY_HAND


def test_the_schedule_is_named() -> None:
    assert describe_trigger({SCHEDULE_NAME_TAG: "reingest_schedule"}, []) == (
        "schedule reingest_schedule"
    )


def test_a_sensor_says_why_in_its_own_tag() -> None:
    tags = {TRIGGER_TAG: "corpus_observation_sensor: new corpus data version"}
    assert describe_trigger(tags, []) == "corpus_observation_sensor: new corpus data version"


def test_fired_conditions_win_over_the_automation_sensors_generic_tag() -> None:
    tags = {TRIGGER_TAG: "automation_sensor (conditions: see the run's evaluation)"}
    fired = ["eager_or_corpus_version_unconsumed", "corpus_version_unconsumed"]
    assert describe_trigger(tags, fired) == (
        "automation_sensor: eager_or_corpus_version_unconsumed, corpus_version_unconsumed"
    )


def test_with_trigger_adds_the_key_and_keeps_the_rest() -> None:
    result = StepResult("v1", {"corpus_digest": "abc", "occurrences": 3})
    marked = with_trigger(result, BY_HAND)
    assert marked.data_version == "v1"
    assert marked.metadata == {"corpus_digest": "abc", "occurrences": 3, TRIGGERED_BY: BY_HAND}
    assert TRIGGERED_BY not in result.metadata  # the step's own result is not changed
