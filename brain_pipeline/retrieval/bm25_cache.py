"""BM25 indexes cached in the build directory, assembled from per-chunk token counts.

Three kinds of files, all under `layout.bm25_dir`:

* `area-<layout>-<digest>/`: one area version, keyed by the area's chunk digest
  (sha256 over its ids in store order) and the index layout: which sets of postings
  make it up, each with a mask of its chunks still in the area. A search or an
  unchanged evaluation loads it memory-mapped and reads only its query terms' postings.
* `postings-<layout>-<digest>/`: the term counts of a set of chunks, term-major, named
  by their ids. An edited area reuses its previous postings with the edited chunks
  masked out and adds small postings of the new ones (see `BM25Cache`).
* `tokens-v<RETRIEVAL_VERSION>/seg-*.npz`: per-chunk term counts keyed by chunk id.
  Ids hash content, so a chunk's counts never change; postings are assembled from
  them with a vectorised CSR build, and only chunks never seen before are tokenised.
  Segments are immutable (written atomically under a content-derived name, so
  concurrent writers never clash) and are merged, dropping chunks no longer in the
  store, once there are more than `_MAX_SEGMENTS`.

Scores are identical to `BM25Index.build` over the area's texts: document lengths and
term frequencies are the same integers, collection statistics are taken over the live
chunks, and the weights come from the same arithmetic.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import IdLookup, id_keys, lookup_sorted
from brain_pipeline.corpus.store import Chunk
from brain_pipeline.corpus.store_reader import StoreView
from brain_pipeline.retrieval.bm25 import (
    RETRIEVAL_VERSION,
    BM25Index,
    BM25Postings,
    term_ids_of,
    terms_in_order,
)
from brain_pipeline.retrieval.hybrid import ChunkSource
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_directory, atomic_write_bytes
from brain_pipeline.utils.damage import healed, is_damage, is_set_aside, set_aside

_MAX_SEGMENTS = 48
_TOKENISE_BATCH = 65_536
_KEEP_EXTRA_AREAS = 8  # area indexes kept beyond the current store's (older versions)
INDEX_LAYOUT = f"v{RETRIEVAL_VERSION}.2"
"""Names area and postings directories: the tokeniser's version and the on-disk layout
(.2: term counts and layers; .1 held precomputed weights). Token segments depend on the
tokeniser only, so a layout change does not tokenise anything again."""
_REUSE_AT_LEAST = 0.75
"""An edited area is served from its earlier postings while they hold this share of it."""
_MAX_LAYERS = 5
"""Beyond this many sets of postings the small ones are rebuilt as one."""
_ORPHAN_GRACE_S = 3600
"""Postings no area refers to are deleted only when older than this: another process
may have written them a moment ago and not yet its area's layers."""

Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
_UNREADABLE = (OSError, ValueError, KeyError, zipfile.BadZipFile)
"""What reading a damaged or vanished segment raises: its chunks are tokenised again."""
_RETOKENISED = "its chunks are tokenised again"
_REBUILT = "rebuilt (a cache miss)"


