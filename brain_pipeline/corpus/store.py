"""The knowledge store: `Chunk`, content-addressed ids, and knowledge-store.json I/O.

PLACEHOLDER SERIALISATION: the exact JSON.stringify-compatible writer, de-duplication
and edge cases are owned by the corpus work; the `Chunk` shape and the function names
below are the interface every other module relies on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE_FILENAME = "knowledge-store.json"


class _NoHeading:
    """Sentinel type: the chunk has no heading and the key is omitted from the JSON."""

    _instance: _NoHeading | None = None

    def __new__(cls) -> _NoHeading:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_HEADING"

    def __bool__(self) -> bool:
        return False


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


def chunk_id(content: str) -> str:
    """First 12 lower-case hex chars of SHA-256 over the content's UTF-8 bytes."""
    data = content.encode("utf-8", errors="surrogatepass")
    return hashlib.sha256(data).hexdigest()[:12]


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


def serialize_store(chunks: Sequence[Chunk]) -> bytes:
    """knowledge-store.json bytes, as JSON.stringify(chunks, null, 2)."""
    rows: list[dict[str, Any]] = []
    for c in chunks:
        row: dict[str, Any] = {"id": c.id, "content": c.content, "area": c.area, "source": c.source}
        if c.has_heading:
            row["heading"] = c.heading
        rows.append(row)
    return json.dumps(rows, indent=2, ensure_ascii=False).encode("utf-8")


def parse_store(data: bytes) -> list[Chunk]:
    """Read knowledge-store.json bytes back into chunks (heading absent -> NO_HEADING)."""
    rows = json.loads(data.decode("utf-8"))
    if not isinstance(rows, list):
        raise ValueError("knowledge-store.json must be a JSON array")
    return [
        Chunk(r["id"], r["content"], r["area"], r["source"], r.get("heading", NO_HEADING))
        for r in rows
    ]


def load_store(path: Path | str) -> list[Chunk]:
    """Load a store from a file or from a store directory holding knowledge-store.json."""
    target = Path(path)
    if target.is_dir():
        target = target / STORE_FILENAME
    return parse_store(target.read_bytes())
