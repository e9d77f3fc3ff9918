"""A small two-area store with int8 vectors from a deterministic toy embedder, and an
empty build directory for the cache tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from brain_pipeline.corpus.store import Chunk, chunk_id
from brain_pipeline.retrieval.vectors import EmbeddingStore, quantize
from brain_pipeline.state.layout import StateLayout
from brain_pipeline_tests.corpus.views import clear_views

DIM = 16
MODEL = "toy-embedder"

CONTENTS = {
    "python": [
        "Lists and tuples are sequences in Python.",
        "A dictionary maps keys to values.",
        "Generators yield values lazily from a function.",
        "List comprehensions build lists from iterables.",
        "Exceptions unwind the stack until a handler catches them.",
        "Decorators wrap functions to add behaviour.",
        "Dictionaries and sets hash their keys.",
    ],
    "sql": [
        "SELECT reads rows from tables.",
        "An index speeds up lookups of rows by key.",
        "JOIN combines rows from two tables.",
        "Transactions keep changes atomic.",
    ],
}


def toy_embed(text: str) -> npt.NDArray[np.float64]:
    """Bag of hashed words: texts sharing words get close vectors, deterministically."""
    vector = np.zeros(DIM)
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,").encode()).digest()
        vector[digest[0] % DIM] += 1.0 + digest[1] / 255
    return vector


@pytest.fixture
def chunks() -> list[Chunk]:
    return [
        Chunk(chunk_id(text), text, area, f"{area}/notes.md")
        for area, texts in CONTENTS.items()
        for text in texts
    ]


@pytest.fixture
def embeddings(chunks: list[Chunk]) -> EmbeddingStore:
    """Vectors for every chunk except the last one of each area (they have none)."""
    with_vectors = [c for c in chunks if c.content not in {t[-1] for t in CONTENTS.values()}]
    matrix = quantize(np.array([toy_embed(c.content) for c in with_vectors]))
    return EmbeddingStore(MODEL, DIM, [c.id for c in with_vectors][::-1], matrix[::-1].copy())


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    """An empty build directory; store views opened by earlier tests are forgotten."""
    build = tmp_path / "build"
    build.mkdir()
    clear_views()
    return StateLayout.of(build)
