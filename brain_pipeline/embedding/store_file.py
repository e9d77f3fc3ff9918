"""embeddings.bin on disk: the one reader every caller shares.

A missing file means "no vectors"; a file that is not a PATBEMB1 store is ignored with
a warning (never misread), so a build rebuilds it and a search falls back to BM25.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path

from brain_pipeline.retrieval.vectors import (
    Buffer,
    EmbeddingStore,
    NotAnEmbeddingStore,
    decode_embeddings,
)


def read_embeddings(
    path: Path, warn: Callable[[str], None] | None = None, *, mapped: bool = False
) -> EmbeddingStore | None:
    """Decode `path`, or None when it is absent or unreadable as a store (then `warn`).

    `mapped`: the vectors stay a read-only memory map of the file instead of a copy
    (searches and evaluations, which read a few areas' rows of up to 800 MB).
    """
    try:
        with Path(path).open("rb") as handle:
            if mapped and os.fstat(handle.fileno()).st_size:
                data: Buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            else:
                data = handle.read()
    except FileNotFoundError:
        return None
    try:
        return decode_embeddings(data, copy=not mapped)
    except NotAnEmbeddingStore as exc:
        if warn is not None:
            warn(f"ignored {Path(path).name}: {exc}")
        return None
