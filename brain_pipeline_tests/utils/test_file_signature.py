"""The one "unchanged since we looked" rule, and the stamps recorded with it."""

from __future__ import annotations

import os
from pathlib import Path

from brain_pipeline.state.records import FileStamp
from brain_pipeline.utils.file_signature import FileSignature


def _replace(path: Path, data: bytes) -> None:
    """Write as the pipeline does: a new inode renamed into place."""
    temp = path.with_name(path.name + ".tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def test_a_replaced_file_no_longer_matches_even_with_the_same_bytes_and_mtime(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.json"
    path.write_bytes(b"same bytes")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = FileSignature.of(path)
    assert before is not None and before.still_matches(path)
    keep = tmp_path / "keep"  # hold the old inode so the new file cannot reuse its number
    os.link(path, keep)
    _replace(path, b"same bytes")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert not before.still_matches(path)


def test_a_size_change_or_a_missing_file_does_not_match(tmp_path: Path) -> None:
    path = tmp_path / "a"
    path.write_bytes(b"12345")
    before = FileSignature.of(path)
    assert before is not None
    with open(path, "ab") as handle:
        handle.write(b"6")
    os.utime(path, ns=(before.mtime_ns, before.mtime_ns))
    assert not before.still_matches(path)
    path.unlink()
    assert FileSignature.of(path) is None and not before.still_matches(path)


def test_the_json_form_round_trips_and_refuses_other_shapes() -> None:
    signature = FileSignature(1, 2, 3, 4)
    assert FileSignature.from_list(signature.as_list()) == signature
    assert FileSignature.from_list([1, 2, 3]) is None  # an older record's three fields
    assert FileSignature.from_list("1-2-3-4") is None


def test_a_stamp_from_before_ctime_was_recorded_is_hashed_again(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.bin"
    path.write_bytes(b"vectors")
    fresh = FileStamp.of(path, "00" * 32)
    assert fresh.still_matches(path)
    old = FileStamp(fresh.sha256, fresh.size, fresh.mtime_ns, fresh.inode)  # no ctime_ns
    assert not old.still_matches(path)