class _Segment:
    """Term counts of a set of chunks: rows sorted by id, CSR by row, own term list.

    A segment read from disk loads only its ids; the counts are read the first time a
    document of the segment is needed, so an edit in one area does not read the counts
    of every other area.
    """

    def __init__(
        self,
        ids: npt.NDArray[np.bytes_],
        indptr: Int64s | None = None,
        terms: npt.NDArray[np.int32] | None = None,
        counts: npt.NDArray[np.int32] | None = None,
        vocabulary: list[str] | None = None,
        path: Path | None = None,
    ) -> None:
        self.ids = ids
        self._indptr = indptr
        self._terms = terms
        self._counts = counts
        self._vocabulary = vocabulary
        self._path = path

    def _load(self) -> None:
        assert self._path is not None, "an in-memory segment has all its arrays"
        with np.load(self._path, allow_pickle=False) as saved:
            blob = saved["vocabulary"].tobytes()
            self._indptr = saved["indptr"]
            self._terms = saved["terms"]
            self._counts = saved["counts"]
        self._vocabulary = blob.decode("ascii").split("\n") if blob else []

    @property
    def indptr(self) -> Int64s:
        if self._indptr is None:
            self._load()
        assert self._indptr is not None
        return self._indptr

    @property
    def terms(self) -> npt.NDArray[np.int32]:
        if self._terms is None:
            self._load()
        assert self._terms is not None
        return self._terms

    @property
    def counts(self) -> npt.NDArray[np.int32]:
        if self._counts is None:
            self._load()
        assert self._counts is not None
        return self._counts

    @property
    def vocabulary(self) -> list[str]:
        if self._vocabulary is None:
            self._load()
        assert self._vocabulary is not None
        return self._vocabulary

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        blob = "\n".join(self.vocabulary).encode("ascii")
        np.savez(
            buffer,
            ids=self.ids,
            indptr=self.indptr,
            terms=self.terms,
            counts=self.counts,
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
    new_docs = rank[docs]
    resort = np.argsort(new_docs, kind="stable")
    per_doc = np.bincount(new_docs, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_doc, out=indptr[1:])
    return _Segment(
        ids[order],
        indptr,
        terms[resort].astype(np.int32),
        counts[resort].astype(np.int32),
        terms_in_order(vocabulary),
    )


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
        starts, stops = segment.indptr[rows], segment.indptr[rows + 1]
        positions = _ranges(starts, stops)
        local = segment.terms[positions]
        used = np.flatnonzero(np.bincount(local, minlength=len(segment.vocabulary)))
        mapping = np.full(len(segment.vocabulary), -1, dtype=np.int32)
        term_of = self._term_of
        words = segment.vocabulary
        known = len(self.terms)
        used_list = used.tolist()
        mapped = [term_of.setdefault(words[t], len(term_of)) for t in used_list]
        # New terms got consecutive numbers from `known` on, in this order.
        self.terms.extend(words[t] for t, m in zip(used_list, mapped, strict=True) if m >= known)
        mapping[used] = mapped
        self.docs.append(np.repeat(docs.astype(np.int32), stops - starts))
        self.term_ids.append(mapping[local])
        self.counts.append(segment.counts[positions].astype(np.int32, copy=False))

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
        name = f"seg-{hashlib.sha256(segment.ids.tobytes()).hexdigest()[:24]}.npz"
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
                    segment.indptr  # noqa: B018 - read the counts now, while the file exists
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
        doc_of, term_of, counts = gather.rows()
        order = np.lexsort((term_of, doc_of))
        per_doc = np.bincount(doc_of, minlength=len(every))
        indptr = np.zeros(len(every) + 1, dtype=np.int64)
        np.cumsum(per_doc, out=indptr[1:])
        merged = _Segment(
            every,
            indptr,
            term_of[order].astype(np.int32),
            counts[order].astype(np.int32),
            list(gather.terms),
        )
        old = list(self._segments)
        written = self._write(merged)
        if written is None:
            return  # keep the segments the merge could not replace
        for path in old:
            if path != written:
                with contextlib.suppress(OSError):
                    path.unlink()
                self._segments.pop(path, None)


class _ViewTexts:
    """Texts of the area's documents at given positions, decoded from the store view."""

    def __init__(self, view: StoreView, rows: npt.NDArray[np.intp]) -> None:
        self._view = view
        self._rows = rows

    def __call__(self, positions: Int64s) -> list[str]:
        store_rows = np.sort(self._rows[positions])
        by_row = dict(zip(store_rows.tolist(), self._view.chunks_at(store_rows), strict=True))
        return [by_row[int(r)].content for r in self._rows[positions].tolist()]


@dataclass
class AreaIndexStats:
    """How one area index was obtained (for metadata and the benchmark)."""

    area: str
    loaded: bool
    tokenised: int
    reused: int = 0
    """Documents served from postings an earlier version of the area had built."""


@dataclass(frozen=True)
class _Layer:
    postings: BM25Postings
    name: str
    live: npt.NDArray[np.bool_] | None


class BM25Cache:
    """Cached BM25 indexes of one store's areas (one object per process and store).

    On disk, under `layout.bm25_dir`:

    * `postings-<layout>-<digest>/`: immutable postings (term counts) of a set of chunks,
      named by the digest of their ids;
    * `area-<layout>-<digest>/layers.json`: an area version (named by its chunk
      digest) as a list of postings, each with a mask of its chunks that are still in
      the area (`live-<k>.npy`, absent when all are).

    A new area version reuses the previous version's postings when they still hold at
    least `_REUSE_AT_LEAST` of its chunks: the chunks they miss become one small set of
    postings (from cached token counts; only never-seen chunks are tokenised) and the
    chunks that left are masked out. A one-file edit thus writes a few KB instead of
    re-assembling the area's postings (3 s and ~0.5 GB at 275k chunks). Otherwise the
    area gets one new set of postings assembled from the token counts.
    """

    def __init__(self, view: StoreView, layout: StateLayout | None) -> None:
        self.view = view
        self.layout = layout
        self._indexes: dict[str, BM25Index] = {}
        self._tokens = TokenCache(self._tokens_dir()) if layout is not None else None
        self._lock = threading.Lock()
        self.stats: list[AreaIndexStats] = []

    def _tokens_dir(self) -> Path:
        assert self.layout is not None
        return self.layout.bm25_dir / f"tokens-v{RETRIEVAL_VERSION}"

    def area_dir(self, area: str) -> Path | None:
        """Where the area's index is cached (None without a layout)."""
        if self.layout is None:
            return None
        digest = self.view.area_digest(area)
        return self.layout.bm25_dir / f"area-{INDEX_LAYOUT}-{digest[:40]}"

    def index(self, area: str) -> BM25Index:
        """The area's index: from memory, from disk, assembled from counts, or built."""
        index = self._indexes.get(area)
        if index is not None:
            return index
        with self._lock:
            index = self._indexes.get(area)
            if index is None:
                index = self._obtain(area)
                self._indexes[area] = index
        return index

    def _obtain(self, area: str) -> BM25Index:
        view = self.view
        rows = view.rows_of_area(area)
        directory = self.area_dir(area)
        if directory is None or self._tokens is None:
            chunks = view.chunks_at(rows)
            index = BM25Index.build([c.id for c in chunks], [c.content for c in chunks])
            self.stats.append(AreaIndexStats(area, False, len(chunks)))
            return index
        layers = self._read_layers(directory, area)
        if layers is not None:
            index = BM25Index([x.postings for x in layers], [x.live for x in layers])
            if len(index) == len(rows):
                self.stats.append(AreaIndexStats(area, True, 0))
                return index
        ids = view.id_array[rows]
        before = self._tokens.tokenised
        layers, missing = self._reusable_layers(area, directory, ids)
        reused = len(ids) - len(missing)
        if len(missing):
            postings = self._tokens.postings_for(
                ids[missing], _ViewTexts(view, rows[missing]), live=view.id_array
            )
            layers.append(_Layer(postings, self._save_postings(postings), None))
        self.stats.append(AreaIndexStats(area, False, self._tokens.tokenised - before, reused))
        index = BM25Index([x.postings for x in layers], [x.live for x in layers])
        if all(layer.name for layer in layers):
            try:
                self._write_layers(directory, area, layers)
                self._prune()
                # Served from the files from now on: an evaluation of four areas holds
                # the pages its queries touch, not four areas' postings.
                stored = self._read_layers(directory, area)
            except OSError:
                stored = None
            if stored is not None:
                return BM25Index([x.postings for x in stored], [x.live for x in stored])
        return index

    # -- reuse ----------------------------------------------------------------------

    def _reusable_layers(
        self, area: str, directory: Path, ids: npt.NDArray[np.bytes_]
    ) -> tuple[list[_Layer], Int64s]:
        """Earlier postings of `area` masked to `ids`, and the positions they lack.

        Nothing is reused (every position is lacking) when there is no earlier version,
        when it holds too little of the area, or when ids repeat within the area (the
        masks could not tell the copies apart).
        """
        everything = np.arange(len(ids), dtype=np.int64)
        previous = self._previous_layers(area, directory)
        if not previous or len(ids) == 0:
            return [], everything
        order = _stable_order(ids)
        ordered = ids[order]
        if np.any(ordered[1:] == ordered[:-1]):
            return [], everything
        if len(previous) >= _MAX_LAYERS:
            previous = previous[:1]  # keep the large base; the rest is rebuilt as one
        claimed = np.zeros(len(ids), dtype=bool)
        layers: list[_Layer] = []
        for layer in previous:
            pos, hit = lookup_sorted(ordered, np.asarray(layer.postings.ids))
            hit &= ~claimed[pos]
            if np.any(hit) and int(np.bincount(pos[hit]).max()) > 1:
                return [], everything  # an id twice in one set of postings
            claimed[pos[hit]] = True
            if np.any(hit):
                layers.append(_Layer(layer.postings, layer.name, None if hit.all() else hit))
        if np.count_nonzero(claimed) < _REUSE_AT_LEAST * len(ids):
            return [], everything
        return layers, np.sort(order[~claimed])

    def _previous_layers(self, area: str, current: Path) -> list[_Layer] | None:
        """The newest other cached version of `area`, or None."""
        assert self.layout is not None
        candidates = sorted(
            (
                p
                for p in self.layout.bm25_dir.glob(f"area-{INDEX_LAYOUT}-*")
                if p != current and not is_set_aside(p)
            ),
            key=_mtime_ns,
            reverse=True,
        )
        for candidate in candidates:
            layers = self._read_layers(candidate, area)
            if layers is not None:
                return layers
        return None

    # -- files ----------------------------------------------------------------------

    def _postings_dir(self, name: str) -> Path:
        assert self.layout is not None
        return self.layout.bm25_dir / name

    def _save_postings(self, postings: BM25Postings) -> str:
        """Write `postings` under their content-derived name; "" if that failed."""
        digest = hashlib.sha256(np.ascontiguousarray(postings.ids).tobytes()).hexdigest()
        name = f"postings-{INDEX_LAYOUT}-{digest[:40]}"
        directory = self._postings_dir(name)
        if not (directory / "terms.txt").is_file():
            try:
                postings.save(directory)
            except OSError:
                return ""  # a read-only build directory: served from memory, not cached
        return name

    def _read_layers(self, directory: Path, area: str) -> list[_Layer] | None:
        """The layers of a cached area version (memory-mapped), or None if unusable.

        A damaged area directory or set of postings is set aside whole (each is written
        as one unit, so a part of one is never trusted) and named in one WARN line; the
        caller then builds the version again as on any miss.
        """
        try:
            found = healed(
                directory,
                partial(_area_files, directory),
                what="BM25 area index",
                consequence=_REBUILT,
            )
        except OSError:
            return None  # not cached (or not readable now): a miss
        if found[0] != area:
            return None
        _, entries = found
        layers = []
        for name, live in entries:
            postings = self._load_postings(name)
            if postings is None:
                return None
            if live is not None and len(live) != len(postings):
                set_aside(
                    directory,
                    what="BM25 area index",
                    consequence=_REBUILT,
                    cause=ValueError(f"a mask of {len(live)} for {len(postings)} postings"),
                )
                return None
            layers.append(_Layer(postings, name, live))
        return layers

    def _load_postings(self, name: str) -> BM25Postings | None:
        """The postings `name` (memory-mapped); None when missing, set aside if damaged."""
        directory = self._postings_dir(name)

        def load() -> BM25Postings:
            if not directory.is_dir():
                raise FileNotFoundError(directory)
            try:
                return BM25Postings.load(directory)
            except FileNotFoundError as missing:
                # Written as one directory: a member missing is damage, not a miss.
                gone = Path(str(missing.filename)).name
                raise ValueError(f"incomplete: {gone} is missing") from missing

        try:
            return healed(directory, load, what="BM25 postings", consequence=_REBUILT)
        except OSError:
            return None

    def _write_layers(self, directory: Path, area: str, layers: list[_Layer]) -> None:
        """Write the area version's layers.json and masks as one directory, atomically."""
        if (directory / "layers.json").is_file():
            if self._read_layers(directory, area) is not None:
                return  # another process wrote this version meanwhile
            # Its postings are gone (set aside as damaged): this version is replaced.
            shutil.rmtree(directory, ignore_errors=True)
        with atomic_directory(directory, complete_when="layers.json") as tmp:
            entries = []
            for k, layer in enumerate(layers):
                live = None
                if layer.live is not None:
                    live = f"live-{k}.npy"
                    np.save(tmp / live, layer.live, allow_pickle=False)
                entries.append({"postings": layer.name, "live": live})
            meta = {"area": area, "layers": entries}
            (tmp / "layers.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    def _prune(self) -> None:
        """Keep the current store's area versions and a few recent others, and the
        postings those refer to."""
        assert self.layout is not None
        bm25_dir = self.layout.bm25_dir
        current = {self.area_dir(a) for a in self.view.areas}
        others = sorted(
            (p for p in bm25_dir.glob("area-v*") if p not in current and not is_set_aside(p)),
            key=_mtime_ns,
            reverse=True,
        )
        for stale in others[_KEEP_EXTRA_AREAS:]:
            shutil.rmtree(stale, ignore_errors=True)
        referenced: set[str] = set()
        for area_dir in bm25_dir.glob("area-v*"):
            if is_set_aside(area_dir):
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                meta = json.loads((area_dir / "layers.json").read_text(encoding="utf-8"))
                referenced.update(entry["postings"] for entry in meta["layers"])
        cutoff = time.time_ns() - _ORPHAN_GRACE_S * 1_000_000_000
        for postings in bm25_dir.glob("postings-*"):
            if is_set_aside(postings):
                continue  # kept once for inspection (replaced by the next damaged copy)
            if postings.name not in referenced and _mtime_ns(postings) < cutoff:
                shutil.rmtree(postings, ignore_errors=True)
        for leftover in bm25_dir.glob(".*"):
            # Temporary directories of writes a killed process never renamed into place.
            if leftover.is_dir() and _mtime_ns(leftover) < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)


_AreaFiles = tuple[str, list[tuple[str, npt.NDArray[np.bool_] | None]]]
"""An area version as stored: its area, and per layer the postings' name and mask."""


def _area_files(directory: Path) -> _AreaFiles:
    """What an area directory holds; raises (ValueError, ...) when it is damaged.

    FileNotFoundError when there is no such directory (a miss). A directory without its
    layers.json or a mask it names is damage: such directories are renamed into place
    whole, so a part of one was torn or removed afterwards.
    """
    if not directory.is_dir():
        raise FileNotFoundError(directory)
    try:
        meta = json.loads((directory / "layers.json").read_text(encoding="utf-8"))
    except FileNotFoundError as missing:
        raise ValueError("incomplete: layers.json is missing") from missing
    if not isinstance(meta, dict) or not isinstance(meta.get("area"), str):
        raise ValueError("not an area index")
    entries: list[tuple[str, npt.NDArray[np.bool_] | None]] = []
    for entry in meta["layers"]:
        name, live_name = entry["postings"], entry["live"]
        if not isinstance(name, str) or not (live_name is None or isinstance(live_name, str)):
            raise ValueError("not an area index")
        live = None
        if live_name is not None:
            try:
                live = np.load(directory / live_name, allow_pickle=False)
            except FileNotFoundError as missing:
                raise ValueError(f"incomplete: {live_name} is missing") from missing
            if live.dtype != np.bool_ or live.ndim != 1:
                raise ValueError(f"{live_name} is not a mask")
        entries.append((name, live))
    return meta["area"], entries


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


_CACHES: dict[tuple[int, Path | None], BM25Cache] = {}
_CACHES_LOCK = threading.Lock()


def bm25_cache(view: StoreView, layout: StateLayout | None) -> BM25Cache:
    """The process-wide BM25 cache of `view` (indexes are kept once loaded or built)."""
    key = (id(view), layout.bm25_dir if layout is not None else None)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None or cache.view is not view:
            if len(_CACHES) > 8:
                _CACHES.clear()
            cache = _CACHES[key] = BM25Cache(view, layout)
        return cache


def _stable_order(ids: npt.NDArray[np.bytes_]) -> Int64s:
    """argsort(ids, kind="stable"), sorting chunk ids as integers (`id_keys`): several
    times faster than comparing 12-byte strings, and the same order."""
    keys = id_keys(ids)
    return np.argsort(keys if keys is not None else ids, kind="stable")


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
