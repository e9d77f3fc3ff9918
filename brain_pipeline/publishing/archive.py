"""Local copies of the last K publications, content-addressed, so a rollback has bytes.

Layout: `layout.published_archive/objects/<sha256>/<filename>` (the store, its vectors
and the manifest exactly as published). A file goes in by hard link from the live copy
the commit just renamed into place (live files are only ever replaced by rename, never
written in place, so the link keeps the published bytes even after the next
publication), or by an atomic copy when the archive is on another filesystem. An
object already archived is not touched, so an unchanged store costs nothing and K
generations cost K distinct sets at most.

`prune` keeps the objects of the generations rollback can still reach
(`History.generations(keep)`) and deletes the rest.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.utils.atomic import atomic_writer

OBJECTS_DIRNAME = "objects"


def object_path(archive: Path, sha256: str, filename: str) -> Path:
    return Path(archive) / OBJECTS_DIRNAME / sha256 / filename


def keep_copy(archive: Path, source: Path, sha256: str, size: int) -> Path:
    """Archive `source` (already verified to hold `sha256`, `size`) and return its path."""
    target = object_path(archive, sha256, source.name)
    with contextlib.suppress(FileNotFoundError):
        if target.stat().st_size == size:
            return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.link")
    temp.unlink(missing_ok=True)
    try:
        os.link(source, temp)
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        with atomic_writer(target) as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
    return target


def keep_bytes(archive: Path, data: bytes, sha256: str, filename: str) -> Path:
    """Archive a small file made in memory (the manifest)."""
    target = object_path(archive, sha256, filename)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(target) as out:
            out.write(data)
    return target


@dataclass(frozen=True)
class Missing:
    """One archived file a rollback needs and cannot use."""

    filename: str
    sha256: str
    path: Path
    why: str

    def describe(self) -> str:
        return f"{self.filename} (sha256 {self.sha256[:16]}): {self.path} {self.why}"


def missing_files(archive: Path, wanted: Mapping[str, tuple[str, int]]) -> list[Missing]:
    """Which of `wanted` (filename -> (sha256, size)) the archive cannot supply. Checks
    presence and size only; the bytes are verified as they are staged (sha256)."""
    problems: list[Missing] = []
    for filename, (sha, size) in sorted(wanted.items()):
        path = object_path(archive, sha, filename)
        try:
            actual = path.stat().st_size
        except FileNotFoundError:
            problems.append(Missing(filename, sha, path, "is gone (pruned or deleted)"))
            continue
        if actual != size:
            problems.append(Missing(filename, sha, path, f"has {actual} bytes, not {size}"))
    return problems


def prune(archive: Path, keep: Iterable[str]) -> list[Path]:
    """Delete archived objects whose sha256 is not in `keep`; return what went."""
    root = Path(archive) / OBJECTS_DIRNAME
    wanted = set(keep)
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for directory in sorted(root.iterdir()):
        if directory.name in wanted or not directory.is_dir():
            continue
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed
