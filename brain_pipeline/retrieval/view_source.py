"""A Retriever's chunks straight from a StoreView, with the cached BM25 indexes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import id_keys
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.corpus.store_reader import StoreView
from brain_pipeline.retrieval.bm25 import BM25Index
from brain_pipeline.retrieval.bm25_cache import bm25_cache
from brain_pipeline.retrieval.hybrid import ChunkSource
from brain_pipeline.state.layout import StateLayout


class _SortedIds:
    """Finds the first position of an id in a fixed id array by binary search.

    An evaluation looks up each hit by id; a dict of an area's quarter of a million ids
    would cost ~0.3 s and ~50 MB per area, the sorted copy (of chunk ids as integers,
    see `id_keys`) ~15 ms and 2 MB.
    """

    def __init__(self, ids: npt.NDArray[np.bytes_]) -> None:
        self._keys = id_keys(ids)
        base: Any = self._keys if self._keys is not None else ids
        self._order = np.argsort(base, kind="stable")  # equal ids: the first one first
        self._sorted = base[self._order]

    def first(self, key: bytes) -> int | None:
        needle: Any = key
        if self._keys is not None:
            keys = id_keys(np.array([key]))
            if keys is None:
                return None  # not a chunk id, so none of these
            needle = keys[0]
        i = int(np.searchsorted(self._sorted, needle))
        if i < len(self._sorted) and self._sorted[i] == needle:
            return int(self._order[i])
        return None


class ViewSource(ChunkSource):
    """A Retriever's chunks straight from a StoreView, with cached BM25 indexes.

    Only what a query touches is decoded: the hits' chunk objects, and an area's ids
    when its vectors are needed; a whole area is parsed only for the legacy baseline.
    """

    def __init__(self, view: StoreView, layout: StateLayout | None) -> None:
        self.view = view
        self.cache = bm25_cache(view, layout)
        self._ids: dict[str, list[str]] = {}
        self._finders: dict[str, _SortedIds] = {}

    def areas(self) -> list[str]:
        return self.view.areas

    def area_ids(self, area: str) -> list[str]:
        ids = self._ids.get(area)
        if ids is None:
            rows = self.view.rows_of_area(area)
            ids = self._ids[area] = np.char.decode(self.view.id_array[rows], "utf-8").tolist()
        return ids

    def area_chunks(self, area: str) -> Sequence[Chunk]:
        return self.view.chunks_of_area(area)

    def chunk(self, area: str, chunk_id: str) -> Chunk:
        rows = self.view.rows_of_area(area)
        finder = self._finders.get(area)
        if finder is None:
            finder = self._finders[area] = _SortedIds(self.view.id_array[rows])
        position = finder.first(chunk_id.encode("utf-8"))
        if position is None:
            raise KeyError((area, chunk_id))
        return self.view.chunk_at(int(rows[position]))

    def bm25(self, area: str) -> BM25Index:
        return self.cache.index(area)

    def count(self) -> int:
        return len(self.view)

    def area_id_array(self, area: str) -> npt.NDArray[np.bytes_]:
        return self.view.id_array[self.view.rows_of_area(area)]

    def area_chunks_at(
        self, area: str, positions: Sequence[int] | npt.NDArray[np.intp]
    ) -> list[Chunk]:
        rows = self.view.rows_of_area(area)[np.asarray(positions, dtype=np.int64)]
        return self.view.chunks_at(rows)

    def cache_dir(self) -> Path | None:
        return self.cache.layout.bm25_dir if self.cache.layout is not None else None

    def with_ids(self, ids: set[str]) -> list[Chunk]:
        wanted = np.array(sorted(i.encode("utf-8") for i in ids)) if ids else None
        if wanted is None:
            return []
        rows = np.flatnonzero(np.isin(self.view.id_array, wanted))
        return self.view.chunks_at(rows)
