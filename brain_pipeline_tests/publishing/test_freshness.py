"""Freshness of the publication with an injected clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from brain_pipeline.publishing.freshness import assess

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
