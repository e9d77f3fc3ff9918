"""Quota pacing (token buckets over texts and requests) and the retry policy.

Why token buckets and not "sleep after each request": a fixed sleep ignores how long the
request itself took, so it both under-uses the quota and cannot absorb a slow response.
A bucket refills continuously and lets the next request go as soon as the quota allows.

Why the odd refill rate: the service counts texts in a window (fixed or sliding) of
`window_seconds`. A bucket of capacity C refilling at r per second lets through at most
C + r·T texts in any interval of length T. Requiring C + r·(W + slack) <= allowance for
the window W (slack covers the difference between when we send and when the service
counts) guarantees that no window, however it is aligned, ever sees more than its
allowance — so a run configured with the service's real quota gets no 429 at all, and
sustains (allowance - C) / (W + slack) of it, about 96 % for 3,000 texts/min in
batches of 100.

Clock and sleep are injectable so the bucket is unit-tested without real time.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

Clock = Callable[[], float]
Sleep = Callable[[float], None]
T = TypeVar("T")


class TokenBucket:
    """A bucket of `capacity` tokens refilling at `rate` tokens per second.

    `take(n)` blocks (through the injected `sleep`) until n tokens are available and
    returns how long it waited. The bucket starts full: its capacity is already counted
    in the window bound, so the first burst is safe.
    """

    def __init__(
        self,
        rate: float,
        capacity: float,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError(f"rate and capacity must be positive (got {rate}, {capacity})")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(capacity)
        self._stamp = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._stamp)
        self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._stamp = now

    @property
    def tokens(self) -> float:
        """Tokens available right now."""
        self._refill()
        return self._tokens

    def delay_for(self, amount: float) -> float:
        """Seconds until `amount` tokens are available (0 when they already are)."""
        if amount > self.capacity:
            raise ValueError(f"cannot take {amount} tokens from a bucket of {self.capacity}")
        self._refill()
        missing = amount - self._tokens
        # A sliver left by float rounding after a sleep counts as available, or a clock
        # that cannot advance by so little would make take() spin forever.
        return 0.0 if missing <= 1e-9 * max(1.0, amount) else missing / self.rate

    def take(self, amount: float) -> float:
        """Wait until `amount` tokens are available, remove them, return the seconds waited."""
        waited = 0.0
        delay = self.delay_for(amount)
        while delay > 0:
            self._sleep(delay)
            waited += delay
            delay = self.delay_for(amount)
        self._tokens -= amount
        return waited


def window_safe_rate(allowance: float, burst: float, window_seconds: float, slack: float) -> float:
    """Refill rate (per second) such that burst + rate·(window + slack) <= allowance."""
    return max(allowance - burst, allowance * 0.05) / (window_seconds + slack)


class QuotaPacer:
    """Paces requests under a texts-per-window quota and an optional requests-per-window one.

    `max_batch` is the largest number of texts a single request will carry; when the
    quota per window is smaller than that, `batch_limit` is lowered so a request can
    always fit in one window.
    """

    def __init__(
        self,
        texts_per_minute: float,
        requests_per_minute: float | None = None,
        *,
        max_batch: int = 100,
        window_seconds: float = 60.0,
        slack_seconds: float = 0.5,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        if texts_per_minute <= 0:
            raise ValueError("texts_per_minute must be positive")
        scale = window_seconds / 60.0
        text_allowance = texts_per_minute * scale
        self.batch_limit = max(1, min(max_batch, int(text_allowance)))
        self.texts_per_minute = float(texts_per_minute)
        self.window_seconds = float(window_seconds)
        self.waited_seconds = 0.0
        self._texts = TokenBucket(
            window_safe_rate(text_allowance, self.batch_limit, window_seconds, slack_seconds),
            self.batch_limit,
            clock=clock,
            sleep=sleep,
        )
        self._requests: TokenBucket | None = None
        if requests_per_minute:
            request_allowance = max(1.0, requests_per_minute * scale)
            self._requests = TokenBucket(
                window_safe_rate(request_allowance, 1, window_seconds, slack_seconds),
                1,
                clock=clock,
                sleep=sleep,
            )

    @property
    def texts_rate_per_minute(self) -> float:
        """The sustained rate the text bucket allows (for reports and benchmarks)."""
        return self._texts.rate * 60.0

    @property
    def requests_rate_per_minute(self) -> float | None:
        """The sustained rate the request bucket allows; None without one."""
        return None if self._requests is None else self._requests.rate * 60.0

    def acquire(self, n_texts: int) -> float:
        """Block until one request carrying `n_texts` texts may go; return seconds waited."""
        if n_texts > self.batch_limit:
            raise ValueError(f"{n_texts} texts exceed the per-request limit {self.batch_limit}")
        waited = self._texts.take(n_texts)
        if self._requests is not None:
            waited += self._requests.take(1)
        self.waited_seconds += waited
        return waited


# --------------------------------------------------------------------------- retry


class FailureKind(Enum):
    """How a failed request should be handled."""

    QUOTA = "quota"  # 429: wait what the service says, then resend
    TRANSIENT = "transient"  # 5xx, transport: exponential backoff with jitter
    FATAL = "fatal"  # 4xx other than 429: retrying cannot help
    INPUT = "input"  # 400 about a text of the request: the others can go without it


@dataclass(frozen=True)
class Failure:
    """A classified failure: its kind, the service's requested delay, a key-free message.

    `request_index`: for an INPUT failure, the text the service named (0-based in the
    request), or None when it named none.
    """

    kind: FailureKind
    message: str
    retry_after: float | None = None
    request_index: int | None = None


class RetriesExhausted(RuntimeError):
    """Every attempt failed with a retryable error; `last` describes the final one."""

    def __init__(self, attempts: int, last: Failure) -> None:
        super().__init__(f"gave up after {attempts} attempt(s): {last.message}")
        self.attempts = attempts
        self.last = last


class FatalFailure(RuntimeError):
    """A failure that retrying cannot fix (bad key, forbidden, unknown model)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*s\s*$")


