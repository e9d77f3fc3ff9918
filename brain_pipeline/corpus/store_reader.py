"""The one fast reader of knowledge-store.json: a memory map plus a sidecar index.

`parse_store` decodes the whole array into `Chunk`s (11 s and gigabytes at 1.1M chunks);
most readers need far less: the ids (staleness, embeddings), the areas, or one area's
chunks, or ten hits. A `StoreView` maps the store and finds each chunk's byte range, id
and area in its *sidecar index* (built, or reused from an earlier version's sidecar, by
`corpus.store_scan`), saved under `layout.store_index_dir` keyed by the file's (size,
mtime_ns, inode, ctime_ns) and carrying the file's sha256, so a later process maps the
store and loads the index without reading the store at all.

Chunks are decoded only on demand, fragment by fragment, with `json.loads` (a C call
over a whole contiguous run of an area); a fragment whose heading is not a string or
that escapes a surrogate goes through the JSON.parse-compatible `parse_json` instead,
so every chunk equals what `parse_store` returns. A file that does not have the fixed
layout (hand-written, compact JSON) is read with `parse_store` and served from memory.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import mmap
import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import ID_WIDTH
from brain_pipeline.corpus.jscompat import parse_json
from brain_pipeline.corpus.store import Chunk, chunk_from_row, parse_store
from brain_pipeline.corpus.store_scan import (
    StoreFormatError,
    StoreIndex,
    reuse_blocks,
    scan_store,
    with_blocks,
)
from brain_pipeline.state.code_digest import code_digest
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.cache_unit import CacheUnit, newest_first, read_unit, write_unit
from brain_pipeline.utils.digest import file_sha256, ids_digest
from brain_pipeline.utils.file_signature import FileSignature

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_KEEP_SIDECARS = 4


@functools.cache
def sidecar_code(root: Path | None = None) -> str:
    """Names the sidecars: the digest of the code that scans, writes and reads them (this
    module, `corpus.store_scan` and what they import). A sidecar of other code is never
    read: the store is scanned once more and the old sidecar pruned. `root`: another copy
    of the package (tests)."""
    return code_digest(__name__, root=root)[:12]


def _run_chunks(objects: bytes) -> list[Chunk]:
    """Chunks of the store's comma-separated objects in `objects` (one `json.loads`),
    each equal to what `parse_store` decodes.

    `json.loads` is the fast path; the JSON.parse-compatible `parse_json` re-reads the
    run when it escapes a surrogate, nests deeper than Python recurses (JSON.parse has
    no depth limit) or holds a heading that is not a string (numbers must come back as
    doubles, keys in JavaScript order: malformed roadmap titles only, so rare).
    """
    text = b"[" + objects + b"]"
    if not _SURROGATE_ESCAPE.search(text):
        try:
            rows = json.loads(text)
        except RecursionError:
            rows = None
        if rows is not None and all(isinstance(row.get("heading", ""), str) for row in rows):
            return [chunk_from_row(row) for row in rows]
    return [chunk_from_row(r) for r in parse_json(text.decode("utf-8"))]


class StoreView:
    """A read-only view of one knowledge-store.json (one file version).

    Cheap to open when the sidecar is cached; chunks are decoded only when asked for.
    Thread-safe for readers. Use `open_store_view` rather than the constructor.
    """

    def __init__(
        self, path: Path, stat: FileSignature, layout: StateLayout | None, sha256: str | None = None
    ) -> None:
        self.path = path
        self._stat = stat
        self._layout = layout
        self._known_sha256 = sha256
        self._chunks: list[Chunk] | None = None  # fallback mode: the whole parsed store
        self._id_strings: tuple[str, ...] | None = None
        self._mmap: mmap.mmap | None = None
        self._buffer: Any = b""
        self._fd: int | None = None
        if stat.size:
            self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self._mmap = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
            self._buffer = self._mmap
        index = self._load_sidecar()
        if index is None:
            data = np.frombuffer(self._buffer, dtype=np.uint8) if stat.size else np.zeros(0, "u1")
            # After an edit, most of the store is the previous version's bytes: its
            # sidecar's unchanged blocks are reused and only the rest is scanned.
            index = self._reuse_previous(data)
            if index is None:
                try:
                    index = with_blocks(scan_store(data), self._buffer, stat.size)
                except StoreFormatError:
                    index = self._index_by_parsing()
            if index.block_rows is not None:
                self._save_sidecar(index)
            self._release_pages()
        self._index = index
        self._rows_of_area: dict[str, npt.NDArray[np.intp]] = {}

    # -- construction helpers -------------------------------------------------------

    def _release_pages(self) -> None:
        """Drop the store's pages from this process's mapping after a whole-file pass.

        Scanning and hashing touch every page of a store of hundreds of MB; left
        mapped, they count in the process's resident memory for the rest of the run
        although only a few chunks are decoded later. They stay in the page cache
        (`MADV_DONTNEED` on a read-only file mapping discards nothing), so a later read
        faults them back in cheaply.
        """
        advice = getattr(mmap, "MADV_DONTNEED", None)
        if self._mmap is not None and advice is not None:
            with contextlib.suppress(OSError):
                self._mmap.madvise(advice)

    def _index_by_parsing(self) -> StoreIndex:
        """Any valid store that is not in the fixed layout: parse it whole, keep it."""
        chunks = parse_store(bytes(self._buffer))
        self._chunks = chunks
        names: dict[str, int] = {}
        codes = np.array([names.setdefault(c.area, len(names)) for c in chunks], dtype=np.int32)
        encoded = [c.id.encode("utf-8") for c in chunks]
        ids = np.array(encoded) if encoded else np.zeros(0, dtype=f"S{ID_WIDTH}")
        empty = np.zeros(len(chunks), dtype=np.int64)
        return StoreIndex(empty, empty, ids, codes, list(names), None)

    def _sidecar_path(self) -> Path | None:
        if self._layout is None:
            return None
        name = f"v{sidecar_code()}-{self._stat.key()}"
        return self._layout.store_index_dir / name

    def _reuse_previous(self, data: npt.NDArray[np.uint8]) -> StoreIndex | None:
        """The index from the newest other sidecar's unchanged blocks (see `reuse_blocks`)."""
        own = self._sidecar_path()
        if own is None or not self._stat.size:
            return None
        for path in newest_first(own.parent, f"v{sidecar_code()}-*", leaving_out=own)[:1]:
            try:
                old_size = int(path.name.split("-")[1])
            except (IndexError, ValueError):
                continue
            old = self._read_sidecar(path)
            if old is not None:
                index = reuse_blocks(old, old_size, data, self._buffer)
                if index is not None:
                    index.sha256 = None  # this file's, computed when saved
                    return index
        return None

    def _load_sidecar(self) -> StoreIndex | None:
        path = self._sidecar_path()
        index = None if path is None else self._read_sidecar(path)
        if index is None:
            return None
        if len(index.starts) and int(index.stops[-1]) > self._stat.size:
            return None
        return index

    def _read_sidecar(self, path: Path) -> StoreIndex | None:
        """A saved sidecar (memory-mapped), or None; a damaged one is set aside (said
        once) and rebuilt, never trusted."""

        def index(unit: CacheUnit) -> StoreIndex:
            a, meta = unit.arrays, unit.meta
            starts, stops, ids, codes = a["starts"], a["stops"], a["ids"], a["area_codes"]
            return StoreIndex(starts, stops, ids, codes, list(meta["areas"]), meta["sha256"],
                              a["block_rows"], a["block_digests"])  # fmt: skip

        return read_unit(path, index, what="store sidecar", consequence="rebuilt from the store")

    def _save_sidecar(self, index: StoreIndex) -> None:
        """Persist the index (and the sha256, computed now) for the next process, as a
        cache unit (`utils.cache_unit`)."""
        path = self._sidecar_path()
        if path is None:
            return
        index.sha256 = self._whole_file_sha256()
        arrays: dict[str, Any] = {"starts": index.starts, "stops": index.stops, "ids": index.ids}
        arrays |= {"area_codes": index.area_codes, "block_rows": index.block_rows}
        arrays |= {"block_digests": index.block_digests}
        try:
            write_unit(path, arrays, areas=index.area_names, sha256=index.sha256)
            _prune(path)
        except OSError:
            pass  # a read-only store directory still works, just without the cache

    # -- the public surface ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._index.ids)

    @property
    def size(self) -> int:
        """Byte size of the file this view reads."""
        return self._stat.size

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the store's bytes (from the sidecar when it was cached)."""
        if self._index.sha256 is None:
            self._index.sha256 = self._whole_file_sha256()
        return self._index.sha256

    def _whole_file_sha256(self) -> str:
        if self._known_sha256 is not None:
            return self._known_sha256
        return file_sha256(self.path)

    def _read(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the store, read through the file rather than the map.

        Decoding reads (a whole area for tokenising, every new chunk for the history)
        would otherwise leave each page they touch mapped, and resident in this
        process's memory, for as long as the view lives.
        """
        if self._fd is None:
            return bytes(self._buffer[start:stop])
        parts = []
        while start < stop:
            piece = os.pread(self._fd, min(stop - start, 1 << 30), start)
            if not piece:
                raise StoreFormatError(f"{self.path}: shorter than its index says")
            parts.append(piece)
            start += len(piece)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @property
    def id_array(self) -> npt.NDArray[np.bytes_]:
        """Chunk ids in store order as numpy `S12` (no Python strings made)."""
        return self._index.ids

    @property
    def ids(self) -> list[str]:
        """Chunk ids in store order."""
        if self._chunks is not None:
            return [c.id for c in self._chunks]
        if self._id_strings is None:
            # Decoded once per view: the embeddings step, the history and the publish gate
            # each ask for them, and at a million chunks a decode costs about half a second.
            self._id_strings = tuple(self._index.ids.astype("U12").tolist())
        return list(self._id_strings)

    @property
    def areas(self) -> list[str]:
        """The areas present, sorted."""
        counts = self.count_per_area()
        return sorted(name for name, n in counts.items() if n)

    @property
    def area_codes(self) -> npt.NDArray[np.int32]:
        """Per chunk, its area's position in `area_names`."""
        return self._index.area_codes

    @property
    def area_names(self) -> list[str]:
        """Area names in order of first appearance (indexed by `area_codes`)."""
        return list(self._index.area_names)

    def count_per_area(self) -> dict[str, int]:
        """Number of chunks per area."""
        counts = np.bincount(self._index.area_codes, minlength=len(self._index.area_names))
        return dict(zip(self._index.area_names, counts.tolist(), strict=True))

    def rows_of_area(self, area: str) -> npt.NDArray[np.intp]:
        """Store positions of the area's chunks, ascending (empty for an unknown area)."""
        rows = self._rows_of_area.get(area)
        if rows is None:
            try:
                code = self._index.area_names.index(area)
            except ValueError:
                rows = np.zeros(0, dtype=np.intp)
            else:
                rows = np.flatnonzero(self._index.area_codes == code)
            self._rows_of_area[area] = rows
        return rows

    def area_digest(self, area: str) -> str:
        """sha256 over the area's ids in store order: what its BM25 index is keyed by."""
        ids = self._index.ids[self.rows_of_area(area)]
        return ids_digest(ids)

    def chunk_at(self, i: int) -> Chunk:
        """The chunk at store position `i`."""
        if self._chunks is not None:
            return self._chunks[i]
        start, stop = int(self._index.starts[i]), int(self._index.stops[i])
        return _run_chunks(self._read(start, stop))[0]

    def chunks_at(self, rows: Sequence[int] | npt.NDArray[np.intp]) -> list[Chunk]:
        """Chunks at the given positions, in that order; contiguous runs decode together."""
        positions = np.asarray(rows, dtype=np.int64)
        if self._chunks is not None:
            return [self._chunks[i] for i in positions.tolist()]
        if len(positions) == 0:
            return []
        if np.all(np.diff(positions) > 0):
            return self._decode_runs(positions)
        return [self.chunk_at(i) for i in positions.tolist()]

    def _decode_runs(self, rows: npt.NDArray[np.int64]) -> list[Chunk]:
        """Decode ascending rows, one `json.loads` per run of adjacent chunks."""
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        out: list[Chunk] = []
        for run in np.split(rows, breaks):
            first, last = int(run[0]), int(run[-1])
            start, stop = int(self._index.starts[first]), int(self._index.stops[last])
            out.extend(_run_chunks(self._read(start, stop)))
        return out

    def chunks_of_area(self, area: str) -> list[Chunk]:
        """The area's chunks in store order, decoding only the area's byte ranges."""
        return self.chunks_at(self.rows_of_area(area))

    def all_chunks(self) -> list[Chunk]:
        """Every chunk in store order (what `parse_store` returns): one run, one decode."""
        return self.chunks_at(np.arange(len(self)))

    def close(self) -> None:
        """Release the memory map (the view must not be used afterwards)."""
        if self._mmap is not None:
            with contextlib.suppress(BufferError):
                self._mmap.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _prune(keep: Path) -> None:
    """Keep the newest few sidecars: one per store version a reader may still hold (an
    older version's `.npz` files go the same way)."""
    for stale in newest_first(keep.parent, "v*", leaving_out=keep)[_KEEP_SIDECARS - 1 :]:
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        with contextlib.suppress(OSError):
            stale.unlink()


_VIEWS: dict[Path, tuple[tuple[FileSignature, Path | None], StoreView]] = {}
_VIEWS_LOCK = threading.Lock()


def open_store_view(
    store_file: Path | str, layout: StateLayout | None = None, *, sha256: str | None = None
) -> StoreView:
    """The view of `store_file`, memoised per process by path and (size, mtime, inode).

    With a `layout`, the sidecar index is loaded from (or saved to)
    `layout.store_index_dir`; without one it is built in memory. A file replaced since
    (atomic writes make a new inode) gets a new view. FileNotFoundError when absent.
    `sha256`: the file's hash when the caller just computed it (the assembly hashes the
    store while writing it), so a new sidecar does not read the whole file again.
    """
    path = Path(store_file).resolve()
    stat = FileSignature.of(path)
    if stat is None:
        raise FileNotFoundError(errno.ENOENT, "no such store file", str(path))
    where = layout.store_index_dir if layout is not None else None
    with _VIEWS_LOCK:
        cached = _VIEWS.get(path)
        if cached is not None and cached[0] == (stat, where):
            return cached[1]
        view = StoreView(path, stat, layout, sha256)
        _VIEWS[path] = ((stat, where), view)
        return view


def cache_layout(store_dir: Path | str, build_dir: Path | str | None = None) -> StateLayout | None:
    """Where caches of the store in `store_dir` may be kept, or None for "memory only".

    The build directory keeps its caches in its own `state/`; any other store directory
    (a published copy the agent reads, say) gets caches only if it already has a
    `state/` directory, so searching a published store never writes into it.
    """
    layout = StateLayout.of(store_dir)
    if build_dir is not None and layout == StateLayout.of(build_dir):
        return layout
    return layout if layout.state_dir.is_dir() else None
