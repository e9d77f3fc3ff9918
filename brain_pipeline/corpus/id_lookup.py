"""Looking up chunk ids in sorted id arrays, fast: ids as integers, needles sorted once.

Chunk ids are 12 lower-case hex digits (`ID_WIDTH` bytes, numpy `S12`). The store
reader, the token and legacy caches and the chunk history all find hundreds of
thousands of them in sorted arrays; `id_keys` turns them into uint64 numbers that sort
the same way and compare several times faster.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

ID_WIDTH = 12

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
