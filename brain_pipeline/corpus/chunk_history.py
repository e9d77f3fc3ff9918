"""Chunk history: every chunk id ever written to a store, so an old id can be explained.

Chunk ids are content hashes. When a labelled paragraph is edited its id disappears from
the store, and without a record of what the id *was* nobody can tell which new passage
replaced it. This module keeps, in the ledger (`state.ledger`, this area's own tables),

    chunk_texts(id PRIMARY KEY, text)          zlib-compressed content, written once
    chunk_seen(id PRIMARY KEY, area, source, heading, first_seen, last_seen, live)
    chunk_stores(seq, recorded_at, chunks, new, live_digest)   one row per recorded store

so every worker sharing the ledger (PostgreSQL on several machines) explains the same
ids, and in the build directory `live-ids.npz`, the sorted ids (with their areas) of the
latest recorded store: a local cache a fresh worker starts without.

Content-addressed and append-only: a text row is inserted the first time its id is
seen and never rewritten (the id *is* the hash of the text).

Recording a store writes only what changed since the previous one. The new store's ids
are compared with `live-ids.npz` (numpy, sorted arrays): ids that appeared are decoded
and upserted with their provenance, ids that vanished get `live = 0` and `last_seen` =
the previous store's time, ids that moved to another area get their area. A live id's
`last_seen` is the latest store's time, so it needs no write (rewriting `last_seen` of
every live row per store cost 6 s at 1.1M chunks for a one-file edit).

`live-ids.npz` is written after the commit and trusted only when its digest equals the
one the latest `chunk_stores` row recorded; otherwise (a crash between the two, a
deleted file, another worker recorded the latest store) the live set is read from
`chunk_seen` instead.

What is not tracked: the source and heading of an id that stays live while its file is
renamed (they are those of when the id last appeared); following them would mean
decoding every chunk of every store.

Upgrade: a build directory made before the ledger kept this history in its own SQLite
file (`state/history/chunks.sqlite`, with or without the live flag). The first use reads
it into the ledger (`_import_old_file`) and removes it; into a ledger that already holds
another worker's stores, its texts and provenance are added as no longer live.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import zipfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from brain_pipeline.corpus.id_lookup import id_keys, lookup_sorted
from brain_pipeline.corpus.jscompat import json_stringify, parse_json
from brain_pipeline.corpus.store import NO_HEADING, heading_text
from brain_pipeline.state.layout import StateLayout
from brain_pipeline.state.ledger import Ledger, LedgerError
from brain_pipeline.state.memory import Memory, memory_for_layout
from brain_pipeline.utils.atomic import atomic_write_bytes
from brain_pipeline.utils.damage import check_sqlite, is_damage, set_aside
from brain_pipeline.utils.digest import sha256_parts

HISTORY_FILENAME = "chunks.sqlite"
"""The pre-ledger history file, read into the ledger once (`_import_old_file`)."""
LIVE_FILENAME = "live-ids.npz"
_ZLIB_LEVEL = 6
_DECODE_BATCH = 32_768
"""Appearing chunks are decoded and written this many at a time (bounds the memory of
recording a first store of a million chunks)."""

AREA = "chunk_history"
DDL = """
CREATE TABLE IF NOT EXISTS chunk_texts (id TEXT PRIMARY KEY, text BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS chunk_seen (
  id TEXT PRIMARY KEY, area TEXT NOT NULL, source TEXT NOT NULL, heading TEXT,
  first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, live INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS chunk_stores (
  seq {serial}, recorded_at TEXT NOT NULL, chunks INTEGER NOT NULL, new INTEGER NOT NULL,
  live_digest TEXT)
"""
"""BYTEA is PostgreSQL's binary type; SQLite stores bytes under any declared type."""


class HistoryError(RuntimeError):
    """The ledger holding the history cannot be opened (the cause says why)."""


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
        return heading_text(self.heading)

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
    """The pre-ledger history file of `layout` (gone once read into the ledger)."""
    return layout.history_dir / HISTORY_FILENAME


def _timestamp(when: datetime) -> str:
    """UTC, second precision, ISO-8601 with a Z: sortable as text."""
    if when.tzinfo is None:
        raise ValueError("history times must be timezone-aware (pass a UTC datetime)")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


HISTORY_RESEEDED = (
    "a new history is seeded from the live published store when the next store is "
    "recorded; ids and texts only older stores held are lost (fixture repair cannot "
    "explain labels that point at them)"
)


def _ready(where: Memory | StateLayout) -> tuple[Ledger, StateLayout]:
    """The ledger with this area's tables, the old history file of the build directory
    read in (once: it is removed after), and the build directory for the sidecar."""
    try:
        memory = where if isinstance(where, Memory) else memory_for_layout(where)
        memory.ledger.ensure_tables(AREA, DDL)
    except LedgerError as exc:
        raise HistoryError(str(exc)) from None
    if history_file(memory.layout).is_file():
        _import_old_file(memory.ledger, history_file(memory.layout))
    return memory.ledger, memory.layout


def _import_old_file(ledger: Ledger, path: Path) -> None:
    """Read the pre-ledger history file at `path` into the ledger in one transaction, then
    remove it; a damaged one is set aside (one WARN line) and nothing is read.

    Into an empty ledger everything comes over (stores, live flags, so the sidecar's
    digest still matches). A ledger holding another worker's stores keeps its own live
    set: the file's texts and provenance are added as no longer live, ids it knows win.
    A file without the live flag (its first layout) marked a live id by `last_seen`
    equal to the latest store's time.
    """
    try:
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as old:
            check_sqlite(old, path)
            columns = {row[1] for row in old.execute("PRAGMA table_info(seen)")}
            if "id" not in columns:
                raise sqlite3.DatabaseError("no chunk history in it")
            live = "live" if "live" in columns else (
                "last_seen = (SELECT recorded_at FROM stores ORDER BY seq DESC LIMIT 1)"
            )  # fmt: skip
            with ledger.transaction() as cursor:
                _lock(ledger, cursor)
                cursor.execute("SELECT 1 FROM chunk_stores LIMIT 1")
                if cursor.fetchone() is not None:
                    live = "0"
                else:
                    digest = "live_digest" if "live_digest" in columns else "NULL"
                    cursor.executemany(
                        ledger.sql("INSERT INTO chunk_stores (recorded_at, chunks, new, "
                                   "live_digest) VALUES (?, ?, ?, ?)"),
                        old.execute(f"SELECT recorded_at, chunks, new, {digest} FROM stores "
                                    "ORDER BY seq"),
                    )  # fmt: skip
                cursor.executemany(
                    ledger.sql("INSERT INTO chunk_texts VALUES (?, ?) ON CONFLICT (id) DO NOTHING"),
                    old.execute("SELECT id, text FROM texts"),
                )
                cursor.executemany(
                    ledger.sql("INSERT INTO chunk_seen VALUES (?, ?, ?, ?, ?, ?, ?) "
                               "ON CONFLICT (id) DO NOTHING"),
                    old.execute("SELECT id, area, source, heading, first_seen, last_seen, "
                                f"{live} FROM seen"),
                )  # fmt: skip
    except Exception as exc:
        if not is_damage(exc):
            raise
        set_aside(path, what="chunk history", consequence=HISTORY_RESEEDED, cause=exc)
        return
    for companion in (path.with_name(path.name + "-journal"), path):
        companion.unlink(missing_ok=True)


def _lock(ledger: Ledger, cursor: Any) -> None:
    """Serialise writers of the history until the transaction ends: SQLite's writer
    holds the file already; on PostgreSQL a transaction-scoped advisory lock."""
    if ledger.backend == "postgresql":
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext('brain-pipeline:chunk-history'))")


@dataclass(frozen=True)
class _LiveSet:
    """The distinct ids of one store, sorted, each with the area it first appears in."""

    ids: npt.NDArray[np.bytes_]
    areas: npt.NDArray[np.int32]
    """Index into `names` per id."""
    names: tuple[str, ...]

    @classmethod
    def empty(cls) -> _LiveSet:
        return cls(np.zeros(0, dtype="S1"), np.zeros(0, dtype=np.int32), ())

    @classmethod
    def of_store(
        cls, ids: npt.NDArray[np.bytes_], codes: npt.NDArray[Any], names: Sequence[str]
    ) -> tuple[_LiveSet, npt.NDArray[np.intp]]:
        """The live set of a store (ids and area codes in store order), and per id the
        store position of its first occurrence (the one the store's readers see)."""
        if len(ids) == 0:
            return cls.empty(), np.zeros(0, dtype=np.intp)
        keys = id_keys(ids)
        _, first = np.unique(keys if keys is not None else ids, return_index=True)
        return cls(ids[first], codes[first].astype(np.int32), tuple(names)), first

    def digest(self) -> str:
        """Names this live set in the history database (the sidecar is trusted only when
        it digests as recorded): its id dtype, ids, area codes and area names."""
        return sha256_parts(
            (
                str(self.ids.dtype).encode("ascii") + b"\0",
                self.ids.tobytes(),
                self.areas.astype("<i4").tobytes(),
                "\n".join(self.names).encode("utf-8"),
            )
        )

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(
            buffer,
            ids=self.ids,
            areas=self.areas,
            names=np.frombuffer("\n".join(self.names).encode("utf-8"), dtype=np.uint8),
        )
        return buffer.getvalue()

    @classmethod
    def read(cls, path: Path) -> _LiveSet:
        with np.load(path, allow_pickle=False) as saved:
            blob = saved["names"].tobytes().decode("utf-8")
            return cls(saved["ids"], saved["areas"], tuple(blob.split("\n")) if blob else ())

    @classmethod
    def from_rows(cls, rows: list[tuple[str, str]]) -> _LiveSet:
        """The live set from `(id, area)` rows of the `seen` table."""
        if not rows:
            return cls.empty()
        names = sorted({area for _, area in rows})
        code_of = {name: code for code, name in enumerate(names)}
        ids = np.array([key.encode("utf-8") for key, _ in rows])
        codes = np.array([code_of[area] for _, area in rows], dtype=np.int32)
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], codes[order], tuple(names))

    def area_names(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
        return np.array(self.names, dtype=object)[self.areas[rows]] if len(rows) else _NONE

    def id_list(self, rows: npt.NDArray[np.intp]) -> list[str]:
        return np.char.decode(self.ids[rows], "utf-8").tolist() if len(rows) else []


_NONE = np.zeros(0, dtype=object)


@dataclass(frozen=True)
class _Changes:
    """How a store's live set differs from the previous one (row numbers into each)."""

    appeared: npt.NDArray[np.intp]
    """Rows of the new set whose id the previous store did not hold."""
    vanished: npt.NDArray[np.intp]
    """Rows of the previous set whose id the new store does not hold."""
    moved: npt.NDArray[np.intp]
    """Rows of the new set whose id is still live but now first appears in another area."""


def _changes(old: _LiveSet, new: _LiveSet) -> _Changes:
    if len(old.ids) == 0:
        nothing = np.zeros(0, dtype=np.intp)
        return _Changes(np.arange(len(new.ids), dtype=np.intp), nothing, nothing)
    pos, hit = lookup_sorted(old.ids, new.ids)
    kept_old = np.zeros(len(old.ids), dtype=bool)
    kept_old[pos[hit]] = True
    both = np.flatnonzero(hit)
    moved = both[new.area_names(both) != old.area_names(pos[both])]
    return _Changes(np.flatnonzero(~hit), np.flatnonzero(~kept_old), moved)


def _live_file(layout: StateLayout) -> Path:
    return layout.history_dir / LIVE_FILENAME


def _previous(cursor: Any, layout: StateLayout) -> tuple[_LiveSet, str | None]:
    """The latest recorded store's live set and time (empty and None before the first).

    The sidecar is trusted only when its digest is the one that store recorded.
    """
    cursor.execute("SELECT recorded_at, live_digest FROM chunk_stores ORDER BY seq DESC LIMIT 1")
    row = cursor.fetchone()
    if row is None:
        return _LiveSet.empty(), None
    stamp, digest = row
    path = _live_file(layout)
    if digest is not None and path.is_file():
        try:
            live = _LiveSet.read(path)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
            pass  # damaged: read the live set from the ledger below
        else:
            if live.digest() == digest:
                return live, str(stamp)
    cursor.execute("SELECT id, area FROM chunk_seen WHERE live = 1")
    return _LiveSet.from_rows(cursor.fetchall()), str(stamp)


def _record(
    where: Memory | StateLayout,
    live: _LiveSet,
    first: npt.NDArray[np.intp],
    chunks_at: Callable[[list[int]], Sequence[ChunkLike]],
    when: datetime,
) -> RecordOutcome:
    """Record the store whose live set is `live` (`first`: store position per id).

    `chunks_at(positions)` returns the store's chunks at those positions; it is called
    only for ids that appeared since the previous store, a batch at a time.
    """
    stamp = _timestamp(when)
    digest = live.digest()
    ledger, layout = _ready(where)
    sql = ledger.sql
    new = 0
    with ledger.transaction() as cursor:
        _lock(ledger, cursor)
        previous, previous_stamp = _previous(cursor, layout)
        changes = _changes(previous, live)
        cache: dict[Any, str | None] = {}
        for start in range(0, len(changes.appeared), _DECODE_BATCH):
            rows = changes.appeared[start : start + _DECODE_BATCH]
            positions = np.sort(first[rows])
            fresh = chunks_at(positions.tolist())
            cursor.executemany(
                sql("INSERT INTO chunk_texts VALUES (?, ?) ON CONFLICT (id) DO NOTHING"),
                ((c.id, zlib.compress(c.content.encode("utf-8", "surrogatepass"), _ZLIB_LEVEL))
                 for c in fresh),
            )  # fmt: skip
            new += max(cursor.rowcount, 0)
            # An id that comes back takes the provenance it has now.
            cursor.executemany(
                sql("INSERT INTO chunk_seen VALUES (?, ?, ?, ?, ?, ?, 1) ON CONFLICT (id) DO "
                    "UPDATE SET area = excluded.area, source = excluded.source, heading = "
                    "excluded.heading, last_seen = excluded.last_seen, live = 1"),
                ((c.id, c.area, c.source, _encode_heading(c.heading, cache), stamp, stamp)
                 for c in fresh),
            )  # fmt: skip
        cursor.executemany(
            sql("UPDATE chunk_seen SET live = 0, last_seen = ? WHERE id = ?"),
            ((previous_stamp, key) for key in previous.id_list(changes.vanished)),
        )
        cursor.executemany(
            sql("UPDATE chunk_seen SET area = ? WHERE id = ?"),
            zip(live.area_names(changes.moved).tolist(), live.id_list(changes.moved), strict=True),
        )
        cursor.execute(
            sql("INSERT INTO chunk_stores (recorded_at, chunks, new, live_digest) "
                "VALUES (?, ?, ?, ?)"),
            (stamp, len(live.ids), new, digest),
        )  # fmt: skip
    with contextlib.suppress(OSError):  # without it the next record reads `chunk_seen`
        atomic_write_bytes(_live_file(layout), live.to_bytes())
    return RecordOutcome(chunks=len(live.ids), new=new, recorded_at=stamp)


def _encode_heading(heading: Any, cache: dict[Any, str | None]) -> str | None:
    """Headings as JSON text (None when absent); cached because a file repeats its heading."""
    if heading is NO_HEADING:
        return None
    if isinstance(heading, str):
        encoded = cache.get(heading)
        if encoded is None:
            encoded = cache[heading] = _json_text(heading)
        return encoded
    return _json_text(heading)


def _json_text(value: Any) -> str:
    """JSON text SQLite can store, for any heading the store can hold: raw non-ASCII as
    before, a lone surrogate (a roadmap title may hold one) as its `\\udxxx` escape,
    which SQLite's strict UTF-8 could not take, and a title nested deeper than Python's
    recursion limit through the store's own iterative writer."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except RecursionError:
        return json_stringify(value, indent="")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True)
    return text


def _decode_heading(raw: str | None) -> Any:
    if raw is None:
        return NO_HEADING
    try:
        return json.loads(raw)
    except RecursionError:
        return parse_json(raw)


def record_store(
    where: Memory | StateLayout, chunks: Iterable[ChunkLike], when: datetime
) -> RecordOutcome:
    """Record that the store made of `chunks` was written at `when`.

    Only chunks whose id the previous recorded store did not hold are read for their
    content; an undeduplicated store's first occurrence of an id wins, as in the store.
    Idempotent for the same store.
    """
    stored = list(chunks)
    names: dict[str, int] = {}
    codes = np.array([names.setdefault(c.area, len(names)) for c in stored], dtype=np.int32)
    ids = np.array([c.id.encode("utf-8") for c in stored]) if stored else np.zeros(0, "S1")
    live, first = _LiveSet.of_store(ids, codes, list(names))
    return _record(where, live, first, lambda positions: [stored[p] for p in positions], when)


def is_empty(where: Memory | StateLayout) -> bool:
    """True when no store has been recorded (the cue to `seed_from_store`)."""
    ledger, _ = _ready(where)
    return not ledger.query("SELECT 1 FROM chunk_stores LIMIT 1")


def record_store_view(where: Memory | StateLayout, view: Any, when: datetime) -> RecordOutcome:
    """`record_store` for a store read through a `StoreView`, decoding only new chunks.

    Re-recording a store of a million chunks after a one-file edit must not decode a
    million chunks: ids and areas come from the view's index, and only ids that
    appeared since the previous recorded store are decoded.
    """
    live, first = _LiveSet.of_store(view.id_array, view.area_codes, list(view.area_names))
    return _record(where, live, first, view.chunks_at, when)


def seed_from_store(
    where: Memory | StateLayout, store_file: Path | str, when: datetime | None = None
) -> RecordOutcome | None:
    """Record a store file (on a fresh clone: the live published store) into the history.

    The published store still holds the texts of labels a blocked build made stale, so
    seeding from it lets `fixture repair` explain them. `when` defaults to the file's
    modification time. Returns None when the file does not exist.
    """
    from brain_pipeline.corpus.store_reader import open_store_view

    path = Path(store_file)
    if not path.is_file():
        return None
    stamp = when or datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    # No layout: a published store's sidecar must not be written into the build's cache.
    return record_store_view(where, open_store_view(path), stamp)


def remember_store(
    where: Memory | StateLayout,
    store_file: Path | str,
    when: datetime,
    *,
    seed_store: Path | str | None = None,
    sha256: str | None = None,
) -> RecordOutcome:
    """Record the store just written to `store_file`, seeding an empty history first.

    The one call for every writer of the build directory's store (the pipeline's
    `knowledge_store` step and the fixture tools' refresh), so each store ever written
    is in the history and an edited label's old text can be found. `seed_store` (the
    live published store) still holds texts an earlier, blocked build replaced.
    """
    from brain_pipeline.corpus.store_reader import open_store_view

    if seed_store is not None and is_empty(where):
        seed_from_store(where, seed_store)
    layout = where.layout if isinstance(where, Memory) else where
    view = open_store_view(store_file, layout, sha256=sha256)
    return record_store_view(where, view, when)


_LOOKUP = (
    "SELECT s.id, t.text, s.area, s.source, s.heading, s.first_seen, s.last_seen, s.live "
    "FROM chunk_seen s JOIN chunk_texts t ON t.id = s.id WHERE s.id = ?"
)


def _entry(row: tuple[Any, ...], latest: str | None) -> HistoryEntry:
    key, text, area, source, heading, first_seen, last_seen, live = row
    live_now = bool(live) and latest is not None
    if live_now:
        last_seen = latest  # a live row's own last_seen is not kept current
    return HistoryEntry(
        id=key,
        text=zlib.decompress(text).decode("utf-8", "surrogatepass"),
        area=area,
        source=source,
        heading=_decode_heading(heading),
        first_seen=first_seen,
        last_seen=last_seen,
        live_in_latest=live_now,
    )


def lookup(where: Memory | StateLayout, chunk_id: str) -> HistoryEntry | None:
    """What `chunk_id` was, or None when no recorded store ever held it."""
    return lookup_many(where, [chunk_id]).get(chunk_id)


def lookup_many(where: Memory | StateLayout, chunk_ids: Iterable[str]) -> dict[str, HistoryEntry]:
    """`lookup` for several ids in one transaction; unknown ids are absent from the result."""
    wanted = list(dict.fromkeys(chunk_ids))
    if not wanted:
        return {}
    ledger, _ = _ready(where)
    found: dict[str, HistoryEntry] = {}
    with ledger.transaction(write=False) as cursor:
        cursor.execute("SELECT recorded_at FROM chunk_stores ORDER BY seq DESC LIMIT 1")
        latest = cursor.fetchone()
        statement = ledger.sql(_LOOKUP)
        for key in wanted:
            cursor.execute(statement, (key,))
            row = cursor.fetchone()
            if row is not None:
                found[key] = _entry(row, None if latest is None else str(latest[0]))
    return found


def stats(where: Memory | StateLayout) -> dict[str, Any]:
    """Size figures: ids known, stores recorded, compressed text bytes (logs, benchmarks)."""
    ledger, _ = _ready(where)
    ((ids,),) = ledger.query("SELECT count(*) FROM chunk_seen")
    ((stores,),) = ledger.query("SELECT count(*) FROM chunk_stores")
    ((size,),) = ledger.query("SELECT coalesce(sum(length(text)), 0) FROM chunk_texts")
    return {"ids": int(ids), "stores": int(stores), "bytes": int(size)}
