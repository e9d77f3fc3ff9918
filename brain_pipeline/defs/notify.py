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
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config
from brain_pipeline.lib.code_location import location_config, location_config_path
from brain_pipeline.lib.instance import BUILD_DIR_TAG, build_dir_tag_value
from brain_pipeline.publishing.run_alerts import (
    CheckOutcome,
    Previous,
    RunFacts,
    build_message,
    classify,
    deliver,
    known_secrets,
    previous_outcome,
    run_link,
)
from brain_pipeline.steps.trigger import describe_trigger

NOTIFIED_KEY = "brain_pipeline/notified/"
"""Instance key-value entry per run already reported (a second tick never re-sends)."""
OUR_JOBS = ("reingest_job", "rollback_job", "__ASSET_JOB")
LOOKBACK_RUNS = 25


def _ours(run: dg.DagsterRun, cfg: BrainConfig) -> bool:
    """A run of this project's jobs on this build directory (when it says which)."""
    if not run.job_name.startswith(OUR_JOBS):
        return False
    tagged = run.tags.get(BUILD_DIR_TAG)
    return tagged is None or tagged == build_dir_tag_value(cfg.build_dir)


def run_facts(instance: dg.DagsterInstance, run: dg.DagsterRun) -> RunFacts:
    """The run's failed steps, check evaluations and publication, from its events."""
    kinds = {
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.ASSET_CHECK_EVALUATION,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
    }
    failed: list[tuple[str, str]] = []
    checks: list[CheckOutcome] = []
    published, status = False, None
    for record in instance.get_records_for_run(run.run_id, of_type=kinds).records:
        event = record.event_log_entry.dagster_event
        if event is None:
            continue
        data: Any = event.event_specific_data
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            user = getattr(data, "user_failure_data", None)
            error = getattr(data, "error", None)
            text = (user.description if user is not None else None) or (
                error.message if error is not None else "failed"
            )
            failed.append((str(event.step_key), str(text)))
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            checks.append(
                CheckOutcome(
                    f"{data.asset_key.to_user_string()}:{data.check_name}",
                    bool(data.passed),
                    str(getattr(data.severity, "value", data.severity)),
                    str(data.description or ""),
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
    )


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


def notify_finished_run(
    instance: dg.DagsterInstance,
    run_id: str,
    cfg: BrainConfig,
    log: Any = None,
    *,
    by_command: bool = True,
) -> str | None:
    """Report the finished run `run_id` once; the one-line account of the delivery, or
    None when it is not ours, has nothing to report, was reported already, or (for the
    command, `by_command`) a running daemon's sensors will report it.

    One path for every run: the notification sensors call it at their tick, and
    `brain-pipeline materialize` right after its run when no daemon runs. Whoever comes
    first records the run as notified in the instance, so the other sends nothing.
    """
    settings = cfg.notify
    record = instance.get_run_record_by_id(run_id)
    if record is None or not settings.configured:
        return None
    run = record.dagster_run
    if not run.is_finished or not _ours(run, cfg):
        return None
    if by_command and sensors_will_notify(instance):
        return None
    key = NOTIFIED_KEY + run.run_id
    storage = instance.run_storage
    if storage.get_cursor_values({key}).get(key):
        return None
    facts = run_facts(instance, run)
    previous = None if not facts.succeeded else previous_event(instance, run, cfg)
    event = classify(facts, previous, run_link(settings.ui_base_url, run.run_id))
    if event is None:
        return None
    message = build_message(event, known_secrets(settings, _environment()))
    delivery = deliver(settings, message)
    storage.set_cursor_values({key: event.kind})
    line = f"run {run.run_id[:8]}: {event.kind} message: {delivery.describe()}"
    if log is not None:
        (log.info if delivery.ok else log.warning)(line)
    return line


#: A sensor daemon whose last heartbeat is older than this is taken for gone (it beats
#: every 30 s or so; one missed beat is not a dead daemon).
DAEMON_HEARTBEAT_TOLERANCE_SECONDS = 120.0


def sensors_will_notify(instance: dg.DagsterInstance, now: float | None = None) -> bool:
    """Whether a live sensor daemon serves this instance (`brain-pipeline ui`, `dagster
    dev` or `dagster-daemon run`), so the notification sensors will see the run."""
    import time

    heartbeats = instance.get_daemon_heartbeats()
    beat = heartbeats.get("SENSOR")
    if beat is None:
        return False
    return (now if now is not None else time.time()) - beat.timestamp < (
        DAEMON_HEARTBEAT_TOLERANCE_SECONDS
    )


def notify_for_run(
    context: dg.RunStatusSensorContext, config_path: str | None
) -> dg.SkipReason | None:
    """A notification sensor's tick for `context.dagster_run` (the configuration is read
    at each tick: a new channel needs no reload)."""
    line = notify_finished_run(
        context.instance,
        context.dagster_run.run_id,
        load_config(config_path),
        context.log,
        by_command=False,
    )
    return dg.SkipReason(line) if line else None


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
    def notify_on_failure(context: dg.RunFailureSensorContext) -> dg.SkipReason | None:
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
    def notify_on_success(context: dg.RunStatusSensorContext) -> dg.SkipReason | None:
        return notify_for_run(context, config_path)

    return [notify_on_failure, notify_on_success]


@dg.definitions
def notify_definitions() -> dg.Definitions:
    sensors = build_notification_sensors(location_config(), location_config_path())
    return dg.Definitions(sensors=sensors)
