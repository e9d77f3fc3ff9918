"""The legacy baseline over the store view, with per-chunk term matches cached.

The baseline scores a chunk by how many query terms occur in its lower-cased content
as substrings, so it has no index: run plainly it decodes and lower-cases every chunk of
every fixture area and tests every term against it (25 CPU-s at 1.1M chunks). What it
needs per chunk is only one bit per fixture term (does the term occur in the content?).
Chunk ids hash content, so those bits never change for an id: they are cached under
`layout.bm25_dir/legacy-v<N>-<terms digest>/`, keyed by chunk id, and an edit only
tests the new chunks. Answers are those of `LegacyRetriever` (same terms, duplicates
counted, stable order by score, ties in store order).
"""

from __future__ import annotations

import io
import shutil
import zipfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.store_reader import IdLookup, StoreView
from brain_pipeline.evaluation.legacy import legacy_terms
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import sha256_hex

LEGACY_CACHE_VERSION = 1
_BATCH = 65_536
_MAX_SEGMENTS = 48
_KEEP_DIRS = 2
_UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)

LegacyRanker = Callable[[str, str, int], list[str]]
"""(query, area, limit) -> ids, as `LegacyRetriever.search` would rank them."""


class LegacyMatches:
    """Which of a fixed list of terms occur in which chunk, for the areas asked about."""

    def __init__(self, view: StoreView, layout: StateLayout | None, terms: Sequence[str]) -> None:
        self.view = view
        self.terms = list(dict.fromkeys(terms))
        self._column = {term: i for i, term in enumerate(self.terms)}
        digest = sha256_hex("\n".join(self.terms).encode("utf-8"))[:24]
        self.directory = (
            layout.bm25_dir / f"legacy-v{LEGACY_CACHE_VERSION}-{digest}" if layout else None
        )
        self._areas: dict[str, npt.NDArray[np.uint8]] = {}
        self._loaded: list[tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint8]]] | None = None
        self.tested = 0
        """Chunks whose content was tested here (the others came from the cache)."""

    def search(self, query: str, area: str, limit: int) -> list[str]:
        """The baseline's top `limit` ids of `area` for `query`."""
        terms = legacy_terms(query)
        if not terms or limit <= 0:
            return []
        matrix = self._matrix(area)
        columns = [self._column[t] for t in terms if t in self._column]
        if len(columns) != len(terms):
            raise KeyError("a query term outside the cached terms")
        scores = matrix[:, columns].sum(axis=1, dtype=np.int64)
        rows = np.flatnonzero(scores > 0)
        order = rows[np.argsort(-scores[rows], kind="stable")][:limit]
        ids = self.view.id_array[self.view.rows_of_area(area)[order]]
        return [bytes(i).decode("utf-8") for i in ids]

    # -- the per-area match matrix ------------------------------------------------------

    def _matrix(self, area: str) -> npt.NDArray[np.uint8]:
        matrix = self._areas.get(area)
        if matrix is None:
            matrix = self._areas[area] = self._build(area)
        return matrix

    def _segments(self) -> list[tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint8]]]:
        """The cached matches, read once per object (every area looks them up)."""
        if self._loaded is None:
            self._loaded = self._read_segments()
        return self._loaded

    def _read_segments(self) -> list[tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint8]]]:
        if self.directory is None or not self.directory.is_dir():
            return []
        paths = sorted(self.directory.glob("seg-*.npz"))
        if len(paths) > _MAX_SEGMENTS:  # bounded: start over rather than grow forever
            shutil.rmtree(self.directory, ignore_errors=True)
            return []
        out = []
        for path in paths:
            try:  # damaged: set aside and said once; its chunks are tested again
                ids, matches = healed(
                    path,
                    partial(_read_segment, path),
                    what="legacy-baseline matches",
                    consequence="its chunks are tested again",
                )
            except _UNREADABLE:
                continue
            if matches.shape == (len(ids), len(self.terms)):
                out.append((ids, matches))
        return out

    def _build(self, area: str) -> npt.NDArray[np.uint8]:
        rows = self.view.rows_of_area(area)
        ids = self.view.id_array[rows]
        matrix = np.zeros((len(rows), len(self.terms)), dtype=np.uint8)
        found = np.zeros(len(rows), dtype=bool)
        lookup = IdLookup(ids)
        for seg_ids, matches in self._segments():
            if found.all():
                break
            pos, hit = lookup.find(seg_ids)
            hit &= ~found
            matrix[hit] = matches[pos[hit]]
            found |= hit
        missing = np.flatnonzero(~found)
        for start in range(0, len(missing), _BATCH):
            batch = missing[start : start + _BATCH]
            chunks = self.view.chunks_at(rows[batch])
            fresh = np.array(
                [[term in c.content.lower() for term in self.terms] for c in chunks],
                dtype=np.uint8,
            ).reshape(len(batch), len(self.terms))
            matrix[batch] = fresh
            self.tested += len(batch)
            self._save(ids[batch], fresh)
        return matrix

    def _save(self, ids: npt.NDArray[np.bytes_], matches: npt.NDArray[np.uint8]) -> None:
        if self.directory is None:
            return
        unique, first = np.unique(ids, return_index=True)
        buffer = io.BytesIO()
        np.savez(buffer, ids=unique, matches=matches[first])
        name = f"seg-{sha256_hex(unique.tobytes())[:24]}.npz"
        try:
            atomic_write_bytes(self.directory / name, buffer.getvalue())
            _prune(self.directory)
        except OSError:
            pass  # read-only: computed, not remembered


def _read_segment(path: Path) -> tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint8]]:
    with np.load(path, allow_pickle=False) as saved:
        return saved["ids"], saved["matches"]


def _prune(current: Path) -> None:
    """Keep the match caches of the current fixture's terms and one other."""
    others = sorted(
        (p for p in current.parent.glob("legacy-v*") if p != current),
        key=lambda p: p.stat().st_mtime_ns,
        reverse=True,
    )
    for stale in others[_KEEP_DIRS - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)
