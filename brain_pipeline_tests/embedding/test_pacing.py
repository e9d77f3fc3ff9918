"""Token buckets and the retry policy, on a simulated clock (no real waiting)."""

from __future__ import annotations

import random

import pytest

from brain_pipeline.embedding.pacing import (
    Failure,
    FailureKind,
    FatalFailure,
    QuotaPacer,
    RetriesExhausted,
    RetryPolicy,
    RetryStats,
    TokenBucket,
    call_with_retry,
    parse_duration,
    retry_delay_from_details,
)
from brain_pipeline_tests.fake_time import FakeTime


def test_bucket_starts_full_then_waits_exactly_for_missing_tokens() -> None:
    t = FakeTime()
    bucket = TokenBucket(rate=10.0, capacity=100, clock=t.clock, sleep=t.sleep)
    assert bucket.take(100) == 0.0
    waited = bucket.take(30)
    assert waited == pytest.approx(3.0)
    assert t.now == pytest.approx(1003.0)


def test_bucket_refills_up_to_capacity_only() -> None:
    t = FakeTime()
    bucket = TokenBucket(rate=10.0, capacity=50, clock=t.clock, sleep=t.sleep)
    bucket.take(50)
    t.now += 3600
    assert bucket.tokens == pytest.approx(50)
    with pytest.raises(ValueError):
        bucket.take(51)


def _simulate(pacer: QuotaPacer, t: FakeTime, batches: int, batch: int,
              latency: float) -> list[tuple[float, int]]:
    sends = []
    for _ in range(batches):
        pacer.acquire(batch)
        sends.append((t.now, batch))
        t.now += latency  # the request itself takes time
    return sends


def _max_in_any_window(sends: list[tuple[float, int]], window: float) -> int:
    """Most texts inside any half-open interval of `window` seconds (covers every alignment
    of a fixed window and every position of a sliding one)."""
    best = 0
    for i, (start, _) in enumerate(sends):
        total = sum(n for at, n in sends[i:] if at < start + window)
        best = max(best, total)
    return best


@pytest.mark.parametrize("latency", [0.0, 0.3, 1.5])
def test_no_window_ever_exceeds_quota_and_rate_is_sustained(latency: float) -> None:
    t = FakeTime()
    quota = 3000
    pacer = QuotaPacer(quota, max_batch=100, clock=t.clock, sleep=t.sleep)
    sends = _simulate(pacer, t, batches=300, batch=100, latency=latency)
    assert _max_in_any_window(sends, 60.0) <= quota
    duration = sends[-1][0] - sends[0][0]
    achieved = 60.0 * sum(n for _, n in sends[:-1]) / duration
    assert achieved >= 0.9 * quota


def test_request_bucket_limits_requests_per_window() -> None:
    t = FakeTime()
    pacer = QuotaPacer(1_000_000, requests_per_minute=30, max_batch=10,
                       clock=t.clock, sleep=t.sleep)
    sends = [(at, 1) for at, _ in _simulate(pacer, t, batches=120, batch=10, latency=0.01)]
    assert _max_in_any_window(sends, 60.0) <= 30
    assert 60.0 * 119 / (sends[-1][0] - sends[0][0]) >= 0.9 * 30


def test_small_quota_lowers_the_batch_so_a_request_fits_a_window() -> None:
    pacer = QuotaPacer(40, max_batch=100)
    assert pacer.batch_limit == 40
    with pytest.raises(ValueError):
        pacer.acquire(41)


def test_pacer_accounts_its_waiting() -> None:
    t = FakeTime()
    pacer = QuotaPacer(600, max_batch=10, clock=t.clock, sleep=t.sleep)
    for _ in range(5):
        pacer.acquire(10)
    assert pacer.waited_seconds == pytest.approx(sum(t.sleeps))
    assert pacer.waited_seconds > 0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("21s", 21.0), ("45.837906927s", 45.837906927), ("0.5s", 0.5), (" 3s ", 3.0),
     ("s", None), ("12", None), ("-1s", None), (None, None), (7, None)],
)
def test_parse_duration(text: object, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_retry_delay_is_found_in_the_error_body() -> None:
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "45.837906927s"},
    ]}}
    assert retry_delay_from_details(body) == pytest.approx(45.837906927)
    assert retry_delay_from_details({"error": {"code": 429}}) is None
    assert retry_delay_from_details("not a dict") is None


class Flaky:
    """Fails with the given failures in turn, then returns 'ok'."""

    def __init__(self, failures: list[Failure]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise RuntimeError(self.failures.pop(0))
        return "ok"


def _classify(exc: BaseException) -> Failure | None:
    arg = exc.args[0] if exc.args else None
    return arg if isinstance(arg, Failure) else None


def test_quota_failure_waits_the_stated_delay_plus_headroom() -> None:
    t = FakeTime()
    send = Flaky([Failure(FailureKind.QUOTA, "429", 45.837906927)])
    stats = RetryStats()
    policy = RetryPolicy(quota_headroom=1.0)
    assert call_with_retry(send, _classify, policy, stats=stats, sleep=t.sleep) == "ok"
    assert t.sleeps == [pytest.approx(46.837906927)]
    assert (stats.requests, stats.rate_limited, stats.retries) == (2, 1, 1)


def test_transient_failures_back_off_exponentially_with_jitter() -> None:
    t = FakeTime()
    failures = [Failure(FailureKind.TRANSIENT, "503")] * 4
    policy = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=60.0)
    call_with_retry(Flaky(failures), _classify, policy, stats=RetryStats(), sleep=t.sleep,
                    rng=random.Random(7))
    assert len(t.sleeps) == 4
    for attempt, waited in enumerate(t.sleeps, start=1):
        ceiling = 2 ** (attempt - 1)
        assert ceiling / 2 <= waited <= ceiling


def test_attempts_are_bounded() -> None:
    send = Flaky([Failure(FailureKind.TRANSIENT, "503")] * 10)
    with pytest.raises(RetriesExhausted) as caught:
        call_with_retry(send, _classify, RetryPolicy(max_attempts=3, base_delay=0.0),
                        stats=RetryStats(), sleep=lambda _s: None)
    assert send.calls == 3
    assert caught.value.attempts == 3


def test_fatal_failures_are_not_retried() -> None:
    send = Flaky([Failure(FailureKind.FATAL, "403 forbidden")])
    with pytest.raises(FatalFailure, match="403 forbidden"):
        call_with_retry(send, _classify, RetryPolicy(), stats=RetryStats(),
                        sleep=lambda _s: None)
    assert send.calls == 1


def test_a_quota_wait_longer_than_allowed_gives_up_at_once() -> None:
    send = Flaky([Failure(FailureKind.QUOTA, "429 daily", 86_000.0)])
    with pytest.raises(RetriesExhausted):
        call_with_retry(send, _classify, RetryPolicy(max_quota_wait=600), stats=RetryStats(),
                        sleep=lambda _s: pytest.fail("must not sleep a day"))


def test_unclassified_exceptions_propagate_untouched() -> None:
    def broken() -> str:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        call_with_retry(broken, _classify, RetryPolicy(), stats=RetryStats())


def test_pacer_runs_before_every_attempt() -> None:
    calls = []
    send = Flaky([Failure(FailureKind.TRANSIENT, "500")])

    def before() -> float:
        calls.append(1)
        return 0.25

    stats = RetryStats()
    call_with_retry(send, _classify, RetryPolicy(base_delay=0.0), stats=stats,
                    before_attempt=before, sleep=lambda _s: None)
    assert len(calls) == 2
    assert stats.waited_seconds == pytest.approx(0.5)
