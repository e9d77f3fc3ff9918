"""Ids as integer keys, and finding ids in sorted arrays (against a plain Python search)."""

from __future__ import annotations

import random

import numpy as np

from brain_pipeline.corpus.id_lookup import id_keys, lookup_sorted


def _ids(values: list[str]) -> np.ndarray:
    return np.array([v.encode() for v in values], dtype="S12")


def test_hex_ids_sort_as_their_keys() -> None:
    rng = random.Random(3)
    values = [f"{rng.getrandbits(48):012x}" for _ in range(200)]
    keys = id_keys(_ids(values))
    assert keys is not None
    assert [values[i] for i in np.argsort(keys, kind="stable")] == sorted(values)
    assert int(keys[0]) == int(values[0], 16)


def test_anything_but_twelve_lower_hex_digits_has_no_keys() -> None:
    assert id_keys(_ids(["0123456789AB"])) is None  # upper case
    assert id_keys(_ids(["0123456789ag"])) is None
    assert id_keys(np.array([b"0123"], dtype="S4")) is None


def test_lookup_matches_a_plain_search_with_keys_or_without() -> None:
    rng = random.Random(5)
    for width in ("hex", "text"):
        pool = [f"{rng.getrandbits(48):012x}" for _ in range(300)]
        if width == "text":
            pool = [f"id-{v[:8]}" for v in pool]
        haystack = sorted(set(pool[:200]))
        needles = pool[150:] + ["ffffffffffff", "000000000000"]
        positions, hits = lookup_sorted(_ids(haystack), _ids(needles))
        for needle, position, hit in zip(needles, positions, hits, strict=True):
            assert bool(hit) == (needle in haystack), needle
            if hit:
                assert haystack[position] == needle


def test_an_empty_haystack_finds_nothing() -> None:
    positions, hits = lookup_sorted(_ids([]), _ids(["0123456789ab"]))
    assert hits.tolist() == [False] and positions.tolist() == [0]
