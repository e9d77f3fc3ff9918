"""embeddings.bin read from disk: absent is "no vectors", damaged is ignored with one
warning naming the file (never misread), and a mapped read is a view of the file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.embedding.store_file import read_embeddings
from brain_pipeline.retrieval.vectors import encode_embeddings, quantize

IDS = ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"]


def _vectors(seed: int) -> np.ndarray:
    return quantize(np.random.default_rng(seed).normal(size=(len(IDS), 8)))


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    path = tmp_path / "embeddings.bin"
    path.write_bytes(encode_embeddings("model-a", IDS, _vectors(1)))
    return path


@pytest.mark.parametrize("mapped", [False, True])
def test_a_store_reads_back_what_was_written(stored: Path, mapped: bool) -> None:
    warnings: list[str] = []
    store = read_embeddings(stored, warnings.append, mapped=mapped)
    assert store is not None and warnings == []
    assert (store.model, store.dim, store.ids) == ("model-a", 8, IDS)
    assert np.array_equal(store.vectors, _vectors(1))


def test_a_plain_read_is_a_private_copy_and_a_mapped_one_a_read_only_view(stored: Path) -> None:
    copied = read_embeddings(stored)
    mapped = read_embeddings(stored, mapped=True)
    assert copied is not None and mapped is not None
    assert copied.vectors.flags.writeable
    assert not mapped.vectors.flags.writeable and not mapped.vectors.flags.owndata


def test_a_mapped_store_keeps_its_vectors_when_the_file_is_replaced(stored: Path) -> None:
    """A build replaces embeddings.bin atomically while a search reads the old one."""
    mapped = read_embeddings(stored, mapped=True)
    assert mapped is not None
    replacement = stored.with_name(".next.bin")
    replacement.write_bytes(encode_embeddings("model-b", IDS, _vectors(2)))
    os.replace(replacement, stored)
    assert np.array_equal(mapped.vectors, _vectors(1))
    fresh = read_embeddings(stored, mapped=True)
    assert fresh is not None and fresh.model == "model-b"


@pytest.mark.parametrize("mapped", [False, True])
def test_an_absent_file_is_no_vectors_and_no_warning(tmp_path: Path, mapped: bool) -> None:
    warnings: list[str] = []
    assert read_embeddings(tmp_path / "embeddings.bin", warnings.append, mapped=mapped) is None
    assert warnings == []


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: data[:-1], "size mismatch"),
        (lambda data: b"", "bad magic"),  # an empty file cannot be memory-mapped
        (lambda data: b"JUNK" + data[4:], "bad magic"),
    ],
)
def test_a_damaged_file_is_ignored_with_one_warning_naming_it(
    stored: Path, mapped: bool, damage: object, reason: str
) -> None:
    damaged = damage(stored.read_bytes())  # type: ignore[operator]
    stored.write_bytes(damaged)
    warnings: list[str] = []
    assert read_embeddings(stored, warnings.append, mapped=mapped) is None
    assert len(warnings) == 1 and warnings[0].startswith("ignored embeddings.bin: ")
    assert reason in warnings[0]
    assert stored.read_bytes() == damaged  # left for the next build to replace
    assert read_embeddings(stored, mapped=mapped) is None  # no warn callback: still None
