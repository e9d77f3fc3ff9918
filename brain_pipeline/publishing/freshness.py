"""Is the published store current? The corpus it serves and how long ago it went live.

Two ways a publication goes stale: the corpus moved on (the manifest's corpus digest is
not the latest observed one), or nothing was published for longer than the nightly
schedule promises (its period plus a margin) — e.g. the schedule is stopped or every
run fails its evaluation. The clock is a parameter so "overdue" is testable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


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
