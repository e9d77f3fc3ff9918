"""Time-based embedding progress: the local model reports per sub-batch, the reporter
speaks on an injected clock (no test here waits on wall time)."""

from __future__ import annotations

import numpy as np
import pytest

from brain_pipeline.embedding.local import LocalEmbedder
from brain_pipeline.embedding.progress import ThrottledProgress
from brain_pipeline.embedding.protocol import ReportsRows, embed_with_progress
from brain_pipeline_tests.embedding.helpers import gemini
from brain_pipeline_tests.peers.fake_gemini import FakeGemini


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def local_model() -> LocalEmbedder:
    # Small sub-batches so a few hundred short texts make many of them.
    return LocalEmbedder(inference_batch=16, max_batch_tokens=4096)


def test_reports_the_first_every_interval_and_the_last() -> None:
    clock = FakeClock()
    said: list[tuple[int, int]] = []
    progress = ThrottledProgress(lambda d, t: said.append((d, t)), every=5.0, clock=clock)
    for done in range(0, 101, 10):  # one report every 2 s of the injected clock
        progress(done, 100)
        clock.now += 2.0
    # t=0 first; then the first call at least 5 s after the last report; 100 is the end.
    assert said == [(0, 100), (30, 100), (60, 100), (90, 100), (100, 100)]
    progress(100, 100)  # the builder repeating the last sub-batch's figure
    assert said[-1:] == [(100, 100)] and len(said) == 5


def test_a_slow_clock_reports_only_the_first_and_last() -> None:
    said: list[tuple[int, int]] = []
    progress = ThrottledProgress(lambda d, t: said.append((d, t)), clock=FakeClock())
    for done in range(0, 257):
        progress(done, 256)
    assert said == [(0, 256), (256, 256)]


def test_the_local_model_reports_each_sub_batch_and_returns_the_same_vectors(
    local_model: LocalEmbedder,
) -> None:
    texts = [f"Sentence {i} about {'vectors ' * (i % 7)}and batches." for i in range(100)]
    counts: list[int] = []
    reported = embed_with_progress(local_model, texts, counts.append)
    assert isinstance(local_model, ReportsRows)
    assert len(counts) == len(local_model._batches([1] * 100))  # one per sub-batch (>= 7)
    assert len(counts) >= 7
    assert counts == sorted(counts) and counts[-1] == 100 and len(set(counts)) == len(counts)
    np.testing.assert_allclose(reported, local_model.embed_documents(texts), atol=1e-6)


def test_one_large_local_call_speaks_every_few_seconds(local_model: LocalEmbedder) -> None:
    """One builder batch of 256 texts: before, one line at its end; now one per ~5 s."""
    clock = FakeClock()
    said: list[tuple[int, int]] = []
    progress = ThrottledProgress(lambda d, t: said.append((d, t)), every=5.0, clock=clock)
    texts = [f"Paragraph {i} of a long embedding run." for i in range(256)]

    def rows_done(finished: int) -> None:
        clock.now += 2.0  # each sub-batch of 16 texts "takes" 2 s: 32 s for the batch
        progress(finished, len(texts))

    progress(0, len(texts))
    embed_with_progress(local_model, texts, rows_done)
    progress(len(texts), len(texts))  # what the builder reports after the batch
    assert said[0] == (0, 256) and said[-1] == (256, 256)
    assert len(said) >= 7  # 32 s in steps of 2 s at one line per >= 5 s, plus both ends
    assert [d for d, _ in said] == sorted(d for d, _ in said)


def test_providers_without_sub_batches_are_called_plainly(gemini_server: FakeGemini) -> None:
    embedder = gemini()
    assert not isinstance(embedder, ReportsRows)
    counts: list[int] = []
    vectors = embed_with_progress(embedder, ["one", "two"], counts.append)
    assert vectors.shape == (2, 16) and counts == []
