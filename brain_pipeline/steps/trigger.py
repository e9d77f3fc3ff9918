"""Why a run exists, in words: the `triggered_by` metadata of `knowledge_chunks`.

A run is started by one of four things, and its tags say which: automation (Dagster tags
the run with the evaluation whose true conditions the Dagster layer looks up, see
`lib.conditions.fired_conditions`), our observation sensor (it tags its run requests with
`TRIGGER_TAG`), the nightly schedule (Dagster's schedule-name tag), or a person (the CLI
or the UI, which set none of these). The wording is decided here, without Dagster, so it
can be read and tested as plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from brain_pipeline.steps.report import StepResult

TRIGGERED_BY = "triggered_by"
"""Metadata key of a `knowledge_chunks` materialisation: why its run exists."""
TRIGGER_TAG = "brain_pipeline/trigger"
"""Run tag our sensors set on the runs they request: who asked, and why."""
SCHEDULE_NAME_TAG = "dagster/schedule_name"
"""Set by Dagster's scheduler on every run a schedule launches."""
BY_HAND = "launched by hand (CLI or UI)"
AUTOMATION_PREFIX = "automation_sensor: "


def describe_trigger(tags: Mapping[str, str], fired: Sequence[str]) -> str:
    """What started the run with `tags`; `fired` are the labelled automation conditions
    that were true for the asset in the evaluation that launched it (empty otherwise).

    The conditions come first: an automation run also carries the sensor's own generic
    `TRIGGER_TAG`, which only says where to look.
    """
    if fired:
        return AUTOMATION_PREFIX + ", ".join(fired)
    if TRIGGER_TAG in tags:
        return tags[TRIGGER_TAG]
    if SCHEDULE_NAME_TAG in tags:
        return f"schedule {tags[SCHEDULE_NAME_TAG]}"
    return BY_HAND


def with_trigger(result: StepResult, triggered_by: str) -> StepResult:
    """`result` with `triggered_by` in its metadata (the step itself does not know it)."""
    return replace(result, metadata={**result.metadata, TRIGGERED_BY: triggered_by})
