"""utils.startup: no cyclic collection while Dagster loads, what it loaded frozen after."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from brain_pipeline.utils.startup import imports_without_collection


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def test_no_collection_inside_and_what_it_allocated_is_frozen_after() -> None:
    gc.enable()
    frozen_before = gc.get_freeze_count()
    collections_before = sum(stat["collections"] for stat in gc.get_stats())
    with imports_without_collection():
        assert not gc.isenabled()
        kept = [[index] for index in range(50_000)]  # would trigger young collections
        assert sum(stat["collections"] for stat in gc.get_stats()) == collections_before
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(kept)


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    with imports_without_collection():
        pass
    assert not gc.isenabled()


def test_collection_resumes_when_the_block_raises() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), imports_without_collection():
        raise RuntimeError("an import failed")
    assert gc.isenabled()
