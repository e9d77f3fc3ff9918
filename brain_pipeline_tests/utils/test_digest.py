"""The one place digests are made: each helper against hashlib itself, values that are
persisted or compared across runs pinned, and no other product module hashing."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.corpus import chunk_history
from brain_pipeline.corpus.observation import files_digest
from brain_pipeline.utils.digest import (
    block_sha1,
    file_sha256,
    file_sha256_or,
    ids_digest,
    md5_hex,
    new_sha256,
    order_key,
    sha256_parts,
    value_digest,
)

PACKAGE = Path(__file__).resolve().parents[2] / "brain_pipeline"

#: Product modules that may import hashlib besides utils/digest.py, each with its reason.
#: None since the S3 split: its checksum header and ETag MD5 come from utils.digest.
HASHLIB_ALLOWED: dict[str, str] = {}


def test_ids_digest_is_the_sha256_of_the_arrays_bytes_in_c_order() -> None:
    ids = np.array([b"0123456789ab", b"ffffffffffff", b"a"], dtype="S12")
    assert ids_digest(ids) == hashlib.sha256(ids.tobytes()).hexdigest()
    strided = np.array([[b"a", b"b"], [b"c", b"d"]], dtype="S12").T  # not C-contiguous
    assert ids_digest(strided) == hashlib.sha256(b"".join(
        v.ljust(12, b"\0") for v in (b"a", b"c", b"b", b"d")
    )).hexdigest()


def test_ids_digest_tells_dtypes_and_orders_apart() -> None:
    ids = np.array([b"aaaaaaaaaaaa", b"bbbbbbbbbbbb"], dtype="S12")
    assert ids_digest(ids) != ids_digest(ids[::-1])
    assert ids_digest(ids) != ids_digest(ids.astype("S16"))


def test_parts_digest_as_their_concatenation() -> None:
    parts = [b"one", memoryview(b"\0two"), bytearray(b"three")]
    assert sha256_parts(parts) == hashlib.sha256(b"one\0twothree").hexdigest()
    assert sha256_parts([]) == hashlib.sha256(b"").hexdigest()
    assert new_sha256(b"x").hexdigest() == hashlib.sha256(b"x").hexdigest()


def test_a_file_is_hashed_in_pieces_as_a_whole(tmp_path: Path) -> None:
    data = bytes(range(256)) * 41  # not a multiple of the block
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_sha256(path, block=1000) == hashlib.sha256(data).hexdigest()
    assert file_sha256_or(path, "x") == hashlib.sha256(data).hexdigest()
    assert file_sha256_or(tmp_path / "missing", "missing") == "missing"
    assert file_sha256_or(tmp_path, "a folder") == "a folder"


def test_md5_and_block_sha1_are_the_plain_algorithms() -> None:
    assert md5_hex([b"ab", b"c"]) == hashlib.md5(b"abc").hexdigest()
    assert block_sha1(memoryview(b"block")[1:]) == hashlib.sha1(b"lock").digest()


def test_value_digest_ignores_key_order() -> None:
    assert value_digest({"a": 1, "b": [2]}) == value_digest({"b": [2], "a": 1})
    assert value_digest({"a": 1}) != value_digest({"a": 2})


# Values recorded by earlier runs (the history database's live digest, the corpus digest
# in every published manifest): computed by the code before the helpers existed.


def test_the_recorded_live_set_digest_keeps_its_value() -> None:
    live = chunk_history._LiveSet(
        np.array([b"0123456789ab", b"ffffffffffff"], dtype="S12"),
        np.array([1, 0], dtype=np.int32),
        ("aws", "python"),
    )
    assert live.digest() == "ab38472f73513c31d0032afc4231e40048c2bfb630e49b9d115ca0cf52fd7a11"


def test_the_published_corpus_digest_keeps_its_value() -> None:
    files = {"aws/a.md": "ab" * 32, "python/b.md": "cd" * 32}
    assert files_digest(files) == (
        "50c039eb4779792104bda5d371ad81ddf7a104374d6d2aa7b340f53039fa4f8d"
    )


def _imports_hashlib(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name == "hashlib" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "hashlib":
            return True
    return False


def test_no_product_module_hashes_on_its_own() -> None:
    hashing = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if _imports_hashlib(path)
    }
    assert hashing - {"utils/digest.py"} - set(HASHLIB_ALLOWED) == set()


@pytest.mark.parametrize("source", ["import hashlib\n", "from hashlib import sha256\n"])
def test_the_hashlib_scan_sees_both_import_forms(tmp_path: Path, source: str) -> None:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    assert _imports_hashlib(path)


def test_order_key_is_a_stable_eight_byte_blake2b() -> None:
    # The known-item sample is chosen by this order: a change would move every area's
    # sample, so its value is pinned (computed independently with hashlib).
    assert order_key("0123456789ab") == hashlib.blake2b(b"0123456789ab", digest_size=8).digest()
    assert len(order_key("x")) == 8 and order_key("x") != order_key("y")
