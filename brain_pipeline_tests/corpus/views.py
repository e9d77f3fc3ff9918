"""Forgetting the store views this process memoised, as a new process starts without them.

`store_reader` keeps one memory-mapped view per store file for the life of the process;
only tests need to empty that memo (to read the sidecars back from disk as the next
process would, or to let go of a full disk's mapped files).
"""

from __future__ import annotations

from brain_pipeline.corpus import store_reader


def clear_views() -> None:
    with store_reader._VIEWS_LOCK:
        store_reader._VIEWS.clear()
