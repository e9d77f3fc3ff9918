"""A cache unit is read back whole, or not at all: a miss is None, damage is set aside."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from brain_pipeline.utils.cache_unit import META, CacheUnit, newest_first, read_unit, write_unit


def _both(unit: CacheUnit) -> tuple[object, list[int]]:
    return unit.meta["note"], np.asarray(unit.arrays["a"]).tolist()


def test_a_unit_reads_back_its_arrays_and_meta(tmp_path: Path) -> None:
    write_unit(tmp_path / "u", {"a": np.arange(4), "b": np.zeros(0, dtype=np.int32)}, note="x")
    assert sorted(p.name for p in (tmp_path / "u").iterdir()) == ["a.npy", "b.npy", META]
    assert read_unit(tmp_path / "u", _both, what="test unit") == ("x", [0, 1, 2, 3])
    unit = read_unit(tmp_path / "u", lambda unit: unit, what="test unit")
    assert unit is not None and isinstance(unit.arrays["a"], np.memmap)
    assert len(unit.arrays["b"]) == 0


def test_no_unit_is_a_miss_and_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="brain_pipeline.damage"):
        assert read_unit(tmp_path / "absent", _both, what="test unit") is None
    assert not caplog.records


@pytest.mark.parametrize(
    ("member", "damage"),
    [("a.npy", None), ("a.npy", b"\x93NUMPY torn"), (META, b"{not json"), (META, b"[]")],
)
def test_a_damaged_unit_is_set_aside_whole_and_said_once(
    tmp_path: Path, member: str, damage: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    write_unit(tmp_path / "u", {"a": np.arange(4)}, note="x")
    if damage is None:
        (tmp_path / "u" / member).unlink()  # a member missing from a whole unit is damage
    else:
        (tmp_path / "u" / member).write_bytes(damage)
    with caplog.at_level(logging.WARNING, logger="brain_pipeline.damage"):
        assert read_unit(tmp_path / "u", _both, what="test unit") is None
    assert not (tmp_path / "u").exists() and (tmp_path / "u.damaged").is_dir()
    (warning,) = caplog.records
    assert "damaged test unit" in warning.getMessage()


def test_members_that_do_not_fit_together_are_damage(tmp_path: Path) -> None:
    write_unit(tmp_path / "u", {"a": np.arange(4)}, note="x")

    def picky(unit: CacheUnit) -> None:
        raise ValueError("a does not fit")

    assert read_unit(tmp_path / "u", picky, what="test unit") is None
    assert (tmp_path / "u.damaged" / "a.npy").is_file()


def test_the_first_whole_copy_of_a_unit_is_kept(tmp_path: Path) -> None:
    write_unit(tmp_path / "u", {"a": np.arange(4)}, note="first")
    write_unit(tmp_path / "u", {"a": np.arange(4)}, note="second")  # a racing writer
    assert read_unit(tmp_path / "u", _both, what="test unit") == ("first", [0, 1, 2, 3])
    assert [p.name for p in tmp_path.iterdir()] == ["u"]  # no temporary left behind


def test_newest_first_leaves_out_copies_set_aside_and_the_one_asked(tmp_path: Path) -> None:
    import os

    for age, name in enumerate(["c", "b", "a", "a.damaged", "x"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    assert [p.name for p in newest_first(tmp_path, "?")] == ["c", "b", "a", "x"]
    assert [p.name for p in newest_first(tmp_path, "[abc]*", leaving_out=tmp_path / "b")] == [
        "c",
        "a",
    ]
    assert newest_first(tmp_path / "absent", "*") == []
