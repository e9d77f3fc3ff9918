"""The one fast reader of knowledge-store.json: a memory map plus a sidecar index.

`parse_store` decodes the whole array into `Chunk`s (11 s and gigabytes at 1.1M chunks);
most readers need far less: the ids (staleness, embeddings), the areas, or one area's
chunks, or ten hits. The store's format is fixed (`JSON.stringify(chunks, null, 2)`):
every chunk object starts with `\\n  {\\n    "id": "` and, since JSON strings never hold
a raw newline, every line of a chunk is one member. So one vectorised scan over the
newline positions finds each chunk's byte range, its id and its area line; the result
(offsets, ids as numpy `S12`, area codes) is the *sidecar index*, saved under
`layout.store_index_dir` keyed by the file's (size, mtime_ns, inode, ctime_ns) and
carrying the file's sha256, so a later process maps the store and loads the index
without reading the store at all.

A new version of the store (after an edit) is mostly the previous version's bytes: the
sidecar also keeps a SHA-1 per block of `BLOCK_ROWS` chunks, so a store without a sidecar
of its own first tries the newest other sidecar: blocks whose bytes digest as before are
reused (a prefix at the same offsets, a suffix shifted by the change in size) and only
the bytes between them are scanned. Digesting costs about a fifth of a scan.

Chunks are decoded only on demand, fragment by fragment, with `json.loads` (a C call
over a whole contiguous run of an area); a fragment whose heading is not a string or
that escapes a surrogate goes through the JSON.parse-compatible `parse_json` instead,
so every chunk equals what `parse_store` returns. A file that does not have the fixed
layout (hand-written, compact JSON) is read with `parse_store` and served from memory.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import mmap
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.jscompat import parse_json
from brain_pipeline.corpus.store import NO_HEADING, Chunk, chunk_from_row, parse_store
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_writer
from brain_pipeline.utils.damage import healed
from brain_pipeline.utils.digest import file_sha256, sha256_hex
from brain_pipeline.utils.file_signature import FileSignature

STORE_INDEX_VERSION = 2
"""Bump when the sidecar's contents or the scan change; older sidecars are then ignored."""

BLOCK_ROWS = 8_192
"""Chunks per block of the sidecar's block digests (about 3.5 MB of a typical store)."""

ID_WIDTH = 12
_ID_PREFIX = b'    "id": "'
_CONTENT_PREFIX = b'    "content": "'
_AREA_PREFIX = b'    "area": "'
_SOURCE_PREFIX = b'    "source": "'
_SCAN_BLOCK = 1 << 24  # bytes per vectorised newline scan (16 MiB of temporaries at most)
_AREA_WIDTH = 64  # area names up to this many bytes are compared without Python
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_KEEP_SIDECARS = 4


class StoreFormatError(ValueError):
    """The file is not knowledge-store.json in the fixed layout (callers fall back)."""


@dataclass
class _Index:
    """Per chunk: [start, stop) of its `{...}` object in the file, id, area code."""

    starts: npt.NDArray[np.int64]
    stops: npt.NDArray[np.int64]
    ids: npt.NDArray[np.bytes_]
    area_codes: npt.NDArray[np.int32]
    area_names: list[str]
    sha256: str | None
    block_rows: npt.NDArray[np.int64] | None = None
    """First row of each block, then the row count: block j is rows [b[j], b[j+1]) and
    the bytes from its first chunk's `{` (the file's start for block 0) to the next
    block's (the file's end for the last)."""
    block_digests: npt.NDArray[np.uint8] | None = None
    """SHA-1 of each block's bytes, (blocks, 20): what lets the next store reuse unchanged
    blocks. Raw bytes, not numpy `S20`, which would drop a digest's trailing zero bytes."""


