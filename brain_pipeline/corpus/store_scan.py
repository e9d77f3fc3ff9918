"""The sidecar index of knowledge-store.json: built by one scan, or reused block by block.

The store's format is fixed (`JSON.stringify(chunks, null, 2)`): every chunk object
starts with `\\n  {\\n    "id": "` and, since JSON strings never hold a raw newline,
every line of a chunk is one member. So one vectorised scan over the newline positions
finds each chunk's byte range, its id and its area line; the result (offsets, ids as
numpy `S12`, area codes) is the *sidecar index* (`StoreIndex`), which
`corpus.store_reader` saves under `layout.store_index_dir` so a later process maps the
store and loads the index without reading the store at all.

A new version of the store (after an edit) is mostly the previous version's bytes: the
sidecar also keeps a SHA-1 per block of `BLOCK_ROWS` chunks, so a store without a sidecar
of its own first tries the newest other sidecar: blocks whose bytes digest as before are
reused (a prefix at the same offsets, a suffix shifted by the change in size) and only
the bytes between them are scanned (`reuse_blocks`). Digesting costs about a fifth of a
scan.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import ID_WIDTH
from brain_pipeline.utils.digest import block_sha1

BLOCK_ROWS = 8_192
"""Chunks per block of the sidecar's block digests (about 3.5 MB of a typical store)."""

_ID_PREFIX = b'    "id": "'
_CONTENT_PREFIX = b'    "content": "'
_AREA_PREFIX = b'    "area": "'
_SOURCE_PREFIX = b'    "source": "'
_SCAN_BLOCK = 1 << 24  # bytes per vectorised newline scan (16 MiB of temporaries at most)
_AREA_WIDTH = 64  # area names up to this many bytes are compared without Python


class StoreFormatError(ValueError):
    """The file is not knowledge-store.json in the fixed layout (callers fall back)."""


@dataclass
class StoreIndex:
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

    @classmethod
    def empty(cls) -> StoreIndex:
        """The index of a store (or a stretch of one) without chunks."""
        none = np.zeros(0, dtype=np.int64)
        return cls(none, none, np.zeros(0, f"S{ID_WIDTH}"), np.zeros(0, np.int32), [], None)


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


def scan_store(data: npt.NDArray[np.uint8]) -> StoreIndex:
    """Build the index of a store in the fixed layout; StoreFormatError otherwise."""
    size = len(data)
    if size == 2 and bytes(data) == b"[]":
        return StoreIndex.empty()
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
    return StoreIndex(starts, stops, ids, codes, names, None)


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


def _block_bounds(
    index: StoreIndex, size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
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
    with memoryview(buffer) as whole:
        return block_sha1(whole[begin:end])


def _digest_array(digests: Sequence[bytes]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 20).copy()


def with_blocks(index: StoreIndex, buffer: Any, size: int) -> StoreIndex:
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
    as `scan_store` numbers them."""
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first)]
    remap = np.zeros(len(names), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes].astype(np.int32), [names[c] for c in order.tolist()]


def reuse_blocks(
    old: StoreIndex, old_size: int, data: npt.NDArray[np.uint8], buffer: Any
) -> StoreIndex | None:
    """The index of `data` from `old` (another version of the store) where blocks of
    bytes are unchanged: a prefix at the same offsets, a suffix shifted by the change in
    size; only the bytes between are scanned. None when nothing can be reused.

    A block is reused when its bytes digest as before, so the result is what `scan_store`
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
    index = StoreIndex(
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


def _scan_between(data: npt.NDArray[np.uint8], lo: int, hi: int, at_end: bool) -> StoreIndex | None:
    """Scan the chunk objects from the `{` at `lo` to the block boundary `hi` (the next
    `{`, or the file's end when `at_end`), as positions in the whole file."""
    if hi == lo:
        return StoreIndex.empty()
    stop = len(data) - 2 if at_end else hi - 4
    if stop <= lo or bytes(data[lo - 3 : lo + 1]) != b"\n  {":
        return None
    if (bytes(data[stop:]) != b"\n]") if at_end else (bytes(data[stop:hi]) != b",\n  "):
        return None
    piece = np.frombuffer(b"[\n  " + bytes(data[lo:stop]) + b"\n]", dtype=np.uint8)
    try:
        index = scan_store(piece)
    except StoreFormatError:
        return None
    shift = lo - 4
    index.starts = index.starts + shift
    index.stops = index.stops + shift
    return index
