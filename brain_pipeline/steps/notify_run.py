"""Notifications for a run made without Dagster: the command itself sends them.

The notification sensors (`defs/notify.py`) react to Dagster runs. `brain-pipeline
materialize` without a selection runs the plan in its own process (`steps.direct_run`),
so no Dagster run exists and no sensor would ever see a blocked publish from an
unattended cron job. Once such a run has ended, the command calls `notify_direct_run`
with the run's journal (`steps.run_journal`); the rest is the sensors' own code:

- `journal_facts` reads the journal into `publishing.notify.RunFacts`, the same plain
  values the sensors read from a Dagster run's events;
- `previous_journal_event` applies the sensors' rule (`publishing.notify.
  previous_outcome`) to the journals before it, newest first;
- `classify`, `build_message` (every known secret scrubbed) and `deliver` (bounded
  retries, never raises) are `publishing.notify`'s.

Once per run: the run's id goes to `state/notified-runs.json` (rewritten atomically)
after the attempt, as the sensors keep a key per run in the instance, so a repeat call
sends nothing. A run interrupted by Ctrl-C is treated as Dagster treats a cancelled run:
no message, and it does not count in the look-back.

The message carries no link: `notify.ui_base_url` links a Dagster run's page, and a run
made without Dagster has none. It names the run by its id and the journal's trigger.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

from brain_pipeline.config import BrainConfig
from brain_pipeline.publishing.notify import (
    CheckOutcome,
    Previous,
    RunFacts,
    Sleep,
    build_message,
    classify,
    deliver,
    known_secrets,
    previous_outcome,
)
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.steps.report import Markdown
from brain_pipeline.steps.run_journal import (
    RunJournal,
    StepEntry,
    journal_paths,
    read_journal,
)
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed

JOB = "materialize"
"""The job name a message shows (the sensors say `materialize` for an asset job too)."""
LOOKBACK_JOURNALS = 25
"""Earlier journals read for the previous event (the sensors read 25 earlier runs)."""
KEEP_NOTIFIED = 400
"""Run ids kept in notified-runs.json (twice the journals kept: an older one is gone)."""
PUBLISHED = "published_local"


def journal_facts(journal: RunJournal) -> RunFacts:
    """The journal's failed steps, check evaluations and publication, as `RunFacts`."""
    failed: list[tuple[str, str]] = []
    checks: list[CheckOutcome] = []
    published, status = False, None
    for entry in journal.steps:
        if entry.status == "failed":
            failed.append((_step_name(entry), entry.error or "failed"))
        elif entry.kind == "check" and entry.status == "ok" and entry.passed is not None:
            checks.append(
                CheckOutcome(
                    _step_name(entry),
                    bool(entry.passed),
                    entry.severity or "ERROR",
                    entry.description or "",
                    bool(entry.blocking),
                    _text(entry.metadata.get("headline")),
                )
            )
        elif entry.name == PUBLISHED and entry.status == "ok":
            published = True
            value = entry.metadata.get("status")
            status = str(value) if value is not None else None
    return RunFacts(
        run_id=journal.run_id,
        job=JOB,
        succeeded=journal.succeeded,
        failed_steps=tuple(failed),
        checks=tuple(checks),
        published=published,
        publish_status=status,
        trigger=journal.trigger or None,
    )


def _step_name(entry: StepEntry) -> str:
    """A check as `asset:check` (how the sensors name a check evaluation), else the step."""
    return f"{entry.asset}:{entry.name}" if entry.kind == "check" and entry.asset else entry.name


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return (value.text if isinstance(value, Markdown) else str(value)) or None


def previous_journal_event(
    layout: StateLayout, journal: RunJournal, *, lookback: int = LOOKBACK_JOURNALS
) -> Previous | None:
    """What the runs before `journal` said (see `publishing.notify.previous_outcome`),
    from at most `lookback` earlier journals, newest first. Only runs made without Dagster
    keep journals: a Dagster run in between is not seen here."""
    return previous_outcome(journal_facts(j) for j in _earlier(layout, journal, lookback))


def _earlier(layout: StateLayout, journal: RunJournal, lookback: int) -> Iterator[RunJournal]:
    """Finished (not interrupted) journals that ended before `journal`, newest first."""
    name = journal.file_name()
    read = 0
    for path in reversed(journal_paths(layout)):
        if path.name >= name:
            continue
        if read >= lookback:
            return
        read += 1
        other = read_journal(path)
        if other is not None and other.run_id != journal.run_id and other.interrupted is None:
            yield other


def notify_direct_run(
    cfg: BrainConfig,
    layout: StateLayout,
    journal: RunJournal,
    environ: Mapping[str, str] | None = None,
    *,
    sleep: Sleep = time.sleep,
) -> str | None:
    """Send the run's one message, once; the line to print (on stderr), or None when no
    channel is configured, the run has nothing to report, or it was already notified.

    Never raises for a channel: one that is down is `NOT sent ...` in the line, and the
    run's outcome is the caller's, unchanged. `environ` (default: the process's) holds
    the SMTP credentials and the secrets to scrub."""
    settings = cfg.notify
    if not settings.configured or journal.interrupted is not None:
        return None
    try:
        if journal.run_id in _notified(layout):
            return None
    except OSError:
        pass  # unreadable (no permission): sent; the line below says it was not recorded
    facts = journal_facts(journal)
    previous = previous_journal_event(layout, journal) if facts.succeeded else None
    event = classify(facts, previous, link=None)
    if event is None:
        return None
    env = dict(os.environ if environ is None else environ)
    message = build_message(event, known_secrets(settings, env))
    delivery = deliver(settings, message, env=env, sleep=sleep)
    line = f"notification: {event.kind} message: {delivery.describe()}"
    try:
        _record_notified(layout, journal.run_id, event.kind)
    except OSError as exc:
        line += f" (not recorded as sent, a repeat may send it again: {type(exc).__name__})"
    return line


def _notified(layout: StateLayout) -> dict[str, str]:
    """Run id -> event kind of every run already notified (damaged: set aside, empty)."""
    path = layout.notified_runs

    def read() -> dict[str, str]:
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return {}
        runs = data["runs"]
        if not isinstance(runs, dict):
            raise ValueError("'runs' is not a mapping")
        return {str(k): str(v) for k, v in runs.items()}

    return healed(path, read, what="notification record", consequence="a run may be notified again")


def _record_notified(layout: StateLayout, run_id: str, kind: str) -> None:
    runs = _notified(layout)
    runs[run_id] = kind
    kept = dict(list(runs.items())[-KEEP_NOTIFIED:])
    data = json.dumps({"format": 1, "runs": kept}, indent=1).encode("utf-8")
    atomic_write_bytes(layout.notified_runs, data)
