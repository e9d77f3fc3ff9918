"""BM25 indexes cached in the build directory, assembled from the postings already there.

Two kinds of directories here, under `layout.bm25_dir`, each written as one unit:

* `area-<layout>-<digest>/`: one area version, keyed by the area's chunk digest
  (sha256 over its ids in store order) and the index layout: which sets of postings
  make it up, each with a mask of its chunks still in the area. A search or an
  unchanged evaluation loads it memory-mapped and reads only its query terms' postings.
* `postings-<layout>-<digest>/`: the term counts of a set of chunks, term-major, named
  by their ids. An edited area reuses its previous postings with the edited chunks
  masked out and adds small postings of the new ones (see `BM25Cache`). Postings hold
  term counts, and ids hash content, so they are also the cache of every chunk's counts:
  a chunk some cached postings hold is never tokenised again.

Scores are identical to `BM25Index.build` over the area's texts: document lengths and
term frequencies are the same integers, collection statistics are taken over the live
chunks, and the weights come from the same arithmetic.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import id_keys, lookup_sorted
from brain_pipeline.corpus.store_reader import StoreView
from brain_pipeline.retrieval.bm25 import BM25Index, BM25Postings, term_ids_of, terms_in_order
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.cache_unit import META, CacheUnit, newest_first, read_unit, write_unit
from brain_pipeline.utils.damage import is_set_aside, set_aside
from brain_pipeline.utils.digest import ids_digest
from brain_pipeline.utils.file_signature import mtime_ns

_KEEP_EXTRA_AREAS = 8  # area indexes kept beyond the current store's (older versions)
_REUSE_AT_LEAST = 0.75
"""An edited area is served from its earlier postings while they hold this share of it."""
_MAX_LAYERS = 5
"""Beyond this many sets of postings the small ones are rebuilt as one."""
_ORPHAN_GRACE_S = 3600
"""Postings no area refers to are deleted only when older than this: another process
may have written them a moment ago and not yet its area's layers."""
_TOKENISE_BATCH = 65_536
"""Texts tokenised at once: a cold area of 275k chunks would otherwise hold every raw
word at once."""
_REBUILT = "rebuilt (a cache miss)"
_POSTINGS, _AREA = "BM25 postings", "BM25 area index"
Int64s = npt.NDArray[np.int64]
Int32s = npt.NDArray[np.int32]
_Ints = npt.NDArray[np.integer[Any]]


