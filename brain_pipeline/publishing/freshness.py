"""Is the published store current? The corpus it serves and how long ago it went live.

Two ways a publication goes stale: the corpus moved on (the manifest's corpus digest is
not the latest observed one), or nothing was published for longer than the nightly
schedule promises (its period plus a margin) — e.g. the schedule is stopped or every
run fails its evaluation. The clock is a parameter so "overdue" is testable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from brain_pipeline.config import cron_fields


@dataclass(frozen=True)
class Freshness:
    current: bool
    reason: str
    age: timedelta | None


def parse_published_at(text: str) -> datetime | None:
    """The manifest's `published_at` (e.g. 2026-01-31T12:00:00Z) as an aware datetime."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def assess(
    *,
    published_at: str | None,
    published_digest: str | None,
    observed_digest: str | None,
    now: datetime,
    allowed_age: timedelta,
) -> Freshness:
    """Current when it serves the latest observed corpus and is younger than allowed_age."""
    if published_at is None:
        return Freshness(False, "nothing is published", None)
    when = parse_published_at(published_at)
    age = now - when if when is not None else None
    if observed_digest is not None and published_digest != observed_digest:
        return Freshness(
            False,
            "the agent serves an older corpus than the one on disk (corpus digest "
            f"{(published_digest or 'unknown')[:12]} published, {observed_digest[:12]} observed)",
            age,
        )
    if age is None:
        unreadable = f"the manifest's publication time is unreadable: {published_at}"
        return Freshness(False, unreadable, None)
    if age > allowed_age:
        return Freshness(
            False,
            f"overdue: published {_hours(age)} ago, the schedule promises at most "
            f"{_hours(allowed_age)}",
            age,
        )
    return Freshness(True, f"current: the latest corpus, published {_hours(age)} ago", age)


def _hours(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f} h"


def cron_fire_times(expression: str, timezone: str, after: datetime, count: int) -> list[datetime]:
    """The next `count` times a 5-field cron fires at or after `after`, in `timezone`.

    Walks calendar days in the schedule's own time zone (so a 03:00 schedule stays at
    03:00 local across a DST change) and keeps each day cron's rules allow: the month
    must match, and the day must match day-of-month *and* day-of-week, or *either* when
    both are restricted (cron's OR). Gives up after ten years (a schedule that fires on
    February 29 of a far leap year is not a nightly one).
    """
    minutes, hours, days, months, weekdays = cron_fields(expression)
    fields = expression.split()
    either = fields[2][0] not in "*?" and fields[4][0] not in "*?"
    weekdays = frozenset(day % 7 for day in weekdays)  # 7 and 0 are both Sunday
    zone = ZoneInfo(timezone)
    day: date = after.astimezone(zone).date()
    last = day + timedelta(days=3653)
    fires: list[datetime] = []
    while len(fires) < count and day <= last:
        by_day, by_week = day.day in days, day.isoweekday() % 7 in weekdays
        if day.month in months and ((by_day or by_week) if either else (by_day and by_week)):
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    fire = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
                    if fire >= after and len(fires) < count:
                        fires.append(fire)
        day += timedelta(days=1)
    return fires


def schedule_period(expression: str, timezone: str, after: datetime) -> timedelta:
    """The longest gap between two consecutive fires over the next 32 fires."""
    times = [fire.timestamp() for fire in cron_fire_times(expression, timezone, after, 32)]
    return timedelta(seconds=max(b - a for a, b in zip(times, times[1:], strict=False)))
