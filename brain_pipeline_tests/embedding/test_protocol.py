"""embedding.protocol: the helpers every provider shares, on plain values.

Pins `unit_rows` (unit length in float32, zero rows stay zero), `QueryCache` (each query
embedded once, vectors read-only, least recently used evicted first),
`embed_with_progress` (reports rows only through providers that can, and only when
asked), and the error family (one base class; a refused input names its text).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from brain_pipeline.embedding.protocol import (
    EmbeddingError,
    EmbeddingInputRefused,
    EmbeddingRejected,
    EmbeddingUnavailable,
    FloatVector,
    LocalModelUnavailable,
    QueryCache,
    ReportsRows,
    RowsDone,
    embed_with_progress,
    unit_rows,
)
from brain_pipeline_tests.embedding.helpers import gemini
from brain_pipeline_tests.peers.fake_gemini import FakeGemini


def test_unit_rows_normalises_each_row_and_keeps_zero_rows_zero() -> None:
    rows = unit_rows([[3, 4], [0, 0], [0, -2]])
    assert rows.dtype == np.float32
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0], [0.0, -1.0]]
    assert not np.isnan(rows).any()


def test_the_query_cache_embeds_each_query_once_and_evicts_the_least_recent() -> None:
    computed: list[str] = []

    def compute(text: str) -> FloatVector:
        computed.append(text)
        return np.full(3, len(computed), dtype=np.float32)

    cache = QueryCache(size=2)
    first = cache.get_or_compute("a", compute)
    assert cache.get_or_compute("a", compute) is first and computed == ["a"]
    assert not first.flags.writeable  # a caller cannot change what others get
    cache.get_or_compute("b", compute)
    cache.get_or_compute("a", compute)  # "a" is now the most recent
    cache.get_or_compute("c", compute)  # over size: "b" goes
    assert computed == ["a", "b", "c"]
    cache.get_or_compute("a", compute)
    cache.get_or_compute("b", compute)
    assert computed == ["a", "b", "c", "b"]


class _Plain:
    """A provider that answers whole calls only."""

    name, dimension, max_batch = "plain", 2, 10

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 2))

    def embed_query(self, text: str) -> FloatVector:
        return np.ones(2, dtype=np.float32)


class _Reporting(_Plain):
    """A provider that reports rows as it finishes them (two at a time)."""

    def __init__(self) -> None:
        self.plain_calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.plain_calls += 1
        return super().embed_documents(texts)

    def embed_documents_reporting(
        self, texts: Sequence[str], rows_done: RowsDone | None
    ) -> np.ndarray:
        for done in range(2, len(texts) + 1, 2):
            if rows_done is not None:
                rows_done(done)
        return np.zeros((len(texts), 2))


def test_progress_is_reported_through_providers_that_can_and_only_when_asked() -> None:
    reporting, counts = _Reporting(), list[int]()
    assert isinstance(reporting, ReportsRows) and not isinstance(_Plain(), ReportsRows)
    answer = embed_with_progress(reporting, ["t"] * 6, counts.append)
    assert counts == [2, 4, 6] and answer.tolist() == [[0.0, 0.0]] * 6
    assert reporting.plain_calls == 0
    embed_with_progress(reporting, ["t"] * 6)  # nobody listening: the plain call
    assert reporting.plain_calls == 1
    assert embed_with_progress(_Plain(), ["t"], counts.append).tolist() == [[1.0, 1.0]]
    assert counts == [2, 4, 6]


def test_providers_without_sub_batches_are_called_plainly(gemini_server: FakeGemini) -> None:
    embedder = gemini()
    assert not isinstance(embedder, ReportsRows)
    counts: list[int] = []
    vectors = embed_with_progress(embedder, ["one", "two"], counts.append)
    assert vectors.shape == (2, 16) and counts == []


@pytest.mark.parametrize(
    "error", [EmbeddingRejected, EmbeddingInputRefused, EmbeddingUnavailable, LocalModelUnavailable]
)
def test_every_embedding_failure_is_an_embedding_error(error: type[EmbeddingError]) -> None:
    assert issubclass(error, EmbeddingError) and issubclass(error, RuntimeError)


def test_a_refused_input_names_its_text_or_none() -> None:
    refused = EmbeddingInputRefused("text 3 is over the token limit", 3)
    assert (str(refused), refused.index) == ("text 3 is over the token limit", 3)
    assert EmbeddingInputRefused("one of the texts").index is None
