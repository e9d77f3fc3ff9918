"""The one damage helper: what counts as damage, what is set aside, what is said."""

from __future__ import annotations

import errno
import logging
import sqlite3
from pathlib import Path

import pytest

from brain_pipeline.utils.damage import healed, is_damage


def test_only_damaged_bytes_count_as_damage() -> None:
    assert is_damage(sqlite3.DatabaseError("file is not a database"))
    assert is_damage(ValueError("bad json"))
    assert not is_damage(sqlite3.OperationalError("database or disk is full"))
    assert not is_damage(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_damage(FileNotFoundError(errno.ENOENT, "gone"))


def test_a_damaged_file_is_set_aside_once_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cache.json"
    (tmp_path / "cache.json.damaged").write_bytes(b"older damage")
    path.write_bytes(b"{torn")

    def opener() -> str:
        return "miss" if not path.exists() else str(__import__("json").loads(path.read_bytes()))

    with caplog.at_level(logging.WARNING, logger="brain_pipeline.damage"):
        assert healed(path, opener, what="test cache") == "miss"
    assert not path.exists()
    assert (tmp_path / "cache.json.damaged").read_bytes() == b"{torn"  # the newest kept
    (line,) = [r.getMessage() for r in caplog.records]
    assert str(path) in line and "cache.json.damaged" in line


def test_a_system_error_leaves_the_file_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"good bytes")

    def opener() -> None:
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError):
        healed(path, opener, what="test cache")
    assert path.read_bytes() == b"good bytes"
    assert not (tmp_path / "cache.sqlite.damaged").exists()
