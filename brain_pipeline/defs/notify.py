"""Notifications: Dagster run-status sensors that report each finished run once.

`notify_on_failure` (`@dg.run_failure_sensor`) and `notify_on_success`
(`@dg.run_status_sensor(SUCCESS)`) read the run's events (its failed steps, its asset
check evaluations, whether `published_local` materialised) into `publishing.run_alerts`'s
`RunFacts`, ask it which event the run is, and send that one message. They watch every
run of the instance (`monitor_all_code_locations`): a run launched from the CLI into the
same instance has no code-location origin, and must count too. Runs of another build
directory are left alone.

A channel that is down never touches the run (the run has already finished when the
sensor sees it); the tick says what was sent and what was not, after the bounded retries
of `publishing.run_alerts.deliver`. Both sensors run by default when a channel is configured.

Once per run, newest truth: `brain-pipeline materialize` reports its own run through the
same `notify_finished_run` whether or not a daemon runs; whoever comes first claims the
run with an exclusive file in the build directory's state (`run_alerts.claim_run`), so
a message is never lost to a daemon that just stopped and never sent twice. A failed
step's cause is the exception the step's code raised (`root_cause`), a run that ended
with no failed step (killed) says which steps had succeeded, and a RECOVERED that a
newer blocked or failed run made stale is not sent (a restarted daemon catching up).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.defs.up_to_date import ours as _ours
from brain_pipeline.lib.code_location import location_config, location_config_path
from brain_pipeline.lib.dagster_private import event_data, run_events
from brain_pipeline.publishing.run_alerts import (
    CheckOutcome,
    Previous,
    RunFacts,
    build_message,
    claim_run,
    classify,
    deliver,
    known_secrets,
    previous_outcome,
    run_link,
    superseded_by,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.trigger import describe_trigger
from brain_pipeline.utils.markdown import md_undefanged

LOOKBACK_RUNS = 25
NEWER_RUNS = 25


def run_facts(instance: dg.DagsterInstance, run: dg.DagsterRun) -> RunFacts:
    """The run's failed steps, check evaluations and publication, from its events."""
    kinds = {
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.STEP_SUCCESS,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
        dg.DagsterEventType.RUN_FAILURE,
    }
    failed: list[tuple[str, str]] = []
    succeeded: list[str] = []
    checks: list[CheckOutcome] = []
    published, status, run_failure = False, None, None
    for entry in run_events(instance, run.run_id, kinds):
        event = entry.dagster_event
        if event is None:
            continue
        data: Any = event_data(event)
        if event.event_type == dg.DagsterEventType.STEP_SUCCESS:
            succeeded.append(str(event.step_key))
        elif event.event_type == dg.DagsterEventType.RUN_FAILURE:
            run_failure = entry.user_message or event.message
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            user = getattr(data, "user_failure_data", None)
            error = getattr(data, "error", None)
            text = (user.description if user is not None else None) or (
                root_cause(error) if error is not None else "failed"
            )
            failed.append((str(event.step_key), str(text)))
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            checks.append(
                CheckOutcome(
                    f"{data.asset_key.to_user_string()}:{data.check_name}",
                    bool(data.passed),
                    str(getattr(data.severity, "value", data.severity)),
                    md_undefanged(str(data.description or "")),  # plain text, not Markdown
                    bool(data.blocking),
                    _text(data.metadata.get("headline")),
                )
            )
        elif data.materialization.asset_key == dg.AssetKey("published_local"):
            published = True
            value = data.materialization.metadata.get("status")
            status = str(getattr(value, "value", value)) if value is not None else None
    return RunFacts(
        run_id=run.run_id,
        job="materialize" if run.job_name.startswith("__ASSET_JOB") else run.job_name,
        succeeded=run.status == dg.DagsterRunStatus.SUCCESS,
        failed_steps=tuple(failed),
        checks=tuple(checks),
        published=published,
        publish_status=status,
        trigger=describe_trigger(run.tags, ()),
        succeeded_steps=tuple(succeeded),
        run_failure=str(run_failure) if run_failure else None,
    )


def root_cause(error: Any) -> str:
    """The exception the code raised, not Dagster's wrapper around it: a step whose
    function raised fails with `DagsterExecutionStepExecutionError: Error occurred while
    executing op ...`, the user's exception being its cause. The first error of the
    chain that is not Dagster's own (the last one when all are)."""
    seen = 0
    while (
        error is not None
        and str(getattr(error, "cls_name", "")).startswith("Dagster")
        and getattr(error, "cause", None) is not None
        and seen < 20
    ):
        error, seen = error.cause, seen + 1
    message = str(getattr(error, "message", "") or "").strip()
    name = str(getattr(error, "cls_name", "") or "")
    if name and not message.startswith(name):
        message = f"{name}: {message}"
    return message or "failed"


def _text(value: Any) -> str | None:
    """A text metadata value's string (None when absent)."""
    if value is None:
        return None
    return str(getattr(value, "value", value)) or None


