"""embeddings.bin (PATBEMB1): the agent's rounding, bytes that are never misread, and a
`quantize` that is the agent's own (checked against its rule run by Node on many vectors)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.retrieval.vectors import (
    NotAnEmbeddingStore,
    decode_embeddings,
    encode_embeddings,
    js_round,
    quantize,
)


def test_rounding_is_javascripts_math_round_halves_up() -> None:
    values = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.49])
    assert js_round(values).tolist() == [-2.0, -1.0, -0.0, 1.0, 2.0, 2.0]


def test_quantize_scales_unit_rows_to_int8() -> None:
    rows = quantize([[3.0, 4.0], [0.0, 0.0]])
    assert rows.dtype == np.int8 and rows.tolist() == [[76, 102], [0, 0]]


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

ORACLE = Path(__file__).with_name("agent_quantize.mjs")


def _agent(rows: list[list[float]]) -> np.ndarray:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is needed for the agent's quantisation oracle")
    done = subprocess.run([node, str(ORACLE)], input=json.dumps(rows), capture_output=True,
                          text=True, check=True)
    return np.asarray(json.loads(done.stdout), dtype=np.int8)


def _boundary_rows(rng: np.random.Generator, count: int, dim: int) -> list[list[float]]:
    """Rows whose normalised components sit on rounding boundaries: all but the last
    component are (k + 0.5) / 127, the last makes the norm 1 in exact arithmetic, and
    the row is then scaled. In doubles the norm comes out within an ulp or two of the
    scale, so each component lands on, just under or just over k + 0.5 depending on
    exactly how the norm was summed and divided."""
    rows = []
    for _ in range(count):
        halves = (rng.integers(-12, 12, size=dim - 1) + 0.5) / 127.0
        rest = 1.0 - float(np.sum(halves * halves))
        row = np.append(halves, np.sqrt(max(rest, 0.0)))
        scale = float(rng.choice([1.0, 0.37, 3.1, 1e-3, 0.03125, 12345.678]))
        rows.append((row * scale).tolist())
    return rows


def test_quantize_matches_the_agent_on_random_and_boundary_vectors() -> None:
    rng = np.random.default_rng(20261202)
    rows = (rng.standard_normal((3000, 256)) * 0.3).tolist()
    rows += _boundary_rows(rng, 2000, 64)
    rows += [[0.0] * 8, [1.0] + [0.0] * 7, [-0.5, 0.5, 0.5, -0.5, 0, 0, 0, 0]]
    # Python's json writes the shortest repr, which JavaScript parses to the same double.
    by_dim: dict[int, list[list[float]]] = {}
    for row in rows:
        by_dim.setdefault(len(row), []).append(row)
    compared = 0
    for group in by_dim.values():
        ours = quantize(np.asarray(group, dtype=np.float64))
        np.testing.assert_array_equal(ours, _agent(group))
        compared += len(group)
    assert compared == len(rows)


def test_other_arithmetic_would_differ_on_the_boundary_rows() -> None:
    """The oracle can tell the arithmetic apart: the old float32 path and a blocked
    (einsum) norm both differ from it on the boundary rows, so the test above can fail."""
    from brain_pipeline.retrieval.vectors import js_round

    rng = np.random.default_rng(7)
    rows = _boundary_rows(rng, 2000, 64)
    agent = _agent(rows)
    data = np.asarray(rows, dtype=np.float64)
    as_float32 = data.astype(np.float32)
    unit32 = as_float32 / np.linalg.norm(as_float32, axis=1, keepdims=True)
    old = np.clip(js_round(unit32.astype(np.float64) * 127), -127, 127).astype(np.int8)
    assert (old != agent).any()
    blocked = np.sqrt(np.einsum("ij,ij->i", data, data))
    other = np.clip(js_round(data * (127.0 / blocked[:, None])), -127, 127).astype(np.int8)
    assert (other != agent).any()
