"""Time-based embedding progress: the reporter speaks on an injected clock (no test here
waits on wall time)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from brain_pipeline.embedding.builder import build_embeddings, local_memory
from brain_pipeline.embedding.packs import VectorPacks
from brain_pipeline.embedding.progress import (
    ThrottledProgress,
    is_progress_line,
    progress_line,
    progress_sink,
    progress_sink_installed,
    step_progress,
)
from brain_pipeline_tests.embedding.helpers import corpus


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reports_the_first_every_interval_and_the_last() -> None:
    clock = FakeClock()
    said: list[tuple[int, int]] = []
    progress = ThrottledProgress(lambda d, t: said.append((d, t)), every=5.0, clock=clock)
    for done in range(0, 101, 10):  # one report every 2 s of the injected clock
        progress(done, 100)
        clock.now += 2.0
    # t=0 first; then the first call at least 5 s after the last report; 100 is the end.
    assert said == [(0, 100), (30, 100), (60, 100), (90, 100), (100, 100)]
    progress(100, 100)  # the same figure again
    assert said[-1:] == [(100, 100)] and len(said) == 5


def test_a_slow_clock_reports_only_the_first_and_last() -> None:
    said: list[tuple[int, int]] = []
    progress = ThrottledProgress(lambda d, t: said.append((d, t)), clock=FakeClock())
    for done in range(0, 257):
        progress(done, 256)
    assert said == [(0, 256), (256, 256)]


class _RecordingSink:
    def __init__(self, on_update: Callable[[str, int, int], None] | None = None) -> None:
        self.figures: list[tuple[str, int, int]] = []
        self._on_update = on_update

    def update(self, task: str, done: int, total: int) -> None:
        self.figures.append((task, done, total))
        if self._on_update is not None:
            self._on_update(task, done, total)


def test_step_progress_throttles_the_lines_and_passes_every_figure_to_the_sink() -> None:
    clock = FakeClock()
    lines: list[str] = []
    sink = _RecordingSink()
    with progress_sink_installed(sink):
        report = step_progress(lines.append, every=5.0, clock=clock)
    assert progress_sink() is None  # only for the duration
    for done in range(0, 101, 25):
        clock.now += 2.0
        report(done, 100)
    assert sink.figures == [("embedding", d, 100) for d in range(0, 101, 25)]
    # Calls 2 s apart from t=2: the first, the first 5 s after it (t=8: 75 texts in
    # 8 s, 9.4/s, 25 left in about 3 s), then the last (100 in 10 s).
    assert lines == [
        "embedded 0/100 texts",
        "embedded 75/100 texts, 9.4/s, about 3s left",
        "embedded 100/100 texts, 10.0/s",
    ]
    assert all(is_progress_line(line) for line in lines)


def test_without_a_sink_only_the_lines_are_said() -> None:
    lines: list[str] = []
    report = step_progress(lines.append, clock=FakeClock())
    report(0, 10)
    report(10, 10)
    assert lines == ["embedded 0/10 texts", "embedded 10/10 texts"]


def test_other_lines_are_not_taken_for_progress() -> None:
    assert not is_progress_line("embeddings: 10 chunks, 0 reused (0 from packs)")
    assert not is_progress_line("embedding stopped: quota exhausted")
    assert is_progress_line(progress_line(3456, 18722, 127.5))


class _CountingEmbedder:
    """Deterministic vectors; `max_batch` texts per call, like a provider's batch."""

    name = "counting"
    dimension = 8
    max_batch = 4

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i, len(text) % self.dimension] = 1.0
        return rows

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def test_the_sink_never_hears_of_texts_the_packs_do_not_hold(tmp_path: Path) -> None:
    """At every figure the bar is given, the packs in the ledger hold at least that many."""
    out = tmp_path / "embeddings.bin"
    chunks = corpus({"a.md": 10, "b.md": 7})
    held: list[tuple[int, int]] = []

    def check(task: str, done: int, total: int) -> None:
        memory = local_memory(out)
        on_disk = len(VectorPacks(memory, "counting", 8).load()[1])
        memory.ledger.close()
        held.append((done, on_disk))

    sink = _RecordingSink(check)
    with progress_sink_installed(sink):
        report = build_embeddings(
            chunks, out, _CountingEmbedder(), progress=step_progress(lambda _: None)
        )
    assert report.embedded == len(chunks)
    assert [d for d, _ in held] == [0, 4, 8, 12, 16, len(chunks)]
    assert all(done <= on_disk for done, on_disk in held), held
