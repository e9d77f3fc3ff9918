"""The sidecar scan against the JSON parser: every chunk's bytes, id and area, and blocks
reused from another version of the store exactly as a fresh scan finds them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from brain_pipeline.corpus import store_scan
from brain_pipeline.corpus.store import Chunk, chunk_id, parse_store, serialize_store
from brain_pipeline.corpus.store_scan import StoreFormatError, reuse_blocks, scan_store, with_blocks


def _chunks(n: int, salt: str = "") -> list[Chunk]:
    texts = [f"Paragraph {i}{salt}: \"quoted\" text, long enough to keep." for i in range(n)]
    return [
        Chunk(chunk_id(t), t, ("aws", "python", "sql")[i % 3], f"a/f{i}.md", {"h": [i]})
        for i, t in enumerate(texts)
    ]


def _array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def test_each_row_is_a_chunk_object_with_its_id_and_area() -> None:
    chunks = _chunks(7)
    data = serialize_store(chunks)
    index = scan_store(_array(data))
    assert [i.decode() for i in index.ids] == [c.id for c in chunks]
    areas = [index.area_names[c] for c in index.area_codes]
    assert areas == [c.area for c in chunks]
    for chunk, start, stop in zip(chunks, index.starts, index.stops, strict=True):
        assert json.loads(data[start:stop])["content"] == chunk.content
    assert parse_store(data) == chunks  # the oracle reads what the scan indexed


def test_the_empty_store_and_other_bytes() -> None:
    assert len(scan_store(_array(b"[]")).ids) == 0
    with pytest.raises(StoreFormatError):
        scan_store(_array(b'[{"id": "x"}]'))


def test_reused_blocks_give_what_a_fresh_scan_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_scan, "BLOCK_ROWS", 4)  # many blocks from a small store
    old_chunks = _chunks(30)
    old = serialize_store(old_chunks)
    old_index = with_blocks(scan_store(_array(old)), old, len(old))
    new_chunks = [*old_chunks[:13], *_chunks(3, salt=" edited"), *old_chunks[14:]]
    new = serialize_store(new_chunks)

    reused = reuse_blocks(old_index, len(old), _array(new), new)
    fresh = scan_store(_array(new))

    assert reused is not None
    assert np.array_equal(reused.starts, fresh.starts)
    assert np.array_equal(reused.stops, fresh.stops)
    assert np.array_equal(reused.ids, fresh.ids)
    assert [reused.area_names[c] for c in reused.area_codes] == [
        fresh.area_names[c] for c in fresh.area_codes
    ]
