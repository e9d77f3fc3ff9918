"""What a publication publishes: a file named by its path, with its known sha256 and size.

A store of a million chunks is ~480 MB and its vectors more; holding them as `bytes`
just to copy them into the agent's folders and to S3 cost a publish 0.5-1 GB it does not
need. Publishing therefore works on `ArtifactSource`s and streams: the local commit
copies the file in blocks into its staging folder, S3 uploads from a file object, the
manifest takes the digest and size as given, and the embeddings header is read from a
memory map (only the header and id pages are touched, never the vectors).

The sha256 is *known*, not computed here: the store view's index and the embeddings
record already hold it, and hashing a 480 MB file again on every publish is the cost
this module exists to avoid. It is still never trusted blindly where bytes are written:
the staging copy hashes what it copies and refuses (`SourceChanged`) when the file is
not what it was named as, and S3 rejects a body that does not match the checksum sent.
"""

from __future__ import annotations

import base64
import contextlib
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

from brain_pipeline.retrieval.vectors import EmbeddingStore, decode_embeddings
from brain_pipeline.utils.digest import file_sha256, md5_hex, new_sha256

BLOCK_SIZE = 1 << 20
"""Bytes per read/write when copying or comparing: large enough for throughput, small
enough that a publish's memory does not grow with the store."""


class SourceChanged(RuntimeError):
    """The file no longer has the size or sha256 it was named with (rewritten meanwhile)."""


@dataclass(frozen=True)
class ArtifactSource:
    """A file to publish: where it is, and the sha256 and size it is known to have."""

    path: Path
    sha256: str
    size: int

    @classmethod
    def of_file(cls, path: Path | str, sha256: str | None = None) -> ArtifactSource:
        """The file as it is now; `sha256` when the caller knows it (else it is hashed)."""
        path = Path(path)
        size = path.stat().st_size
        return cls(path, sha256 if sha256 is not None else file_sha256(path), size)

    @property
    def b64_sha256(self) -> str:
        """The digest as S3's x-amz-checksum-sha256 spells it (base64 of the raw bytes)."""
        return base64.b64encode(bytes.fromhex(self.sha256)).decode("ascii")

    @contextlib.contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """The file for reading, refused when its size is no longer the known one."""
        with self.path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size != self.size:
                raise SourceChanged(
                    f"{self.path} has {size} bytes, not the {self.size} it was published as "
                    "(it was rewritten meanwhile); run the pipeline again"
                )
            yield handle

    def blocks(self) -> Iterator[bytes]:
        """The file's bytes in `BLOCK_SIZE` pieces; `SourceChanged` at the end when what
        was read is not the known size and sha256 (the caller must then discard it)."""
        digest = new_sha256()
        read = 0
        with self.open() as handle:
            while piece := handle.read(BLOCK_SIZE):
                digest.update(piece)
                read += len(piece)
                yield piece
        if read != self.size or digest.hexdigest() != self.sha256:
            raise SourceChanged(
                f"{self.path} is not the file it was published as (sha256 "
                f"{digest.hexdigest()[:16]}..., expected {self.sha256[:16]}...); it was "
                "rewritten meanwhile: run the pipeline again"
            )

    def md5_hex(self) -> str:
        """MD5 of the file, streamed (only for servers that verify by ETag)."""
        with self.open() as handle:
            return md5_hex(iter(partial(handle.read, BLOCK_SIZE), b""))

    def same_bytes_as(self, other: Path) -> bool:
        """True when `other` holds exactly this file's bytes (compared block by block).

        Raises `SourceChanged` when this file no longer has its known size: it is then
        not the artifact to compare, and the caller decides (stage it, and fail there).
        """
        try:
            with self.open() as mine, Path(other).open("rb") as theirs:
                if os.fstat(theirs.fileno()).st_size != self.size:
                    return False
                while piece := mine.read(BLOCK_SIZE):
                    if theirs.read(len(piece)) != piece:
                        return False
                return not theirs.read(1)
        except FileNotFoundError:
            return False


@dataclass(frozen=True)
class VectorsHeader:
    """What a manifest and the model check need from an embeddings.bin: no vectors."""

    model: str
    dim: int
    ids: list[str]

    @property
    def count(self) -> int:
        return len(self.ids)


def read_vectors_header(source: ArtifactSource) -> VectorsHeader:
    """Model, dimension and ids of a PATBEMB1 file, decoded from a read-only memory map.

    Raises `NotAnEmbeddingStore` for anything else, as `decode_embeddings` does. The
    vectors (most of the file) are never read: the map is dropped once the ids are
    copied out.
    """
    with source.open() as handle:
        if source.size == 0:
            return _header(decode_embeddings(b"", copy=False))
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            store = decode_embeddings(mapped, copy=False)
            header = _header(store)
            del store  # releases the numpy view, so the map can close
        finally:
            with contextlib.suppress(BufferError):  # a view still alive: the GC closes it
                mapped.close()
    return header


def _header(store: EmbeddingStore) -> VectorsHeader:
    return VectorsHeader(store.model, store.dim, list(store.ids))