@functools.cache
def index_layout(root: Path | None = None) -> str:
    """Names area and postings directories: the digest of the code that writes and reads
    them (this module and what it imports: the on-disk layout, the counts' assembly,
    BM25's arithmetic, the tokeniser). An edit to it builds each area's index once more
    (tokenising, as a first build does), never reading a stale one. `root`: another copy
    of the package (tests)."""
    return code_digest(__name__, root=root)[:12]


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
    * `area-<layout>-<digest>/`: an area version (named by its chunk digest) as a list
      of postings, each with a mask of its chunks that are still in the area (`live-<k>`,
      absent when all are).

    Each is a cache unit (`utils.cache_unit`): written whole, checked when read.

    A new area version reuses the previous version's postings when they still hold at
    least `_REUSE_AT_LEAST` of its chunks: the chunks they miss become one small set of
    postings and the chunks that left are masked out. A one-file edit thus writes a few
    KB instead of re-assembling the area's postings (3 s and ~0.5 GB at 275k chunks).
    Otherwise the area gets one new set of postings. A new set copies the counts of
    chunks that cached postings hold (`_postings_for`): only never-seen chunks are
    tokenised.
    """

    def __init__(self, view: StoreView, layout: StateLayout | None) -> None:
        self.view = view
        self.layout = layout
        self._indexes: dict[str, BM25Index] = {}
        self._lock = threading.Lock()
        self.stats: list[AreaIndexStats] = []

    def area_dir(self, area: str) -> Path | None:
        """Where the area's index is cached (None without a layout)."""
        if self.layout is None:
            return None
        digest = self.view.area_digest(area)
        return self.layout.bm25_dir / f"area-{index_layout()}-{digest[:40]}"

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
        if directory is None:
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
        layers, missing = self._reusable_layers(area, directory, ids)
        tokenised = 0
        if len(missing):
            postings, tokenised = self._postings_for(ids[missing], _ViewTexts(view, rows[missing]))
            layers.append(_Layer(postings, self._save_postings(postings), None))
        self.stats.append(AreaIndexStats(area, False, tokenised, len(ids) - len(missing)))
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
        pattern = f"area-{index_layout()}-*"
        for candidate in newest_first(self.layout.bm25_dir, pattern, leaving_out=current):
            layers = self._read_layers(candidate, area)
            if layers is not None:
                return layers
        return None

    # -- counts -----------------------------------------------------------------------

    def _postings_for(
        self, ids: npt.NDArray[np.bytes_], texts_of: Callable[[Int64s], list[str]]
    ) -> tuple[BM25Postings, int]:
        """Postings of documents `ids` (in this order; an id may repeat), and how many
        texts were tokenised for them.

        Ids hash content, so a chunk's counts are the same in every set of postings that
        holds it: they are copied from the cached sets (newest first: the area's earlier
        versions, an area a chunk moved from), and only the chunks none holds are
        tokenised (`texts_of(positions)` gives the texts of `ids[positions]`), in store
        order and in batches that bound the memory of tokenising.
        """
        unique, first, of_unique = np.unique(ids, return_index=True, return_inverse=True)
        found = np.zeros(len(unique), dtype=bool)
        rows = _Rows()
        for name in self._cached_postings():
            if found.all():
                break
            at, hit = _find_sorted(unique, self._cached_ids(name))
            hit = hit[~found[at[hit]]]
            docs, first_copy = np.unique(at[hit], return_index=True)  # an id twice: once
            postings = self._load_postings(name) if len(docs) else None
            if postings is not None:
                rows.copy(postings, hit[first_copy], docs)
                found[docs] = True
        todo = np.flatnonzero(~found)
        todo = todo[np.argsort(first[todo], kind="stable")]  # store order: runs decode fast
        for start in range(0, len(todo), _TOKENISE_BATCH):
            batch = todo[start : start + _TOKENISE_BATCH]
            term_ids, token_docs, vocabulary = term_ids_of(texts_of(first[batch]))
            width = max(len(vocabulary), 1)
            pairs, counts = np.unique(token_docs * width + term_ids, return_counts=True)
            rows.add(terms_in_order(vocabulary), pairs % width, batch[pairs // width], counts)
        return rows.postings(ids, of_unique.reshape(-1), len(unique)), len(todo)

    def _cached_postings(self) -> list[str]:
        """The names of the cached sets of postings of this code, newest first."""
        assert self.layout is not None
        return [p.name for p in newest_first(self.layout.bm25_dir, f"postings-{index_layout()}-*")]

    def _cached_ids(self, name: str) -> npt.NDArray[np.bytes_]:
        """The ids of the postings `name` (memory-mapped); none when missing or damaged."""
        ids = read_unit(self._postings_dir(name), lambda unit: unit.arrays["ids"], what=_POSTINGS)
        return np.zeros(0, dtype="S12") if ids is None else np.asarray(ids)

    # -- files ----------------------------------------------------------------------

    def _postings_dir(self, name: str) -> Path:
        assert self.layout is not None
        return self.layout.bm25_dir / name

    def _save_postings(self, postings: BM25Postings) -> str:
        """Write `postings` under their content-derived name; "" if that failed."""
        digest = ids_digest(postings.ids)
        name = f"postings-{index_layout()}-{digest[:40]}"
        directory = self._postings_dir(name)
        if not (directory / META).is_file():
            try:
                save_postings(directory, postings)
            except OSError:
                return ""  # a read-only build directory: served from memory, not cached
        return name

    def _read_layers(self, directory: Path, area: str) -> list[_Layer] | None:
        """The layers of a cached area version (memory-mapped), or None if unusable.

        A damaged area directory or set of postings is set aside whole (each is written
        as one unit, so a part of one is never trusted) and named in one WARN line; the
        caller then builds the version again as on any miss.
        """
        found = read_unit(directory, _area_files, what=_AREA)
        if found is None or found[0] != area:
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
                    what=_AREA,
                    consequence=_REBUILT,
                    cause=ValueError(f"a mask of {len(live)} for {len(postings)} postings"),
                )
                return None
            layers.append(_Layer(postings, name, live))
        return layers

    def _load_postings(self, name: str) -> BM25Postings | None:
        """The postings `name` (memory-mapped); None when missing, set aside if damaged."""
        return load_postings(self._postings_dir(name))

    def _write_layers(self, directory: Path, area: str, layers: list[_Layer]) -> None:
        """Write the area version: per layer its postings' name and mask (if any)."""
        if (directory / META).is_file():
            if self._read_layers(directory, area) is not None:
                return  # another process wrote this version meanwhile
            # Its postings are gone (set aside as damaged): this version is replaced.
            shutil.rmtree(directory, ignore_errors=True)
        masks = {f"live-{k}": x.live for k, x in enumerate(layers) if x.live is not None}
        entries = [
            {"postings": x.name, "live": f"live-{k}" if x.live is not None else None}
            for k, x in enumerate(layers)
        ]
        write_unit(directory, masks, area=area, layers=entries)

    def _prune(self) -> None:
        """Keep the current store's area versions and a few recent others, and the
        postings those refer to (others are dropped once their grace has passed: another
        process may still use them)."""
        assert self.layout is not None
        bm25_dir = self.layout.bm25_dir
        current = {self.area_dir(a) for a in self.view.areas}
        others = [p for p in newest_first(bm25_dir, "area-*") if p not in current]
        for stale in others[_KEEP_EXTRA_AREAS:]:
            shutil.rmtree(stale, ignore_errors=True)
        referenced: set[str] = set()
        for area_dir in bm25_dir.glob("area-*"):
            if is_set_aside(area_dir):
                continue
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                meta = json.loads((area_dir / META).read_text(encoding="utf-8"))
                referenced.update(entry["postings"] for entry in meta["layers"])
        cutoff = time.time_ns() - _ORPHAN_GRACE_S * 1_000_000_000
        for postings in bm25_dir.glob("postings-*"):
            if is_set_aside(postings):
                continue  # kept once for inspection (replaced by the next damaged copy)
            if postings.name not in referenced and mtime_ns(postings) < cutoff:
                shutil.rmtree(postings, ignore_errors=True)
        for leftover in chain(bm25_dir.glob(".*"), bm25_dir.glob("tokens-*")):
            # Temporary directories of writes a killed process never renamed into place,
            # and the per-chunk token counts older versions kept (postings hold them now).
            if leftover.is_dir() and mtime_ns(leftover) < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)


