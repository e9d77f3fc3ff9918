"""What the pipeline remembers between runs, as one value a step is handed.

`Memory` bundles the three places state lives: the ledger (what was built from what,
verdicts, publications, pointers, claims), the content-addressed blobs (the artifacts
those rows name) and the local build directory, which is only a cache a worker may start
without. Steps and the modules below them take a `Memory` (or just the part they need)
instead of rebuilding paths and connections from a build directory each time;
`config.memory_of` opens one per process and thread, because a database connection must
not cross either.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.state.blobs import BlobStore
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger


@dataclass(frozen=True)
class Memory:
    """The ledger, the blobs and the local cache folder of one configuration."""

    ledger: Ledger
    blobs: BlobStore
    layout: StateLayout
    """The build directory: working copies and caches, never the only copy of history."""


_OPEN: dict[tuple[Path, int, int], Memory] = {}


def _where(layout: StateLayout) -> tuple[Path, int, int]:
    return (layout.build_dir, os.getpid(), threading.get_ident())


def remember_memory(memory: Memory) -> Memory:
    """Make `memory` the one `memory_for_layout` finds for its build directory (in this
    process and thread): `config.memory_of` registers each it opens."""
    _OPEN[_where(memory.layout)] = memory
    return memory


def memory_for_layout(layout: StateLayout) -> Memory:
    """The memory opened for `layout`'s build directory by this process and thread, else
    the default one (the SQLite ledger and the blob folder inside it), for the code that
    only knows a build directory."""
    from brain_pipeline.state.blobs import LocalBlobs
    from brain_pipeline.state.ledger import Ledger, sqlite_path, sqlite_url

    memory = _OPEN.get(_where(layout))
    if memory is None:
        memory = Memory(Ledger(sqlite_url(layout.ledger)), LocalBlobs(layout.blobs_dir), layout)
    elif memory.ledger.backend == "sqlite" and not sqlite_path(memory.ledger.url).exists():
        # The build directory was removed under an open connection: open the new file.
        memory = Memory(Ledger(memory.ledger.url), memory.blobs, layout)
    _OPEN[_where(layout)] = memory
    return memory
