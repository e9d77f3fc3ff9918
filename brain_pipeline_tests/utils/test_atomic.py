"""Atomic writes: the whole new file or the old one, never a temporary left behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from brain_pipeline.utils.atomic import (
    atomic_directory,
    atomic_write_bytes,
    atomic_writer,
    write_if_changed,
)


def test_a_failed_write_keeps_the_old_bytes_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    atomic_write_bytes(path, b"old")
    with pytest.raises(RuntimeError), atomic_writer(path) as handle:
        handle.write(b"half of the new")
        raise RuntimeError("interrupted")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_parents_are_created_and_the_file_is_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "f.bin"
    with umask(0o022):
        atomic_write_bytes(path, b"data")
    assert path.read_bytes() == b"data" and _mode(path) == 0o644


@pytest.mark.parametrize(("mask", "mode"), [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_a_written_file_follows_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    path = tmp_path / "f.json"
    with umask(mask):
        atomic_write_bytes(path, b"new")
    assert _mode(path) == mode


def test_a_replaced_file_gets_the_mode_a_new_one_would(tmp_path: Path) -> None:
    """Not the old file's: the writer's umask decides (see utils/atomic.py)."""
    path = tmp_path / "f.json"
    with umask(0o022):
        atomic_write_bytes(path, b"old")
    assert _mode(path) == 0o644
    with umask(0o077):
        atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new" and _mode(path) == 0o600


@pytest.mark.parametrize(("mask", "mode"), [(0o077, 0o700), (0o022, 0o755)])
def test_a_written_directory_follows_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    target = tmp_path / "generation-1"
    with umask(mask), atomic_directory(target, complete_when="done") as staging:
        (staging / "done").write_bytes(b"")
    assert _mode(target) == mode


def test_write_if_changed_leaves_current_bytes_untouched(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert write_if_changed(path, b"one") is True
    inode = path.stat().st_ino
    assert write_if_changed(path, b"one") is False
    assert path.stat().st_ino == inode
    assert write_if_changed(path, b"two") is True and path.read_bytes() == b"two"


def test_a_directory_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "index"
    with pytest.raises(RuntimeError), atomic_directory(target, "done") as tmp:
        (tmp / "part").write_bytes(b"x")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with atomic_directory(target, "done") as tmp:
        (tmp / "done").write_bytes(b"x")
    assert (target / "done").is_file() and [p.name for p in tmp_path.iterdir()] == ["index"]


def test_a_complete_copy_renamed_first_by_another_writer_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "done").write_bytes(b"theirs")
    with atomic_directory(target, "done") as tmp:
        (tmp / "done").write_bytes(b"ours")
    assert (target / "done").read_bytes() == b"theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["index"]
    (target / "done").rename(target / "partial")  # theirs is incomplete: the failure shows
    with pytest.raises(OSError), atomic_directory(target, "done") as tmp:
        (tmp / "done").write_bytes(b"ours")
    assert [p.name for p in tmp_path.iterdir()] == ["index"]
