"""The one place digests are made: of bytes, of id arrays, of files, of JSON-able values.

Everything content-addressed in the build directory (records, caches, the evaluation key,
the fixture's identity) is a sha256 hex digest made here, so "the same input" means the
same thing everywhere. Where a shorter form is used (record data versions, cache file
names) it is a prefix of these digests, never a different hash. Two other hashes exist,
each for one job and made here too: SHA-1 identifies the store's blocks for the sidecar
cache (`block_sha1`), and MD5 is what S3-compatible servers compare ETags with
(`md5_hex`); neither names anything a person or another run compares by value.

No numpy import: this module is on the path of every command, including the ones that
must refuse quickly (an id array is hashed through its own `tobytes()`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

#: A new incremental sha256 (`.update(...)`, then `.hexdigest()`), for bytes that arrive
#: in pieces, and the plain constructor for hot loops (`new_sha256(data).hexdigest()`
#: costs no extra call per chunk where millions are hashed).
new_sha256 = hashlib.sha256

Buffer = bytes | bytearray | memoryview


class IdArray(Protocol):
    """What `ids_digest` needs of an id array (a numpy array of any dtype)."""

    def tobytes(self) -> bytes: ...


def sha256_hex(data: Buffer) -> str:
    return hashlib.sha256(data).hexdigest()


def order_key(text: str) -> bytes:
    """An 8-byte BLAKE2b of `text`: a stable pseudo-random order for sampling by id (the
    same ids give the same sample on every machine and in every build)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


def ids_digest(ids: IdArray) -> str:
    """sha256 of an id array's bytes in C order and its own dtype: the content name of a
    cached segment, postings or match matrix built for exactly those ids, in that order.

    The same ids in another dtype (`S12` against `S16`) digest differently; every caller
    hashes the store's own id dtype, so that never splits one cache entry into two.
    """
    return hashlib.sha256(ids.tobytes()).hexdigest()


def sha256_parts(parts: Iterable[Buffer]) -> str:
    """sha256 of the parts one after another, without joining them first (the same value
    as `sha256_hex(b"".join(parts))`)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def file_sha256(path: Path | str, block: int = 1 << 20) -> str:
    """sha256 of a file read in pieces: stores and vectors can be hundreds of MB, and
    reading them whole just to hash them would double the memory of the step."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while piece := handle.read(block):
            digest.update(piece)
    return digest.hexdigest()


def file_sha256_or(path: Path | str, default: str) -> str:
    """`file_sha256`, or `default` when the file cannot be read (missing, a folder...)."""
    try:
        return file_sha256(path)
    except OSError:
        return default


def md5_hex(pieces: Iterable[Buffer]) -> str:
    """MD5 of the pieces one after another: only for servers that verify an upload by its
    ETag. Never a content name of ours."""
    digest = hashlib.md5(usedforsecurity=False)
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def block_sha1(data: Buffer) -> bytes:
    """The raw 20-byte SHA-1 of one block of the store, as the sidecar index records it.

    It identifies a block's bytes for a cache (nothing adversarial), and is the fastest
    strong hash here (0.26 s for a 477 MB store, SHA-256 0.35 s). Changing it would
    only make every recorded sidecar miss once.
    """
    return hashlib.sha1(data, usedforsecurity=False).digest()


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, anything else as its str(): equal values, equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def value_digest(value: Any) -> str:
    """sha256 of `value`'s canonical JSON."""
    return sha256_hex(canonical_json(value))
