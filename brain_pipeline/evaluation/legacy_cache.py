"""Where the legacy baseline keeps its per-chunk term matches between processes.

The baseline (`evaluation.legacy`) needs, per chunk, one bit per fixture term: does the
term occur in the chunk's content? Chunk ids hash content, so those bits never change
for an id. This module only stores and finds them; what they mean is `legacy`'s.

One directory per term list (`legacy.cache_directory`) holds one table per area version
it saw: the area's ids in store order and their match bits, named by the area (hashed)
and the digest of its ids. An unchanged area is one exact file (no lookup); an edited
area finds its chunks by id in the area's previous tables (newest first), then in the
others, so only chunks never seen are tested. Each area keeps its newest few tables.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import IdLookup, id_keys
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import sha256_hex
from brain_pipeline.utils.file_signature import mtime_ns

_KEEP_PER_AREA = 2
_WORTH_A_TABLE = 2_048
"""Missing ids below which reading one more table costs more than testing them: a table
of a 275k-chunk area takes ~50-100 ms to read and search, testing a chunk ~20-50 µs."""
_KEEP_OTHER_TERM_LISTS = 1
_UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)

Matches = npt.NDArray[np.uint8]


def _area_key(area: str) -> str:
    return sha256_hex(area.encode("utf-8"))[:12]


class LegacyMatchCache:
    """The cached match tables of one term list (`n_terms` columns) in `directory`."""

    def __init__(
        self, directory: Path, n_terms: int, *, worth_a_table: int = _WORTH_A_TABLE
    ) -> None:
        self.directory = directory
        self.n_terms = n_terms
        self.worth_a_table = worth_a_table

    def _path(self, area: str, digest: str) -> Path:
        return self.directory / f"{_area_key(area)}-{digest[:24]}.npz"

    def _read(self, path: Path) -> tuple[npt.NDArray[np.bytes_], Matches] | None:
        """A table's ids and (unpacked) matches, or None when unreadable: damaged bytes are
        set aside and said once (utils.damage), and its chunks are tested again."""

        def load() -> tuple[npt.NDArray[np.bytes_], npt.NDArray[np.uint8]]:
            with np.load(path, allow_pickle=False) as saved:
                return saved["ids"], saved["bits"]

        try:
            ids, bits = healed(
                path,
                load,
                what="legacy-baseline matches",
                consequence="its chunks are tested again",
            )
        except _UNREADABLE:
            return None
        if bits.ndim != 2 or len(bits) != len(ids) or bits.shape[1] != -(-self.n_terms // 8):
            return None
        return ids, np.unpackbits(bits, axis=1, count=self.n_terms)

    def exact(self, area: str, digest: str, ids: npt.NDArray[np.bytes_]) -> Matches | None:
        """The matches of exactly these ids (the area's store order), when saved before."""
        path = self._path(area, digest)
        table = self._read(path) if path.is_file() else None
        if table is None or not np.array_equal(table[0], ids):
            return None
        return table[1]

    def _tables(self, area: str) -> list[Path]:
        """The saved tables, the area's own first, each group newest first."""
        if not self.directory.is_dir():
            return []
        own = f"{_area_key(area)}-"
        paths = sorted(self.directory.glob("*.npz"), key=mtime_ns, reverse=True)
        return [p for p in paths if p.name.startswith(own)] + [
            p for p in paths if not p.name.startswith(own)
        ]

    def lookup(
        self, area: str, ids: npt.NDArray[np.bytes_]
    ) -> tuple[Matches, npt.NDArray[np.bool_]]:
        """Per id: its saved matches (zeros when unknown) and whether they were found.

        Tables are read until fewer than `worth_a_table` ids are missing, so an id may be
        reported missing although some table has it: the caller then tests it again.
        """
        matrix = np.zeros((len(ids), self.n_terms), dtype=np.uint8)
        found = np.zeros(len(ids), dtype=bool)
        if len(ids) == 0:
            return matrix, found
        lookup = IdLookup(ids)
        for path in self._tables(area):
            table = self._read(path)
            if table is None:
                continue
            table_ids, matches = table
            keys = id_keys(table_ids)  # integers sort several times faster than S12
            order = np.argsort(keys if keys is not None else table_ids, kind="stable")
            pos, hit = lookup.find(table_ids[order])
            hit &= ~found
            matrix[hit] = matches[order[pos[hit]]]
            found |= hit
            if len(found) - int(np.count_nonzero(found)) < self.worth_a_table:
                break  # the rest (usually the chunks an edit added) are cheaper to test
        return matrix, found

    def save(
        self, area: str, digest: str, ids: npt.NDArray[np.bytes_], matches: Matches
    ) -> None:
        """Remember the area version's matches (a read-only directory only loses the cache)."""
        buffer = io.BytesIO()
        np.savez(buffer, ids=ids, bits=np.packbits(matches, axis=1))
        try:
            atomic_write_bytes(self._path(area, digest), buffer.getvalue())
            self._prune(area)
        except OSError:
            pass  # read-only: computed, not remembered

    def _prune(self, area: str) -> None:
        """Keep each area's newest tables, and one other term list's directory."""
        own = f"{_area_key(area)}-"
        mine = [p for p in self._tables(area) if p.name.startswith(own)]
        for stale in mine[_KEEP_PER_AREA:]:
            with contextlib.suppress(OSError):
                stale.unlink()
        others = sorted(
            (p for p in self.directory.parent.glob("legacy-*") if p != self.directory),
            key=mtime_ns,
            reverse=True,
        )
        for stale_dir in others[_KEEP_OTHER_TERM_LISTS:]:
            shutil.rmtree(stale_dir, ignore_errors=True)


