"""Notifications: Dagster sensors that deliver each finished run's message once.

`notify_on_failure` (`@dg.run_failure_sensor`) and `notify_on_success`
(`@dg.run_status_sensor(SUCCESS)`) read the run's events (its failed steps, its asset
check evaluations, whether `published_local` materialised) into `publishing.run_alerts`'s
`RunFacts`, ask it which event the run is, and send that one message. They watch every
run of the instance (`monitor_all_code_locations`): a run launched from the CLI into the
same instance has no code-location origin, and must count too. Runs of another build
directory are left alone.

A channel that is down never touches the run (the run has already finished when the
sensor sees it); the tick says what was sent and what was not, after the quick attempts
of `publishing.run_alerts.deliver`. Both sensors run by default when a channel is
configured, and so does `notify_retry`.

Each run's message is delivered once, newest truth: `brain-pipeline materialize`
reports its own run through the same `notify_finished_run` whether or not a daemon
runs. Whoever holds the run's lease (`run_alerts.run_lease`, a compare-and-set on the
run's row in the ledger, so across every worker of a shared ledger) sends and records
the outcome per channel in the run's delivery record before letting go, so two
deliverers racing (the command after its run, a sensor tick, another worker) send one
message, and a channel that accepted it is never sent it again.
A message no channel accepted (an endpoint down for a minute) stays `pending` and is
tried again by `notify_retry` (and by the next `materialize`), with a doubling
backoff, until it is delivered or `notify.retry_for_seconds` have passed; then it is
`failed`, named in the run's own log and in `brain-pipeline status`. A send that
crashes between the endpoint's acceptance and the record being written is sent again
by the next try: once is what the record can promise, not across a `kill -9` in that
instant. A failed step's cause is the exception the step's code raised, found as the
run summary finds it (`lib.runner.error_cause`); a run that ended with no failed step
(killed) says which steps had succeeded, and a RECOVERED that a newer blocked or failed
run made stale is not sent (a restarted daemon catching up).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from brain_pipeline.config import BrainConfig, load_config, memory_of
from brain_pipeline.defs.up_to_date import ours as _ours
from brain_pipeline.lib.code_location import location_config, location_config_path
from brain_pipeline.lib.dagster_private import event_data, note_in_run_log, run_events
from brain_pipeline.lib.runner import error_cause
from brain_pipeline.publishing.run_alerts import (
    CheckOutcome,
    RunDelivery,
    RunFacts,
    alerts_ledger,
    build_message,
    classify,
    known_secrets,
    pending_deliveries,
    previous_outcome,
    read_delivery,
    run_lease,
    run_link,
    superseded_by,
    try_delivery,
    write_delivery,
)
from brain_pipeline.steps.trigger import describe_trigger
from brain_pipeline.utils.markdown import md_undefanged

RUNS_AROUND = 25
"""How many of the instance's finished runs before (or after) a run are read to judge it."""


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
    forced: str | None = None
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
                error_cause(error) if error is not None else "failed"
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
            forced = _forced(data.materialization.metadata)
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
        forced=forced,
    )


def _forced(metadata: Any) -> str | None:
    """`published over <what> (reason: ...)` when published_local's materialisation says a
    person forced it (steps.publish), else None."""
    flag = metadata.get("forced")
    if not getattr(flag, "value", flag):
        return None
    overrode = _text(metadata.get("force_overrode")) or "its blocking checks"
    return f"published over {overrode} (reason: {_text(metadata.get('force_reason'))})"


def _text(value: Any) -> str | None:
    """A text metadata value's string (None when absent)."""
    if value is None:
        return None
    return str(getattr(value, "value", value)) or None


def _finished_runs(
    instance: dg.DagsterInstance, run: dg.DagsterRun, cfg: BrainConfig, *, after: bool
) -> Iterator[RunFacts]:
    """The finished runs of ours created before `run` (newest first) or after it, up to
    RUNS_AROUND of the instance's, read lazily: what `previous_outcome` and
    `superseded_by` judge from, so the sensors need no shared state and may tick in any
    order."""
    record = instance.get_run_record_by_id(run.run_id)
    if record is None:
        return
    at = record.create_timestamp
    filters = dg.RunsFilter(
        statuses=[dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE],
        created_after=at if after else None,
        created_before=None if after else at,
    )
    others = instance.get_run_records(filters=filters, limit=RUNS_AROUND)
    for other in others:
        if other.dagster_run.run_id != run.run_id and _ours(other.dagster_run, cfg):
            yield run_facts(instance, other.dagster_run)


Clock = Callable[[], float]