def _newlines(data: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """Positions of every b"\\n", block by block so temporaries stay bounded."""
    parts = []
    for start in range(0, len(data), _SCAN_BLOCK):
        block = data[start : start + _SCAN_BLOCK]
        parts.append(np.flatnonzero(block == 10).astype(np.int64) + start)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _words(data: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """A little-endian uint64 starting at every byte offset (a strided view, no copy).

    Gathering `words[positions]` reads 8 bytes per position in one numpy operation,
    instead of one gather per byte.
    """
    count = max(len(data) - 7, 0)
    return np.ndarray((count,), dtype="<u8", buffer=data, offset=0, strides=(1,))


def _has_prefix(
    words: npt.NDArray[np.uint64], positions: npt.NDArray[np.int64], prefix: bytes
) -> bool:
    """Whether `prefix` starts at every position (8 bytes per vectorised comparison)."""
    if len(positions) == 0:
        return True
    if int(positions.max()) + len(prefix) > len(words) + 7:
        return False
    padded = prefix + bytes(-len(prefix) % 8)
    for k in range(0, len(prefix), 8):
        width = min(8, len(prefix) - k)
        mask = np.uint64((1 << (8 * width)) - 1)
        expected = np.uint64(int.from_bytes(padded[k : k + 8], "little")) & mask
        at = np.minimum(positions + k, len(words) - 1)  # past the end: a mismatch, not a crash
        if not bool(np.all((words[at] & mask) == expected)):
            return False
    return True


def _columns(
    words: npt.NDArray[np.uint64], starts: npt.NDArray[np.int64], width: int
) -> npt.NDArray[np.uint8]:
    """The `width` bytes at each start as an (n, width) array, gathered 8 bytes at a time."""
    chunks = -(-width // 8)
    out = np.empty((len(starts), chunks * 8), dtype=np.uint8)
    as_words = out.view("<u8")
    last = len(words) - 1
    for k in range(chunks):
        as_words[:, k] = words[np.minimum(starts + 8 * k, last)]
    return out[:, :width]


def _scan(data: npt.NDArray[np.uint8]) -> _Index:
    """Build the index of a store in the fixed layout; StoreFormatError otherwise."""
    size = len(data)
    if size == 2 and bytes(data) == b"[]":
        empty = np.zeros(0, dtype=np.int64)
        return _Index(empty, empty, np.zeros(0, "S12"), np.zeros(0, np.int32), [], None)
    if bytes(data[:5]) != b"[\n  {" or bytes(data[-6:]) != b"\n  }\n]":
        raise StoreFormatError("not a JSON array in JSON.stringify(chunks, null, 2) layout")
    nl = _newlines(data)
    # A chunk starts at a newline followed by `  {` and a newline: nested heading
    # containers are indented by at least four spaces, so nothing else matches.
    cand = nl[nl + 4 < size]
    is_open = (data[cand + 1] == 32) & (data[cand + 2] == 32) & (data[cand + 3] == 123)
    is_open &= data[cand + 4] == 10
    opens = cand[is_open]
    n = len(opens)
    if n == 0 or int(opens[0]) != 1:
        raise StoreFormatError("no chunk objects where the layout puts them")
    k = np.searchsorted(nl, opens)  # index of each chunk's opening newline in `nl`
    if int(k.max()) + 5 >= len(nl):
        raise StoreFormatError("truncated chunk object")
    id_line, content_line = nl[k + 1] + 1, nl[k + 2] + 1
    area_line, source_line = nl[k + 3] + 1, nl[k + 4] + 1
    words = _words(data)
    for positions, prefix in (
        (id_line, _ID_PREFIX),
        (content_line, _CONTENT_PREFIX),
        (area_line, _AREA_PREFIX),
        (source_line, _SOURCE_PREFIX),
    ):
        if not _has_prefix(words, positions, prefix):
            raise StoreFormatError(f"a chunk does not have {prefix.strip()!r} where expected")
    id_start = id_line + len(_ID_PREFIX)
    if not np.all(nl[k + 2] - id_start == ID_WIDTH + 2):  # `<12 bytes>",`
        raise StoreFormatError("a chunk id is not 12 characters")
    ids = np.ascontiguousarray(_columns(words, id_start, ID_WIDTH)).view(f"S{ID_WIDTH}")
    ids = ids.reshape(n)
    starts = opens + 3
    stops = np.empty(n, dtype=np.int64)
    stops[:-1] = opens[1:] - 1  # the comma before the next `\n  {`
    stops[-1] = size - 2  # before the final `\n]`
    if not np.all(data[stops - 1] == 125):
        raise StoreFormatError("a chunk object does not end with '}'")
    codes, names = _area_codes(data, words, area_line + len(_AREA_PREFIX), nl[k + 4] - 2)
    return _Index(starts, stops, ids, codes, names, None)


def _area_codes(
    data: npt.NDArray[np.uint8],
    words: npt.NDArray[np.uint64],
    begin: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Code per chunk of its area (the JSON string between `begin` and `end`), and names.

    Rows are compared with their predecessor in numpy, so Python decodes one area string
    per run of equal areas (stores are area by area), not one per chunk.
    """
    n = len(begin)
    lengths = end - begin
    if n and int(lengths.max()) <= _AREA_WIDTH:
        changed = np.ones(n, dtype=bool)
        changed[1:] = lengths[1:] != lengths[:-1]
        last = len(words) - 1
        for j in range(0, int(lengths.max()), 8):
            # Bytes past a name's end belong to what follows it; mask them off so equal
            # names compare equal (unequal lengths are already a change).
            col = words[np.minimum(begin + j, last)]
            valid = np.clip(lengths - j, 0, 8).astype(np.uint64)
            partial = (np.uint64(1) << (np.uint64(8) * np.minimum(valid, 7))) - np.uint64(1)
            mask = np.where(valid == 8, np.uint64(2**64 - 1), partial)
            col = col & mask
            changed[1:] |= col[1:] != col[:-1]
        run_starts = np.flatnonzero(changed)
    else:
        run_starts = np.arange(n)
    names: list[str] = []
    code_of: dict[bytes, int] = {}
    run_codes = np.empty(len(run_starts), dtype=np.int32)
    for r, row in enumerate(run_starts.tolist()):
        raw = bytes(data[begin[row] : end[row]])
        code = code_of.get(raw)
        if code is None:
            text = raw.decode("utf-8")
            name = json.loads(b'"' + raw + b'"') if "\\" in text else text
            code = code_of[raw] = len(names)
            names.append(name)
        run_codes[r] = code
    counts = np.diff(np.append(run_starts, n))
    return np.repeat(run_codes, counts).astype(np.int32), names


def _block_bounds(index: _Index, size: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Byte [begin, end) of each block of `index` in a file of `size` bytes."""
    assert index.block_rows is not None
    firsts = index.block_rows[:-1]
    begins = index.starts[firsts].astype(np.int64)
    if not len(begins):
        return begins, begins
    begins[0] = 0
    ends = np.append(begins[1:], size).astype(np.int64)
    return begins, ends


def _digest(buffer: Any, begin: int, end: int) -> bytes:
    # SHA-1 identifies a block's bytes for a cache (nothing adversarial), and is the
    # fastest strong hash here (0.26 s for a 477 MB store, SHA-256 0.35 s).
    with memoryview(buffer) as whole:
        return hashlib.sha1(whole[begin:end], usedforsecurity=False).digest()


def _digest_array(digests: Sequence[bytes]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 20).copy()


def _with_blocks(index: _Index, buffer: Any, size: int) -> _Index:
    """`index` cut into blocks of `BLOCK_ROWS` rows, each digested."""
    n = len(index.ids)
    index.block_rows = np.array([*range(0, n, BLOCK_ROWS), n], dtype=np.int64)
    begins, ends = _block_bounds(index, size)
    index.block_digests = _digest_array(
        [_digest(buffer, b, e) for b, e in zip(begins.tolist(), ends.tolist(), strict=True)]
    )
    return index


def _first_appearance(
    codes: npt.NDArray[np.int32], names: list[str]
) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Codes renumbered so names are in order of first appearance (unused ones dropped),
    as `_scan` numbers them."""
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first)]
    remap = np.zeros(len(names), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes].astype(np.int32), [names[c] for c in order.tolist()]


def _reuse(old: _Index, old_size: int, data: npt.NDArray[np.uint8], buffer: Any) -> _Index | None:
    """The index of `data` from `old` (another version of the store) where blocks of
    bytes are unchanged: a prefix at the same offsets, a suffix shifted by the change in
    size; only the bytes between are scanned. None when nothing can be reused.

    A block is reused when its bytes digest as before, so the result is what `_scan`
    returns for a store in the fixed layout.
    """
    if old.block_rows is None or old.block_digests is None or len(old.ids) == 0:
        return None
    size = len(data)
    delta = size - old_size
    begins, ends = _block_bounds(old, old_size)
    digests = [bytes(row) for row in old.block_digests]
    n_blocks = len(digests)
    prefix = 0
    while (
        prefix < n_blocks
        and int(ends[prefix]) <= size
        and _digest(buffer, int(begins[prefix]), int(ends[prefix])) == digests[prefix]
    ):
        prefix += 1
    if prefix == n_blocks and delta == 0:
        return old  # the same bytes (a copy, or touched): the same index
    suffix = n_blocks  # first block of the reused suffix
    floor = int(begins[prefix]) if prefix < n_blocks else old_size
    while (
        suffix > prefix
        and int(begins[suffix - 1]) + delta >= floor
        and _digest(buffer, int(begins[suffix - 1]) + delta, int(ends[suffix - 1]) + delta)
        == digests[suffix - 1]
    ):
        suffix -= 1
    if prefix == 0 and suffix == n_blocks:
        return None
    row_lo, row_hi = int(old.block_rows[prefix]), int(old.block_rows[suffix])
    lo = int(begins[prefix]) if prefix < n_blocks else old_size
    hi = int(begins[suffix]) + delta if suffix < n_blocks else size
    if prefix == 0:
        lo = 4  # the first chunk's `{` (after `[\n  `)
    if hi - lo < 0:
        return None
    middle = _scan_between(data, lo, hi, at_end=suffix == n_blocks)
    if middle is None:
        return None
    names = list(old.area_names) + [a for a in middle.area_names if a not in old.area_names]
    remap = np.array([names.index(a) for a in middle.area_names], dtype=np.int32)
    codes = np.concatenate(
        [
            old.area_codes[:row_lo],
            remap[middle.area_codes] if len(remap) else middle.area_codes,
            old.area_codes[row_hi:],
        ]
    ).astype(np.int32)
    codes, names = _first_appearance(codes, names)
    index = _Index(
        np.concatenate([old.starts[:row_lo], middle.starts, old.starts[row_hi:] + delta]),
        np.concatenate([old.stops[:row_lo], middle.stops, old.stops[row_hi:] + delta]),
        np.concatenate([old.ids[:row_lo], middle.ids, old.ids[row_hi:]]),
        codes,
        names,
        None,
    )
    # Blocks: the reused prefix's, the middle's (new, digested), the suffix's (shifted).
    n_mid = len(middle.ids)
    mid_rows = list(range(row_lo, row_lo + n_mid, BLOCK_ROWS))
    suffix_rows = (old.block_rows[suffix:-1] - row_hi + row_lo + n_mid).tolist()
    n = len(index.ids)
    index.block_rows = np.array(
        old.block_rows[:prefix].tolist() + mid_rows + suffix_rows + [n], dtype=np.int64
    )
    if n == 0:
        return None
    new_begins, new_ends = _block_bounds(index, size)
    fresh = [
        _digest(buffer, int(new_begins[j]), int(new_ends[j]))
        for j in range(prefix, prefix + len(mid_rows))
    ]
    shifted = digests[suffix:]
    if prefix == 0 and not mid_rows:
        # The first shifted block now starts the file: its bytes include the `[`.
        shifted[0] = _digest(buffer, int(new_begins[0]), int(new_ends[0]))
    index.block_digests = _digest_array(digests[:prefix] + fresh + shifted)
    return index


def _scan_between(data: npt.NDArray[np.uint8], lo: int, hi: int, at_end: bool) -> _Index | None:
    """Scan the chunk objects from the `{` at `lo` to the block boundary `hi` (the next
    `{`, or the file's end when `at_end`), as positions in the whole file."""
    if hi == lo:
        empty = np.zeros(0, dtype=np.int64)
        return _Index(empty, empty, np.zeros(0, "S12"), np.zeros(0, np.int32), [], None)
    stop = len(data) - 2 if at_end else hi - 4
    if stop <= lo or bytes(data[lo - 3 : lo + 1]) != b"\n  {":
        return None
    if (bytes(data[stop:]) != b"\n]") if at_end else (bytes(data[stop:hi]) != b",\n  "):
        return None
    piece = np.frombuffer(b"[\n  " + bytes(data[lo:stop]) + b"\n]", dtype=np.uint8)
    try:
        index = _scan(piece)
    except StoreFormatError:
        return None
    shift = lo - 4
    index.starts = index.starts + shift
    index.stops = index.stops + shift
    return index


def _fragment_row(fragment: bytes) -> Chunk:
    """One chunk object's bytes as `parse_store` would decode it."""
    if _SURROGATE_ESCAPE.search(fragment):
        return chunk_from_row(parse_json(fragment.decode("utf-8")))
    try:
        row = json.loads(fragment)
    except RecursionError:  # a very deeply nested heading: JSON.parse has no depth limit
        return chunk_from_row(parse_json(fragment.decode("utf-8")))
    heading = row.get("heading", NO_HEADING)
    if heading is not NO_HEADING and not isinstance(heading, str):
        return chunk_from_row(parse_json(fragment.decode("utf-8")))
    return chunk_from_row(row)


def _run_chunks(objects: bytes) -> list[Chunk]:
    """Chunks of the store's comma-separated objects in `objects` (one `json.loads`)."""
    text = b"[" + objects + b"]"
    if _SURROGATE_ESCAPE.search(text):
        return [chunk_from_row(r) for r in parse_json(text.decode("utf-8"))]
    try:
        rows = json.loads(text)
    except RecursionError:  # a very deeply nested heading: JSON.parse has no depth limit
        return [chunk_from_row(r) for r in parse_json(text.decode("utf-8"))]
    out: list[Chunk] = []
    for row in rows:
        heading = row.get("heading", NO_HEADING)
        if heading is not NO_HEADING and not isinstance(heading, str):
            # Numbers must come back as doubles, keys in JavaScript order: re-read the row
            # with JSON.parse semantics (rare: malformed roadmap titles only).
            return [chunk_from_row(r) for r in parse_json(text.decode("utf-8"))]
        out.append(chunk_from_row(row))
    return out


_HEX_VALUE = np.full(256, 255, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def id_keys(ids: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64] | None:
    """Ids of 12 lower-case hex digits as uint64 numbers, or None if any id is not.

    The numbers sort exactly as the ids do (fixed width, '0'-'9' before 'a'-'f'), and
    comparing integers is several times faster than comparing 12-byte strings, which is
    what looking up hundreds of thousands of ids in sorted caches spends its time on.
    """
    if ids.dtype.itemsize != ID_WIDTH:
        return None
    raw = np.ascontiguousarray(ids).view(np.uint8).reshape(len(ids), ID_WIDTH)
    nibbles = _HEX_VALUE[raw]
    if len(ids) and int(nibbles.max()) > 15:
        return None
    keys = np.zeros(len(ids), dtype=np.uint64)
    for column in range(ID_WIDTH):
        keys = (keys << np.uint64(4)) | nibbles[:, column].astype(np.uint64)
    return keys


class IdLookup:
    """Finds a fixed set of ids (`needles`) in sorted id arrays, many times over.

    The needles are converted to integer keys (`id_keys`) and sorted once; numpy's
    binary search is much faster for sorted needles, so looking up an area's 275k ids in
    a dozen cache segments costs milliseconds per segment.
    """

    def __init__(self, needles: npt.NDArray[np.bytes_]) -> None:
        self.needles = needles
        self._keys = id_keys(needles)
        self._order = np.argsort(self._keys if self._keys is not None else needles)
        self._sorted_keys = self._keys[self._order] if self._keys is not None else None
        self._sorted_ids = needles[self._order]

    def find(
        self, haystack: npt.NDArray[np.bytes_]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
        """Per needle: its position in the sorted `haystack`, and whether it is there."""
        n = len(self.needles)
        if len(haystack) == 0 or n == 0:
            return np.zeros(n, dtype=np.intp), np.zeros(n, dtype=bool)
        hay_keys = id_keys(haystack) if self._sorted_keys is not None else None
        hay: Any = hay_keys if hay_keys is not None else haystack
        wanted: Any = self._sorted_keys if hay_keys is not None else self._sorted_ids
        found = np.minimum(np.searchsorted(hay, wanted), len(hay) - 1)
        pos = np.empty(n, dtype=np.intp)
        hit = np.empty(n, dtype=bool)
        pos[self._order] = found
        hit[self._order] = hay[found] == wanted
        return pos, hit


def lookup_sorted(
    haystack: npt.NDArray[np.bytes_], needles: npt.NDArray[np.bytes_]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    """For each needle, its position in the sorted `haystack` and whether it is there."""
    return IdLookup(needles).find(haystack)


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
                    index = _with_blocks(_scan(data), self._buffer, stat.size)
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

    def _index_by_parsing(self) -> _Index:
        """Any valid store that is not in the fixed layout: parse it whole, keep it."""
        chunks = parse_store(bytes(self._buffer))
        self._chunks = chunks
        names: dict[str, int] = {}
        codes = np.array([names.setdefault(c.area, len(names)) for c in chunks], dtype=np.int32)
        encoded = [c.id.encode("utf-8") for c in chunks]
        ids = np.array(encoded) if encoded else np.zeros(0, dtype=f"S{ID_WIDTH}")
        empty = np.zeros(len(chunks), dtype=np.int64)
        return _Index(empty, empty, ids, codes, list(names), None)

    def _sidecar_path(self) -> Path | None:
        if self._layout is None:
            return None
        name = f"v{STORE_INDEX_VERSION}-{self._stat.key()}.npz"
        return self._layout.store_index_dir / name

    def _reuse_previous(self, data: npt.NDArray[np.uint8]) -> _Index | None:
        """The index from the newest other sidecar's unchanged blocks (see `_reuse`)."""
        own = self._sidecar_path()
        if own is None or not self._stat.size or not own.parent.is_dir():
            return None
        others = sorted(
            (p for p in own.parent.glob(f"v{STORE_INDEX_VERSION}-*.npz") if p != own),
            key=lambda p: _mtime_ns(p),
            reverse=True,
        )
        for path in others[:1]:
            try:
                old_size = int(path.name.split("-")[1])
            except (IndexError, ValueError):
                continue
            old = self._read_sidecar(path)
            if old is not None:
                index = _reuse(old, old_size, data, self._buffer)
                if index is not None:
                    index.sha256 = None  # this file's, computed when saved
                    return index
        return None

    def _load_sidecar(self) -> _Index | None:
        path = self._sidecar_path()
        if path is None or not path.is_file():
            return None
        index = self._read_sidecar(path)
        if index is None:
            return None
        if len(index.starts) and int(index.stops[-1]) > self._stat.size:
            return None
        return index

    def _read_sidecar(self, path: Path) -> _Index | None:
        """A saved sidecar (a damaged one is removed and None returned)."""

        def load() -> _Index | None:
            if not path.is_file():
                return None
            with np.load(path, allow_pickle=False) as saved:
                meta = json.loads(bytes(saved["meta"]).decode("utf-8"))
                return _Index(
                    saved["starts"],
                    saved["stops"],
                    saved["ids"],
                    saved["area_codes"],
                    list(meta["areas"]),
                    meta.get("sha256"),
                    saved["block_rows"],
                    saved["block_digests"],
                )

        # A damaged sidecar is rebuilt, never trusted.
        return healed(path, load, what="store sidecar", consequence="rebuilt from the store")

    def _save_sidecar(self, index: _Index) -> None:
        """Persist the index (and the sha256, computed now) for the next process."""
        path = self._sidecar_path()
        if path is None:
            return
        index.sha256 = self._known_sha256 or self._whole_file_sha256()
        assert index.block_rows is not None and index.block_digests is not None
        meta = json.dumps({"areas": index.area_names, "sha256": index.sha256}).encode("utf-8")
        try:
            with atomic_writer(path) as handle:
                np.savez(
                    handle,
                    starts=index.starts,
                    stops=index.stops,
                    ids=index.ids,
                    area_codes=index.area_codes,
                    block_rows=index.block_rows,
                    block_digests=index.block_digests,
                    meta=np.frombuffer(meta, dtype=np.uint8),
                )
            _prune(path.parent, keep=path)
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
        return sha256_hex(np.ascontiguousarray(ids).tobytes())

    def chunk_at(self, i: int) -> Chunk:
        """The chunk at store position `i`."""
        if self._chunks is not None:
            return self._chunks[i]
        start, stop = int(self._index.starts[i]), int(self._index.stops[i])
        return _fragment_row(self._read(start, stop))

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
        rows = self.rows_of_area(area)
        if self._chunks is not None:
            return [self._chunks[i] for i in rows.tolist()]
        if len(rows) == 0:
            return []
        return self._decode_runs(rows.astype(np.int64))

    def all_chunks(self) -> list[Chunk]:
        """Every chunk in store order (what `parse_store` returns)."""
        if self._chunks is not None:
            return list(self._chunks)
        if not len(self):
            return []
        return _run_chunks(self._read(int(self._index.starts[0]), int(self._index.stops[-1])))

    def close(self) -> None:
        """Release the memory map (the view must not be used afterwards)."""
        if self._mmap is not None:
            with contextlib.suppress(BufferError):
                self._mmap.close()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _prune(directory: Path, keep: Path) -> None:
    """Keep the newest few sidecars: one per store version a reader may still hold."""
    sidecars = sorted(
        (p for p in directory.glob("v*.npz") if p != keep),
        key=lambda p: p.stat().st_mtime_ns,
        reverse=True,
    )
    for stale in sidecars[_KEEP_SIDECARS - 1 :]:
        with contextlib.suppress(FileNotFoundError):
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


def clear_views() -> None:
    """Forget memoised views (tests and benchmarks use it to simulate a new process)."""
    with _VIEWS_LOCK:
        _VIEWS.clear()