def parse_duration(text: object) -> float | None:
    """Parse a protobuf Duration string such as '21s' or '45.837906927s' into seconds."""
    if not isinstance(text, str):
        return None
    match = _DURATION.match(text)
    return float(match.group(1)) if match else None


def retry_delay_from_details(details: Any) -> float | None:
    """Find google.rpc.RetryInfo.retryDelay in an error body (the SDK's APIError.details)."""
    if not isinstance(details, dict):
        return None
    error = details.get("error", details)
    entries = error.get("details") if isinstance(error, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and str(entry.get("@type", "")).endswith("rpc.RetryInfo"):
            return parse_duration(entry.get("retryDelay"))
    return None


@dataclass
class RetryPolicy:
    """Bounded attempts; quota waits honour the service's delay plus headroom."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    quota_headroom: float = 1.0
    quota_default_delay: float = 10.0
    max_quota_wait: float = 600.0

    def delay(self, failure: Failure, attempt: int, rng: random.Random) -> float:
        """Seconds to wait after the `attempt`-th (1-based) failure."""
        if failure.kind is FailureKind.QUOTA:
            stated = failure.retry_after
            base = self.quota_default_delay if stated is None else stated
            return base + self.quota_headroom
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        # "Equal jitter": at least half the exponential step, so waits still grow.
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass
class RetryStats:
    """Figures the report needs: attempts sent, quota refusals, seconds spent waiting."""

    requests: int = 0
    rate_limited: int = 0
    retries: int = 0
    waited_seconds: float = 0.0


def call_with_retry(
    send: Callable[[], T],
    classify: Callable[[BaseException], Failure | None],
    policy: RetryPolicy,
    *,
    stats: RetryStats,
    before_attempt: Callable[[], float] | None = None,
    sleep: Sleep = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[Failure, float], None] | None = None,
) -> T:
    """Run `send` until it succeeds, a fatal failure occurs, or attempts run out.

    `classify` maps an exception to a Failure, or None for exceptions that are not the
    service's business (programming errors), which propagate untouched.
    `before_attempt` (the pacer) runs before every attempt and returns seconds waited.
    """
    generator = rng or random.Random()
    attempt = 0
    while True:
        attempt += 1
        if before_attempt is not None:
            stats.waited_seconds += before_attempt()
        stats.requests += 1
        try:
            return send()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if failure.kind in (FailureKind.FATAL, FailureKind.INPUT):
                raise FatalFailure(failure) from None
            if failure.kind is FailureKind.QUOTA:
                stats.rate_limited += 1
            if attempt >= policy.max_attempts:
                raise RetriesExhausted(attempt, failure) from None
            wait = policy.delay(failure, attempt, generator)
            if failure.kind is FailureKind.QUOTA and wait > policy.max_quota_wait:
                raise RetriesExhausted(attempt, failure) from None
            if on_retry is not None:
                on_retry(failure, wait)
            stats.retries += 1
            stats.waited_seconds += wait
            sleep(wait)
