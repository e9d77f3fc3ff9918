"""Atomic file replacement: a reader sees the old bytes or the new bytes, never a mix.

Every artifact this project writes goes through here (the store, embeddings, the
embedding checkpoint, published copies, manifests) so that an interrupted run can
never leave a torn file behind.

Permissions follow the process umask, as for a file any other tool creates: a new file
is created with mode 0o666 and a directory with 0o777, and the kernel takes the umask
off (umask 022: 0644 and 0755; umask 077: 0600 and 0700). A replaced file gets the
mode a new one would, not the old file's: what decides who may read a publication is
the umask of the process that writes it (set it for the UI, the daemon and the CLI
alike), never a mode left behind by an earlier run.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TypeVar

T = TypeVar("T")


def _fsync_directory(directory: Path) -> None:
    """Persist the rename itself; without it a power loss can undo the replacement."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


_ATTEMPTS = 100


def _temporary_name(target: Path) -> Path:
    return target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"


def _create_beside(target: Path, create: Callable[[Path], T]) -> tuple[T, Path]:
    """`create(name)` on a new temporary name in `target`'s directory, which `create` must
    make exclusively (a taken name raises FileExistsError and another is tried).

    Files are made with mode 0o666 and directories 0o777, less the umask: what
    `tempfile.mkstemp`/`mkdtemp` do, except that they always make 0600/0700, and a chmod
    afterwards would override the umask instead of following it.
    """
    for _ in range(_ATTEMPTS):
        tmp = _temporary_name(target)
        try:
            return create(tmp), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
"""Created exclusively: never an existing file or a symlink, opened for writing."""


@contextlib.contextmanager
def atomic_writer(path: Path | str) -> Iterator[BinaryIO]:
    """Yield a binary file in the target's directory; rename it over `path` on success.

    The temporary file lives in the same directory so the final `os.replace` is a
    same-filesystem rename (atomic on POSIX). On any exception the temporary file is
    removed and the previous content of `path` is untouched. Its mode follows the
    umask (see the module).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(target, lambda name: os.open(name, _NEW_FILE, 0o666))
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _fsync_directory(target.parent)


@contextlib.contextmanager
def atomic_directory(path: Path | str, complete_when: str) -> Iterator[Path]:
    """Yield a temporary sibling directory to fill; rename it to `path` on success.

    A reader sees the whole directory or none. Directories written this way are
    content-named, so when another writer renamed its copy into place first (the
    rename fails on a non-empty target) that copy is kept, provided it has the file
    `complete_when`; otherwise the failure is raised. The temporary directory is
    removed on any exit.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _, tmp = _create_beside(target, lambda name: os.mkdir(name, 0o777))
    try:
        yield tmp
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / complete_when).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Replace `path` with `data` atomically (temp file, fsync, rename)."""
    with atomic_writer(path) as handle:
        handle.write(data)


def write_if_changed(path: Path | str, data: bytes) -> bool:
    """Atomically write `data` unless `path` already holds exactly these bytes.

    Returns True when the file was (re)written, False when it was already current, so
    callers can report "unchanged" and avoid touching mtimes that sensors watch.
    """
    target = Path(path)
    try:
        if target.stat().st_size == len(data) and target.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    atomic_write_bytes(target, data)
    return True
