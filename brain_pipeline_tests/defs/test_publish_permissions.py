"""Published files follow the umask of the process that publishes them: a run under
umask 077 publishes files only their owner can read (0600), one under umask 022 files
anyone may read (0644). See utils/atomic.py for why a replaced file does not keep the
old file's mode."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from brain_pipeline_tests.defs.conftest import Project


@contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _modes(root: Path) -> dict[str, int]:
    """Mode of every regular file under `root` (symlinks not followed)."""
    return {
        str(path.relative_to(root)): path.lstat().st_mode & 0o777
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


@pytest.mark.parametrize(("mask", "mode"), [(0o077, 0o600), (0o022, 0o644)])
def test_published_files_follow_the_umask(tiny_project: Project, mask: int, mode: int) -> None:
    with umask(mask):
        outcome = tiny_project.materialize()
    assert outcome.success, outcome.lines
    store = tiny_project.published() / "knowledge-store.json"
    assert store.is_file()
    published = _modes(tiny_project.publish_root)
    assert published and set(published.values()) == {mode}, published
    assert set(_modes(tiny_project.build).values()) == {mode}


def test_a_republish_under_a_tighter_umask_tightens_the_files(tiny_project: Project) -> None:
    with umask(0o022):
        assert tiny_project.materialize().success
    store = tiny_project.published() / "knowledge-store.json"
    assert store.stat().st_mode & 0o777 == 0o644
    notes = tiny_project.corpus / "alpha" / "notes.md"
    notes.write_text(notes.read_text() + "\nRoute tables decide where traffic goes.\n")
    with umask(0o077):
        assert tiny_project.materialize().success
    assert store.stat().st_mode & 0o777 == 0o600