def previous_event(
    instance: dg.DagsterInstance, run: dg.DagsterRun, cfg: BrainConfig
) -> Previous | None:
    """What the runs before this one reported (`publishing.run_alerts.previous_outcome` over
    the last LOOKBACK_RUNS finished runs of ours, newest first). Read from the instance,
    so the two sensors need no shared state and may tick in any order."""
    record = instance.get_run_record_by_id(run.run_id)
    if record is None:
        return None
    earlier = instance.get_run_records(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE],
            created_before=record.create_timestamp,
        ),
        limit=LOOKBACK_RUNS,
    )
    return previous_outcome(
        run_facts(instance, other.dagster_run)
        for other in earlier
        if other.dagster_run.run_id != run.run_id and _ours(other.dagster_run, cfg)
    )


def newer_runs(
    instance: dg.DagsterInstance, run: dg.DagsterRun, cfg: BrainConfig
) -> Iterator[RunFacts]:
    """The finished runs of ours created after `run` (up to NEWER_RUNS), read lazily."""
    record = instance.get_run_record_by_id(run.run_id)
    if record is None:
        return
    later = instance.get_run_records(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE],
            created_after=record.create_timestamp,
        ),
        limit=NEWER_RUNS,
    )
    for other in later:
        if other.dagster_run.run_id != run.run_id and _ours(other.dagster_run, cfg):
            yield run_facts(instance, other.dagster_run)


def notify_finished_run(
    instance: dg.DagsterInstance,
    run_id: str,
    cfg: BrainConfig,
    log: Any = None,
) -> str | None:
    """Report the finished run `run_id` once; the one-line account of the delivery, or
    None when it is not ours, has nothing to report, or was reported already.

    One path for every run: the notification sensors call it at their tick, and
    `brain-pipeline materialize` right after its own run (and for each dead run it
    reaps), whether or not a daemon runs: a daemon that is stopping or stopped never
    leaves a run unannounced. Whoever comes first claims the run
    (`publishing.run_alerts.claim_run`, in the build directory's state), so the other
    sends nothing. A RECOVERED that a newer blocked or failed run has made stale is
    not sent.
    """
    settings = cfg.notify
    record = instance.get_run_record_by_id(run_id)
    if record is None or not settings.configured:
        return None
    run = record.dagster_run
    if not run.is_finished or not _ours(run, cfg):
        return None
    facts = run_facts(instance, run)
    previous = None if not facts.succeeded else previous_event(instance, run, cfg)
    event = classify(facts, previous, run_link(settings.ui_base_url, run.run_id))
    if event is None:
        return None
    if not claim_run(StateLayout.of(cfg.build_dir).state_dir, run.run_id):
        return None
    stale = superseded_by(event, newer_runs(instance, run, cfg))
    if stale is not None:
        ok = True
        line = (
            f"run {run.run_id[:8]}: {event.kind} message not sent: a newer run "
            f"({stale.run_id[:8]}) did not publish"
        )
    else:
        delivery = deliver(settings, build_message(event, known_secrets(settings, _environment())))
        ok = delivery.ok
        line = f"run {run.run_id[:8]}: {event.kind} message: {delivery.describe()}"
    if log is not None:
        (log.info if ok else log.warning)(line)
    return line


def notify_for_run(context: dg.RunStatusSensorContext, config_path: str | None) -> dg.SkipReason:
    """A notification sensor's tick for `context.dagster_run` (the configuration is read
    at each tick: a new channel needs no reload).

    Always a SkipReason, never None: a run-status sensor whose function returns None for
    one run and a SkipReason for the next in the same tick fails the tick ("received both
    DagsterRunReaction and SkipReason"), which a daemon catching up on several finished
    runs would hit; with a SkipReason each tick handles one run and says what it did."""
    run_id = context.dagster_run.run_id
    line = notify_finished_run(context.instance, run_id, load_config(config_path), context.log)
    return dg.SkipReason(line or f"run {run_id[:8]}: nothing to report")


def _environment() -> dict[str, str]:
    import os

    return dict(os.environ)


def build_notification_sensors(
    cfg: BrainConfig, config_path: str | None
) -> list[dg.SensorDefinition]:
    status = (
        dg.DefaultSensorStatus.RUNNING if cfg.notify.configured else dg.DefaultSensorStatus.STOPPED
    )

    @dg.run_failure_sensor(
        name="notify_on_failure",
        monitor_all_code_locations=True,
        default_status=status,
        description=(
            "Sends one message per failed run: the publish was blocked (which check, its "
            "one-line cause) or a step failed before publishing. Channels: notify.*."
        ),
    )
    def notify_on_failure(context: dg.RunFailureSensorContext) -> dg.SkipReason:
        return notify_for_run(context, config_path)

    @dg.run_status_sensor(
        run_status=dg.DagsterRunStatus.SUCCESS,
        name="notify_on_success",
        monitor_all_code_locations=True,
        default_status=status,
        description=(
            "Sends one message per successful run that published a WARN regression "
            "(on_regression: warn) or that is the first good publication after a blocked, "
            "failed or WARN run (recovered). Channels: notify.*."
        ),
    )
    def notify_on_success(context: dg.RunStatusSensorContext) -> dg.SkipReason:
        return notify_for_run(context, config_path)

    return [notify_on_failure, notify_on_success]


@dg.definitions
def notify_definitions() -> dg.Definitions:
    sensors = build_notification_sensors(location_config(), location_config_path())
    return dg.Definitions(sensors=sensors)
