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

from dataclasses import dataclass

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