_AreaFiles = tuple[str, list[tuple[str, npt.NDArray[np.bool_] | None]]]
"""An area version as stored: its area, and per layer the postings' name and mask."""


def _area_files(unit: CacheUnit) -> _AreaFiles:
    """What an area unit holds; raises (ValueError, ...) when it is damaged."""
    area, entries = unit.meta["area"], unit.meta["layers"]
    if not isinstance(area, str) or not isinstance(entries, list):
        raise ValueError("not an area index")
    out: list[tuple[str, npt.NDArray[np.bool_] | None]] = []
    for entry in entries:
        name, live_name = entry["postings"], entry["live"]
        if not isinstance(name, str) or not (live_name is None or isinstance(live_name, str)):
            raise ValueError("not an area index")
        live = None if live_name is None else unit.arrays[live_name]
        if live is not None and (live.dtype != np.bool_ or live.ndim != 1):
            raise ValueError(f"{live_name} is not a mask")
        out.append((name, live))
    return area, out


def save_postings(directory: Path, postings: BM25Postings) -> None:
    """Write `postings` as the cache unit `directory` (see `utils.cache_unit`)."""
    terms = np.frombuffer("\n".join(postings.terms).encode("ascii"), dtype=np.uint8)
    arrays = {"ids": postings.ids, "indptr": postings.indptr, "docs": postings.docs}
    arrays |= {"tf": postings.tf, "lengths": postings.lengths, "terms": terms}
    write_unit(directory, arrays)


def load_postings(directory: Path) -> BM25Postings | None:
    """The postings `save_postings` wrote (memory-mapped: paged in on use); None when
    there are none, set aside (said once) when damaged."""

    def postings(unit: CacheUnit) -> BM25Postings:
        a = unit.arrays
        raw = bytes(a["terms"])
        terms = raw.decode("ascii").split("\n") if raw else []
        indptr, ids, docs, tf, lengths = (a[k] for k in ("indptr", "ids", "docs", "tf", "lengths"))
        if len(indptr) != len(terms) + 1 or len(docs) != len(tf) or len(ids) != len(lengths):
            raise ValueError("postings whose arrays do not fit together")
        return BM25Postings(ids, terms, np.asarray(indptr), docs, tf, lengths)

    return read_unit(directory, postings, what=_POSTINGS)


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


