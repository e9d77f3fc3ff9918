"""The repair score: how much of an old chunk's text a candidate keeps, and excerpts.

The score is **coverage**, an ordered character n-gram containment: the share of the old
text's characters that lie inside `MIN_RUN`-character windows (8) found again in the
candidate in the same order (the longest chain of common windows increasing in both
texts), both texts whitespace-normalised. It is 1.0 for a re-wrap, about 0.99 for a
typo fix (only the windows through the changed letters are lost), and stays 1.0 when a
sentence is added; a rewrite or an unrelated paragraph shares only a few long words and
scores low. Linear in the two lengths, so whole files can be scored.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

MIN_RUN = 8
"""Window length: shorter common strings (a shared short word) do not count as kept text."""
_EXCERPT = 160

SCORE_HELP = (
    "coverage = share of the old text's characters inside "
    f"{MIN_RUN}-character windows found again, in the same order, in the candidate "
    "(whitespace-normalised)"
)


def normalise(text: str) -> str:
    """Whitespace runs collapsed to one space, ends trimmed: re-wrapping changes nothing."""
    return " ".join(text.split())


def kept_runs(old: str, new: str) -> list[tuple[int, int]]:
    """Intervals of `old` covered by MIN_RUN-character windows found again, in order, in `new`.

    Every window of `old` that occurs in `new` is a (position in old, position in new)
    pair; the longest chain increasing in both (patience sorting) is what was kept, so a
    rewrite that reuses the words in another order keeps little.
    """
    n = MIN_RUN
    if len(old) < n or len(new) < n:
        return [(0, len(old))] if old and old in new else []
    where: dict[str, list[int]] = {}
    for j in range(len(new) - n + 1):
        where.setdefault(new[j : j + n], []).append(j)
    tails: list[int] = []  # tails[k]: smallest new-position ending a chain of length k + 1
    ends: list[int] = []  # the pair index of that chain's last element
    pairs: list[int] = []  # old position of each pair
    previous: list[int] = []
    for i in range(len(old) - n + 1):
        found = where.get(old[i : i + n])
        if not found:
            continue
        for j in reversed(found):  # descending: one old window extends a chain at most once
            k = bisect_left(tails, j)
            previous.append(ends[k - 1] if k else -1)
            pairs.append(i)
            if k == len(tails):
                tails.append(j)
                ends.append(len(pairs) - 1)
            else:
                tails[k] = j
                ends[k] = len(pairs) - 1
    kept: list[int] = []
    p = ends[-1] if ends else -1
    while p >= 0:
        kept.append(pairs[p])
        p = previous[p]
    runs: list[tuple[int, int]] = []
    for i in reversed(kept):
        if runs and runs[-1][1] >= i:
            runs[-1] = (runs[-1][0], i + n)
        else:
            runs.append((i, i + n))
    return runs


def covered(intervals: Iterable[tuple[int, int]]) -> int:
    """How many characters the (possibly overlapping) intervals cover together."""
    total, reach = 0, 0
    for start, end in sorted(intervals):
        start = max(start, reach)
        if end > start:
            total += end - start
            reach = end
    return total


def coverage(old: str, new: str) -> float:
    """The repair score (see the module doc) of `new` against `old`, in [0, 1]."""
    a, b = normalise(old), normalise(new)
    return covered(kept_runs(a, b)) / len(a) if a else 0.0


def excerpt(text: str, size: int = _EXCERPT) -> str:
    flat = normalise(text)
    return flat if len(flat) <= size else flat[: size - 1].rstrip() + "…"
