"""The agent's original keyword retriever, kept only as the evaluation's baseline.

Nothing under `brain_pipeline.retrieval` can select it: it exists so every evaluation
shows how far BM25 and hybrid retrieval moved from where the agent started.

Semantics (the agent's JavaScript): split the lower-cased query on whitespace, keep terms
longer than 2 characters (not de-duplicated: a repeated term counts twice); a chunk in
the query's area scores one point per term that occurs anywhere in its lower-cased
content as a substring; keep positive scores; a stable sort by score, so ties keep store
order; the first `limit`.

There is one implementation, for chunks in memory and for the memory-mapped store alike:
per area, a match matrix (one row per chunk in store order, one column per term: does
the term occur in the chunk?) computed by `term_matches`, and `rank_matches` over it.
The baseline has no index, so on a big store computing the matrix is what costs (every
chunk of every asked area decoded, lower-cased and tested); a source that names a cache
directory keeps the matrices there (`LegacyMatchCache`), keyed by chunk id, and an edit
only tests the chunks that are new.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import IdLookup, id_keys
from brain_pipeline.corpus.jscompat import JS_WS_CLASS, utf16_length
from brain_pipeline.retrieval.hybrid import ChunkSource
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import ids_digest, sha256_hex
from brain_pipeline.utils.file_signature import mtime_ns

# JavaScript's \s (jscompat): Python's str.split() differs (it splits on \x1c-\x1f, not
# on U+FEFF).
_JS_WHITESPACE = re.compile(f"[{JS_WS_CLASS}]+")
_BATCH = 65_536  # chunks decoded and tested at a time (bounds the decoded texts held)
_KEEP_PER_AREA = 2
_WORTH_A_TABLE = 2_048
"""Missing ids below which reading one more table costs more than testing them: a table
of a 275k-chunk area takes ~50-100 ms to read and search, testing a chunk ~20-50 µs."""
_KEEP_OTHER_TERM_LISTS = 1
_UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)

Matches = npt.NDArray[np.uint8]
"""(chunks, terms) of 0/1: whether each term occurs in each chunk's lower-cased content."""


def legacy_terms(query: str) -> list[str]:
    """Whitespace-split lower-cased query terms longer than 2 characters, duplicates kept."""
    return [t for t in _JS_WHITESPACE.split(query.lower()) if utf16_length(t) > 2]


def term_matches(contents: Sequence[str], terms: Sequence[str]) -> Matches:
    """The match matrix of `contents` (one row each) against `terms` (one column each):
    does the term occur as a substring of the lower-cased content?

    Each content is lower-cased once, not once per term: that repetition was two thirds
    of a cold evaluation's legacy cost (a scan per term over the texts is inherent to
    substring semantics, and runs in C).
    """
    matrix = np.zeros((len(contents), len(terms)), dtype=np.uint8)
    lowered = [text.lower() for text in contents]
    for column, term in enumerate(terms):
        matrix[:, column] = [term in text for text in lowered]
    return matrix


def rank_matches(matches: Matches, columns: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """The baseline's top `limit` (row, score): score = the columns' matches summed (a
    column listed twice counts twice), positive only, stable by score (ties: row order)."""
    if limit <= 0 or not columns or len(matches) == 0:
        return []
    scores = matches[:, list(columns)].sum(axis=1, dtype=np.int64)
    rows = np.flatnonzero(scores > 0)
    order = rows[np.argsort(-scores[rows], kind="stable")][:limit]
    return list(zip(order.tolist(), scores[order].tolist(), strict=True))


def cache_directory(root: Path, terms: Sequence[str]) -> Path:
    """Where the matches of `terms` are cached under `root` (one directory per term list)."""
    unique = list(dict.fromkeys(terms))
    digest = sha256_hex("\n".join(unique).encode("utf-8"))[:24]
    code = code_digest(__name__)[:12]
    return root / f"legacy-{code}-{digest}"


def _area_key(area: str) -> str:
    return sha256_hex(area.encode("utf-8"))[:12]


class LegacyMatchCache:
    """The cached match tables of one term list (`n_terms` columns) in `directory`.

    Chunk ids hash content, so an id's match bits never change. The directory holds one
    table per area version it saw: the area's ids in store order and their match bits,
    named by the area (hashed) and the digest of its ids. An unchanged area is one exact
    file (no lookup); an edited area finds its chunks by id in the area's previous tables
    (newest first), then in the others, so only chunks never seen are tested. Each area
    keeps its newest few tables.
    """

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


class LegacyBaseline:
    """The baseline over a `ChunkSource` for a fixed list of terms (a fixture's).

    Matrices are built per area on first use; with a cache (the source's `cache_dir`, or
    one given), only chunks whose id it does not know are decoded and tested.
    """

    def __init__(
        self,
        source: ChunkSource,
        terms: Sequence[str],
        cache: LegacyMatchCache | None = None,
    ) -> None:
        self.source = source
        self.terms = list(dict.fromkeys(terms))
        self._column = {term: i for i, term in enumerate(self.terms)}
        self.cache = cache
        self._areas: dict[str, Matches] = {}
        self.tested = 0
        """Chunks whose content was tested here (the others came from the cache)."""

    @classmethod
    def cached(cls, source: ChunkSource, terms: Sequence[str]) -> LegacyBaseline:
        """The baseline with its matches cached where the source keeps derived data."""
        root = source.cache_dir()
        unique = list(dict.fromkeys(terms))
        cache = LegacyMatchCache(cache_directory(root, unique), len(unique)) if root else None
        return cls(source, unique, cache)

    def search(self, query: str, area: str, limit: int = 10) -> list[tuple[int, int]]:
        """Top `limit` (position in the area, score) for `query`; KeyError for a query
        term outside `terms`."""
        terms = legacy_terms(query)
        if not terms or limit <= 0:
            return []
        columns = [self._column[term] for term in terms]
        return rank_matches(self.matrix(area), columns, limit)

    def search_ids(self, query: str, area: str, limit: int = 10) -> list[str]:
        """The ids of `search`'s hits, in rank order."""
        hits = self.search(query, area, limit)
        if not hits:
            return []
        ids = self.source.area_id_array(area)[[position for position, _ in hits]]
        return [bytes(i).decode("utf-8") for i in ids]

    def matrix(self, area: str) -> Matches:
        """The area's match matrix (built, or assembled from the cache, once)."""
        matrix = self._areas.get(area)
        if matrix is None:
            matrix = self._areas[area] = self._build(area)
        return matrix

    def _build(self, area: str) -> Matches:
        ids = self.source.area_id_array(area)
        if self.cache is None:
            matrix = np.zeros((len(ids), len(self.terms)), dtype=np.uint8)
            found = np.zeros(len(ids), dtype=bool)
        else:
            digest = ids_digest(ids)
            exact = self.cache.exact(area, digest, ids)
            if exact is not None:
                return exact
            matrix, found = self.cache.lookup(area, ids)
        missing = np.flatnonzero(~found)
        for start in range(0, len(missing), _BATCH):
            batch = missing[start : start + _BATCH]
            chunks = self.source.area_chunks_at(area, batch)
            matrix[batch] = term_matches([c.content for c in chunks], self.terms)
            self.tested += len(batch)
        if self.cache is not None:
            self.cache.save(area, digest, ids, matrix)
        return matrix
