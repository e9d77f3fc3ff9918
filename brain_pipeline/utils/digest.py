"""The one place digests are made: of bytes, of files, of JSON-able values.

Everything content-addressed in the build directory (records, caches, the evaluation key,
the fixture's identity) is a sha256 hex digest made here, so "the same input" means the
same thing everywhere. Where a shorter form is used (record data versions, cache file
names) it is a prefix of these digests, never a different hash.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


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


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, anything else as its str(): equal values, equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def value_digest(value: Any) -> str:
    """sha256 of `value`'s canonical JSON."""
    return sha256_hex(canonical_json(value))
