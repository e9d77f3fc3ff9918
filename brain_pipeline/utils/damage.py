"""Damage to a file the pipeline keeps between runs: found, set aside, said once.

Every cache opener in the build directory goes through `healed`: it opens the file with
the opener it is given; when that fails in a way that means the bytes are damaged (torn,
truncated, overwritten, not the format), the file is moved aside to `<name>.damaged`
(replacing an older one: one copy is kept for inspection), one WARN line names it and
says what happens instead, and the opener runs again on the now-missing file, which
every cache treats as a miss. Errors that are not damage (a full disk, a lock, no
permission) are raised unchanged: setting a good file aside would lose it for nothing.

The WARN goes to the `brain_pipeline.damage` logger; the Dagster layer forwards it to
the run's log, the CLI prints it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("brain_pipeline.damage")


def print_report(message: str) -> None:
    """A damage report where no run log takes it: one line on stderr."""
    import sys

    print(f"brain-pipeline: warning: {message}", file=sys.stderr, flush=True)

T = TypeVar("T")

DAMAGED_SUFFIX = ".damaged"
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def is_damage(error: BaseException) -> bool:
    """True when `error` says the file's bytes are damaged, not that the system failed."""
    if isinstance(error, sqlite3.DatabaseError):
        # OperationalError (locked, disk full, I/O) and friends are not damage.
        return type(error) is sqlite3.DatabaseError
    if isinstance(error, FileNotFoundError):
        return False  # a missing file is an ordinary miss, nothing to set aside
    if isinstance(error, OSError):
        # numpy reports bytes that are no array this way; the system's errors carry errno.
        return error.errno is None
    return isinstance(
        error, zipfile.BadZipFile | EOFError | ValueError | KeyError | TypeError | IndexError
    )


def set_aside(path: Path, *, what: str, consequence: str, cause: BaseException | None) -> Path:
    """Move a damaged file (and SQLite's companions) to `<name>.damaged`; one WARN line.

    `path` may be a directory written as one unit (BM25 postings, an area index): the
    whole directory is set aside, since its files only make sense together. An older
    `.damaged` copy is replaced, so damage found again and again keeps one copy.
    """
    target = set_aside_copy(path)
    if path.is_dir() and not path.is_symlink():
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        elif target.exists() or target.is_symlink():
            target.unlink()
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, target)
    for suffix in SQLITE_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.replace(companion, target.with_name(target.name + suffix))
    reason = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    log.warning(f"damaged {what} {path}{reason}: moved to {target.name}; {consequence}")
    return target


def healed(
    path: Path,
    opener: Callable[[], T],
    *,
    what: str,
    consequence: str = "rebuilt (a cache miss)",
) -> T:
    """`opener()`, or, when it finds `path` damaged, `opener()` again with `path` set aside."""
    try:
        return opener()
    except Exception as error:
        if not is_damage(error):
            raise
        set_aside(path, what=what, consequence=consequence, cause=error)
    return opener()


def set_aside_copy(path: Path) -> Path:
    """Where `set_aside` keeps the damaged copy of `path`."""
    return path.with_name(path.name + DAMAGED_SUFFIX)


def is_set_aside(path: Path) -> bool:
    """True for a copy `set_aside` kept: globs of a cache's own files must skip it."""
    return path.name.endswith(DAMAGED_SUFFIX)


def check_sqlite(conn: sqlite3.Connection, path: Path) -> None:
    """Raise sqlite3.DatabaseError when `path` is not a whole SQLite database.

    Reading the schema catches overwritten bytes ("file is not a database"); a file
    shorter than the pages its header counts is truncated (only trusted when no
    write-ahead log holds pages the main file does not have yet).
    """
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    if path.exists() and path.stat().st_size < pages * size:
        raise sqlite3.DatabaseError(
            f"truncated: {path.stat().st_size} bytes, the header counts {pages * size}"
        )
