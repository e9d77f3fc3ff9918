"""What the pipeline remembers between runs, as one value a step is handed.

`Memory` bundles the three places state lives: the ledger (what was built from what,
verdicts, publications, pointers, claims), the content-addressed blobs (the artifacts
those rows name) and the local build directory, which is only a cache a worker may start
without. Steps and the modules below them take a `Memory` (or just the part they need)
instead of rebuilding paths and connections from a build directory each time;
`open_memory` keeps one per build directory, process and thread (a database connection
must cross neither): the one cache, whether the configuration (`config.memory_of`) or
only a build directory (`memory_for_layout`) asks.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from brain_pipeline.state.blobs import BlobStore, blob_store
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, sqlite_path, sqlite_url


@dataclass(frozen=True)
class Memory:
    """The ledger, the blobs and the local cache folder of one configuration."""

    ledger: Ledger
    blobs: BlobStore
    layout: StateLayout
    """The build directory: working copies and caches, never the only copy of history."""


_OPEN: dict[tuple[Path, int, int], tuple[tuple[str, str], Memory]] = {}
"""Per build directory, process and thread: the ledger and blob URLs, and their memory."""


def _where(layout: StateLayout) -> tuple[Path, int, int]:
    return (layout.build_dir, os.getpid(), threading.get_ident())


def open_memory(
    layout: StateLayout,
    ledger_url: str,
    blobs_url: str,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
) -> Memory:
    """The memory at these places for `layout`'s build directory, opened once per process
    and thread (a connection crosses neither) and reused after: `config.memory_of` asks
    with the configuration's places, `memory_for_layout` finds what it opened. Opened
    anew when the places change, and the ledger when its SQLite file was removed under
    its connection (the build directory was deleted)."""
    where, urls = _where(layout), (ledger_url, blobs_url)
    known = _OPEN.get(where)
    if known is not None and known[0] == urls:
        memory = known[1]
        if memory.ledger.backend != "sqlite" or sqlite_path(ledger_url).exists():
            return memory
        memory = Memory(Ledger(ledger_url), memory.blobs, layout)
    else:
        blobs = blob_store(blobs_url, region=region, endpoint_url=endpoint_url)
        memory = Memory(Ledger(ledger_url), blobs, layout)
    _OPEN[where] = (urls, memory)
    return memory


def memory_for_layout(layout: StateLayout) -> Memory:
    """The memory opened for `layout`'s build directory by this process and thread, else
    the default one (the SQLite ledger and the blob folder inside it), for the code that
    only knows a build directory."""
    known = _OPEN.get(_where(layout))
    urls = known[0] if known else (sqlite_url(layout.ledger), str(layout.blobs_dir))
    return open_memory(layout, *urls)
