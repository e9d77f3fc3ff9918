"""Time-based progress for long embedding runs: a line every few seconds, not per batch.

The builder reports after every packed batch, so every figure it gives is held by the
vector packs (a person who presses Ctrl-C after reading "152/1425" finds 152 again).
How often that happens depends on the provider and batch size (a 64-text batch of the
local model takes a few seconds here, a Gemini request well under one), so the decision
to print is made on the clock instead: the first report, then at most one every `every`
seconds, then the last. The clock is injectable so tests never wait.
`progress_line` says the rate and the time left, for a person deciding whether to wait.

A terminal shows a progress bar instead of those lines: the command installs a
`ProgressSink` for the run (`progress_sink_installed`), and `step_progress` hands it
every figure the builder reports, unthrottled (the bar redraws on its own clock). The
figures are the same packed counts, so the bar never claims texts the packs do not
hold. The core stays free of any terminal library: the sink is a protocol.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from brain_pipeline.embedding.pacing import Clock

Emit = Callable[[int, int], None]
"""Receives (texts done, texts to do) when a report is due."""

DEFAULT_EVERY_SECONDS = 5.0


class ThrottledProgress:
    """A builder `progress(done, total)` callback that passes on one report per interval.

    The first call and the one that reaches `total` are always passed on; in between, a
    call is passed on when `every` seconds have gone by since the last one that was. A
    repeat of the last reported figures is never passed on.
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


def short_duration(seconds: float) -> str:
    """`9m24s`, `1h05m`, `7s`: a time left as a person reads it."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(done: int, total: int, elapsed: float, what: str = "embedded") -> str:
    """`embedded 3,456/18,722 texts, 27.1/s, about 9m24s left` (no rate before any)."""
    line = f"{what} {done:,}/{total:,} texts"
    if done > 0 and elapsed > 0:
        rate = done / elapsed
        line += f", {rate:.1f}/s"
        if done < total:
            line += f", about {short_duration((total - done) / rate)} left"
    return line


_PROGRESS_LINE = re.compile(r"^\w+ [\d,]+/[\d,]+ texts(, |$)")


def is_progress_line(message: str) -> bool:
    """True for a `progress_line`: the line a terminal's bar replaces on the console."""
    return _PROGRESS_LINE.match(message) is not None


class ProgressSink(Protocol):
    """Receives every progress figure of a long step, e.g. a terminal's progress bar."""

    def update(self, task: str, done: int, total: int) -> None:
        """`done` of `total` texts of `task` are held (packed) now."""
        ...


_SINKS: list[ProgressSink] = []


@contextlib.contextmanager
def progress_sink_installed(sink: ProgressSink) -> Iterator[ProgressSink]:
    """Send the figures of the steps run in this process to `sink` for the duration.

    Process-wide because the steps run in-process under Dagster, which passes nothing
    of the command's own through to them; the innermost installation wins.
    """
    _SINKS.append(sink)
    try:
        yield sink
    finally:
        _SINKS.remove(sink)


def progress_sink() -> ProgressSink | None:
    """The sink installed for this process, or None (then only the lines are shown)."""
    return _SINKS[-1] if _SINKS else None


def shown_by_sink(message: str) -> bool:
    """A progress line while a sink shows the same figures: the console leaves it out
    (a run's stored log keeps it). One rule for both kinds of run's console."""
    return progress_sink() is not None and is_progress_line(message)


def step_progress(
    say: Callable[[str], None],
    *,
    task: str = "embedding",
    what: str = "embedded",
    every: float = DEFAULT_EVERY_SECONDS,
    clock: Clock = time.monotonic,
) -> Emit:
    """A builder's `progress(done, total)` for a step: throttled `progress_line`s to `say`
    (the run log keeps them), and every figure to the installed sink, if any."""
    started = clock()
    lines = ThrottledProgress(
        lambda done, total: say(progress_line(done, total, clock() - started, what)),
        every=every,
        clock=clock,
    )
    sink = progress_sink()

    def report(done: int, total: int) -> None:
        lines(done, total)
        if sink is not None:
            sink.update(task, done, total)

    return report
