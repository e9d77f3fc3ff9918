"""Start-up cost of the commands that import Dagster.

Importing Dagster, its storage layer (SQLAlchemy, Alembic) and the code location
allocates about a million objects that live as long as the process. CPython's cyclic
garbage collector runs a young-generation pass every 700 allocations and older passes
after that, so while these modules load it scans the same long-lived objects again and
again: about a tenth of a one-edit run's CPU at 19k chunks (benchmarks/bench_run_cost.py).
`imports_without_collection` pauses collection while they load and then freezes what
was loaded (`gc.freeze`: moved to a permanent generation that later passes skip), so
the run itself collects as usual, over only its own objects.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def imports_without_collection() -> Iterator[None]:
    """No cyclic collection inside the block; what it allocated is frozen after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
