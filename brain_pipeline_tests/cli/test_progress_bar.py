"""The terminal progress bar of `materialize` and the plain lines elsewhere.

Rendering uses rich's own terminal handling on a buffer (force_terminal) and an injected
clock, so the rate and the time left are exact and no test waits on wall time; the
terminal detection is tried on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import os
import pty
from collections.abc import Iterator

import dagster as dg
import pytest
from rich.console import Console

from brain_pipeline.cli.progress_bar import TerminalBar, progress_for, wants_bar
from brain_pipeline.embedding.progress import (
    progress_sink,
    progress_sink_installed,
    step_progress,
)
from brain_pipeline.lib.runner import concise_console_logger


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _terminal_console(out: io.StringIO) -> Console:
    """A console that behaves as on a terminal, without colour codes to read past."""
    return Console(file=out, force_terminal=True, color_system=None, width=120)


def test_the_bar_shows_count_rate_and_time_left_on_a_terminal() -> None:
    out = io.StringIO()
    clock = FakeClock()
    bar = TerminalBar(_terminal_console(out), clock=clock, auto_refresh=False)
    with bar:
        bar.update("embedding", 0, 100)
        clock.now += 4.0
        bar.update("embedding", 40, 100)  # 40 texts in 4 s: 10/s, 60 left: 6 s
        bar.refresh()
        shown = out.getvalue()
        clock.now += 16.0  # 40 texts in 20 s: 2/s, 60 left: 30 s
        bar.refresh()
        later = out.getvalue()[len(shown) :]
    assert "embedding" in shown
    assert "40/100 texts" in shown
    assert "10.0/s" in shown and "about 6s left" in shown
    assert "2.0/s" in later and "about 30s left" in later


def test_the_bar_shows_only_the_figures_it_is_given() -> None:
    """No interpolation between reports: what it shows is what the checkpoint holds."""
    out = io.StringIO()
    clock = FakeClock()
    bar = TerminalBar(_terminal_console(out), clock=clock, auto_refresh=False)
    with bar:
        bar.update("embedding", 8, 64)
        clock.now += 600.0  # a long batch in flight: nothing new is held
        bar.refresh()
        shown = out.getvalue()
    assert "8/64 texts" in shown
    assert "9/64" not in shown


@pytest.fixture
def terminal() -> Iterator[io.TextIOWrapper]:
    main, secondary = pty.openpty()
    stream = open(secondary, "w", encoding="utf-8", closefd=True)  # noqa: SIM115
    try:
        yield stream
    finally:
        stream.close()
        os.close(main)


def test_a_terminal_gets_a_bar_fed_by_the_steps(
    terminal: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    assert wants_bar(terminal)
    with progress_for(terminal) as bar:
        assert bar is not None and progress_sink() is bar
        lines: list[str] = []
        report = step_progress(lines.append, clock=FakeClock())
        report(0, 10)
        report(10, 10)
        task = bar.progress.tasks[0]
        assert (task.description, task.completed, task.total) == ("embedding", 10, 10)
        assert lines  # the run log still gets its lines
    assert progress_sink() is None


def test_a_pipe_gets_plain_lines(
    terminal: io.TextIOWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    with progress_for(io.StringIO()) as bar:
        assert bar is None and progress_sink() is None
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_bar(terminal)


def _console_lines(capsys: pytest.CaptureFixture[str], *messages: str) -> str:
    logger = concise_console_logger.logger_fn(
        dg.build_init_logger_context(logger_config={"log_level": "INFO"})
    )
    for message in messages:
        logger.info(message)
    return capsys.readouterr().err


def test_the_console_skips_progress_lines_only_while_a_bar_shows_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    messages = ("embedded 4/17 texts, 2.0/s, about 7s left", "embeddings: 17 chunks, 0 reused")
    plain = _console_lines(capsys, *messages)
    assert "embedded 4/17 texts" in plain and "embeddings: 17 chunks" in plain
    # Not started, so rich does not take over stderr: only the installed sink matters.
    bar = TerminalBar(Console(file=io.StringIO(), force_terminal=True), auto_refresh=False)
    with progress_sink_installed(bar):
        barred = _console_lines(capsys, *messages)
    assert "embedded 4/17 texts" not in barred and "embeddings: 17 chunks" in barred


def test_console_lines_escape_control_characters_even_above_a_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Above a bar, rich prints the run's lines on its own handle, past the command's
    escaping streams: the console logger escapes them itself."""
    shown = _console_lines(capsys, "problem: a/\x1b]0;owned\x07.md: junk\x1b[2K\rforged")
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "a/\\u001b]0;owned\\u0007.md: junk\\u001b[2K\\u000dforged" in shown


def test_the_bar_draws_on_the_terminal_past_the_command_s_escaping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from brain_pipeline.utils.terminal import escape_controls

    main, secondary = pty.openpty()
    stream = open(secondary, "w", encoding="utf-8", closefd=True)  # noqa: SIM115
    try:
        monkeypatch.setenv("TERM", "xterm")
        escape_controls(stream)
        with progress_for(stream) as bar:
            assert bar is not None
            bar.update("embedding", 3, 10)
            bar.refresh()
        stream.write("after \x1b\n")
        stream.flush()
        drawn = b""
        while b"after" not in drawn:
            drawn += os.read(main, 65536)
    finally:
        stream.close()
        os.close(main)
    assert b" 3/10" in drawn and b"\x1b[2K" in drawn  # rich's own line control, raw
    assert drawn.rstrip().endswith(b"after \\u001b")  # the stream escapes again after it
