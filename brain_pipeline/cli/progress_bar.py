"""A progress bar for `brain-pipeline materialize` on a terminal (rich), fed by the steps.

A long step reports each checkpointed figure to the installed `ProgressSink`
(`embedding.progress`); this sink draws them as a bar with the count, the rate and the
time left. Only a terminal gets it: piped or logged output keeps the plain periodic
lines, which a file can hold and a person can grep. The command imports this module
after its preflight, so a refusal never pays for rich.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.text import Text

from brain_pipeline.embedding.progress import progress_sink_installed, short_duration


def _rate(task: Task) -> float | None:
    """Texts per second since the task's first figure, by the bar's clock: the average
    `progress_line` gives, so the bar and the plain lines agree (rich's own speed needs
    several reports and looks only at the last ones)."""
    elapsed = task.elapsed
    if not task.completed or not elapsed:
        return None
    return task.completed / elapsed


class RateColumn(ProgressColumn):
    """`27.1/s` (blank before the first texts are held)."""

    def render(self, task: Task) -> Text:
        rate = _rate(task)
        return Text(f"{rate:.1f}/s" if rate else "", style="progress.data.speed")


class TimeLeftColumn(ProgressColumn):
    """`about 9m24s left` at the average rate (blank before any rate, and when done)."""

    def render(self, task: Task) -> Text:
        rate = _rate(task)
        if not rate or task.total is None or task.completed >= task.total:
            return Text("")
        left = short_duration((task.total - task.completed) / rate)
        return Text(f"about {left} left", style="progress.remaining")


class TerminalBar:
    """A `ProgressSink` drawing one rich progress bar per task (embedding, ...).

    The bar shows exactly the figures it is given: the builder gives checkpointed
    counts, so the bar never runs ahead of what a Ctrl-C would keep. `clock` is rich's
    time source for the rate and the time left (injectable: tests never wait).
    """

    def __init__(
        self,
        console: Console,
        *,
        clock: Callable[[], float] | None = None,
        auto_refresh: bool = True,
    ) -> None:
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("texts"),
            RateColumn(),
            TimeLeftColumn(),
        )
        # rich reads the console's clock when get_time is None
        self.progress = Progress(
            *columns, console=console, auto_refresh=auto_refresh, get_time=clock
        )
        self._tasks: dict[str, TaskID] = {}

    def update(self, task: str, done: int, total: int) -> None:
        found = self._tasks.get(task)
        if found is None:
            self._tasks[task] = self.progress.add_task(task, total=total, completed=done)
        else:
            self.progress.update(found, total=total, completed=done)

    def refresh(self) -> None:
        self.progress.refresh()

    def __enter__(self) -> TerminalBar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def wants_bar(stream: TextIO) -> bool:
    """A bar only on an interactive terminal (not a pipe, a file or a dumb terminal)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and os.environ.get("TERM", "") != "dumb"


@contextlib.contextmanager
def progress_for(stream: TextIO) -> Iterator[TerminalBar | None]:
    """For the duration of a run: a bar on `stream` when it is a terminal, else nothing
    (the steps' plain lines are printed as they are logged).

    The bar is started before the run so rich redirects the run's console lines to print
    above it instead of through it.
    """
    if not wants_bar(stream):
        yield None
        return
    with (
        _without_escaping(stream) as raw,
        TerminalBar(Console(file=raw)) as bar,
        progress_sink_installed(bar),
    ):
        yield bar


def _without_escaping(stream: TextIO) -> contextlib.AbstractContextManager[TextIO]:
    """The bar draws with escape sequences, which the command's streams would escape
    (`utils.terminal.escape_controls`): it gets its own handle on the same terminal.
    The run's lines it prints above the bar are escaped by the console logger."""
    from brain_pipeline.utils.terminal import unescaped

    try:
        return unescaped(stream)
    except (AttributeError, OSError, ValueError):  # no file descriptor: nothing to undo
        return contextlib.nullcontext(stream)
