"""Stale fixture labels, and what their ids were.

A label is *stale* when its chunk id is not among the live chunks of its query's area
(an edited paragraph gets a new id; a file moved to another area takes its ids out of
the query's reach). The chunk history (`corpus.chunk_history`) says what the old id's text
and source file were; `old_chunks_for` looks them up (falling back to older store
files), and `old_chunk_of` reads one history entry or store chunk as an OldChunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brain_pipeline.corpus.store import NO_HEADING, Chunk
from brain_pipeline.evaluation.fixture import Fixture

if TYPE_CHECKING:
    from brain_pipeline.state.layout import StateLayout


@dataclass(frozen=True)
class OldChunk:
    """What a stale id was: its text and where it lived (from history or a live store)."""

    id: str
    text: str
    area: str
    source: str
    heading: Any = NO_HEADING
    last_seen: str | None = None


def old_chunk_of(entry: Any) -> OldChunk:
    """An OldChunk from a history entry (`text`) or a store Chunk (`content`)."""
    text = entry.text if hasattr(entry, "text") else entry.content
    return OldChunk(
        id=entry.id,
        text=text,
        area=entry.area,
        source=entry.source,
        heading=entry.heading,
        last_seen=getattr(entry, "last_seen", None),
    )


@dataclass(frozen=True)
class StaleLabel:
    """One label of one query whose id is not live in the query's area."""

    query: str
    area: str
    id: str
    live_in: tuple[str, ...] = ()
    """Other areas where the id is still live (the file moved to another area)."""


def find_stale(fixture: Fixture, chunks: Iterable[Chunk]) -> list[StaleLabel]:
    """Every stale label, in fixture order: an id not live in its query's area."""
    areas_of: dict[str, set[str]] = {}
    for chunk in chunks:
        areas_of.setdefault(chunk.id, set()).add(chunk.area)
    stale: list[StaleLabel] = []
    for q in fixture.queries:
        for label in q.relevant:
            live = areas_of.get(label, set())
            if q.area not in live:
                stale.append(StaleLabel(q.query, q.area, label, tuple(sorted(live))))
    return stale


def old_chunks_for(
    layout: StateLayout, ids: Iterable[str], fallback_stores: Sequence[Path | str] = ()
) -> dict[str, OldChunk]:
    """What each id was: from the chunk history of `layout`, else from older store files.

    `fallback_stores` are knowledge-store.json paths read (in order) only for ids the
    history does not know, e.g. the live published store before the history is seeded.
    """
    from brain_pipeline.corpus.chunk_history import lookup_many
    from brain_pipeline.corpus.store import load_store

    wanted = list(dict.fromkeys(ids))
    found = {key: old_chunk_of(entry) for key, entry in lookup_many(layout, wanted).items()}
    for store in fallback_stores:
        missing = {key for key in wanted if key not in found}
        path = Path(store)
        if not missing or not path.is_file():
            continue
        for chunk in load_store(path):
            if chunk.id in missing and chunk.id not in found:
                found[chunk.id] = old_chunk_of(chunk)
    return found
