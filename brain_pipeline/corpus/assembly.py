"""knowledge-store.json from the chunk cache: de-duplicate in discovery order and join.

The cache holds each chunk's store fragment already serialised, so the store is the
fragments of the snapshot's files, in discovery order, first occurrence of an id
winning, joined as `JSON.stringify(chunks, null, 2)` joins them. The bytes are those of
`ingest_corpus(root).store_bytes()` for the same files (the contract in
store-compatibility.md); they are streamed to the target, never held whole in memory.

Whether the store needs assembling at all is the `knowledge_store` step's record's to
say (same chunks, same code: the step does not run); an assembly that does run keeps
the existing file when its bytes come out the same.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from brain_pipeline.corpus.agent_limits import utf16_units_of_utf8
from brain_pipeline.corpus.chunk_cache import (
    FRAGMENT_SEPARATOR,
    ID_SEPARATOR,
    CachedFile,
    cache_version,
    open_cache,
    resolve_rows,
)
from brain_pipeline.corpus.discovery import ManifestEntry
from brain_pipeline.corpus.jscompat import parse_json
from brain_pipeline.corpus.observation import CorpusSnapshot
from brain_pipeline.corpus.store import heading_text
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.utils.atomic import atomic_writer
from brain_pipeline.utils.digest import file_sha256, new_sha256

PREVIEW_ROWS = 12
_FLUSH_BYTES = 1 << 20


@dataclass
class AssemblyReport:
    """What assembling the store produced; `written` is False when the bytes were current."""

    path: str
    sha256: str
    size: int
    chunks: int
    duplicates_collapsed: int
    chunks_per_area: dict[str, int]
    written: bool
    utf16_units: int = 0
    """The store's length as the agent's V8 string (counted while streaming it)."""
    preview: list[dict[str, Any]] = field(default_factory=list)


class _Unchanged(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised inside the atomic writer to drop the temporary file: the bytes are current."""


@dataclass
class _Stream:
    """Hash, measure and buffer the store bytes on their way to the file."""

    out: BinaryIO
    hasher: Any = field(default_factory=new_sha256)
    size: int = 0
    utf16_units: int = 0
    pending: list[bytes] = field(default_factory=list)
    buffered: int = 0

    def write(self, data: bytes) -> None:
        self.pending.append(data)
        self.buffered += len(data)
        if self.buffered >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        data = b"".join(self.pending)
        self.hasher.update(data)
        self.out.write(data)
        self.size += len(data)
        self.utf16_units += utf16_units_of_utf8(data)  # per-byte rule: any split is fine
        self.pending.clear()
        self.buffered = 0


@dataclass
class _Dedup:
    """First-occurrence-wins de-duplication over per-file fragment bodies."""

    stream: _Stream
    seen: set[str] = field(default_factory=set)
    chunks: int = 0
    collapsed: int = 0
    per_area: Counter[str] = field(default_factory=Counter)
    preview: list[bytes] = field(default_factory=list)

    def add_file(self, area: str, ids_text: str, ends_raw: bytes, body: bytes) -> None:
        """Emit the file's fragments whose id was not seen before (all of them, usually).

        The common case — no id seen before, none repeated inside the file — costs two
        set operations and one write of the whole body.
        """
        if not ids_text:
            return
        ids = ids_text.split(ID_SEPARATOR)
        seen = self.seen
        if seen.isdisjoint(ids):
            before = len(seen)
            seen.update(ids)
            if len(seen) - before == len(ids):
                self._emit(area, body, len(ids))
                wanted = PREVIEW_ROWS - len(self.preview)
                for start, end in islice(_fragment_bounds(ends_raw), max(wanted, 0)):
                    self.preview.append(body[start:end])
                return
            seen = set()  # only repeats inside this file remain to be dropped
        self._emit_new(area, ids, ends_raw, body, seen)

    def _emit_new(
        self, area: str, ids: list[str], ends_raw: bytes, body: bytes, seen: set[str]
    ) -> None:
        """Emit fragment by fragment, skipping ids in `seen` (and adding the others)."""
        parts: list[bytes] = []
        for chunk_id, (start, end) in zip(ids, _fragment_bounds(ends_raw), strict=True):
            if chunk_id in seen:
                self.collapsed += 1
            else:
                seen.add(chunk_id)
                parts.append(body[start:end])
        self.seen.update(ids)
        if parts:
            self._emit(area, FRAGMENT_SEPARATOR.join(parts), len(parts))
            if len(self.preview) < PREVIEW_ROWS:
                self.preview.extend(parts[: PREVIEW_ROWS - len(self.preview)])

    def _emit(self, area: str, body: bytes, count: int) -> None:
        self.stream.write(b"[\n  " if self.chunks == 0 else FRAGMENT_SEPARATOR)
        self.stream.write(body)
        self.chunks += count
        self.per_area[area] += count


