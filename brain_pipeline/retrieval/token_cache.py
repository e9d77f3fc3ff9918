"""Per-chunk BM25 term counts cached in the build directory, keyed by chunk id.

`tokens-<tokens_code()>/seg-*.npz` (under `layout.bm25_dir`, see
`retrieval.bm25_cache`): ids hash content, so a chunk's counts never change; postings
are assembled from them with a vectorised CSR build, and only chunks never seen before
are tokenised. Segments are immutable (written atomically under a content-derived name,
so concurrent writers never clash) and are merged, dropping chunks no longer in the
store, once there are more than `_MAX_SEGMENTS`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import zipfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import IdLookup, lookup_sorted
from brain_pipeline.retrieval.bm25 import BM25Postings, term_ids_of, terms_in_order
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import healed, is_damage, set_aside
from brain_pipeline.utils.digest import ids_digest

_MAX_SEGMENTS = 48
_TOKENISE_BATCH = 65_536

Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
_UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)
"""What reading a damaged or vanished segment raises: its chunks are tokenised again."""
_RETOKENISED = "its chunks are tokenised again"


@functools.cache
def tokens_code(root: Path | None = None) -> str:
    """Names the folder of the counts: the digest of the code that makes them (this
    module and what it imports: the tokeniser, the stemmer). An edit to it tokenises
    every chunk once, into a new folder; stale counts are never read. `root`: another
    copy of the package (tests)."""
    return code_digest(__name__, root=root)[:12]


class _Counts(NamedTuple):
    """A segment's term counts: CSR by row (`indptr`), each entry a term of `vocabulary`
    (its own numbering) and its count in that row's chunk."""

    indptr: Int64s
    terms: Int32s
    counts: Int32s
    vocabulary: list[str]


class _Segment:
    """Term counts of a set of chunks: rows sorted by id, CSR by row, own term list.

    A segment read from disk loads only its ids; the counts are read the first time a
    document of the segment is needed, so an edit in one area does not read the counts
    of every other area.
    """

    def __init__(
        self, ids: npt.NDArray[np.bytes_], data: _Counts | None = None, path: Path | None = None
    ) -> None:
        self.ids = ids
        self._data = data
        self._path = path

    @property
    def data(self) -> _Counts:
        """The counts (read from the segment's file on first use)."""
        if self._data is None:
            assert self._path is not None, "an in-memory segment has all its arrays"
            with np.load(self._path, allow_pickle=False) as saved:
                blob = saved["vocabulary"].tobytes()
                self._data = _Counts(
                    saved["indptr"],
                    saved["terms"],
                    saved["counts"],
                    blob.decode("ascii").split("\n") if blob else [],
                )
        return self._data

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        data = self.data
        blob = "\n".join(data.vocabulary).encode("ascii")
        np.savez(
            buffer,
            ids=self.ids,
            indptr=data.indptr,
            terms=data.terms,
            counts=data.counts,
            vocabulary=np.frombuffer(blob, dtype=np.uint8),
        )
        return buffer.getvalue()

    @classmethod
    def read(cls, path: Path) -> _Segment:
        """The segment at `path`, with only its ids read now."""
        with np.load(path, allow_pickle=False) as saved:
            if not {"ids", "indptr", "terms", "counts", "vocabulary"} <= set(saved.files):
                raise ValueError(f"{path.name}: not a token segment")
            return cls(saved["ids"], path=path)


def _by_row(
    ids: npt.NDArray[np.bytes_],
    rows: npt.NDArray[np.integer[Any]],
    terms: npt.NDArray[np.integer[Any]],
    counts: npt.NDArray[np.integer[Any]],
    vocabulary: list[str],
) -> _Segment:
    """The segment of `ids` (sorted) whose row `rows[i]` has `counts[i]` of `terms[i]`;
    the entries may come in any order (a row's keep their order)."""
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=len(ids)), out=indptr[1:])
    return _Segment(
        ids,
        _Counts(indptr, terms[order].astype(np.int32), counts[order].astype(np.int32), vocabulary),
    )


