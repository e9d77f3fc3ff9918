"""Chunk history: every chunk id ever written to a store, so an old id can be explained.

Chunk ids are content hashes. When a labelled paragraph is edited its id disappears from
the store, and without a record of what the id *was* nobody can tell which new passage
replaced it. This module keeps, in `StateLayout.history_dir`, one SQLite file:

    texts(id PRIMARY KEY, text BLOB)            zlib-compressed content, written once
    seen(id PRIMARY KEY, area, source, heading, first_seen, last_seen)
    stores(seq, recorded_at, chunks, new)      one row per recorded store

Content-addressed and append-only: a text row is inserted the first time its id is
seen and never rewritten (the id *is* the hash of the text). `seen` holds the id's
provenance the last time it was live and when it was first / last live. Texts live in
their own table so the bulk `last_seen` update rewrites only the small rows.

`record_store` costs one pass over the ids (to load them into a temporary table, in
C), compression of the *new* texts only, and two set-based statements; it never reads
a chunk's content unless its id is new, so a lazily decoded store view stays lazy.

SQLite rather than JSON lines: the bulk update and the "which ids are new" question are
single indexed statements at a million rows, and a crash mid-write rolls back.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from brain_pipeline.corpus.store import NO_HEADING
from brain_pipeline.state.layout import StateLayout

HISTORY_FILENAME = "chunks.sqlite"
_SCHEMA_VERSION = 1
_ZLIB_LEVEL = 6

_SCHEMA = """
CREATE TABLE IF NOT EXISTS texts (
    id TEXT PRIMARY KEY,
    text BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (
    id TEXT PRIMARY KEY,
    area TEXT NOT NULL,
    source TEXT NOT NULL,
    heading TEXT,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stores (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    new INTEGER NOT NULL
);
"""


class HistoryError(RuntimeError):
    """The history file cannot be used (newer schema, not a SQLite file, corrupt)."""


class ChunkLike(Protocol):
    """What `record_store` reads from a chunk; `content` only for ids it has not seen."""

    @property
    def id(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def area(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def heading(self) -> Any: ...


@dataclass(frozen=True)
class HistoryEntry:
    """What one chunk id was, where it lived the last time, and when it was live."""

    id: str
    text: str
    area: str
    source: str
    heading: Any
    """The heading as in the store (any JSON value), or NO_HEADING."""
    first_seen: str
    """UTC ISO-8601 time of the first recorded store holding the id."""
    last_seen: str
    """UTC ISO-8601 time of the last recorded store holding the id."""
    live_in_latest: bool
    """Whether the most recently recorded store still holds the id."""

    @property
    def heading_text(self) -> str:
        """The heading as a person reads it ("" when there is none)."""
        if self.heading is NO_HEADING:
            return ""
        return self.heading if isinstance(self.heading, str) else json.dumps(self.heading)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "source": self.source,
            "heading": None if self.heading is NO_HEADING else self.heading,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "live_in_latest": self.live_in_latest,
            "text": self.text,
        }


@dataclass(frozen=True)
class RecordOutcome:
    """What one `record_store` call did (for logs and asset metadata)."""

    chunks: int
    new: int
    recorded_at: str


def history_file(layout: StateLayout) -> Path:
    return layout.history_dir / HISTORY_FILENAME


def _timestamp(when: datetime) -> str:
    """UTC, second precision, ISO-8601 with a Z: sortable as text."""
    if when.tzinfo is None:
        raise ValueError("history times must be timezone-aware (pass a UTC datetime)")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA temp_store=MEMORY")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _SCHEMA_VERSION):
            raise HistoryError(
                f"{path}: chunk history schema {version} is newer than this code "
                f"({_SCHEMA_VERSION}); upgrade brain-pipeline"
            )
        if version == 0:
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise HistoryError(f"{path}: unreadable chunk history ({exc})") from exc
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def _open(layout: StateLayout) -> Iterator[sqlite3.Connection]:
    with closing(_connect(history_file(layout))) as conn:
        yield conn


@contextmanager
def _recording(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction for a recorded store, with the `live` temp table dropped.

    SQLite may already have rolled back when something failed (a full disk does): a
    second ROLLBACK would raise and hide the real cause, so it is issued only if needed.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("DROP TABLE IF EXISTS live")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _log_store(conn: sqlite3.Connection, stamp: str, chunks: int, new: int) -> None:
    conn.execute(
        "INSERT INTO stores (recorded_at, chunks, new) VALUES (?, ?, ?)", (stamp, chunks, new)
    )


def _encode_heading(heading: Any, cache: dict[Any, str | None]) -> str | None:
    """Headings as JSON text (None when absent); cached because a file repeats its heading."""
    if heading is NO_HEADING:
        return None
    if isinstance(heading, str):
        encoded = cache.get(heading)
        if encoded is None:
            encoded = cache[heading] = json.dumps(heading, ensure_ascii=False)
        return encoded
    return json.dumps(heading, ensure_ascii=False)


def _decode_heading(raw: str | None) -> Any:
    return NO_HEADING if raw is None else json.loads(raw)


def record_store(layout: StateLayout, chunks: Iterable[ChunkLike], when: datetime) -> RecordOutcome:
    """Record that the store made of `chunks` was written at `when`.

    New ids get their compressed text and first_seen; every id of the store gets
    last_seen = `when` and its current provenance. Idempotent for the same store.
    """
    stamp = _timestamp(when)
    rows: list[tuple[str, str, str, str | None]] = []
    by_id: dict[str, ChunkLike] = {}
    cache: dict[Any, str | None] = {}
    for chunk in chunks:
        key = chunk.id
        if key in by_id:
            continue  # an undeduplicated store: the first occurrence wins, as in the store
        by_id[key] = chunk
        rows.append((key, chunk.area, chunk.source, _encode_heading(chunk.heading, cache)))
    with _open(layout) as conn, _recording(conn):
        conn.execute(
            "CREATE TEMP TABLE live (id TEXT PRIMARY KEY, area TEXT, source TEXT, "
            "heading TEXT) WITHOUT ROWID"
        )
        conn.executemany("INSERT INTO live VALUES (?, ?, ?, ?)", rows)
        new_ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM live "
                "WHERE NOT EXISTS (SELECT 1 FROM texts t WHERE t.id = live.id)"
            )
        ]
        conn.executemany(
            "INSERT INTO texts VALUES (?, ?)",
            (
                (key, zlib.compress(by_id[key].content.encode("utf-8"), _ZLIB_LEVEL))
                for key in new_ids
            ),
        )
        # One statement for every live id: provenance refreshed, last_seen advanced.
        conn.execute(
            "INSERT INTO seen (id, area, source, heading, first_seen, last_seen) "
            "SELECT id, area, source, heading, :at, :at FROM live WHERE true "
            "ON CONFLICT(id) DO UPDATE SET area = excluded.area, source = excluded.source, "
            "heading = excluded.heading, last_seen = excluded.last_seen",
            {"at": stamp},
        )
        _log_store(conn, stamp, len(rows), len(new_ids))
    return RecordOutcome(chunks=len(rows), new=len(new_ids), recorded_at=stamp)


def is_empty(layout: StateLayout) -> bool:
    """True when no store has been recorded (the cue to `seed_from_store`)."""
    if not history_file(layout).exists():
        return True
    with _open(layout) as conn:
        return conn.execute("SELECT 1 FROM stores LIMIT 1").fetchone() is None


def record_store_view(layout: StateLayout, view: Any, when: datetime) -> RecordOutcome:
    """`record_store` for a store read through a `StoreView`, decoding only new chunks.

    Re-recording a store of a million chunks after a one-file edit must not decode a
    million chunks: ids and areas come from the view's index, and only ids the history
    has never seen are decoded for their text, source and heading. An id seen before
    keeps the source and heading it was first recorded with (its text cannot differ:
    the id is its hash); its area and last_seen are refreshed.
    """
    stamp = _timestamp(when)
    names = list(view.area_names)
    ids = list(view.ids)
    rows = list(dict.fromkeys(zip(ids, (names[c] for c in view.area_codes.tolist()), strict=True)))
    with _open(layout) as conn, _recording(conn):
        conn.execute("CREATE TEMP TABLE live (id TEXT PRIMARY KEY, area TEXT) WITHOUT ROWID")
        conn.executemany("INSERT OR IGNORE INTO live VALUES (?, ?)", rows)
        new_ids = {
            r[0]
            for r in conn.execute(
                "SELECT id FROM live "
                "WHERE NOT EXISTS (SELECT 1 FROM texts t WHERE t.id = live.id)"
            )
        }
        wanted = np.array(sorted(new_ids), dtype=view.id_array.dtype)
        positions = np.flatnonzero(np.isin(view.id_array, wanted)).tolist() if new_ids else []
        fresh = {c.id: c for c in view.chunks_at(positions)} if positions else {}
        cache: dict[Any, str | None] = {}
        conn.executemany(
            "INSERT INTO texts VALUES (?, ?)",
            (
                (key, zlib.compress(chunk.content.encode("utf-8"), _ZLIB_LEVEL))
                for key, chunk in fresh.items()
            ),
        )
        conn.executemany(
            "INSERT INTO seen (id, area, source, heading, first_seen, last_seen) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (
                (key, c.area, c.source, _encode_heading(c.heading, cache), stamp, stamp)
                for key, c in fresh.items()
            ),
        )
        conn.execute(
            "UPDATE seen SET area = live.area, last_seen = :at FROM live "
            "WHERE seen.id = live.id",
            {"at": stamp},
        )
        _log_store(conn, stamp, len(rows), len(fresh))
    return RecordOutcome(chunks=len(rows), new=len(fresh), recorded_at=stamp)


def seed_from_store(
    layout: StateLayout, store_file: Path | str, when: datetime | None = None
) -> RecordOutcome | None:
    """Record a store file (on a fresh clone: the live published store) into the history.

    The published store still holds the texts of labels a blocked build made stale, so
    seeding from it lets `fixture repair` explain them. `when` defaults to the file's
    modification time. Returns None when the file does not exist.
    """
    from brain_pipeline.corpus.store import load_store

    path = Path(store_file)
    if not path.is_file():
        return None
    stamp = when or datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    return record_store(layout, load_store(path), stamp)


_LOOKUP = (
    "SELECT s.id, t.text, s.area, s.source, s.heading, s.first_seen, s.last_seen "
    "FROM seen s JOIN texts t ON t.id = s.id WHERE s.id = ?"
)


def _latest(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT recorded_at FROM stores ORDER BY seq DESC LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def _entry(row: tuple[Any, ...], latest: str | None) -> HistoryEntry:
    key, text, area, source, heading, first_seen, last_seen = row
    return HistoryEntry(
        id=key,
        text=zlib.decompress(text).decode("utf-8"),
        area=area,
        source=source,
        heading=_decode_heading(heading),
        first_seen=first_seen,
        last_seen=last_seen,
        live_in_latest=latest is not None and last_seen == latest,
    )


def lookup(layout: StateLayout, chunk_id: str) -> HistoryEntry | None:
    """What `chunk_id` was, or None when no recorded store ever held it."""
    return lookup_many(layout, [chunk_id]).get(chunk_id)


def lookup_many(layout: StateLayout, chunk_ids: Iterable[str]) -> dict[str, HistoryEntry]:
    """`lookup` for several ids in one connection; unknown ids are absent from the result."""
    wanted = list(dict.fromkeys(chunk_ids))
    if not wanted or not history_file(layout).exists():
        return {}
    found: dict[str, HistoryEntry] = {}
    with _open(layout) as conn:
        latest = _latest(conn)
        for key in wanted:
            row = conn.execute(_LOOKUP, (key,)).fetchone()
            if row is not None:
                found[key] = _entry(row, latest)
    return found


def stats(layout: StateLayout) -> dict[str, Any]:
    """Size figures: ids known, stores recorded, file bytes (for logs and benchmarks)."""
    path = history_file(layout)
    if not path.exists():
        return {"ids": 0, "stores": 0, "bytes": 0}
    with _open(layout) as conn:
        ids = conn.execute("SELECT count(*) FROM seen").fetchone()[0]
        stores = conn.execute("SELECT count(*) FROM stores").fetchone()[0]
    return {"ids": int(ids), "stores": int(stores), "bytes": path.stat().st_size}
