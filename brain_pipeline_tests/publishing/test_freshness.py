"""Freshness of the publication with an injected clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brain_pipeline.publishing.freshness import assess, cron_fire_times, schedule_period

PUBLISHED = "2026-11-30T03:00:00Z"
DAY = timedelta(hours=25)


def _at(hours_later: float) -> datetime:
    return datetime(2026, 11, 30, 3, 0, tzinfo=UTC) + timedelta(hours=hours_later)


def test_current_within_the_promised_age() -> None:
    verdict = assess(
        published_at=PUBLISHED, published_digest="a", observed_digest="a", now=_at(24.5),
        allowed_age=DAY,
    )
    assert verdict.current and "current" in verdict.reason


def test_overdue_past_the_period_plus_margin() -> None:
    verdict = assess(
        published_at=PUBLISHED, published_digest="a", observed_digest="a", now=_at(25.5),
        allowed_age=DAY,
    )
    assert not verdict.current
    assert verdict.reason.startswith("overdue") and "25.5 h" in verdict.reason


def test_a_newer_corpus_is_stale_whatever_the_age() -> None:
    verdict = assess(
        published_at=PUBLISHED, published_digest="aaaa", observed_digest="bbbb", now=_at(1),
        allowed_age=DAY,
    )
    assert not verdict.current and "older corpus" in verdict.reason


def test_nothing_published() -> None:
    verdict = assess(
        published_at=None, published_digest=None, observed_digest="a", now=_at(0), allowed_age=DAY
    )
    assert not verdict.current and verdict.reason == "nothing is published"


@pytest.mark.parametrize("timezone", ["UTC", "Europe/Berlin", "America/New_York"])
@pytest.mark.parametrize(
    "expression",
    [
        "0 3 * * *",
        "*/15 * * * *",
        "0 0 1 * *",
        "30 2 * * 1-5",
        "0 12 13 * 5",
        "15 4 * * SUN",
        "0 9,17 * * MON-FRI",
        "0 0 31 * *",
        "0 3 * * 7",
        "30 1 * 3,10 *",
    ],
)
def test_fire_times_agree_with_dagsters_schedule_iterator(expression: str, timezone: str) -> None:
    """Dagster's own (private) iterator is the oracle here; the product does not import it."""
    from dagster._utils.schedules import cron_string_iterator

    start = datetime(2026, 3, 1, tzinfo=UTC)  # a month with a DST change in both zones
    theirs = cron_string_iterator(start.timestamp(), expression, timezone)
    expected = [next(theirs).timestamp() for _ in range(40)]
    ours = [fire.timestamp() for fire in cron_fire_times(expression, timezone, start, 40)]
    assert ours == expected


def test_the_period_is_the_longest_gap_between_fires() -> None:
    start = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday
    assert schedule_period("0 3 * * *", "UTC", start) == timedelta(days=1)
    assert schedule_period("0 9 * * MON-FRI", "UTC", start) == timedelta(days=3)
