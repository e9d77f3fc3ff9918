"""The append-only checkpoint: round trip, torn tails, corruption, foreign files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.embedding.checkpoint import (
    CheckpointWriter,
    NotACheckpoint,
    checkpoint_path,
    read_checkpoint,
)


def _rows(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, size=(n, dim), dtype=np.int8)


def test_batches_round_trip(tmp_path: Path) -> None:
    path = checkpoint_path(tmp_path / "embeddings.bin")
    assert path.name == "embeddings.bin.partial"
    first, second = _rows(3, 8, 1), _rows(2, 8, 2)
    with CheckpointWriter(path, "model-é", 8) as writer:
        writer.append(["a1", "a2", "a3"], first)
        writer.append(["b1", "b2"], second)
    contents = read_checkpoint(path)
    assert (contents.model, contents.dim, contents.torn_bytes) == ("model-é", 8, 0)
    assert list(contents.vectors) == ["a1", "a2", "a3", "b1", "b2"]
    np.testing.assert_array_equal(contents.vectors["b2"], second[1])


def test_resuming_truncates_a_torn_tail_then_appends(tmp_path: Path) -> None:
    path = tmp_path / "x.partial"
    with CheckpointWriter(path, "m", 4) as writer:
        writer.append(["one"], _rows(1, 4, 3))
    with path.open("ab") as handle:
        handle.write(b"two         \x01\x02")  # cut off before its vector and CRC end
    torn = read_checkpoint(path)
    assert list(torn.vectors) == ["one"] and torn.torn_bytes == 14
    with CheckpointWriter(path, "m", 4, resume_at=torn.valid_length) as writer:
        writer.append(["three"], _rows(1, 4, 4))
    assert list(read_checkpoint(path).vectors) == ["one", "three"]


def test_a_corrupt_record_ends_the_readable_part(tmp_path: Path) -> None:
    path = tmp_path / "x.partial"
    with CheckpointWriter(path, "m", 4) as writer:
        writer.append(["r1", "r2", "r3"], _rows(3, 4, 5))
    data = bytearray(path.read_bytes())
    record = 12 + 4 + 4
    data[len(data) - 2 * record + 13] ^= 0xFF  # flip a byte of r2's vector
    path.write_bytes(bytes(data))
    assert list(read_checkpoint(path).vectors) == ["r1"]


def test_a_foreign_file_is_not_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "x.partial"
    path.write_bytes(b"PATBEMB1 but not a journal")
    with pytest.raises(NotACheckpoint):
        read_checkpoint(path)


def test_append_checks_the_shape(tmp_path: Path) -> None:
    with CheckpointWriter(tmp_path / "x.partial", "m", 4) as writer, pytest.raises(ValueError):
        writer.append(["a", "b"], _rows(1, 4, 6))
