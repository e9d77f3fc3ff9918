"""knowledge-store.json bytes and ids, compared with what Node.js itself produces."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from brain_pipeline.corpus.jscompat import parse_json
from brain_pipeline.corpus.store import (
    NO_HEADING,
    STORE_FILENAME,
    Chunk,
    chunk_id,
    deduplicate,
    load_store,
    parse_store,
    serialize_store,
)

ALPHABET = (
    'abc XYZ 09 é漢😀 "\\/ \n\r\t\b\f\x00\x01\x1f\x7f\u2028\u2029\ufeff\u00a0'
    "\ud800\udbff\udc00\udfff"
)


def _random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(size))


def _js_rows(chunks: list[Chunk]) -> list[dict[str, Any]]:
    """The chunk objects as Node will rebuild them (heading omitted when absent)."""
    rows = []
    for c in chunks:
        row: dict[str, Any] = {"id": c.id, "content": c.content, "area": c.area, "source": c.source}
        if c.has_heading:
            row["heading"] = c.heading
        rows.append(row)
    return rows


def _node_store(
    node: Any, chunks: list[Chunk], heading_texts: list[str | None] | None = None
) -> bytes:
    """Node's JSON.stringify(chunks, null, 2); headings travel as JSON text for JSON.parse."""
    payload = [
        [r, json.dumps(r.pop("heading"), ensure_ascii=True) if "heading" in r else None]
        for r in _js_rows(chunks)
    ]
    if heading_texts is not None:
        payload = [[row, text] for (row, _), text in zip(payload, heading_texts, strict=True)]
    text = node(
        "return JSON.stringify(input.map(([r,h])=>{"
        "const o={id:r.id,content:r.content,area:r.area,source:r.source};"
        "if(h!==null)o.heading=JSON.parse(h);return o}),null,2);",
        payload,
    )
    return str(text).encode("utf-8")


def test_serialization_matches_json_stringify_on_random_strings(node: Any) -> None:
    rng = random.Random(3)
    chunks = []
    for i in range(400):
        content = _random_text(rng, rng.randrange(0, 40))
        heading = rng.choice([NO_HEADING, _random_text(rng, 6), "Intro"])
        chunks.append(Chunk(chunk_id(content), content, f"area{i % 3}", f"a/{i}.md", heading))
    ours = serialize_store(chunks)
    assert ours == _node_store(node, chunks)
    ours.decode("utf-8")  # always encodable: lone surrogates are escaped


HEADINGS = [
    "null",
    "null",
    "1",
    "1e400",
    "-0",
    "1e21",
    "0.000001",
    "1e-7",
    "true",
    '[1,"a",[null,[]],{}]',
    '{"b":1,"2":[],"a":{"1":"x","0":"y"},"b":2}',
    '"\\ud800"',
    "[[[[]]]]",
    '{"":[{}]}',
]


def test_non_string_headings_match_json_stringify(node: Any) -> None:
    chunks = [
        Chunk(chunk_id(str(i)), f"content {i}", "a", "a/r.json", parse_json(text))
        for i, text in enumerate(HEADINGS)
    ]
    shared = parse_json('[1, {"a": "b"}]')  # one heading object reused by neighbours
    chunks += [Chunk(f"s{i}", "s", "a", "a/r.json", shared) for i in range(2)]
    chunks.append(Chunk("t", "t", "a", "a/r.json"))
    texts: list[str | None] = [*HEADINGS, '[1, {"a": "b"}]', '[1, {"a": "b"}]', None]
    assert serialize_store(chunks) == _node_store(node, chunks, texts)


def test_empty_store_and_exact_layout() -> None:
    assert serialize_store([]) == b"[]"
    one = serialize_store([Chunk("abc", "x/y", "a", "a/b.md")])
    assert (
        one == b'[\n  {\n    "id": "abc",\n    "content": "x/y",\n    "area": "a",\n'
        b'    "source": "a/b.md"\n  }\n]'
    )
    assert not one.endswith(b"\n")


def test_chunk_id_is_sha256_prefix_of_utf8() -> None:
    text = "Héllo wörld 😀"
    assert chunk_id(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def test_chunk_id_hashes_lone_surrogates_as_replacement_character(node: Any) -> None:
    samples = ["\ud800", "a\udc00b", "x\ud83d\ude00", "\ud83d", "\ude00\ud83d"]
    expected = node(
        "const c=require('crypto');"
        "return input.map(s=>c.createHash('sha256').update(s).digest('hex').slice(0,12));",
        samples,
    )
    assert [chunk_id(s) for s in samples] == expected
    assert chunk_id("\ud800") == chunk_id("\ufffd")


def test_parse_store_round_trips_everything_we_write() -> None:
    chunks = [
        Chunk(chunk_id("a\ud800"), "a\ud800", "a", "a/r.json", parse_json('[1,{"x":"\\udfff"}]')),
        Chunk("b" * 12, "plain", "b", "b/x.md"),
        Chunk("c" * 12, "t", "b", "b/r.json", 1e21),
        Chunk("d" * 12, "deep", "b", "b/r.json", parse_json("[" * 5000 + "]" * 5000)),
    ]
    data = serialize_store(chunks)
    back = parse_store(data)
    assert serialize_store(back) == data
    assert back[0].content == "a\ud800" and back[1].heading is NO_HEADING


def test_load_store_accepts_file_or_directory(tmp_path: Path) -> None:
    chunks = [Chunk("a" * 12, "one", "a", "a/x.md", "H")]
    (tmp_path / STORE_FILENAME).write_bytes(serialize_store(chunks))
    assert load_store(tmp_path) == chunks
    assert load_store(tmp_path / STORE_FILENAME) == chunks


@pytest.mark.parametrize(
    "bad", [b"{}", b"[1]", b'[{"id":"x"}]', b'[{"id":1,"content":"","area":"","source":""}]']
)
def test_parse_store_rejects_other_shapes(bad: bytes) -> None:
    with pytest.raises(ValueError):
        parse_store(bad)


def test_deduplicate_keeps_first_occurrence() -> None:
    a1 = Chunk("a", "x", "area1", "area1/f.md")
    a2 = Chunk("a", "x", "area2", "area2/f.md", "H")
    b = Chunk("b", "y", "area2", "area2/f.md")
    kept, collapsed = deduplicate([a1, b, a2])
    assert kept == [a1, b] and collapsed == 1


def test_no_heading_survives_pickling() -> None:
    import pickle

    chunk = Chunk("a", "x", "a", "a/x.md")
    assert pickle.loads(pickle.dumps(chunk)).heading is NO_HEADING
