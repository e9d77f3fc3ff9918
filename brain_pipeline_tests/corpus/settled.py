"""Settled files for the incremental ingest tests (chunk cache, observation).

The corpus tests' `write` gives files the filesystem's fresh mtimes; the incremental core
trusts a recorded digest only for files whose mtime is settled, so these tests write with
mtimes a fixed clock (`NOW_NS`) counts as settled. A test module opts in with
`write = settled.write` (a module's fixture overrides the package conftest's).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

#: A fixed "now" far after every mtime the tests set, so files count as settled.
NOW_NS = 2_000_000_000 * 10**9
#: The mtime the tests give files (a day before NOW_NS).
SETTLED_NS = NOW_NS - 86_400 * 10**9

# Each write gets its own mtime, a second after the previous one: an edit is visible
# to the index by its mtime, as on a real filesystem, yet every file stays settled.
_MTIMES = itertools.count(SETTLED_NS, 10**9)

Writer = Callable[[str, "str | bytes"], Path]


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
