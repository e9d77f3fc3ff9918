"""What the agent's Node.js loader can read: V8's maximum string length.

The agent reads knowledge-store.json into one JavaScript string. V8 caps a string at
2**29 - 24 = 536,870,888 UTF-16 code units on 64-bit builds, and fails with
`ERR_STRING_TOO_LONG` past it — a store that grows with its corpus breaks the agent
without any error on our side unless we count as V8 does.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

NODE_MAX_STRING_UNITS = 536_870_888
WARN_FRACTION = 0.8
_BLOCK = 1 << 24


def utf16_units_of_utf8(data: bytes | memoryview | mmap.mmap) -> int:
    """UTF-16 code units of well-formed UTF-8 text, counted without decoding it.

    Every code point starts with a byte that is not a continuation byte (10xxxxxx), and
    each four-byte sequence (lead byte 11110xxx) is one astral code point, which UTF-16
    writes as a surrogate pair: units = lead bytes + four-byte leads.
    """
    array = np.frombuffer(data, dtype=np.uint8)
    units = 0
    for start in range(0, array.size, _BLOCK):
        block = array[start : start + _BLOCK]
        units += int(np.count_nonzero((block & 0xC0) != 0x80))
        units += int(np.count_nonzero(block >= 0xF0))
    return units


@dataclass(frozen=True)
class SizeVerdict:
    """`level` is "ok", "warn" (past 80 % of the limit) or "block" (past the limit)."""

    level: str
    units: int
    limit: int
    message: str

    @property
    def fraction(self) -> float:
        return self.units / self.limit if self.limit else 0.0


def string_limit(configured: int | None = None) -> int:
    """The limit a store is judged against: the configured one, else the agent's own,
    read now (not bound when this module loaded)."""
    return configured if configured is not None else NODE_MAX_STRING_UNITS


def size_verdict(units: int, limit: int | None = None) -> SizeVerdict:
    limit = string_limit(limit)
    share = units / limit if limit else 0.0
    where = (
        f"knowledge-store.json is {units:,} UTF-16 code units, {share:.1%} of the agent's "
        f"limit of {limit:,} (Node.js maximum string length)"
    )
    if units > limit:
        return SizeVerdict("block", units, limit, f"{where}: the agent cannot load it")
    if share >= WARN_FRACTION:
        return SizeVerdict("warn", units, limit, f"{where}: split areas or trim the corpus soon")
    return SizeVerdict("ok", units, limit, where)
