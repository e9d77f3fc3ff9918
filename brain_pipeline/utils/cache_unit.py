"""A cache entry written as one unit: named numpy arrays and a little JSON in one folder.

The local caches of arrays (BM25 postings and area versions, the store's sidecar index)
are such folders, each named by the digest of what it holds and of the code that writes
it, so an entry is never changed once written. Written into a temporary sibling renamed
into place (`atomic_directory`): a reader sees all of it or none, and when two writers
race the first whole copy is kept. Read back memory-mapped (pages are read when used)
and checked as it is read: a member missing or unreadable is damage (the folder was torn
or changed after it was renamed into place), and the folder is set aside whole and said
once (`utils.damage`), which the caller treats as a miss.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from brain_pipeline.utils.atomic import atomic_directory
from brain_pipeline.utils.damage import healed, is_set_aside
from brain_pipeline.utils.file_signature import mtime_ns

T = TypeVar("T")
META = "meta.json"
"""The member written last: the folder's list of arrays and whatever the cache adds."""


@dataclass(frozen=True)
class CacheUnit:
    """What a unit holds: its JSON (`meta`) and its arrays, memory-mapped."""

    meta: dict[str, Any]
    arrays: dict[str, Any]


def write_unit(directory: Path, arrays: Mapping[str, Any], **meta: Any) -> None:
    """Write `arrays` (`.npy` each) and `meta` as the unit `directory`, atomically; when
    another writer renamed its (identical, content-named) copy into place first, that
    copy is kept. OSError when it cannot be written."""
    with atomic_directory(directory, complete_when=META) as tmp:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        text = json.dumps({**meta, "arrays": sorted(arrays)}, indent=1)
        (tmp / META).write_text(text, encoding="utf-8")


def read_unit(
    directory: Path,
    read: Callable[[CacheUnit], T],
    *,
    what: str,
    consequence: str = "rebuilt (a cache miss)",
) -> T | None:
    """`read(unit)` of the unit at `directory`; None when there is none (or it cannot be
    read now), or when it is damaged: then it is set aside whole, named in one WARN line.
    `read` raises ValueError (or KeyError, ...) for members that do not fit together."""

    def whole() -> T:
        if not directory.is_dir():
            raise FileNotFoundError(directory)
        try:
            meta = json.loads((directory / META).read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or not isinstance(meta.get("arrays"), list):
                raise ValueError(f"{META} is not a cache unit's")
            arrays = {
                str(name): np.load(directory / f"{name}.npy", mmap_mode="r", allow_pickle=False)
                for name in meta["arrays"]
            }
        except FileNotFoundError as missing:
            gone = Path(str(missing.filename)).name
            raise ValueError(f"incomplete: {gone} is missing") from missing
        return read(CacheUnit(meta, arrays))

    try:
        return healed(directory, whole, what=what, consequence=consequence)
    except OSError:
        return None  # not cached (or not readable now): a miss


def newest_first(folder: Path, pattern: str, *, leaving_out: Path | None = None) -> list[Path]:
    """The entries of `folder` matching `pattern`, newest first: what a cache reuses
    (the last version of what changed) and prunes by. Copies set aside as damaged and
    `leaving_out` are not among them."""
    found = (p for p in folder.glob(pattern) if p != leaving_out and not is_set_aside(p))
    return sorted(found, key=mtime_ns, reverse=True)
