"""Vector maths and the `PATBEMB1` embeddings.bin codec the agent reads.

Pure numpy, no I/O: callers read and write the bytes (atomically) themselves.
Layout (little-endian): magic `PATBEMB1`, u16 dim, u32 count, u16 model-name length,
model name (UTF-8), 12 ASCII bytes of id per vector (space padded), then
count × dim int8 values.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

EMBEDDINGS_FILENAME = "embeddings.bin"
MAGIC = b"PATBEMB1"
ID_WIDTH = 12
Buffer = bytes | bytearray | memoryview | mmap.mmap
_HEADER = struct.Struct("<8sHIH")


class NotAnEmbeddingStore(ValueError):
    """The bytes are not a readable PATBEMB1 file (bad magic, truncated, inconsistent)."""


@dataclass(frozen=True)
class EmbeddingStore:
    """A decoded embeddings.bin: the model that made it, ids and int8 vectors (count × dim)."""

    model: str
    dim: int
    ids: list[str]
    vectors: npt.NDArray[np.int8]

    @property
    def count(self) -> int:
        return len(self.ids)

    def index_of(self) -> dict[str, int]:
        """Map chunk id -> row, for reuse by id."""
        return {chunk_id: row for row, chunk_id in enumerate(self.ids)}


def js_round(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """JavaScript's Math.round: halves go towards +inf, exact for every double.

    `floor(x + 0.5)` is wrong for 0.49999999999999994 (the sum rounds up to 1.0), so
    round the floor and compare the remainder instead.
    """
    floor = np.floor(values)
    return np.where(values - floor >= 0.5, floor + 1.0, floor)


def agent_norms(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Row norms with the agent's arithmetic: float64 squares summed left to right.

    The agent's loop adds `x * x` one component after the other; numpy's dot products
    and `einsum` sum in blocks, which can differ in the last bit and, after the
    division and `* 127`, move a component across a rounding boundary. `cumsum` adds
    strictly in order, so its last column is the agent's sum bit for bit.
    """
    if matrix.shape[1] == 0:
        return np.zeros(matrix.shape[0], dtype=np.float64)
    return np.sqrt(np.cumsum(matrix * matrix, axis=1)[:, -1])


def quantize(matrix: npt.ArrayLike) -> npt.NDArray[np.int8]:
    """The agent's quantisation: in float64, `Math.round((x / norm) * 127)` clamped to
    ±127, with the norm summed as the agent sums it; a zero row stays zero.

    Callers pass the service's values as they came (float64, not normalised): a cast
    to float32 or a normalisation of our own first changes a component in rare cases.
    """
    data = np.asarray(matrix, dtype=np.float64)
    if data.ndim == 1:
        data = data[None, :]
    norms = agent_norms(data)
    safe = np.where(norms > 0, norms, 1.0)
    scaled = (data / safe[:, None]) * 127.0
    return np.clip(js_round(scaled), -127, 127).astype(np.int8)


def encode_embeddings(model: str, ids: Sequence[str], vectors: npt.NDArray[np.int8]) -> bytes:
    """Serialise to PATBEMB1 bytes; `vectors` must already be int8 with one row per id."""
    vecs = np.ascontiguousarray(vectors, dtype=np.int8)
    if vecs.ndim != 2 or vecs.shape[0] != len(ids):
        raise ValueError(f"need one vector per id: {len(ids)} ids, array shape {vecs.shape}")
    dim = int(vecs.shape[1])
    name = model.encode("utf-8")
    if dim > 0xFFFF or len(name) > 0xFFFF:
        raise ValueError("dimension and model name must each fit in 16 bits")
    id_block = bytearray()
    for chunk_id in ids:
        raw = chunk_id.encode("ascii")
        if len(raw) > ID_WIDTH:
            raise ValueError(f"chunk id longer than {ID_WIDTH} bytes: {chunk_id!r}")
        id_block += raw.ljust(ID_WIDTH, b" ")
    header = _HEADER.pack(MAGIC, dim, len(ids), len(name))
    return header + name + bytes(id_block) + vecs.tobytes()


def decode_embeddings(data: Buffer, *, copy: bool = True) -> EmbeddingStore:
    """Parse PATBEMB1 bytes; raise NotAnEmbeddingStore for anything else (never misread).

    `data` may be any buffer (bytes, or a read-only memory map); with `copy=False` the
    vectors stay a view of it, so a search over an 800 MB file reads only the rows it
    touches.
    """
    size = len(data)
    if size < _HEADER.size or bytes(data[:8]) != MAGIC:
        raise NotAnEmbeddingStore("not a PATBEMB1 file (bad magic)")
    _, dim, count, name_len = _HEADER.unpack_from(data, 0)
    offset = _HEADER.size
    expected = offset + name_len + ID_WIDTH * count + dim * count
    if size != expected:
        raise NotAnEmbeddingStore(
            f"PATBEMB1 size mismatch: header says {expected} bytes, file has {size}"
        )
    try:
        model = bytes(data[offset : offset + name_len]).decode("utf-8")
        offset += name_len
        raw_ids = np.frombuffer(data, dtype=f"S{ID_WIDTH}", count=count, offset=offset)
        ids = np.char.rstrip(np.char.decode(raw_ids, "ascii"), " ").tolist()
    except UnicodeDecodeError as exc:
        raise NotAnEmbeddingStore(f"PATBEMB1 header is not text: {exc}") from exc
    offset += ID_WIDTH * count
    vectors = np.frombuffer(data, dtype=np.int8, count=dim * count, offset=offset)
    matrix = vectors.reshape(count, dim)
    return EmbeddingStore(model, dim, ids, matrix.copy() if copy else matrix)


