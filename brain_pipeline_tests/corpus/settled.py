"""Fixtures for the incremental ingest core: a corpus folder, a build dir, a clock."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from brain_pipeline.state.layout import StateLayout

#: A fixed "now" far after every mtime the tests set, so files count as settled.
NOW_NS = 2_000_000_000 * 10**9
#: The mtime the tests give files (a day before NOW_NS).
SETTLED_NS = NOW_NS - 86_400 * 10**9

# Each write gets its own mtime, a second after the previous one: an edit is visible
# to the index by its mtime, as on a real filesystem, yet every file stays settled.
_MTIMES = itertools.count(SETTLED_NS, 10**9)

Writer = Callable[[str, "str | bytes"], Path]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    return root


@pytest.fixture
def layout(tmp_path: Path) -> StateLayout:
    return StateLayout.of(tmp_path / "build")


def put(path: Path, content: str | bytes, mtime_ns: int | None = None) -> Path:
    """Write a file and give it `mtime_ns`, or a new settled mtime when not told."""
    mtime_ns = next(_MTIMES) if mtime_ns is None else mtime_ns
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


@pytest.fixture
def write(corpus: Path) -> Writer:
    """write("area/dir/file.md", text or bytes) -> path, with a settled mtime."""
    return lambda relative, content: put(corpus / relative, content)


def settle(root: Path) -> None:
    """Give every file under `root` the settled mtime (builders write with fresh ones)."""
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path) and os.path.isfile(path):
                os.utime(path, ns=(SETTLED_NS, SETTLED_NS))