def _tokenised(ids: npt.NDArray[np.bytes_], texts: Sequence[str]) -> _Segment:
    """Tokenise `texts` (one per id, ids distinct) into a new segment sorted by id."""
    term_ids, token_docs, vocabulary = term_ids_of(texts)
    n = len(texts)
    keys = token_docs * max(len(vocabulary), 1) + term_ids
    pair_keys, counts = np.unique(keys, return_counts=True)  # doc-major
    docs = pair_keys // max(len(vocabulary), 1)
    terms = pair_keys - docs * max(len(vocabulary), 1)
    order = np.argsort(ids, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    # Re-number documents in id order, keeping each document's entries together.
    return _by_row(ids[order], rank[docs], terms, counts, terms_in_order(vocabulary))


def _ranges(starts: Int64s, stops: Int64s) -> Int64s:
    """Concatenation of arange(start, stop) for each pair, vectorised."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + offsets


class _Gather:
    """Collects (document, term, count) rows from several segments into one vocabulary.

    Rows are int32: an area of a quarter of a million chunks has ~11M of them, and the
    assembly's peak memory is a few copies of these arrays.
    """

    def __init__(self) -> None:
        self.terms: list[str] = []
        self._term_of: dict[str, int] = {}
        self.docs: list[Int32s] = []
        self.term_ids: list[Int32s] = []
        self.counts: list[Int32s] = []

    def add(self, segment: _Segment, docs: Int64s, rows: Int64s) -> None:
        """Document `docs[i]` has the counts of `segment` row `rows[i]`."""
        data = segment.data
        starts, stops = data.indptr[rows], data.indptr[rows + 1]
        positions = _ranges(starts, stops)
        local = data.terms[positions]
        words = data.vocabulary
        used = np.flatnonzero(np.bincount(local, minlength=len(words)))
        mapping = np.full(len(words), -1, dtype=np.int32)
        term_of = self._term_of
        known = len(self.terms)
        used_list = used.tolist()
        mapped = [term_of.setdefault(words[t], len(term_of)) for t in used_list]
        # New terms got consecutive numbers from `known` on, in this order.
        self.terms.extend(words[t] for t, m in zip(used_list, mapped, strict=True) if m >= known)
        mapping[used] = mapped
        self.docs.append(np.repeat(docs.astype(np.int32), stops - starts))
        self.term_ids.append(mapping[local])
        self.counts.append(data.counts[positions].astype(np.int32, copy=False))

    def rows(self) -> tuple[Int32s, Int32s, Int32s]:
        """Documents, terms and counts of the rows gathered, in the order added."""
        return _take(self.docs), _take(self.term_ids), _take(self.counts)

    def term_major(self, n_docs: int) -> tuple[Int32s, Int32s, Int32s]:
        """The rows as postings sorted by (term, document): terms, documents, counts.

        Each gathered list is joined, reordered and released in turn, so the peak is the
        sort keys and permutation plus about two copies of the rows, not six.
        """
        docs, terms = _take(self.docs), _take(self.term_ids)
        keys = terms.astype(np.int64) * max(n_docs, 1)
        keys += docs
        order = np.argsort(keys)  # (term, doc) pairs are distinct: no stability needed
        del keys
        post_docs = docs[order]
        del docs
        post_terms = terms[order]
        del terms
        tf = _take(self.counts)[order]
        return post_terms, post_docs, tf


def _take(parts: list[Int32s]) -> Int32s:
    """The parts joined; the list is emptied so the parts are not held twice."""
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    parts.clear()
    return joined


class TokenCache:
    """Per-chunk term counts under `directory`, keyed by chunk id (content-addressed)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._segments: dict[Path, _Segment] = {}
        self.tokenised = 0
        """Chunks tokenised by this object (the rest came from the cache)."""

    def _load(self) -> list[_Segment]:
        paths = sorted(self.directory.glob("seg-*.npz")) if self.directory.is_dir() else []
        for path in paths:
            if path not in self._segments:
                # Damaged: set aside (said once), its chunks are simply tokenised again;
                # vanished (merged away by another process meanwhile): nothing to read.
                with contextlib.suppress(*_UNREADABLE):
                    self._segments[path] = healed(
                        path,
                        partial(_Segment.read, path),
                        what="BM25 token counts",
                        consequence=_RETOKENISED,
                    )
        for gone in set(self._segments) - set(paths):
            del self._segments[gone]
        return [self._segments[p] for p in paths if p in self._segments]

    def _write(self, segment: _Segment) -> Path | None:
        """Write `segment` under its content-derived name; that path, or None if it could
        not be written."""
        data = segment.to_bytes()
        name = f"seg-{ids_digest(segment.ids)[:24]}.npz"
        path = self.directory / name
        try:
            atomic_write_bytes(path, data)
        except OSError:
            return None  # a read-only build directory: the index is still built, not cached
        # Kept as ids only: its counts are read back from the file if another area needs
        # them, instead of holding every chunk's counts in memory for the whole run.
        self._segments[path] = _Segment(segment.ids, path=path)
        return path

    def postings_for(
        self,
        ids: npt.NDArray[np.bytes_],
        texts_of: Callable[[Int64s], list[str]],
        *,
        live: npt.NDArray[np.bytes_] | None = None,
    ) -> BM25Postings:
        """BM25 postings of documents `ids` (in this order), tokenising only new ids.

        `texts_of(positions)` returns the texts of `ids[positions]`; it is called once,
        for the documents whose counts are not cached. `live` (every id of the store)
        lets a merge drop counts of chunks that no longer exist.
        """
        segments = self._load()
        n = len(ids)
        seg_of = np.full(n, -1, dtype=np.int64)
        row_of = np.zeros(n, dtype=np.int64)
        lookup = IdLookup(ids)
        for s, segment in enumerate(segments):
            if not np.any(seg_of < 0):
                break
            pos, hit = lookup.find(segment.ids)
            hit &= seg_of < 0
            seg_of[hit] = s
            row_of[hit] = pos[hit]
        for s, segment in enumerate(segments):
            if np.any(seg_of == s):
                try:
                    segment.data  # noqa: B018 - read the counts now, while the file exists
                except _UNREADABLE as error:
                    # Merged away meanwhile, or its counts are damaged: tokenise those again.
                    seg_of[seg_of == s] = -1
                    if segment._path is not None and is_damage(error):
                        set_aside(
                            segment._path,
                            what="BM25 token counts",
                            consequence=_RETOKENISED,
                            cause=error,
                        )
        missing = np.flatnonzero(seg_of < 0)
        if len(missing):
            _, first = np.unique(ids[missing], return_index=True)
            todo = missing[np.sort(first)]  # one position per new id, in store order
            # Batches bound the memory of tokenising (a cold area of 275k chunks would
            # otherwise hold every raw word at once); each batch is its own segment.
            for start in range(0, len(todo), _TOKENISE_BATCH):
                batch = todo[start : start + _TOKENISE_BATCH]
                fresh = _tokenised(ids[batch], texts_of(batch))
                self.tokenised += len(batch)
                self._write(fresh)
                segments.append(fresh)
                pos, hit = lookup_sorted(fresh.ids, ids[missing])
                seg_of[missing[hit]] = len(segments) - 1
                row_of[missing[hit]] = pos[hit]
        gather = _Gather()
        for s, segment in enumerate(segments):
            docs = np.flatnonzero(seg_of == s)
            if len(docs):
                gather.add(segment, docs, row_of[docs])
        postings = BM25Postings.from_postings(ids, gather.terms, *gather.term_major(n))
        if len(segments) > _MAX_SEGMENTS:
            self._merge(segments, live)
        return postings

    def _merge(self, segments: list[_Segment], live: npt.NDArray[np.bytes_] | None) -> None:
        """Rewrite all segments as one, keeping only `live` ids when given."""
        every = np.unique(np.concatenate([s.ids for s in segments]))
        if live is not None:
            every = every[np.isin(every, live)]
        gather = _Gather()
        taken = np.zeros(len(every), dtype=bool)
        for segment in segments:
            pos = np.minimum(np.searchsorted(every, segment.ids), max(len(every) - 1, 0))
            keep = (every[pos] == segment.ids) if len(every) else np.zeros(0, bool)
            # First segment holding an id wins; later duplicates are identical anyway.
            rows = np.flatnonzero(keep)
            docs = pos[rows]
            fresh = ~taken[docs]
            gather.add(segment, docs[fresh], rows[fresh].astype(np.int64))
            taken[docs[fresh]] = True
        merged = _by_row(every, *gather.rows(), list(gather.terms))
        old = list(self._segments)
        written = self._write(merged)
        if written is None:
            return  # keep the segments the merge could not replace
        for path in old:
            if path != written:
                with contextlib.suppress(OSError):
                    path.unlink()
                self._segments.pop(path, None)
