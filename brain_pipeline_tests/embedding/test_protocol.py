"""embedding.protocol: the helpers every provider shares, on plain values.

Pins `unit_rows` (unit length in float32, zero rows stay zero), `QueryCache` (each query
embedded once, vectors read-only, least recently used evicted first), and the error
family (one base class; a refused input names its text).
"""

from __future__ import annotations

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
    unit_rows,
)


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


@pytest.mark.parametrize(
    "error", [EmbeddingRejected, EmbeddingInputRefused, EmbeddingUnavailable, LocalModelUnavailable]
)
def test_every_embedding_failure_is_an_embedding_error(error: type[EmbeddingError]) -> None:
    assert issubclass(error, EmbeddingError) and issubclass(error, RuntimeError)


def test_a_refused_input_names_its_text_or_none() -> None:
    refused = EmbeddingInputRefused("text 3 is over the token limit", 3)
    assert (str(refused), refused.index) == ("text 3 is over the token limit", 3)
    assert EmbeddingInputRefused("one of the texts").index is None
