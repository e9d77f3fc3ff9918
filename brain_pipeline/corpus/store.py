"""The knowledge store: `Chunk`, content-addressed ids, and knowledge-store.json I/O.

The running agent and the hand-labelled evaluation fixture both depend on the exact
bytes the original Node.js script wrote, so ids hash what Node hashes (lone surrogates
as U+FFFD) and the writer reproduces `JSON.stringify(chunks, null, 2)` byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain_pipeline.corpus.jscompat import (
    escape_lone_surrogates,
    json_stringify,
    json_stringify_size,
    parse_json,
    quote,
    utf8_bytes,
)
from brain_pipeline.corpus.jscompat import quote_raw as _quote_raw
from brain_pipeline.utils.digest import sha256_hex

STORE_FILENAME = "knowledge-store.json"


class _NoHeading:
    """Sentinel type: the chunk has no heading and the key is omitted from the JSON.

    Made once, as `NO_HEADING`; copies and pickles resolve to that one object by name.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_HEADING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NO_HEADING"  # pickles (e.g. Dagster IO managers) keep the singleton


NO_HEADING: Any = _NoHeading()


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage. `heading` is any JSON value (roadmap titles can be numbers) or NO_HEADING."""

    id: str
    content: str
    area: str
    source: str
    heading: Any = NO_HEADING

    @property
    def has_heading(self) -> bool:
        return self.heading is not NO_HEADING


def heading_text(heading: Any) -> str:
    """A heading as a person reads it: the string, a number's or object's JSON, or ""."""
    if heading is NO_HEADING or heading is None:
        return ""
    if isinstance(heading, str):
        return heading
    try:
        return json.dumps(heading, ensure_ascii=False)
    except RecursionError:  # a malformed roadmap title nested thousands deep
        return json_stringify(heading, indent="")


def chunk_id(content: str) -> str:
    """First 12 lower-case hex chars of SHA-256 over the content's UTF-8 bytes.

    Node.js encodes a lone surrogate (possible only via a JSON `\\ud800` escape) as
    U+FFFD, so two contents differing only there share an id, as they did originally.
    """
    return sha256_hex(utf8_bytes(content))[:12]


def deduplicate(chunks: Iterable[Chunk]) -> tuple[list[Chunk], int]:
    """Keep the first chunk of each id; return the survivors and how many collapsed."""
    seen: set[str] = set()
    kept: list[Chunk] = []
    collapsed = 0
    for chunk in chunks:
        if chunk.id in seen:
            collapsed += 1
            continue
        seen.add(chunk.id)
        kept.append(chunk)
    return kept, collapsed


def _heading_member(heading: Any) -> str:
    """The end of a row: `"heading": ...` when there is one, then the closing brace."""
    if heading is NO_HEADING:
        return "\n  }"
    value = _quote_raw(heading) if isinstance(heading, str) else json_stringify(heading, "  ", 2)
    return ',\n    "heading": ' + value + "\n  }"


def serialize_store(chunks: Sequence[Chunk]) -> bytes:
    """knowledge-store.json bytes, exactly as `JSON.stringify(chunks, null, 2)`.

    `json.dumps(indent=2)` drops to the pure-Python encoder, so the text is assembled
    here from the C string encoder and joined once; area, source and heading repeat from
    one chunk to the next (store order is file order) and are quoted once per run. The C
    encoder's quoting agrees with JavaScript's except for lone surrogates, which it
    leaves raw: they make the final UTF-8 encoding fail, and only then is the text
    escaped (rare: only roadmap JSON can carry them).
    """
    if not chunks:
        return b"[]"
    q = _quote_raw
    parts: list[str] = []
    add = parts.append
    opening = '[\n  {\n    "id": '
    last_area: object = None
    last_source: object = None
    last_heading: object = None
    area_json = source_json = heading_json = ""
    for c in chunks:
        add(opening)
        add(q(c.id))
        add(',\n    "content": ')
        add(q(c.content))
        if c.area is not last_area:
            last_area = c.area
            area_json = ',\n    "area": ' + q(c.area) + ',\n    "source": '
        add(area_json)
        if c.source is not last_source:
            last_source = c.source
            source_json = q(c.source)
        add(source_json)
        if c.heading is not last_heading or last_heading is None:
            last_heading = c.heading
            heading_json = _heading_member(c.heading)
        add(heading_json)
        opening = ',\n  {\n    "id": '
    add("\n]")
    text = "".join(parts)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_lone_surrogates(text).encode("utf-8")


# The fixed parts of one row as `serialize_store` writes it, for `store_size`.
_ROW_FIXED = len('{\n    "id": ') + 14 + len(',\n    "content": ')
_ROW_FIXED += len(',\n    "area": ') + len(',\n    "source": ') + len("\n  }")
_HEADING_KEY = len(',\n    "heading": ')
_ROW_SEPARATOR = len(",\n  ")
_STORE_BRACKETS = len("[\n  ") + len("\n]")


def string_size(text: str) -> int:
    """UTF-8 bytes of `text` as a JSON string literal in the store (quotes included)."""
    quoted = quote(text)  # lone surrogates written as the store writes them: \\udxxx
    return len(quoted) if quoted.isascii() else len(quoted.encode("utf-8"))


def heading_size(heading: Any) -> int:
    """Bytes a row spends on `heading` (its key and value; 0 when it has none)."""
    if heading is NO_HEADING:
        return 0
    if isinstance(heading, str):
        return _HEADING_KEY + string_size(heading)
    return _HEADING_KEY + json_stringify_size(heading, "  ", 2)


def row_size(content_size: int, area_size: int, source_size: int, heading_bytes: int) -> int:
    """Bytes of one row from the sizes of its quoted strings and of its heading member."""
    return _ROW_FIXED + content_size + area_size + source_size + heading_bytes


def rows_store_size(row_sizes_total: int, rows: int) -> int:
    """Bytes of a store holding `rows` rows whose own bytes add up to `row_sizes_total`."""
    if rows == 0:
        return len("[]")
    return _STORE_BRACKETS + row_sizes_total + _ROW_SEPARATOR * (rows - 1)


def store_size(chunks: Sequence[Chunk]) -> int:
    """`len(serialize_store(chunks))`, counted without writing the store.

    Chunks of one file share area, source and (per section) heading objects, so each
    distinct one is measured once: the count costs about one pass over the contents
    even when a long heading repeats on every chunk.
    """
    sizes: dict[int, int] = {}
    keep: list[Any] = []  # holds measured objects so their ids cannot be reused

    def measured(value: Any, measure: Any) -> int:
        key = id(value)
        if key not in sizes:
            sizes[key] = measure(value)
            keep.append(value)
        return sizes[key]

    total = 0
    for c in chunks:
        total += row_size(
            string_size(c.content),
            measured(c.area, string_size),
            measured(c.source, string_size),
            measured(c.heading, heading_size),
        )
    return rows_store_size(total, len(chunks))


def chunk_from_row(row: Any) -> Chunk:
    if not isinstance(row, dict):
        raise ValueError("knowledge-store.json rows must be objects")
    try:
        fields = [row["id"], row["content"], row["area"], row["source"]]
    except KeyError as exc:
        raise ValueError(f"knowledge-store.json row lacks {exc.args[0]!r}") from None
    if not all(isinstance(f, str) for f in fields):
        raise ValueError("knowledge-store.json: id, content, area and source must be strings")
    chunk_key, content, area, source = fields
    return Chunk(chunk_key, content, area, source, row.get("heading", NO_HEADING))


def parse_store(data: bytes) -> list[Chunk]:
    """Read knowledge-store.json bytes back into chunks (heading absent -> NO_HEADING).

    Uses the JSON.parse-compatible reader so escaped lone surrogates, numeric headings
    (as doubles) and deeply nested headings come back as the writer saw them.
    """
    rows = parse_json(data.decode("utf-8"))
    if not isinstance(rows, list):
        raise ValueError("knowledge-store.json must be a JSON array")
    return [chunk_from_row(r) for r in rows]


def load_store(path: Path | str) -> list[Chunk]:
    """Load a store from a file or from a store directory holding knowledge-store.json."""
    target = Path(path)
    if target.is_dir():
        target = target / STORE_FILENAME
    return parse_store(target.read_bytes())