def notify_finished_run(
    instance: dg.DagsterInstance,
    run_id: str,
    cfg: BrainConfig,
    log: Any = None,
    *,
    now: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Report the finished run `run_id` once; the one-line account of the delivery, or
    None when it is not ours, has nothing to report, or another deliverer has it.

    One path for every run: the notification sensors call it at their tick, and
    `brain-pipeline materialize` right after its own run (and for each dead run it
    reaps), whether or not a daemon runs: a daemon that is stopping or stopped never
    leaves a run unannounced. A run already handled gets one more try of its pending
    message if it is due (`_try`).
    """
    record = instance.get_run_record_by_id(run_id)
    if record is None or not cfg.notify.configured:
        return None
    run = record.dagster_run
    if not run.is_finished or not _ours(run, cfg):
        return None
    at = time.time() if now is None else now
    first = None
    if read_delivery(alerts_ledger(memory_of(cfg)), run_id) is None:
        first = first_delivery(instance, run, cfg, at)
        if first is None:
            return None
    return _try(instance, cfg, run_id, first, log, at=at, sleep=sleep)


def first_delivery(
    instance: dg.DagsterInstance, run: dg.DagsterRun, cfg: BrainConfig, at: float
) -> RunDelivery | None:
    """The run's delivery record before its first try (None: nothing to report): its
    message, `pending`; or `superseded`, a RECOVERED that a newer blocked or failed run
    has made stale (a restarted daemon catching up), which is never sent."""
    facts = run_facts(instance, run)
    earlier = _finished_runs(instance, run, cfg, after=False)
    previous = previous_outcome(earlier) if facts.succeeded else None
    event = classify(facts, previous, run_link(cfg.notify.ui_base_url, run.run_id))
    if event is None:
        return None
    stale = superseded_by(event, _finished_runs(instance, run, cfg, after=True))
    if stale is not None:
        return RunDelivery(run.run_id, event.kind, "superseded", None, at, newer=stale.run_id)
    message = build_message(event, known_secrets(cfg.notify, dict(os.environ)))
    return RunDelivery(run.run_id, event.kind, "pending", message, first_at=at, next_at=at)


def _try(
    instance: dg.DagsterInstance,
    cfg: BrainConfig,
    run_id: str,
    first: RunDelivery | None,
    log: Any,
    *,
    at: float,
    sleep: Callable[[float], None],
) -> str | None:
    """One try at run `run_id`'s message, by whoever holds the run's lease
    (`publishing.run_alerts.run_lease`): `first` when nobody has handled the run yet,
    else its pending message when it is due; the outcome is recorded per channel before
    the lease goes, so a deliverer racing (another sensor tick, the command, another
    worker) sends nothing, and a channel that accepted the message is never sent it
    again. The account of the try, else None."""
    ledger = alerts_ledger(memory_of(cfg))
    with run_lease(ledger, run_id) as held:
        if not held:
            return None
        record = read_delivery(ledger, run_id)
        if record is None:
            record = first  # nobody has handled the run yet
        elif first is not None or not record.due(at):
            return None  # handled since by another deliverer, or not due yet
        if record is None:
            return None
        done = try_delivery(record, cfg.notify, now=at, sleep=sleep)
        write_delivery(ledger, done)
    line = done.describe()
    if log is not None:
        (log.warning if done.state in ("pending", "failed") else log.info)(line)
    if done.state == "failed":  # given up: said in its run's own log too (the UI shows it)
        note_in_run_log(instance, done.run_id, f"notification {line}")
    return line


def redeliver_due(
    instance: dg.DagsterInstance,
    cfg: BrainConfig,
    log: Any = None,
    *,
    now: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Try again every pending message that is due (`notify.retry_backoff_seconds`,
    doubling): the `notify_retry` sensor's tick, and the command's after its own run.
    The accounts of what was tried."""
    if not cfg.notify.configured:
        return []
    at = time.time() if now is None else now
    tried = [
        _try(instance, cfg, run_id, None, log, at=at, sleep=sleep)
        for run_id in pending_deliveries(alerts_ledger(memory_of(cfg)))
    ]
    return [line for line in tried if line is not None]


def notify_for_run(
    context: dg.RunStatusSensorContext, config_path: str | None, clock: Clock = time.time
) -> dg.SkipReason:
    """A notification sensor's tick for `context.dagster_run` (the configuration is read
    at each tick: a new channel needs no reload).

    Always a SkipReason, never None: a run-status sensor whose function returns None for
    one run and a SkipReason for the next in the same tick fails the tick ("received both
    DagsterRunReaction and SkipReason"), which a daemon catching up on several finished
    runs would hit; with a SkipReason each tick handles one run and says what it did."""
    run_id = context.dagster_run.run_id
    cfg = load_config(config_path)
    line = notify_finished_run(context.instance, run_id, cfg, context.log, now=clock())
    return dg.SkipReason(line or f"run {run_id[:8]}: nothing to report")


def build_notification_sensors(
    cfg: BrainConfig, config_path: str | None, clock: Clock = time.time
) -> list[dg.SensorDefinition]:
    """The two run-status sensors and `notify_retry`; `clock` is what their tries are
    timed by (the tests pass their own)."""
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
        return notify_for_run(context, config_path, clock)

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
        return notify_for_run(context, config_path, clock)

    @dg.sensor(
        name="notify_retry",
        minimum_interval_seconds=30,
        default_status=status,
        description=(
            "Tries again each run's message that no channel accepted yet (an endpoint "
            "down), notify.retry_backoff_seconds apart and doubling, until it is delivered "
            "or notify.retry_for_seconds have passed (then it is named in the run's log "
            "and in `brain-pipeline status`). Never sends a message twice."
        ),
    )
    def notify_retry(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        lines = redeliver_due(
            context.instance, load_config(config_path), context.log, now=clock()
        )
        return dg.SkipReason("; ".join(lines) or "no message due to be tried again")

    return [notify_on_failure, notify_on_success, notify_retry]


@dg.definitions
def notify_definitions() -> dg.Definitions:
    sensors = build_notification_sensors(location_config(), location_config_path())
    return dg.Definitions(sensors=sensors)