class _Rows:
    """(document, term, count) rows gathered from several sources into one vocabulary.

    Rows are int32: an area of a quarter of a million chunks has ~11M of them, and the
    assembly's peak memory is a few copies of these arrays.
    """

    def __init__(self) -> None:
        self.terms: list[str] = []
        self._term_of: dict[str, int] = {}
        self.docs: list[Int32s] = []
        self.term_ids: list[Int32s] = []
        self.counts: list[Int32s] = []

    def add(self, words: Sequence[str], local: _Ints, docs: _Ints, counts: _Ints) -> None:
        """Document `docs[i]` has `counts[i]` of the term `words[local[i]]`."""
        used = np.flatnonzero(np.bincount(local, minlength=len(words)))
        term_of = self._term_of
        known = len(self.terms)
        used_list = used.tolist()
        mapped = [term_of.setdefault(words[t], len(term_of)) for t in used_list]
        # New terms got consecutive numbers from `known` on, in this order.
        self.terms.extend(words[t] for t, m in zip(used_list, mapped, strict=True) if m >= known)
        mapping = np.full(len(words), -1, dtype=np.int32)
        mapping[used] = mapped
        self.docs.append(docs.astype(np.int32))
        self.term_ids.append(mapping[local])
        self.counts.append(counts.astype(np.int32))

    def copy(self, postings: BM25Postings, rows: _Ints, docs: _Ints) -> None:
        """Document `docs[i]` has the counts of `postings`' document `rows[i]`."""
        want = np.zeros(len(postings), dtype=bool)
        want[rows] = True
        source = np.asarray(postings.docs)
        picked = np.flatnonzero(want[source])  # term-major positions of the wanted documents
        doc_of = np.zeros(len(postings), dtype=np.int64)
        doc_of[rows] = docs
        local = np.searchsorted(np.asarray(postings.indptr), picked, side="right") - 1
        self.add(postings.terms, local, doc_of[source[picked]], np.asarray(postings.tf)[picked])

    def postings(
        self, ids: npt.NDArray[np.bytes_], of_unique: Int64s, n_unique: int
    ) -> BM25Postings:
        """The rows (documents numbered by distinct id) as postings of `ids`, where
        position i is document `of_unique[i]`; sorted by (term, position) block by block
        of memory: each gathered list is joined, reordered and released in turn."""
        docs, terms, counts = _take(self.docs), _take(self.term_ids), _take(self.counts)
        order = np.argsort(of_unique, kind="stable")  # positions grouped by document
        if len(ids) == n_unique:
            docs = order[docs].astype(np.int32)
        else:  # an id repeats: its document's rows go to each of its positions
            per_doc = np.bincount(of_unique, minlength=n_unique)
            starts = np.cumsum(per_doc) - per_doc
            times = per_doc[docs]
            docs = order[_ranges(starts[docs], starts[docs] + times)].astype(np.int32)
            terms, counts = np.repeat(terms, times), np.repeat(counts, times)
        keys = terms.astype(np.int64) * max(len(ids), 1)
        keys += docs
        order = np.argsort(keys)  # (term, position) pairs are distinct: no stability needed
        del keys
        post_docs = docs[order]
        del docs
        post_terms = terms[order]
        del terms
        return BM25Postings.from_postings(ids, self.terms, post_terms, post_docs, counts[order])


def _take(parts: list[Int32s]) -> Int32s:
    """The parts joined; the list is emptied so the parts are not held twice."""
    joined = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    parts.clear()
    return joined


def _ranges(starts: _Ints, stops: _Ints) -> Int64s:
    """Concatenation of arange(start, stop) for each pair, vectorised."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total, dtype=np.int64) + offsets


def _find_sorted(
    needles: npt.NDArray[np.bytes_], hay: npt.NDArray[np.bytes_]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Per element of `hay` (any order), its position in the sorted distinct `needles`,
    and the elements of `hay` found there. Ids as integers (`id_keys`) when both are
    chunk ids: each of the hay's ids is one binary search among the needles."""
    if len(needles) == 0 or len(hay) == 0:
        return np.zeros(len(hay), dtype=np.intp), np.zeros(0, dtype=np.intp)
    keys, hay_keys = id_keys(needles), id_keys(hay)
    wanted: Any = keys if keys is not None and hay_keys is not None else needles
    searched: Any = hay_keys if keys is not None and hay_keys is not None else hay
    at = np.minimum(np.searchsorted(wanted, searched), len(wanted) - 1)
    return at, np.flatnonzero(wanted[at] == searched)


def _stable_order(ids: npt.NDArray[np.bytes_]) -> Int64s:
    """argsort(ids, kind="stable"), sorting chunk ids as integers (`id_keys`): several
    times faster than comparing 12-byte strings, and the same order."""
    keys = id_keys(ids)
    return np.argsort(keys if keys is not None else ids, kind="stable")
