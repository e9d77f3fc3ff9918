"""Time-based progress for long embedding runs: a line every few seconds, not per batch.

The builder reports after every checkpointed batch and, through
`providers.embed_with_progress`, after every sub-batch a provider finishes. How often that
happens depends on the provider and batch size (a 256-text batch of the local model is
~30 s here, a Gemini request well under one), so the decision to print is made on the
clock instead: the first report, then at most one every `every` seconds, then the last.
The clock is injectable so tests never wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from brain_pipeline.embedding.pacing import Clock

Emit = Callable[[int, int], None]
"""Receives (texts done, texts to do) when a report is due."""

DEFAULT_EVERY_SECONDS = 5.0


class ThrottledProgress:
    """A builder `progress(done, total)` callback that passes on one report per interval.

    The first call and the one that reaches `total` are always passed on; in between, a
    call is passed on when `every` seconds have gone by since the last one that was. A
    repeat of the last reported figures is never passed on (the builder's own
    end-of-batch report often repeats the provider's last sub-batch report).
    """

    def __init__(
        self, emit: Emit, *, every: float = DEFAULT_EVERY_SECONDS, clock: Clock = time.monotonic
    ) -> None:
        self._emit = emit
        self.every = float(every)
        self._clock = clock
        self._last_at: float | None = None
        self._last: tuple[int, int] | None = None

    def __call__(self, done: int, total: int) -> None:
        if (done, total) == self._last:
            return
        now = self._clock()
        due = (
            self._last_at is None
            or done >= total
            or now - self._last_at >= self.every
        )
        if due:
            self._last_at = now
            self._last = (done, total)
            self._emit(done, total)