def _fragment_bounds(ends_raw: bytes) -> Iterator[tuple[int, int]]:
    """[start, end) of each fragment in a cached body, from its stored end offsets."""
    ends = array("q")
    ends.frombytes(ends_raw)
    start = 0
    for end in ends:
        yield start, end
        start = end + len(FRAGMENT_SEPARATOR)


def _existing_sha(path: Path, size: int) -> str | None:
    """sha256 of the current target; a file of another size cannot hold the same bytes,
    so it is not read at all (None, as for a missing file)."""
    try:
        if path.stat().st_size != size:
            return None
        return file_sha256(path)
    except FileNotFoundError:
        return None


def _fragments(
    db: sqlite3.Connection, plan: list[tuple[ManifestEntry, CachedFile]]
) -> Iterator[tuple[str, str, bytes, bytes]]:
    """(area, ids, ends, body) per contributing file, in plan order."""
    query = "SELECT ids, ends, body FROM bodies WHERE id = ?"
    for entry, cached in plan:
        if cached.chunks == 0:
            continue
        ids, ends, body = db.execute(query, (cached.row,)).fetchone()
        yield entry.area, ids, ends, body


def _preview_rows(fragments: list[bytes]) -> list[dict[str, Any]]:
    """The first chunks as plain dicts, for the asset's preview table.

    A heading that is not a string (a malformed roadmap title) is given as its readable
    text: nested thousands deep, it would break the record's `asdict`/`json.dumps` and
    the table's `str()`, which all recurse.
    """
    rows: list[dict[str, Any]] = []
    for fragment in fragments:
        value = parse_json(fragment.decode("utf-8"))
        if isinstance(value, dict):
            if "heading" in value and not isinstance(value["heading"], str):
                value["heading"] = heading_text(value["heading"])
            rows.append(value)
    return rows


def assemble_store(
    snapshot: CorpusSnapshot, layout: StateLayout, target: Path, *, variant: str = ""
) -> AssemblyReport:
    """Write the de-duplicated store of `snapshot` to `target`, atomically and only if new.

    Requires `chunk_snapshot(snapshot, layout)` first (ChunkCacheMissError otherwise).
    Byte-identical to `ingest_corpus(root).store_bytes()` for the observed files.
    """
    target = Path(target)
    with open_cache(layout) as db:
        plan = resolve_rows(db, snapshot, cache_version(variant))
        return _write(db, plan, snapshot.areas, target)


def _write(
    db: sqlite3.Connection,
    plan: list[tuple[ManifestEntry, CachedFile]],
    areas: list[str],
    target: Path,
) -> AssemblyReport:
    """Stream the store through the atomic writer; keep the old file when bytes match."""
    dedup: _Dedup | None = None
    written = True
    try:
        with atomic_writer(target) as handle:
            dedup = _Dedup(_Stream(handle))
            for area, ids, ends, body in _fragments(db, plan):
                dedup.add_file(area, ids, ends, body)
            dedup.stream.write(b"\n]" if dedup.chunks else b"[]")
            dedup.stream.flush()
            sha = dedup.stream.hasher.hexdigest()
            if _existing_sha(target, dedup.stream.size) == sha:
                raise _Unchanged
    except _Unchanged:
        written = False
    assert dedup is not None
    per_area = dict.fromkeys(areas, 0)
    per_area.update(dedup.per_area)
    return AssemblyReport(
        path=str(target),
        sha256=dedup.stream.hasher.hexdigest(),
        size=dedup.stream.size,
        chunks=dedup.chunks,
        duplicates_collapsed=dedup.collapsed,
        chunks_per_area=per_area,
        written=written,
        utf16_units=dedup.stream.utf16_units,
        preview=_preview_rows(dedup.preview),
    )
