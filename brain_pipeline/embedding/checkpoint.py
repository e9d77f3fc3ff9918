"""The append-only checkpoint that makes an embedding build resumable.

Beside `embeddings.bin` the builder keeps `embeddings.bin.partial`: a header naming the
model and dimension, then one fixed-size record per newly embedded vector (12-byte id,
`dim` int8 values, CRC-32 of both). Every batch is appended and fsync'd before the next
request, so a crash, kill -9 or exhausted quota loses at most the batch in flight.

Why a journal rather than rewriting the artifact after every batch: appending costs one
batch of bytes per request instead of the whole file, so checkpointing stays cheap for
stores of any size. Why a CRC per record: after a crash the tail can hold a record that
was only partly written (or zero-filled); reading stops at the first record that does
not check out, and the file is truncated there before appending again.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from brain_pipeline.retrieval.vectors import ID_WIDTH
from brain_pipeline.utils.atomic import atomic_write_bytes

JOURNAL_MAGIC = b"PATBJRN1"
_HEADER = struct.Struct("<8sHH")
_CRC = struct.Struct("<I")
SUFFIX = ".partial"


def checkpoint_path(out_path: Path) -> Path:
    """Where the checkpoint of `out_path` lives (same directory, so it moves with it)."""
    return out_path.with_name(out_path.name + SUFFIX)


def _header(model: str, dim: int) -> bytes:
    name = model.encode("utf-8")
    return _HEADER.pack(JOURNAL_MAGIC, dim, len(name)) + name


def _record_size(dim: int) -> int:
    return ID_WIDTH + dim + _CRC.size


@dataclass
class JournalContents:
    """What a checkpoint held: its model/dim, vectors by id, and where valid data ends."""

    model: str
    dim: int
    vectors: dict[str, npt.NDArray[np.int8]] = field(default_factory=dict)
    valid_length: int = 0
    torn_bytes: int = 0


class NotACheckpoint(ValueError):
    """The file is not a checkpoint this code wrote."""


def read_checkpoint(path: Path) -> JournalContents:
    """Parse a checkpoint, keeping every record up to the first torn or corrupt one."""
    data = path.read_bytes()
    if len(data) < _HEADER.size or data[:8] != JOURNAL_MAGIC:
        raise NotACheckpoint("bad magic")
    _, dim, name_len = _HEADER.unpack_from(data, 0)
    start = _HEADER.size + name_len
    if len(data) < start:
        raise NotACheckpoint("truncated header")
    try:
        model = data[_HEADER.size : start].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotACheckpoint("model name is not UTF-8") from exc
    contents = JournalContents(model=model, dim=dim, valid_length=start)
    size = _record_size(dim)
    offset = start
    while offset + size <= len(data):
        body = data[offset : offset + ID_WIDTH + dim]
        (crc,) = _CRC.unpack_from(data, offset + ID_WIDTH + dim)
        if zlib.crc32(body) != crc:
            break
        try:
            chunk_id = body[:ID_WIDTH].decode("ascii").rstrip(" ")
        except UnicodeDecodeError:
            break
        contents.vectors[chunk_id] = np.frombuffer(body, dtype=np.int8, offset=ID_WIDTH).copy()
        offset += size
    contents.valid_length = offset
    contents.torn_bytes = len(data) - offset
    return contents


def encode_records(ids: list[str], vectors: npt.NDArray[np.int8]) -> bytes:
    """Records for a batch, ready to append in one write."""
    out = bytearray()
    matrix = np.ascontiguousarray(vectors, dtype=np.int8)
    for chunk_id, row in zip(ids, matrix, strict=True):
        body = chunk_id.encode("ascii").ljust(ID_WIDTH, b" ") + row.tobytes()
        out += body + _CRC.pack(zlib.crc32(body))
    return bytes(out)


class CheckpointWriter:
    """Appends batches durably to a checkpoint for one model and dimension."""

    def __init__(self, path: Path, model: str, dim: int, *, resume_at: int | None = None) -> None:
        """Open `path` for appending; start a fresh file unless `resume_at` says where
        the valid part of an existing checkpoint for the same model/dim ends."""
        self.path = path
        self.dim = dim
        if resume_at is None:
            atomic_write_bytes(path, _header(model, dim))
        else:
            os.truncate(path, resume_at)  # drop a torn tail before appending after it
        self._handle: BinaryIO | None = open(path, "ab")  # noqa: SIM115 - closed in close()

    def append(self, ids: list[str], vectors: npt.NDArray[np.int8]) -> None:
        """Write one batch of records and make it durable before returning."""
        if self._handle is None:
            raise ValueError("checkpoint is closed")
        if vectors.shape != (len(ids), self.dim):
            raise ValueError(f"expected {len(ids)}×{self.dim} vectors, got {vectors.shape}")
        self._handle.write(encode_records(ids, vectors))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
