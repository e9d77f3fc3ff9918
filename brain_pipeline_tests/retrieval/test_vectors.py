"""embeddings.bin (PATBEMB1): the agent's rounding, and bytes that are never misread."""

from __future__ import annotations

import numpy as np
import pytest

from brain_pipeline.retrieval.vectors import (
    NotAnEmbeddingStore,
    decode_embeddings,
    encode_embeddings,
    js_round,
    l2_normalize,
    quantize,
)


def test_rounding_is_javascripts_math_round_halves_up() -> None:
    values = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.49])
    assert js_round(values).tolist() == [-2.0, -1.0, -0.0, 1.0, 2.0, 2.0]


def test_quantize_scales_unit_rows_to_int8() -> None:
    rows = quantize([[3.0, 4.0], [0.0, 0.0]])
    assert rows.dtype == np.int8 and rows.tolist() == [[76, 102], [0, 0]]
    assert np.allclose(np.linalg.norm(l2_normalize([[3.0, 4.0]]), axis=1), 1.0)


def test_encode_then_decode_gives_the_same_store() -> None:
    vectors = quantize(np.random.default_rng(1).standard_normal((3, 5)))
    data = encode_embeddings("model-x", ["aaaaaaaaaaaa", "b", "c"], vectors)
    store = decode_embeddings(data)
    assert (store.model, store.dim, store.ids) == ("model-x", 5, ["aaaaaaaaaaaa", "b", "c"])
    assert np.array_equal(store.vectors, vectors) and store.count == 3
    assert store.index_of() == {"aaaaaaaaaaaa": 0, "b": 1, "c": 2}


@pytest.mark.parametrize("data", [b"", b"NOTMAGIC" + bytes(20), b"PATBEMB1" + bytes(3)])
def test_anything_else_is_refused(data: bytes) -> None:
    with pytest.raises(NotAnEmbeddingStore):
        decode_embeddings(data)


def test_bad_inputs_are_refused_when_writing() -> None:
    with pytest.raises(ValueError, match="one vector per id"):
        encode_embeddings("m", ["a"], np.zeros((2, 3), dtype=np.int8))
    with pytest.raises(ValueError, match="longer than 12"):
        encode_embeddings("m", ["x" * 13], np.zeros((1, 3), dtype=np.int8))
